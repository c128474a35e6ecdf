"""`cpverify run`: the steps a RunSpec names, in one process, under one run-directory lock, and
the verdict an interrupted step still leaves (ARCHITECTURE.md, "The flow", lists the steps).

A step that does not apply (no image for the local runner, no model for the probe) says so
and succeeds. Arm steps succeed whenever they *recorded* a result: a crashed workload is
evidence for the verdict, not a reason to stop before writing it.
"""

from __future__ import annotations

import argparse

from cpverify.artifacts import LATEST, RunDir, latest_run_id, new_run_id, point_latest
from cpverify.errors import EXIT_BLOCKED, EXIT_OK, CpverifyError
from cpverify.locks import RunDirLock
from cpverify.model import ArmInterrupted
from cpverify.redact import redacted_terminal
from cpverify.run_spec import ALIASES, STEPS, RunSpec, run_spec
from cpverify.run_state import Interrupted, RunRecord, check_plan
from cpverify.runners.watch import Terminated
from cpverify.steps.arms import step_arms
from cpverify.steps.context import Context
from cpverify.steps.lint import step_lint
from cpverify.steps.prepare import step_compileall, step_doctor, step_fetch, step_image
from cpverify.steps.verdict import step_name, step_verdict

__all__ = ["ALIASES", "STEPS", "STEP_FUNCTIONS", "Context", "run", "execute"]

STEP_FUNCTIONS = {
    "doctor": step_doctor,
    "image": step_image,
    "fetch": step_fetch,
    "compileall": step_compileall,
    "lint": step_lint,
    "cp1": lambda ctx: step_arms(ctx, "cp1"),
    "cp2": lambda ctx: step_arms(ctx, "cp2"),
    "verdict": step_verdict,
}


def run(args: argparse.Namespace) -> int:
    """`cpverify run`: the steps --only names, in one process, under one run-directory lock."""
    return execute(run_spec(args))


def execute(spec: RunSpec) -> int:
    """The steps of `spec`, in one process, under one run-directory lock."""
    steps = list(spec.steps)
    run_id = latest_run_id(spec.out) if spec.run_id == LATEST else spec.run_id
    run_dir = RunDir.create(base=spec.out, run_id=run_id)
    with RunDirLock(run_dir.root, run_id=run_dir.run_id, new_run_id=new_run_id()):
        ctx = Context(spec=spec, run_dir=run_dir, record=RunRecord.load(run_dir.state_json, new_run_id=new_run_id()))
        if steps != ["verdict"]:  # before the first step; the verdict of a run judges the logs it has
            ctx.workspace.check(wheel_dir=spec.image.wheel_dir)
        try:
            point_latest(run_dir)
        except CpverifyError as exc:  # only the shortcut is missing: the run itself can go on
            ctx.say(f"warning: {exc}")
        # The plan is built here, once; a later process of the run builds it from its own arguments and
        # is refused unless it is the one plan.json records (cpverify.run_state.check_plan).
        if check_plan(run_dir.plan_json, ctx.credentials_only.json(ctx.plan_definition()),
                      run_id=run_dir.run_id, new_run_id=new_run_id()):
            ctx.say(f"plan: {run_dir.plan_json} (every later step of this run must plan the same)")
        previous = ctx.record.interrupted
        if steps != ["verdict"] or (previous and previous.step == "verdict"):
            # a new attempt: whatever blocked or interrupted an earlier one is history (checked again)
            ctx.record.blocked = ctx.record.interrupted = None

        step = steps[0]
        with redacted_terminal(ctx.redactor):  # what the terminal shows uses the files' placeholders
            try:
                for step in steps:
                    code = STEP_FUNCTIONS[step](ctx)
                    if code != EXIT_OK:
                        return code
                    if ctx.record.blocked and step != "verdict":
                        return EXIT_BLOCKED
            except KeyboardInterrupt as exc:
                _verdict_after_interrupt(ctx, step, exc)
                raise
    return EXIT_OK


def _verdict_after_interrupt(ctx: Context, step: str, exc: KeyboardInterrupt) -> None:
    """Ctrl-C or SIGTERM in any step: record what was interrupted and still leave a verdict that
    says so (it takes a moment; another Ctrl-C skips it); the caller exits 130."""
    interrupted = ctx.record.interrupted
    if not isinstance(exc, ArmInterrupted) or interrupted is None:  # an arm records its own, with its result
        why = f"terminated ({exc.args[0]})" if isinstance(exc, Terminated) else "interrupted (Ctrl-C)"
        interrupted = ctx.record.interrupted = Interrupted(step, why)
    ctx.say(f"{step_name(interrupted.step)} was {interrupted.why}; writing an "
            "INCONCLUSIVE verdict that says so (Ctrl-C again skips it)")
    try:
        ctx.save()
        step_verdict(ctx)
    except (KeyboardInterrupt, CpverifyError) as again:
        ctx.say(f"verdict not written after the interruption: {again or 'interrupted again'}")
