#!/usr/bin/env bash
# Doctor + torch-native CP probe + NCCL bandwidth on one multi-GPU host, in one go.
#
#   OUT=/some/dir bash benchmarks/run_probe_device.sh            # CP = NPROC = number of GPUs
#   CP=2 LENGTHS="4096 16384" OUT=... bash benchmarks/run_probe_device.sh
#   EXTRAS="bypass cp2-dp cudnn" ...   choose the extra runs (default below)
#
# Writes at most 6 files under $OUT: doctor.txt, doctor.json, summary.md, logs.tar.gz (every log and
# the raw nvidia-smi outputs), env.txt, timing.txt. Each launch has its own timeout; a failed arm
# does not stop the rest. Optional extras are skipped once BUDGET_S seconds have passed.
set -u -o pipefail
cd "$(dirname "$0")/.."

# NVLink multicast stays off on shared hosts (a program using it can take the host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

OUT=${OUT:?set OUT to an output directory}
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
NPROC=${NPROC:-$NGPU}
CP=${CP:-$NPROC}
EXTRAS=${EXTRAS:-"bw-variants bypass gqa-repeat alltoall"}
LENGTHS=${LENGTHS:-"4096 16384 65536 131072"}
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-5}
BUDGET_S=${BUDGET_S:-420}
PY=${PY:-python3}
W=$(mktemp -d /tmp/cpverify-probe.XXXX)
mkdir -p "$W/logs" "$W/raw" "$OUT"
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }
NCCL_INFO=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,NET)

EXTRA=(${PROBE_EXTRA:-})  # e.g. PROBE_EXTRA="--device cpu" to try this script on a machine without GPUs

# launch NAME TIMEOUT [ENV=VAL ...] -- ARGS...: one torchrun, logged to logs/NAME.log with its command
launch() {
  local name=$1 limit=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local t0=$(date +%s)
  { echo "# env ${envs[*]} $PY -m torch.distributed.run --standalone --nproc-per-node $NPROC $*"
    env ${envs[@]+"${envs[@]}"} timeout "$limit" "$PY" -m torch.distributed.run --standalone --nproc-per-node "$NPROC" "$@" 2>&1
    echo "# exit $?"; } > "$W/logs/$name.log"
  echo "$name $(( $(date +%s) - t0 ))s $(tail -1 "$W/logs/$name.log")" | tee -a "$W/timing.txt"
}

{ date -u; nvidia-smi; "$PY" -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())'; env | grep -E '^(NCCL|CUDA|TORCH|NVSHMEM)_' | sort; } > "$W/env.txt" 2>&1

# Raw outputs, recorded for the doctor's parser tests (tests/data/doctor/).
nvidia-smi > "$W/raw/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version,mig.mode.current --format=csv,noheader,nounits > "$W/raw/query-gpu.csv" 2>&1
nvidia-smi topo -m > "$W/raw/topo-m.txt" 2>&1
ls -la /sys/class/infiniband /dev/infiniband > "$W/raw/infiniband.txt" 2>&1
df -B1 /dev/shm > "$W/raw/dev-shm.txt" 2>&1

# (1) NCCL bandwidth with transport lines: default, P2P off (SHM), P2P and SHM off (sockets).
launch bw-default 120 "${NCCL_INFO[@]}" -- -m cpverify.probe.bandwidth --sizes 1M,16M,256M --iters 20
want() { [[ " $EXTRAS " == *" $1 "* ]] && [ "$(elapsed)" -lt "$BUDGET_S" ]; }
if want bw-variants; then
launch bw-p2p-off 120 "${NCCL_INFO[@]}" NCCL_P2P_DISABLE=1 -- -m cpverify.probe.bandwidth --sizes 1M,16M,256M --iters 10
launch bw-p2p-shm-off 150 "${NCCL_INFO[@]}" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- -m cpverify.probe.bandwidth --sizes 1M,16M,64M --iters 5
fi

