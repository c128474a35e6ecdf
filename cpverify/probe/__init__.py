"""`cpverify probe`: PyTorch's own context parallelism on these GPUs, without slime.

Runs the attention workload (cpverify.probe.workload) twice through torchrun on the same GPUs —
CP=1 (each GPU its own sequence) and CP=N (one sequence split over N GPUs) — and prints the
median step times, their ratio and the correctness checks. The full pipeline
(`cpverify run --profile probe`) runs the same argv through the shared runners and verdict; this
command is the quick, standalone way. `--dry-run` only prints the commands.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cpverify.errors import InputError
from cpverify.model import Arm
from cpverify.plan.build import arm_name
from cpverify.probe import rules

__all__ = ["arm_commands", "arm_name", "bandwidth_argv", "probe_arm", "run_arm", "summarize", "workload_argv"]


def _torchrun(nproc: int, python: str) -> list[str]:
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]


def workload_argv(*, cp: int, seq_len: int, steps: int, warmup: int, nproc: int,
                  python: str = sys.executable, extra: tuple[str, ...] = ()) -> list[str]:
    return [*_torchrun(nproc, python), "-m", "cpverify.probe.workload", "--cp", str(cp),
            "--seq-len", str(seq_len), "--steps", str(steps), "--warmup", str(warmup), *extra]


def bandwidth_argv(*, nproc: int, python: str = sys.executable, extra: tuple[str, ...] = ()) -> list[str]:
    return [*_torchrun(nproc, python), "-m", "cpverify.probe.bandwidth", *extra]


def arm_commands(*, cp: int, seq_len: int, steps: int, warmup: int, nproc: int | None = None,
                 python: str = sys.executable, bypass_cp: bool = False) -> tuple[Arm, ...]:
    """The two arms on the same `nproc` GPUs: CP=1 (data parallel) and CP=cp."""
    if cp < 2:
        raise InputError(f"--cp {cp} compares nothing", "use --cp 2 (or 4, 8: a divisor of the GPU count)")
    nproc = nproc or cp
    if nproc % cp:
        raise InputError(f"--nproc {nproc} is not a multiple of --cp {cp}", f"use --nproc {cp} or a multiple of it")
    common: dict[str, Any] = {"seq_len": seq_len, "steps": steps, "warmup": warmup, "nproc": nproc, "python": python}
    return (probe_arm(arm_name(1, seq_len), 1, workload_argv(cp=1, **common), seq_len=seq_len),
            probe_arm(arm_name(cp, seq_len), cp, workload_argv(cp=cp, extra=("--bypass-cp",) if bypass_cp else (),
                                                               **common), seq_len=seq_len))


def probe_arm(name: str, cp: int, argv: Sequence[str], *, seq_len: int | None = None) -> Arm:
    """An arm of `cpverify probe`, run from here with the probe profile's environment (cp 0: an arm
    that is no CP size, the bandwidth measurement)."""
    from cpverify.profiles import get_profile  # not at the top: the workload's side imports this package

    return Arm(name, cp, tuple(argv), get_profile("probe").env, os.getcwd(), seq_len=seq_len)


def run_arm(arm: Arm, log_path: Path, *, on_progress=None) -> dict:
    """Run one arm as `cpverify run --profile probe` runs it: through the local runner, so that the
    workload gets the allow-listed environment (cpverify.runners.workload_env: never this machine's HF_TOKEN
    or other credentials), its log is scrubbed line by line as it streams to disk, the probe
    profile's limits stop a hung arm, and nothing of it outlives Ctrl-C. `on_progress` gets the
    watcher's reports (cpverify.progress.ArmsDisplay.update). The result carries the arm's CP."""
    from cpverify.profiles import get_profile
    from cpverify.runners.local import LocalRunner

    log_path.unlink(missing_ok=True)  # the runner appends: one attempt, one log
    result = LocalRunner(on_progress=on_progress).run_arm(arm, log_path=log_path, limits=get_profile("probe").limits())
    return {"cp": arm.cp, "returncode": result.exit_code, "log": str(log_path), "outcome": str(result.outcome),
            "reason": result.reason}


def summarize(results: dict[str, dict], *, cp: int) -> dict:
    """Medians per arm, the CP/baseline ratio, every check; `ok` when all arms ran and all checks passed.
    `results`: per arm name, what run_arm returned (the arm's CP among it: the ratio is CP=`cp`'s over CP=1's).

    Each arm's log is read by cpverify's log parser, as `cpverify run --profile probe` reads it:
    its perf records, its cpverify-check and cpverify-busbw lines (as `cpverify parse --json` shows them).
    """
    from cpverify.parse import parse_file  # not at the top: the workload's side imports this package

    arms, checks, busbw = {}, [], []
    for name, result in results.items():
        parsed = parse_file(result["log"]).to_json()
        perf = [p["metrics"] for p in parsed["perf"] if p["side"] == "train"]
        train = [m["perf/actor_train_time"] for m in perf if m.get("perf/actor_train_time") is not None]
        step = [m["perf/step_time"] for m in perf if m.get("perf/step_time") is not None]
        arms[name] = {"returncode": result["returncode"], "log": result["log"], "steps": len(train),
                      "actor_train_time_median_s": rules.spread(train).median if train else None,
                      "step_time_median_s": rules.spread(step).median if step else None}
        checks += [{"arm": name, **c} for c in parsed["checks"]]
        busbw += [{"arm": name, **b} for b in parsed["bandwidth"]]
    medians = [(result["cp"], arms[name]["actor_train_time_median_s"]) for name, result in results.items()]
    base = next((m for arm_cp, m in medians if arm_cp == 1), None)
    cand = next((m for arm_cp, m in medians if arm_cp == cp), None)
    ratio = cand / base if base and cand else None
    ok = all(a["returncode"] == 0 for a in arms.values()) and all(c["status"] == "pass" for c in checks)
    return {"cp": cp, "arms": arms, "ratio_actor_train_time": ratio, "checks": checks, "busbw": busbw, "ok": ok}
