"""Throughput and peak memory of `cpverify parse LOG --json` on large synthetic logs, as a user
runs it: the whole command, interpreter start, imports and JSON output included, against a bare
Python line loop over the same file run the same way.

    python3 benchmarks/parse_throughput.py [--sizes-mb 50 100] [--reps 7] [--dir /tmp]
                                           [--shapes mixed nccl megatron] [--in-process hyperscan/orjson ...]
                                           [--before TREE]

Shapes (every log is written under --dir and deleted afterwards):
  mixed     a colocated slime run with NCCL_DEBUG=INFO, Ray prefixes and ANSI colour on every actor
            line: per rollout (~120 KiB) ~600 NCCL INFO lines, ~300 SGLang access lines, a tqdm bar of
            30 `\\r` updates, and slime's Timer, Memory-Usage, `step N:` and `perf N:` lines.
  nccl      a multi-node NCCL_DEBUG=INFO set-up whose lines are mostly DISTINCT (64 ranks on 8 nodes,
            32 channels over P2P, SHM and NET/IB/GDRDMA); a slime step every ~2,600 lines.
  megatron  records-dense: a Megatron-LM `iteration N/ M | ...` line after every 20 NCCL INFO lines
            (~39k records and ~12 MB of JSON per 100 MiB).

For each log it runs, alternately (bare, cpverify, bare, cpverify, ...: a load that comes and goes
falls on both), --reps times each:
  bare      python -c 'import sys\nfor line in open(sys.argv[1], "rb"): pass' LOG
  cpverify  python -m cpverify parse LOG --json > OUT
and, with --before TREE, that tree's `cpverify parse LOG --json` in the same turn (a load that comes and
goes falls on both: the before and after of a change, and whether they print the same bytes),
each a fresh process started by a small launcher that reports the child's own CPU time (user +
sys) and peak RSS (wait4; the launcher is small, so Linux's carry-over of the parent's peak RSS
into the child's does not show), with the wall time around it. The interpreter's bytecode is
cached (PYTHONPYCACHEPREFIX), as an installed package has it. One line of 100 MiB (a tqdm bar
that never printed a newline) shows that line length costs no memory. With --in-process, it also
times parse_file alone in this process per block-scan engine / JSON reader, against a bare loop
in this process.
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
import tempfile
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


def megatron_block(rid: int, rng: random.Random) -> str:
    """20 NCCL INFO lines, then one Megatron-LM iteration line: a record per ~2.6 KiB."""
    host, pid = f"node{rid % 8:02d}", 40000 + rid % 64
    out = [TRAIN.format(pid=pid) + NCCL_INFO[i % len(NCCL_INFO)].format(host=host, pid=pid, tid=pid + 1, dev=i % 8,
                                                                         peer=(i + 1) % 8, ch=i % 24)
           for i in range(20)]
    out.append(f" iteration {rid + 1:8d}/  500000 | consumed samples: {1024 * (rid + 1):12d} | elapsed time per "
               f"iteration (ms): {rng.uniform(800, 900):.1f} | learning rate: {rng.uniform(1e-6, 1e-5):.6E} | global "
               f"batch size:  1024 | lm loss: {rng.uniform(1, 3):.6E} | loss scale: 1.0 | grad norm: "
               f"{rng.uniform(0.1, 1):.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |")
    return "\n".join(out) + "\n"


SHAPES = {"mixed": rollout_block, "nccl": nccl_block, "megatron": megatron_block}


def write_log(path: Path, size_mb: int, shape: str = "mixed") -> int:
    """Write blocks of the shape until the file holds size_mb MiB; return the number of blocks."""
    rng = random.Random(size_mb)
    make = SHAPES[shape]
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


# -- whole processes ----------------------------------------------------------------------------

# Started as `python -S -I -c LAUNCHER OUT ARGV...`: runs ARGV with stdout to OUT and prints
# [wall s, user s, sys s, peak RSS MiB, exit code] of that child alone.
LAUNCHER = """
import json, os, sys, time
out, argv = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
    os.execv(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
print(json.dumps([time.perf_counter() - start, usage.ru_utime, usage.ru_stime, usage.ru_maxrss / 1024,
                  os.waitstatus_to_exitcode(status)]))
"""
BARE = "import sys\nfor line in open(sys.argv[1], 'rb'): pass"


def run_whole(argv: list[str], out: Path, env: dict[str, str], cwd: Path = REPO) -> dict[str, float]:
    """One fresh process: wall and CPU seconds, peak RSS MiB."""
    proc = subprocess.run([sys.executable, "-S", "-I", "-c", LAUNCHER, str(out), *argv], capture_output=True,
                          text=True, check=True, cwd=cwd, env=env)
    wall, user, system, rss, code = json.loads(proc.stdout)
    if code != 0:
        raise SystemExit(f"{argv} exited {code}")
    return {"wall": wall, "cpu": user + system, "rss": rss}


def whole_process(path: Path, reps: int, scratch: Path, before: Path | None = None) -> dict[str, list[dict[str, float]]]:
    """`reps` runs each of the bare loop and `cpverify parse LOG --json` (and the `before` tree's, when
    given), alternately."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(scratch / "pycache"))  # it mirrors each tree's absolute paths
    bare = [sys.executable, "-c", BARE, str(path)]
    cpverify = [sys.executable, "-m", "cpverify", "parse", str(path), "--json"]
    trees = {"cpverify": REPO, **({"before": before} if before else {})}
    runs: dict[str, list[dict[str, float]]] = {"bare": [], **{name: [] for name in trees}}
    for name, tree in trees.items():  # bytecode written, the page cache warm: as for every later run
        run_whole(cpverify, scratch / f"{name}.json", {**env, "PYTHONPATH": str(tree)}, tree)
    for _ in range(reps):
        runs["bare"].append(run_whole(bare, scratch / "bare.out", env))
        for name, tree in trees.items():
            runs[name].append(run_whole(cpverify, scratch / f"{name}.json", {**env, "PYTHONPATH": str(tree)}, tree))
    out = (scratch / "cpverify.json").read_bytes()
    runs["output_bytes"] = [{"bytes": len(out)}]
    if before:
        runs["same_output"] = [{"same": float(out == (scratch / "before.json").read_bytes())}]
    return runs


def median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def report_whole(label: str, path: Path, runs: dict[str, list[dict[str, float]]]) -> None:
    size = path.stat().st_size / MB
    bare, cpv = runs["bare"], runs["cpverify"]
    bc, bw, cc, cw = median(bare, "cpu"), median(bare, "wall"), median(cpv, "cpu"), median(cpv, "wall")
    print(f"[{label}] {size:.1f} MiB -> {runs['output_bytes'][0]['bytes'] / MB:.2f} MiB of JSON\n"
          f"    CPU  : bare {bc:.3f} s ({size / bc:.0f} MiB/s), cpverify {cc:.3f} s ({size / cc:.0f} MiB/s), "
          f"ratio {cc / bc:.2f}x\n"
          f"    wall : bare {bw:.3f} s, cpverify {cw:.3f} s, ratio {cw / bw:.2f}x\n"
          f"    peak RSS: bare {max(r['rss'] for r in bare):.1f} MiB, cpverify {max(r['rss'] for r in cpv):.1f} MiB\n"
          f"    runs (cpu, wall): bare {[(round(r['cpu'], 3), round(r['wall'], 3)) for r in bare]}\n"
          f"                      cpverify {[(round(r['cpu'], 3), round(r['wall'], 3)) for r in cpv]}")
    if "before" in runs:
        old = runs["before"]
        oc, ow = median(old, "cpu"), median(old, "wall")
        print(f"    before: CPU {oc:.3f} s, ratio {oc / bc:.2f}x; wall {ow:.3f} s, ratio {ow / bw:.2f}x; peak RSS "
              f"{max(r['rss'] for r in old):.1f} MiB; the same JSON: {bool(runs['same_output'][0]['same'])}\n"
              f"    runs (cpu, wall): before {[(round(r['cpu'], 3), round(r['wall'], 3)) for r in old]}")


# -- parse_file in this process -------------------------------------------------------------------


def bare_loop(path: Path) -> tuple[float, float]:
    """(wall s, CPU s) of the cheapest Python read of every line."""
    wall, cpu = time.perf_counter(), time.process_time()
    with path.open("rb") as f:
        for _line in f:
            pass
    return time.perf_counter() - wall, time.process_time() - cpu


def timed_parse(path: Path, setup: str) -> tuple[float, float]:
    """(wall s, CPU s) of parse_file with the set-up ENGINE/READER (hyperscan/orjson, find/json, ...)."""
    from cpverify.parse import dicts, parse_file, scan

    scan.ENGINE, dicts.JSON_READER = setup.split("/")
    wall, cpu = time.perf_counter(), time.process_time()
    parse_file(path)
    return time.perf_counter() - wall, time.process_time() - cpu


def in_process(path: Path, setup: str, reps: int) -> str:
    timed_parse(path, setup)  # the scan compiled once, as in a process that parses more than one log
    bare, parse = [], []
    for _ in range(reps):
        bare.append(bare_loop(path))
        parse.append(timed_parse(path, setup))
    (bw, bc), (pw, pc) = ((statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
                          for runs in (bare, parse))
    return (f"    parse_file alone in this process, {setup}: CPU {pc:.3f} s against a bare loop's {bc:.3f} s "
            f"({pc / bc:.2f}x), wall {pw / bw:.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes-mb", type=int, nargs="+", default=[50, 100])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--dir", type=Path, default=Path("/tmp"))
    ap.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    ap.add_argument("--before", type=lambda tree: Path(tree).resolve(), metavar="TREE",
                    help="also run the cpverify of this tree (e.g. `git archive main | tar -x -C TREE`), alternately "
                         "with this one's, and say whether it prints the same JSON")
    sys.path.insert(0, str(REPO))
    from cpverify.parse import dicts, scan

    setups = [f"{engine}/{reader}" for engine in scan.ENGINES for reader in dicts.JSON_READERS]
    ap.add_argument("--in-process", nargs="*", choices=setups, default=[], metavar="ENGINE/READER",
                    help=f"also time parse_file alone in this process with these set-ups, of {', '.join(setups)}")
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.platform()}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.2f}; block-scan engines here: {', '.join(scan.ENGINES)}; "
          f"JSON readers: {', '.join(dicts.JSON_READERS)}\n")
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="cpverify-bench-") as tmp:
        scratch = Path(tmp)
        for shape, size in [(shape, size) for shape in args.shapes for size in args.sizes_mb]:
            path = scratch / f"{shape}-{size}mb.log"
            write_log(path, size, shape)
            report_whole(f"{shape}, whole process", path, whole_process(path, args.reps, scratch, args.before))
            for setup in args.in_process:
                print(in_process(path, setup, args.reps))
            path.unlink()
        path = scratch / "one-line.log"
        write_one_line(path, max(args.sizes_mb))
        report_whole("one line, whole process", path, whole_process(path, args.reps, scratch, args.before))
    print(f"load {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
