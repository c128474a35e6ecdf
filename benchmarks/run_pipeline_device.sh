#!/usr/bin/env bash
# The whole cpverify pipeline -- doctor -> lint -> arms -> verdict -> report -- with the probe
# profile on a GPU host, exactly what `nox -s verify_cp -- --profile probe --runner local` runs
# (nox is not installed on the device machines, so the same `cpverify run` is called directly).
#
#   OUT=/some/dir bash benchmarks/run_pipeline_device.sh
#
# Three runs on all GPUs of the machine: a sweep (CP in {1,2,4} capped at the GPU count x three
# sequence lengths), a deliberately broken CP (--bypass-cp: SDPA bound before the CP context, the
# silent pitfall), and NCCL forced onto sockets (P2P and SHM off). Results land in $OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/cpverify-device}
RUNS=$OUT/runs
mkdir -p "$RUNS"
N=$(nvidia-smi -L | wc -l)
CPS=1,2; [ "$N" -ge 4 ] && CPS=1,2,4
SEQS=${SEQS:-8192,32768,131072}

run() {
    local id=$1; shift
    local start=$SECONDS
    python3 -m cpverify run --profile probe --runner local --gpus "$N" --set gpus="$N" \
        --out "$RUNS" --run-id "$id" --only doctor,lint,cp1,cp2,verdict "$@" > "$RUNS/$id.stdout" 2> "$RUNS/$id.stderr"
    echo "run $id: exit $? in $((SECONDS - start)) s"
    head -n 3 "$RUNS/$id.stdout"
}

run sweep --set cp_sizes="$CPS" --set seq_lens="$SEQS" --set steps=15
run bypass --set cp_sizes=1,"$N" --set seq_lens=16384 --set steps=12 --set probe_args=--bypass-cp
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run sockets --set cp_sizes=1,2 --set seq_lens=16384 --set steps=12

for id in sweep bypass sockets; do
    cp "$RUNS/$id/verdict.md" "$OUT/$id-verdict.md" 2>/dev/null
done
cp "$RUNS/sweep/verdict.json" "$OUT/sweep-verdict.json" 2>/dev/null
tar -czf "$OUT/runs.tgz" -C "$RUNS" .
