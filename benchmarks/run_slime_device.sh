#!/usr/bin/env bash
# Real slime (device kit: slime 624b824a, Megatron-LM 1dcf0daf, TE 2.16.1, Ray 2.56.1) through
# cpverify's own pipeline on a GPU host, as a user with a slime environment would run it:
#
#   cp -r <device-kit> .kit     # then, on the GPU machine, in this checkout:
#   OUT=/some/dir bash benchmarks/run_slime_device.sh RUN_ID SEQ_LENS [extra cpverify run options]
#
# e.g. `bash benchmarks/run_slime_device.sh h200x2-1k 1K`. The kit has no Hub access, so the model
# is the kit's random Qwen2.5-0.5B-shaped checkpoint (make_fake_qwen.py), given with --model-dir.
# Everything of the run (verdict.md/json, env.json, commands.sh, plan.json, logs) is packed into
# $OUT/RUN_ID.tgz; the terminal output goes to $OUT/RUN_ID.out.
#
# Extra options reach `cpverify run` as they are: the rounds (`--rounds 3`, `--rounds auto --budget 20m`,
# `--max-rounds 8`), `--cp 1,2,4`, `--set ...`. Two settings of the host:
#   GPUS=0,1        the GPUs, as `cpverify run --gpus` reads them (default 0,1): indices take a comma,
#                   a single number is a count (GPUS=1 is one GPU, GPU 0; GPUS=0 is none and refused);
#                   the profile runs on as many (--set gpus=N)
#   EFFECT="0.013"  an A/B of the kit's slime against a copy that waits that many seconds per
#                   loss_function call when CP > 1 (benchmarks/known_effect.py); EFFECT="0.013 every-cp"
#                   at every CP (CP-neutral)
# One GPU cannot run CP=2: there it compares two slime revisions at CP=1 (an A/B at one CP), e.g. a
# CP-neutral known effect and, for free, each arm's A/A reading from its own rounds:
#   GPUS=1 EFFECT="0.013 every-cp" bash benchmarks/run_slime_device.sh h100-effect 1K --cp 1 --rounds auto --budget 25m
set -uo pipefail
id=${1:?run id}; lens=${2:?seq lens}; shift 2
GPUS=${GPUS:-0,1}
OUT=${OUT:-/tmp/cpverify-device}; mkdir -p "$OUT"
T0=$SECONDS
source .kit/setup.sh || exit 1
if [ ! -f "$KIT_ROOT/model/config.json" ]; then
    python3 .kit/make_fake_qwen.py "$KIT_ROOT/model" 2>&1 | tail -1
fi
echo "[$((SECONDS - T0))s] kit ready"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
python3 -m ray.scripts.scripts stop --force >/dev/null 2>&1
runs=/tmp/cpverify-runs; mkdir -p "$runs"
case "$GPUS" in  # the profile's gpus is how many GPUs --gpus names: the count, or the indices listed
    *,*) IFS=, read -ra listed <<< "$GPUS"; host=(--set "gpus=${#listed[@]}") ;;
    *) host=(--set "gpus=$GPUS") ;;
esac
if [ -n "${EFFECT:-}" ]; then
    read -r seconds where <<< "$EFFECT"
    candidate="$runs/$id-candidate-slime"
    rm -rf "$candidate"
    python3 benchmarks/known_effect.py "$SLIME_DIR" "$candidate" --seconds "$seconds" ${where:+--$where} || exit 1
    host+=(--slime-dir-candidate "$candidate")
fi
python3 -m cpverify run --profile train-only --runner local --slime-dir "$SLIME_DIR" \
    --python "$(command -v python3)" --model-dir "$KIT_ROOT/model" --gpus "$GPUS" --seq-len "$lens" \
    --out "$runs" --run-id "$id" "${host[@]}" "$@" > "$OUT/$id.out" 2>&1
rc=$?
echo "[$((SECONDS - T0))s] cpverify run $id: exit $rc"
tail -n 25 "$OUT/$id.out"
tar -czf "$OUT/$id.tgz" -C "$runs" "$id"
