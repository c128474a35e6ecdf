"""Throughput and peak memory of cpverify.parse.parse_file on large synthetic slime logs.

    python3 benchmarks/parse_throughput.py [--sizes-mb 50 200] [--reps 5] [--dir /tmp] [--shapes mixed nccl]
                                           [--setups hyperscan/orjson find/json]

Writes logs shaped like a colocated slime run with NCCL_DEBUG=INFO (Ray prefixes and ANSI
colour on every actor line). Shape "mixed": per rollout ~600 NCCL INFO lines (process groups are rebuilt
every iteration), ~300 SGLang access-log lines, a tqdm bar of 30 `\\r` updates, slime's
Timer/Memory-Usage/step/perf lines. Shape "nccl": a multi-node NCCL_DEBUG=INFO set-up in which
most lines are DISTINCT: 64 ranks on 8 nodes, 32 channels, rings and trees over P2P, SHM and
NET/IB/GDRDMA, every line with its own host, pid, rank, channel and peer; a slime step every
~2,600 lines. For each size and set-up -- a block-scan engine (Hyperscan, or the bytes.find
fallback used where Hyperscan is not installed) and a JSON reader for slime's dicts (orjson, or
json where orjson is not installed) -- it times a bare binary `for line in f: pass` and parse_file
over the same (page-cached) file, alternately (bare, parse, bare, parse, ...: the machine's load
falls on both alike), medians of --reps runs; and it measures, in a fresh process, the peak RSS
(VmHWM, Linux) and the CPU time of a first parse (which compiles the block scan). A last file of
one 200 MB line (a tqdm bar that never printed a newline) shows that line length does not cost
memory either.
The generated logs are deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MB = 1024 * 1024

TRAIN = "\x1b[36m(MegatronTrainRayActor pid={pid})\x1b[0m "
ROLLOUT = "\x1b[36m(RolloutManager pid=999)\x1b[0m "
SGLANG = "\x1b[33m(SGLangEngine pid=22439)\x1b[0m "
NCCL_INFO = [
    "{host}:{pid}:{tid} [{dev}] NCCL INFO Channel {ch:02d}/0 : {dev}[{dev}] -> {peer}[{peer}] via P2P/CUMEM",
    "{host}:{pid}:{tid} [{dev}] NCCL INFO Channel {ch:02d}/24 :    0   1",
    "{host}:{pid}:{tid} [{dev}] NCCL INFO Ring {ch:02d} : {peer} -> {dev} -> {peer}",
    "{host}:{pid}:{tid} [{dev}] NCCL INFO Trees [0] -1/-1/-1->{dev}->{peer} [1] -1/-1/-1->{dev}->{peer}",
    "{host}:{pid}:{tid} [{dev}] NCCL INFO P2P Chunksize set to 524288",
    "{host}:{pid}:{tid} [{dev}] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "{host}:{pid}:{tid} [{dev}] NCCL INFO comm 0x55f08a1c83d0 rank {dev} nranks 2 cudaDev {dev} nvmlDev {dev} "
    "busId 30 commId 0x438c8edb9fb0064f - Init COMPLETE",
    "{host}:{pid}:{tid} [{dev}] NCCL INFO threadThresholds 8/8/64 | 16/8/64 | 512 | 512",
]


def rollout_block(rid: int, rng: random.Random) -> str:
    out = []
    add = out.append
    pid = 32167 + rng.randrange(2)
    add(
        ROLLOUT
        + "Rollout generation: "
        + "\r".join(
            f"{p * 256 // 30:3d}/256 [{p:02d}:00<00:{30 - p:02d}, {rng.uniform(8, 12):.2f}it/s]" for p in range(1, 31)
        )
    )
    for _ in range(300):
        add(
            SGLANG + f"[2026-08-21 10:00:{rng.randrange(60):02d}] INFO:     127.0.0.1:{rng.randrange(30000, 60000)} - "
            '"POST /generate HTTP/1.1" 200 OK'
        )
    for tp in range(8):
        add(SGLANG + f"[2026-08-21 10:00:15 TP{tp}] Cache flushed successfully!")
    add(
        ROLLOUT + f"[2026-08-21 10:00:15] rollout.py:534 - perf {rid}: {{'rollout/response_len/mean': "
        f"{rng.uniform(200, 400)}, 'perf/rollout_time': {rng.uniform(3, 4)}, 'perf/tokens_per_gpu_per_sec': "
        f"{rng.uniform(200, 300)}}}"
    )
    for name in ("sleep", "wake_up", "actor_train"):
        add(TRAIN.format(pid=pid) + f"[2026-08-21 10:00:16] timer.py:24 - Timer {name} start")
        add(
            TRAIN.format(pid=pid) + f"[2026-08-21 10:00:17] memory_utils.py:41 - [Rank 0] Memory-Usage before {name}: "
            f"{{'gpu': '0', 'total_GB': 79.11, 'free_GB': {rng.uniform(20, 60):.2f}, 'used_GB': 19.11}}"
        )
        add(
            TRAIN.format(pid=pid) + f"[2026-08-21 10:00:18] timer.py:32 - Timer {name} end (elapsed: "
            f"{rng.uniform(0.5, 90):.1f}s)"
        )
    for i in range(40):
        add(
            TRAIN.format(pid=pid) + f"[2026-08-21 10:00:18] reloadable_process_group.py:152 - Reloading {i} process "
            f"groups in pid {pid}"
        )
    host, tid = "e54db9740f9d", 228141 + rid % 7
    for i in range(600):
        dev = i % 2
        add(
            TRAIN.format(pid=pid)
            + NCCL_INFO[i % len(NCCL_INFO)].format(host=host, pid=pid, tid=tid, dev=dev, peer=1 - dev, ch=i % 24)
        )
    for k in range(2):
        step = rid * 2 + k
        add(
            TRAIN.format(pid=pid) + f"[2026-08-21 10:00:28] model.py:918 - step {step}: {{'train/loss': "
            f"{rng.uniform(-1e-8, 1e-8)}, 'train/pg_loss': {rng.uniform(-1e-8, 1e-8)}, 'train/entropy_loss': "
            f"{rng.random()}, 'train/pg_clipfrac': 0.0, 'train/ppo_kl': 0.0, "
            f"'train/train_rollout_logprob_abs_diff': {rng.random() / 10}, 'train/kl_loss': {rng.random() / 100}, "
            f"'train/grad_norm': {rng.random()}, 'train/lr-pg_0': 1e-06, 'train/global_batch_size': 8, "
            f"'train/step': {step}}}"
        )
    add(
        TRAIN.format(pid=pid) + f"[2026-08-21 10:00:28] train_metric_utils.py:401 - perf {rid}: {{'perf/sleep_time': "
        f"{rng.uniform(3, 5)}, 'perf/update_weights_time': 0.33, 'perf/wake_up_time': 1.94, "
        f"'perf/train_wait_time': 11.3, 'perf/ref_log_probs_time': {rng.uniform(1, 2)}, 'perf/log_probs_time': "
        f"{rng.uniform(0.1, 0.2)}, 'perf/actor_train_time': {rng.uniform(1, 2)}, 'perf/train_time': 2.84, "
        f"'perf/actor_train_tflops': 3.7, 'perf/step_time': {rng.uniform(13, 15)}, 'perf/wait_time_ratio': 0.8}}"
    )
    return "\n".join(out) + "\n"


def nccl_block(rid: int, rng: random.Random) -> str:
    """One communicator set-up of 64 ranks: ~2,600 NCCL INFO lines, nearly all distinct."""
    out = []
    add = out.append
    transports = ("P2P/CUMEM/read", "SHM/direct/direct", "NET/IB/{nic}/GDRDMA", "P2P/IPC")
    for rank in range(64):
        node, dev = divmod(rank, 8)
        head = f"node{node:02d}-{rid % 97}:{40000 + rank * 13 + rid}:{50000 + rank + rid * 7} [{dev}] NCCL INFO "
        for ch in range(32):
            peer = (rank + 1 + ch) % 64
            via = transports[(rank + ch) % 4].format(nic=(dev + ch) % 8)
            add(TRAIN.format(pid=40000 + rank) + head + f"Channel {ch:02d}/0 : {rank}[{dev}] -> {peer}[{peer % 8}] via {via}")
            if ch % 4 == 0:
                add(TRAIN.format(pid=40000 + rank) + head + f"Ring {ch:02d} : {rank - 1 & 63} -> {rank} -> {peer}")
        add(TRAIN.format(pid=40000 + rank) + head + f"comm 0x{rng.getrandbits(48):012x} rank {rank} nranks 64 "
            f"cudaDev {dev} nvmlDev {dev} busId {dev * 16 + 9:x}000 commId 0x{rng.getrandbits(64):016x} - Init COMPLETE")
    add(TRAIN.format(pid=40000) + STEP_LINE.format(step=rid, loss=rng.uniform(-1e-8, 1e-8)))
    return "\n".join(out) + "\n"


STEP_LINE = ("[2026-08-21 10:00:28] model.py:918 - step {step}: {{'train/loss': {loss}, 'train/grad_norm': 0.5, "
             "'train/step': {step}}}")
SHAPES = {"mixed": "rollout_block", "nccl": "nccl_block"}


def write_log(path: Path, size_mb: int, shape: str = "mixed") -> int:
    """Write blocks of the shape until the file holds size_mb MiB; return the number of blocks."""
    rng = random.Random(size_mb)
    make = globals()[SHAPES[shape]]
    written, rid = 0, 0
    with path.open("w", encoding="utf-8") as f:
        while written < size_mb * MB:
            block = make(rid, rng)
            f.write(block)
            written += len(block.encode())
            rid += 1
    return rid


def write_one_line(path: Path, size_mb: int) -> None:
    bar = ("Update weights:  50%|█████     | 8/16 [00:10<00:10,  1.25s/it]\r" * 2000).encode()
    with path.open("wb") as f:
        for _ in range(size_mb * MB // len(bar) + 1):
            f.write(bar)
        f.write(b"\n")


def bare_loop(path: Path) -> tuple[float, float]:
    """(wall s, CPU s) of the cheapest Python read of every line."""
    wall, cpu = time.perf_counter(), time.process_time()
    with path.open("rb") as f:
        for _line in f:
            pass
    return time.perf_counter() - wall, time.process_time() - cpu


def use(setup: str) -> None:
    """Make parse_file use a set-up, "ENGINE/READER" (hyperscan/orjson, find/json, ...)."""
    from cpverify.parse import dicts, scan

    scan.ENGINE, dicts.JSON_READER = setup.split("/")


def timed_parse(path: Path, setup: str) -> tuple[float, float]:
    """(wall s, CPU s) of parse_file with the given set-up."""
    from cpverify.parse import parse_file

    use(setup)
    wall, cpu = time.perf_counter(), time.process_time()
    parse_file(path)
    return time.perf_counter() - wall, time.process_time() - cpu


def medians(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def fresh_parse(path: Path | None, setup: str = "") -> tuple[float, dict, float]:
    """(peak RSS MiB, record counts, CPU s of the parse) of a fresh interpreter that imports
    cpverify.parse and parses `path` once: the first parse compiles the block scan.

    Reads VmHWM from /proc: ru_maxrss would be wrong here, Linux carries it over from the
    (large) parent process across fork and exec.
    """
    code = (
        "import json, sys, time\n"
        "from cpverify.parse import dicts, parse_file, scan\n"
        "counts, cpu = {}, 0.0\n"
        "if len(sys.argv) > 1:\n"
        "    scan.ENGINE, dicts.JSON_READER = sys.argv[2].split('/')\n"
        "    cpu = time.process_time()\n"
        "    p = parse_file(sys.argv[1])\n"
        "    cpu = time.process_time() - cpu\n"
        "    counts = {k: len(getattr(p, k)) for k in ('steps', 'perf', 'timers', 'memory', 'errors')}\n"
        "    counts['lines'] = p.lines\n"
        "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
        "print(json.dumps([int(hwm.split()[1]) / 1024, counts, cpu]))\n"
    )
    argv = [sys.executable, "-c", code] + ([str(path), setup] if path else [])
    out = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=REPO).stdout
    rss, counts, cpu = json.loads(out)
    return rss, counts, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes-mb", type=int, nargs="+", default=[50, 200])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=Path("/tmp"))
    ap.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=["mixed", "nccl"])
    sys.path.insert(0, str(REPO))
    from cpverify.parse import dicts, scan

    setups = [f"{engine}/{reader}" for engine in scan.ENGINES for reader in dicts.JSON_READERS]
    # The default: what a full install runs, and what runs with no optional library at all.
    default = sorted({setups[0], setups[-1]}, key=setups.index)
    ap.add_argument("--setups", nargs="+", choices=setups, default=default, metavar="ENGINE/READER",
                    help=f"block-scan engine / JSON reader, of {', '.join(setups)} (default: {' '.join(default)})")
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.platform()}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.2f}; block-scan engines here: {', '.join(scan.ENGINES)}; "
          f"JSON readers: {', '.join(dicts.JSON_READERS)}")
    base_rss, _, _ = fresh_parse(None)
    print(f"baseline RSS (interpreter + cpverify.parse imported): {base_rss:.1f} MiB\n")
    for shape, size in [(shape, size) for shape in args.shapes for size in args.sizes_mb]:
        path = args.dir / f"cpverify-bench-{shape}-{size}mb.log"
        try:
            rollouts = write_log(path, size, shape)
            nbytes = path.stat().st_size
            bare_loop(path)  # warm the page cache: both loops read from memory
            for setup in args.setups:
                timed_parse(path, setup)  # compile this engine's scan once, as a long-lived process has
                bare, parse = [], []
                for _ in range(args.reps):  # interleaved: a load that comes and goes falls on both
                    bare.append(bare_loop(path))
                    parse.append(timed_parse(path, setup))
                rss, counts, first_cpu = fresh_parse(path, setup)
                (bw, bc), (pw, pc) = medians(bare), medians(parse)
                size_mb = nbytes / MB
                print(
                    f"[{shape}, {setup}] {size_mb:7.1f} MiB, {counts['lines']} lines, {rollouts} blocks, "
                    f"records {counts}\n"
                    f"    CPU  : bare loop {bc:.3f} s ({size_mb / bc:.0f} MiB/s), parse_file {pc:.3f} s "
                    f"({size_mb / pc:.1f} MiB/s), ratio {pc / bc:.2f}x\n"
                    f"    wall : bare loop {bw:.3f} s ({size_mb / bw:.0f} MiB/s), parse_file {pw:.3f} s "
                    f"({size_mb / pw:.1f} MiB/s), ratio {pw / bw:.2f}x\n"
                    f"    first parse in a fresh process (compiles the scan): CPU {first_cpu:.3f} s; "
                    f"peak RSS (VmHWM) {rss:.1f} MiB (+{rss - base_rss:.1f} over baseline)\n"
                    f"    runs (wall, cpu): bare {[(round(w, 3), round(c, 3)) for w, c in bare]}\n"
                    f"                      parse {[(round(w, 3), round(c, 3)) for w, c in parse]}"
                )
        finally:
            path.unlink(missing_ok=True)

    path = args.dir / "cpverify-bench-one-line.log"
    try:
        write_one_line(path, max(args.sizes_mb))
        nbytes = path.stat().st_size
        pw, pc = medians([timed_parse(path, args.setups[0]) for _ in range(args.reps)])
        rss, counts, _ = fresh_parse(path, args.setups[0])
    finally:
        path.unlink(missing_ok=True)
    print(
        f"{nbytes / MB:7.1f} MiB in ONE line ({counts['lines']} line): parse_file CPU {pc:.3f} s, wall {pw:.3f} s; "
        f"peak RSS {rss:.1f} MiB (+{rss - base_rss:.1f} over baseline)"
    )
    print(f"load {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
