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
from dataclasses import replace
from pathlib import Path

from cpverify.errors import InputError
from cpverify.model import Arm
from cpverify.probe import rules

__all__ = ["arm_commands", "bandwidth_argv", "probe_arm", "run_arm", "summarize"]


def bandwidth_argv(*, nproc: int, python: str = sys.executable, extra: tuple[str, ...] = ()) -> list[str]:
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
            "-m", "cpverify.probe.bandwidth", *extra]


def arm_commands(*, cp: int, seq_len: int, steps: int, warmup: int, nproc: int | None = None,
                 python: str = sys.executable, bypass_cp: bool = False) -> tuple[Arm, ...]:
    """The two arms on the same `nproc` GPUs, CP=1 (data parallel) and CP=cp: the arms `cpverify run
    --profile probe` plans for these numbers (its plan, built here), run from this directory."""
    from cpverify.overrides import with_overrides  # not at the top: the workload's side imports this package
    from cpverify.plan.build import build_plan
    from cpverify.profiles import get_profile

    if cp < 2:
        raise InputError(f"--cp {cp} compares nothing", "use --cp 2 (or 4, 8: a divisor of the GPU count)")
    nproc = nproc or cp
    if nproc % cp:
        raise InputError(f"--nproc {nproc} is not a multiple of --cp {cp}", f"use --nproc {cp} or a multiple of it")
    defaults = get_profile("probe")
    for flag, value, least, default in (("--steps", steps, 1, defaults.steps),
                                        ("--warmup", warmup, 0, defaults.warmup_steps),
                                        ("--seq-len", seq_len, 1, defaults.seq_lens[0])):
        if value < least:
            raise InputError(f"{flag} {value} must be at least {least}", f"pass e.g. {flag} {default}")
    # this command prints its own medians: the verdict's least number of counted steps is not asked of it
    profile = with_overrides(defaults, gpus=nproc, cp_sizes=(1, cp), seq_lens=(seq_len,), steps=steps,
                             warmup_steps=warmup, min_counted_steps=min(steps, defaults.min_counted_steps))
    arms = build_plan(profile, run_id="probe", python=python).arms
    return tuple(replace(arm, workdir=os.getcwd(),
                         argv=(*arm.argv, "--bypass-cp") if bypass_cp and arm.cp == cp else arm.argv) for arm in arms)


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
