"""The arm steps: `cp1` runs round 1 of the baseline arms; `cp2` round 1 of the candidate arms, then
every further round the design asks for, interleaved (cpverify.plan.rounds), on the same GPUs,
under one lock. Each look is the verdict itself on the rounds so far (cpverify.course)."""

from __future__ import annotations

import time
from pathlib import Path

from cpverify import config, course
from cpverify.artifacts import file_digest
from cpverify.errors import EXIT_OK
from cpverify.locks import GpuLock
from cpverify.model import Arm, ArmInterrupted
from cpverify.plan import rounds as rounds_plan
from cpverify.progress import ArmsDisplay
from cpverify.run_state import ArmRecord, Interrupted
from cpverify.runners import make_runner
from cpverify.steps.context import Context
from cpverify.steps.verdict import evidence, judge, write_blocked
from cpverify.verdict import across


def step_arms(ctx: Context, which: str) -> int:
    """`cp1` or `cp2` (above). A round already recorded is not run again: a continued run picks up
    where it stopped."""
    if ctx.record.blocked:
        ctx.say(f"{which}: skipped, the run is blocked: {ctx.record.blocked.problem}")
        return EXIT_OK
    python = ctx.workload_python(refresh=True)
    if python is not None and not python.ok:  # before any GPU is held: the arms would die on import
        if not ctx.spec.gpu_less:
            return write_blocked(ctx, python.problem(), python.fix())
        ctx.say(f"{which}: {python.problem()}; ignored because of --gpus none")
    plan = ctx.plan
    baseline = ctx.profile.baseline_cp
    first = [a for a in rounds_plan.round_order(plan.arms, baseline, 1)
             if rounds_plan.is_baseline(a, baseline) == (which == "cp1")]
    course.begin(ctx.record, ctx.spec.design)
    ctx.save()
    # one line per running round (a live display on a terminal, plain lines elsewhere), through the runners' watcher
    displays: list[ArmsDisplay] = []
    runner = make_runner(ctx.runner, ctx.run_setup(progress=lambda report: displays[-1].update(report)))
    for what in runner.sweep_leftovers():  # a Docker engine that does not answer stops the run here (exit 4)
        ctx.say(f"{what} of an earlier, interrupted run")
    with GpuLock(plan.gpus, run_id=ctx.run_dir.run_id):
        _run_round(ctx, runner, displays, first, 1)
        if which == "cp2":
            _further_rounds(ctx, runner, displays)
    return EXIT_OK


def _run_round(ctx: Context, runner, displays: list, arms, k: int) -> None:
    """Round k of `arms` (planned arms), in the order given, each unless it stands recorded."""
    todo = [a for a in arms if not course.done(ctx.record, a.name, k)]
    for arm in arms:
        if arm not in todo:
            ctx.say(f"{arm.as_round(k).name}: recorded by an earlier attempt of this run; kept")
    if not todo:
        return
    displays.append(ArmsDisplay([a.as_round(k).name for a in todo], ctx.profile.planned_rollouts,
                                prefix=f"[cpverify {ctx.run_dir.run_id}] ", every_s=config.progress_s()))
    with displays[-1] as display:
        for planned in todo:
            arm = planned.as_round(k)
            # The round's earlier result goes first: until this attempt ends, it has no result
            # (a cpverify killed outright leaves "never run", not a record of another log).
            ctx.record.arms.pop(arm.name, None)
            ctx.save()
            ctx.say(f"{arm.name}: starting on GPUs {','.join(map(str, ctx.plan.gpus)) or 'none'} "
                    f"with the {ctx.runner} runner; log {ctx.run_dir.log_path(arm.name)}")
            try:
                result = runner.run_arm(arm, log_path=_fresh_log(ctx, arm.name), limits=ctx.profile.limits())
            except ArmInterrupted as interrupted:
                _record_arm(ctx, interrupted.result, planned, k)
                ctx.record.interrupted = Interrupted(arm.name, interrupted.result.reason)
                ctx.save()
                raise
            _record_arm(ctx, result, planned, k)
            ctx.save()
            display.finish(arm.name, f"{result.outcome} (exit {result.exit_code})")
            ctx.say(f"{arm.name}: {result.outcome} (exit {result.exit_code}) after {result.duration_s:.0f}s"
                    + (f": {result.reason}" if result.reason else ""))


def _further_rounds(ctx: Context, runner, displays: list) -> None:
    """Rounds 2, 3, ... of every arm, interleaved, until the design stops them (and says why). Each
    look is the verdict itself on the rounds so far, at the look's confidence (cpverify.course)."""
    parsed: dict = {}
    arms = ctx.plan.arms

    def look(rounds: int, index: int | None) -> dict:
        return across.look_of(judge(ctx, evidence(ctx, upto=rounds, parsed=parsed), look=index))

    k = 2
    while True:
        stop = course.next_stop(ctx.record, arms, ctx.spec.design, k - 1, look)
        ctx.save()
        if stop is not None:
            ctx.say(f"rounds: {k - 1} per arm; stopped ({stop.reason}): {stop.detail}")
            return
        order = rounds_plan.round_order(arms, ctx.profile.baseline_cp, k)
        ctx.say(f"round {k}: " + ", ".join(a.as_round(k).name for a in order))
        _run_round(ctx, runner, displays, order, k)
        k += 1


def _record_arm(ctx: Context, result, planned: Arm, k: int) -> None:
    """Round k of a planned arm: its result and the log it wrote, fingerprinted now that nothing writes to it."""
    log = Path(result.log_path)
    sha256, size = file_digest(log) if log.is_file() else ("", 0)
    ctx.record.arms[planned.as_round(k).name] = ArmRecord(result, str(log.relative_to(ctx.run_dir.root)), sha256,
                                                          size, arm=planned.name, round=k)
    course.ran(ctx.record, planned.as_round(k).name)


def _fresh_log(ctx: Context, arm: str) -> Path:
    """The round's log path, empty: an earlier attempt's log is kept beside it, never appended to
    (two runs in one file would make the verdict INCONCLUSIVE)."""
    log_path = ctx.run_dir.log_path(arm)
    if log_path.exists():
        kept = log_path.with_name(f"{arm}.before-{time.strftime('%Y%m%d-%H%M%S')}.log")
        log_path.rename(kept)
        ctx.say(f"{arm}: the earlier attempt's log is kept as {kept.name}")
    return log_path