# (2) doctor, reading the NCCL version from the bandwidth log too.
"$PY" -m cpverify.doctor --cp "$CP" --nccl-log "$W/logs/bw-default.log" --json-out "$OUT/doctor.json" > "$OUT/doctor.txt" 2>&1
echo "# exit $?" >> "$OUT/doctor.txt"
echo "doctor $(elapsed)s" >> "$W/timing.txt"

# (3) the probe: CP=1 vs CP=N at each length, same method.
for L in $LENGTHS; do
  if [ $((L % 1024)) -eq 0 ]; then tag="s$((L / 1024))k"; else tag="s$L"; fi
  launch "cp1-$tag" 240 "${NCCL_INFO[@]}" -- -m cpverify.probe.workload --cp 1 --seq-len "$L" --steps "$STEPS" --warmup "$WARMUP" ${EXTRA[@]+"${EXTRA[@]}"}
  launch "cp$CP-$tag" 240 "${NCCL_INFO[@]}" -- -m cpverify.probe.workload --cp "$CP" --seq-len "$L" --steps "$STEPS" --warmup "$WARMUP" ${EXTRA[@]+"${EXTRA[@]}"}
done

# (4) broken CP on purpose: the gate must FAIL (exit 1) and no perf line may appear.
if want bypass; then
  launch "cp$CP-s16k-bypass" 120 -- -m cpverify.probe.workload --cp "$CP" --seq-len 16384 --steps "$STEPS" --warmup "$WARMUP" --bypass-cp ${EXTRA[@]+"${EXTRA[@]}"}
fi

# (5) extras while the budget lasts.
# KV heads expanded before SDPA (the ring then passes 14 heads instead of 2):
if want gqa-repeat; then
  launch cp1-s64k-gqa-repeat 180 -- -m cpverify.probe.workload --cp 1 --seq-len 65536 --steps "$STEPS" --warmup "$WARMUP" --gqa repeat ${EXTRA[@]+"${EXTRA[@]}"}
  launch "cp$CP-s64k-gqa-repeat" 180 -- -m cpverify.probe.workload --cp "$CP" --seq-len 65536 --steps "$STEPS" --warmup "$WARMUP" --gqa repeat ${EXTRA[@]+"${EXTRA[@]}"}
fi
# all-to-all KV rotation instead of all-gather:
if want alltoall; then
  launch "cp$CP-s64k-alltoall" 180 -- -m cpverify.probe.workload --cp "$CP" --seq-len 65536 --steps "$STEPS" --warmup "$WARMUP" --rotate alltoall ${EXTRA[@]+"${EXTRA[@]}"}
fi
# CP=2 x DP=NPROC/2 (the 2-D mesh) against the CP=1 arm of the same length:
if want cp2-dp; then
  launch cp2-s64k-dp 180 -- -m cpverify.probe.workload --cp 2 --seq-len 65536 --steps "$STEPS" --warmup "$WARMUP" ${EXTRA[@]+"${EXTRA[@]}"}
fi
# cuDNN attention instead of flash (both arms):
if want cudnn; then
  launch cp1-s64k-cudnn 180 -- -m cpverify.probe.workload --cp 1 --seq-len 65536 --steps "$STEPS" --warmup "$WARMUP" --sdpa-backend cudnn ${EXTRA[@]+"${EXTRA[@]}"}
  launch "cp$CP-s64k-cudnn" 180 -- -m cpverify.probe.workload --cp "$CP" --seq-len 65536 --steps "$STEPS" --warmup "$WARMUP" --sdpa-backend cudnn ${EXTRA[@]+"${EXTRA[@]}"}
fi

"$PY" benchmarks/summarize_probe.py "$W/logs" > "$OUT/summary.md" 2>&1
cp "$W/env.txt" "$W/timing.txt" "$OUT/"
tar -C "$W" -czf "$OUT/logs.tar.gz" logs raw
echo "total $(elapsed)s"
cat "$OUT/summary.md"
