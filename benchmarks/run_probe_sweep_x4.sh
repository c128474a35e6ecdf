#!/usr/bin/env bash
# The probe sweep CP in {1,2,4} x sequence length in {8K,32K,128K} on one 4-GPU host, through the
# whole pipeline (doctor -> lint -> arms -> verdict -> report with plots), with the matrix flags of
# `cpverify run`. Every arm runs on the same 4 GPUs, one after another; each CP>1 arm is compared
# with CP=1 at the same length, and cp.png / seq.png draw time vs CP and vs length with the ideal 1/CP.
#
#   OUT=/some/dir bash benchmarks/run_probe_sweep_x4.sh          # e.g. on nvidia-h200-x4, OUT=$OUT
#   STEPS=30 SEQS=8K,32K,128K CPS=1,2,4 OUT=... bash benchmarks/run_probe_sweep_x4.sh
#
# Leaves 8 files in $OUT (the device tool brings back at most 8): verdict.md, verdict.json,
# commands.sh, cp.png, seq.png, steps.png, phases.png, and run.tgz (the whole run directory:
# every arm's log, env.json, state.json, plot.png, cpverify's stdout and stderr).
# Exit code: cpverify's (0 PASS, 1 FAIL, 3 INCONCLUSIVE, 4 BLOCKED); about 4 minutes on H200 x4.
set -uo pipefail
cd "$(dirname "$0")/.."

# NVLink multicast stays off on shared hosts (a program using it can take the host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

OUT=${OUT:?set OUT to an output directory}
CPS=${CPS:-1,2,4}
SEQS=${SEQS:-8192,32768,131072}
STEPS=${STEPS:-20}
NGPU=${NGPU:-4}
RUN_ID=${RUN_ID:-probe-sweep-x4}
WORK=$(mktemp -d /tmp/cpverify-sweep.XXXX)
mkdir -p "$OUT"

start=$SECONDS
python3 -m cpverify run --profile probe --runner local --cp "$CPS" --seq-len "$SEQS" \
    --set gpus="$NGPU" --gpus "$NGPU" --set steps="$STEPS" \
    --only doctor,lint,cp1,cp2,verdict --out "$WORK" --run-id "$RUN_ID" \
    > "$WORK/cpverify.stdout" 2> "$WORK/cpverify.stderr"
code=$?
echo "cpverify run: exit $code in $((SECONDS - start)) s"

RUN=$WORK/$RUN_ID
mkdir -p "$RUN" && mv "$WORK/cpverify.stdout" "$WORK/cpverify.stderr" "$RUN/"
for f in verdict.md verdict.json commands.sh cp.png seq.png steps.png phases.png; do
    cp "$RUN/$f" "$OUT/" 2>/dev/null || echo "missing: $f"
done
tar -czf "$OUT/run.tgz" -C "$WORK" "$RUN_ID"
head -n 40 "$RUN/cpverify.stdout" 2>/dev/null
exit "$code"
