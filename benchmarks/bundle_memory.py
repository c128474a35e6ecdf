"""Peak memory, time and bundle size of `cpverify verdict` (and `cpverify parse`) on hostile logs.

    python3 benchmarks/bundle_memory.py [--reps 3] [--dir /tmp] [--tree PATH]

Each case is a real-format slime CP=1/CP=2 pair (tests/helpers/slime_log.py) whose CP=2 log is
made hostile: one 160 MiB line (a progress bar that never printed a newline); a 200 KiB gzip that
inflates to the log plus 200 MiB without a newline (a gzip bomb); a gzip that inflates to the log
plus 200 MiB of 1 KiB lines (a bomb of many lines). Each command runs in a fresh process; its peak
RSS is the kernel's (wait4's ru_maxrss), its wall time the median of --reps runs, and the bundle's
size is what `du` would count for logs/. `--tree` runs another checkout's cpverify (PYTHONPATH),
e.g. the commit before the bundle was capped, to compare. The inputs are deleted afterwards.
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIB = 1 << 20
sys.path.insert(0, str(REPO / "tests"))

from helpers.slime_log import synthetic_arm  # noqa: E402


def make_inputs(folder: Path) -> dict[str, Path]:
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(folder / "cp1.log")
    cand = synthetic_arm(cp=2, actor_train_time=1.05, seed=2).write(folder / "cp2.log")
    text = cand.read_bytes()
    long_line = folder / "cp2-long-line.log"
    with long_line.open("wb") as out:
        out.write(text)
        for _ in range(160):
            out.write(b"x" * MIB)
        out.write(b"\n")
    bomb = folder / "cp2-bomb.log.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as out:
        out.write(text)
        for _ in range(200):
            out.write(b"A" * MIB)
    lines = folder / "cp2-bomb-lines.log.gz"
    with gzip.open(lines, "wb", compresslevel=9) as out:
        out.write(text)
        line = b"y" * 1023 + b"\n"
        for _ in range(200):
            out.write(line * 1024)
    return {"cp1": base, "plain": cand, "160 MiB line": long_line, "200 KiB gzip bomb": bomb,
            "gzip bomb of 1 KiB lines": lines}


def run(argv: list[str], tree: Path, cwd: Path) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in bytes, exit code) of one fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "cpverify", *argv], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.monotonic() - started, usage.ru_maxrss * 1024, proc.returncode


def size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--tree", type=Path, default=REPO, help="the checkout whose cpverify runs (default: this one)")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cpverify-bundle-bench-", dir=args.dir))
    try:
        inputs = make_inputs(folder)
        print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
              f"tree {args.tree}")
        print("| command | CP=2 log given | its size | peak RSS | wall (median) | exit | bundle logs/ |")
        print("|---|---|---|---|---|---|---|")
        for name, log in inputs.items():
            if name == "cp1":
                continue
            for command in ("verdict", "parse"):
                walls, peaks, codes, bundle = [], [], set(), 0
                for rep in range(args.reps):
                    out = folder / f"out-{rep}"
                    argv = (["verdict", "--baseline", str(inputs["cp1"]), "--candidate", str(log), "--out", str(out)]
                            if command == "verdict" else ["parse", str(log)])
                    wall, peak, code = run(argv, args.tree, folder)
                    walls.append(wall)
                    peaks.append(peak)
                    codes.add(code)
                    if command == "verdict":
                        bundle = size_of(out / "logs")
                        shutil.rmtree(out)
                shown = f"{bundle / MIB:.1f} MiB" if command == "verdict" else "-"
                print(f"| `cpverify {command}` | {name} | {log.stat().st_size / 1024:,.0f} KiB | "
                      f"{statistics.median(peaks) / 1e6:.0f} MB | {statistics.median(walls):.1f} s | "
                      f"{','.join(map(str, sorted(codes)))} | {shown} |", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
