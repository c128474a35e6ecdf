"""Throughput of the streaming credential scrubber (cpverify.redact.LineScrubber) on a large slime log.

    python3 benchmarks/scrub_throughput.py [--size-mb 50] [--reps 5] [--dir /tmp]

Every line a workload prints passes through LineScrubber before it reaches the log file, in the
watcher's reader thread, so its cost is paid per line of a run. The log is the synthetic one of
parse_throughput.py (a colocated slime run with NCCL_DEBUG=INFO: Ray prefixes and ANSI colour,
~600 NCCL INFO lines and ~300 SGLang access-log lines per rollout, slime's step/perf/Timer lines).
Two variants of the same file are timed, median CPU time of --reps runs each:

  * clean:   the log as it is (what almost every run looks like);
  * planted: one line in 50 replaced by a line holding a credential (a token, a URL password, a
             secret-named pair, a PEM block), the worst case that takes the slow path.

Each is fed one line a call (a workload that flushes every line) and in blocks of 64 KiB of lines
(what one pipe read delivers when a workload prints fast: the case where speed matters), against
the cheapest loop over the same lines (`for line in lines: pass`). To compare two versions of
cpverify, run it with PYTHONPATH pointing at each checkout; the scrubber is imported from there
(a version without `LineScrubber.lines` is fed line by line in both columns).
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLANTED = [
    b"(MegatronTrainRayActor pid=1) export HF_TOKEN=hf_Qx7bT2mN9pL4vR8sK1wZ3yC6dF0gH5jE2a\n",
    b"(MegatronTrainRayActor pid=1) runtime_env {'PGPASSWORD': 'planted-pw-5d21', 'NCCL_DEBUG': 'INFO'}\n",
    b"(MegatronTrainRayActor pid=1) connecting to postgres://u:planted-pw@db.example.internal:5432/x\n",
    b"-----BEGIN RSA PRIVATE KEY-----\n",
    b"MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2dP1cVeQWa9y1u7PmUz8iLNRqIe+\n",
    b"-----END RSA PRIVATE KEY-----\n",
]


def _write_log():
    spec = importlib.util.spec_from_file_location("parse_throughput", HERE / "parse_throughput.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_log


def timed(lines: list[bytes], scrub) -> float:
    cpu = time.process_time()
    for line in lines:
        scrub(line)
    return time.process_time() - cpu


def blocks_of(lines: list[bytes], size: int = 64 * 1024) -> list[list[bytes]]:
    out, block, filled = [], [], 0
    for line in lines:
        block.append(line)
        filled += len(line)
        if filled >= size:
            out.append(block)
            block, filled = [], 0
    return out + ([block] if block else [])


def timed_blocks(blocks: list[list[bytes]], scrubber) -> float:
    feed = getattr(scrubber, "lines", None) or (lambda block: [scrubber(line) for line in block])
    cpu = time.process_time()
    for block in blocks:
        feed(block)
    return time.process_time() - cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=50)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=Path("/tmp"))
    args = ap.parse_args()
    from cpverify.redact import LineScrubber  # from PYTHONPATH: the checkout under test

    path = args.dir / f"cpverify-scrub-bench-{args.size_mb}mb.log"
    try:
        _write_log()(path, args.size_mb)
        clean = path.read_bytes().splitlines(keepends=True)
    finally:
        path.unlink(missing_ok=True)
    planted = [PLANTED[i // 50 % len(PLANTED)] if i % 50 == 0 else line for i, line in enumerate(clean)]
    mib = sum(map(len, clean)) / 2**20
    import cpverify.redact

    print(f"python {platform.python_version()} on {platform.platform()}; cpverify.redact from {cpverify.redact.__file__}")
    print(f"{len(clean):,} lines, {mib:.1f} MiB; medians of {args.reps} runs (CPU time)\n")
    print("| log | bare loop | per line | per 64 KiB block | MiB/s (blocks) | µs a line (line / block) |")
    print("|---|---|---|---|---|---|")
    for name, lines in (("clean", clean), ("planted (1 line in 50)", planted)):
        blocks = blocks_of(lines)
        bare = statistics.median(timed(lines, lambda _line: None) for _ in range(args.reps))
        one = statistics.median(timed(lines, LineScrubber(["planted-extra-secret"])) for _ in range(args.reps))
        many = statistics.median(timed_blocks(blocks, LineScrubber(["planted-extra-secret"])) for _ in range(args.reps))
        print(f"| {name} | {bare:.3f} s | {one:.3f} s | {many:.3f} s | {mib / many:.0f} | "
              f"{one / len(lines) * 1e6:.2f} / {many / len(lines) * 1e6:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
