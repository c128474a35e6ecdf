#!/usr/bin/env bash
# `cpverify verdict`'s whole-process benchmark (benchmarks/verdict_throughput.py) on a GPU host's CPUs,
# in its own Python (the device's torch venv), this tree against an older one. No GPU is used.
#
# Prepare here (ignored paths, carried to the device with carry=[".whl"]):
#   mkdir -p .whl/bench/wheels .whl/bench/before .whl/bench/after
#   pip download orjson hyperscan --python-version 3.12 --only-binary=:all: \
#       --platform manylinux2014_x86_64 -d .whl/bench/wheels
#   git archive OLD cpverify | tar -x -C .whl/bench/before
#   git archive NEW cpverify benchmarks tests/helpers | tar -x -C .whl/bench/after
# Run there:  bash benchmarks/run_verdict_bench_device.sh   (its output: $OUT/verdict_throughput_device.txt)
# Recorded: benchmarks/verdict-h100-host/ (OLD 1b6d1da, NEW main at h/vspeed's merge).
set -uo pipefail
B=$PWD/.whl/bench
python3 -m pip install --no-deps --no-index "$B"/wheels/*.whl -q 2>&1 | tail -2
export PYTHONPYCACHEPREFIX=/tmp/pycache
python3 -c "import orjson, hyperscan, matplotlib, numpy, scipy; print('deps ok', numpy.__version__, matplotlib.__version__)"
lscpu | grep -E "Model name|^CPU\(s\)"
uptime
cd "$B/after"
python3 benchmarks/verdict_throughput.py --rollouts 1000 10000 --reps 5 --tree "$B/before" --tree-rollouts 1000 10000 2>&1 \
    | tee "$OUT/verdict_throughput_device.txt"
uptime
