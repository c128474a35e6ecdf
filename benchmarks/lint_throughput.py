"""CPU time of `cpverify lint` (cpverify.lint.lint_argv) on large pasted commands, by shape and size.

    python3 benchmarks/lint_throughput.py [--sizes-kb 400 4000] [--reps 3] [--shapes script token unknown]

Shapes, each grown to the size asked for:
  script   slime's smoke command as a launch script (exports, comments, MODEL_ARGS array, the
           train.py command with every flag), repeated: many known flags, quoted values, lines;
  token    the smoke command with one huge quoted value (a --runtime-env-json pasted inline);
  unknown  the smoke command plus distinct unknown flags (--extra-flag-N N), each looked up
           for a close known flag ("did you mean").
Prints the median CPU time (time.process_time) of --reps runs per shape and size, and the
throughput; linear code keeps the time per KB flat as the size grows. Run it against another
checkout with PYTHONPATH=/that/checkout to compare.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(REPO))

from cpverify import lint
from cpverify.profiles import QWEN25_05B_MODEL_ARGS, SLIME_ENV, SMOKE_TRAIN_ARGS

COMMAND = "python3 train.py " + " ".join(map(shlex.quote, SMOKE_TRAIN_ARGS))


def script_block(i: int) -> str:
    exports = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in SLIME_ENV)
    model = "MODEL_ARGS=(\n  " + " \\\n  ".join(map(shlex.quote, QWEN25_05B_MODEL_ARGS)) + "\n)"
    flags = " \\\n   ".join(f"{a}" if a.startswith("--") else shlex.quote(a) for a in SMOKE_TRAIN_ARGS)
    return (f"# run {i}: the smoke command, as a launch script\n{exports}\n{model}\n"
            f"python3 train.py \\\n   ${{MODEL_ARGS[@]}} \\\n   {flags} \\\n   --seed {i}\n")


def make(shape: str, size: int) -> str:
    if shape == "script":
        blocks, total, i = [], 0, 0
        while total < size:
            blocks.append(script_block(i))
            total += len(blocks[-1])
            i += 1
        return "".join(blocks)
    if shape == "token":
        return COMMAND + " --runtime-env-json '" + "x" * (size - len(COMMAND)) + "'"
    if shape == "unknown":
        flags, total, i = [], len(COMMAND), 0
        while total < size:
            flags.append(f"--extra-flag-{i} {i}")
            total += len(flags[-1]) + 1
            i += 1
        return COMMAND + " " + " ".join(flags)
    raise SystemExit(f"unknown shape {shape}")


def cpu_seconds(text: str) -> float:
    if hasattr(lint, "_closest_flag"):
        lint._closest_flag.cache_clear()  # no help from an earlier run
    start = time.process_time()
    lint.lint_argv(text)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-kb", type=int, nargs="+", default=[400, 4000])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--shapes", nargs="+", default=["script", "token", "unknown"])
    args = parser.parse_args()
    commit = subprocess.run(["git", "-C", str(Path(lint.__file__).parent), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    print(f"cpverify.lint from {Path(lint.__file__).parent} at {commit or '?'}; python {platform.python_version()} "
          f"on {platform.platform()}, {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}")
    print("| shape | size | median CPU | per MB | runs |\n|---|---|---|---|---|")
    for shape in args.shapes:
        for kb in args.sizes_kb:
            text = make(shape, kb * 1000)
            runs = [cpu_seconds(text) for _ in range(args.reps)]
            median = statistics.median(runs)
            print(f"| {shape} | {len(text) / 1e6:.2f} MB | {median:.2f} s | {median / (len(text) / 1e6):.2f} s/MB | "
                  f"{', '.join(f'{r:.2f}' for r in runs)} |", flush=True)
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
