"""The verdict step: every recorded round as evidence, the decision, and the files written
(verdict.md, verdict.json, env.json, commands.sh); also what a blocked run leaves."""

from __future__ import annotations

import dataclasses
import sys

from cpverify import course
from cpverify.errors import EXIT_BLOCKED, EnvironmentBlocked
from cpverify.inputs import shown_command
from cpverify.model import BASE, ArmResult, CheckStatus, Outcome
from cpverify.parse import ParsedLog
from cpverify.plan import GRAD_NORM_LOAD
from cpverify.plan import design as ab_design
from cpverify.revisions import checkout
from cpverify.run_spec import STEPS
from cpverify.run_state import ArmRecord
from cpverify.runners.workload_env import secret_values
from cpverify.steps.context import Context
from cpverify.verdict import INCONCLUSIVE, ArmEvidence, Check, Thresholds, ab, decide


def step_verdict(ctx: Context) -> int:
    plan = ctx.plan
    interrupted = ctx.record.interrupted
    run_checks = []
    if interrupted and interrupted.step not in ctx.record.arms:
        # Outside an arm's round (fetch, lint, between the rounds, this very step): what was measured stands,
        # but the run did not end as planned, so it cannot pass.
        detail = f"the run was {interrupted.why} during {step_name(interrupted.step)}"
        run_checks.append(Check("interrupted", CheckStatus.FAIL, detail, "rerun when ready", effect=INCONCLUSIVE, brief=detail))
    verdict = judge(ctx, evidence(ctx), look=course.verdict_look(ctx.record, plan.arms), run_checks=run_checks)
    verdict.rounds.update(course.summary(ctx.record, plan.arms, gpus=len(plan.gpus)))
    _write(ctx, verdict)
    return verdict.exit_code


def write_blocked(ctx: Context, reason: str, fix: str) -> int:
    """Record that the run cannot happen here, and still leave a verdict a person can read."""
    ctx.record.blocked = EnvironmentBlocked(reason, fix)
    ctx.save()
    step_verdict(ctx)
    return EXIT_BLOCKED


def step_name(step: str) -> str:
    return f"arm {step}" if step not in STEPS or step in ("cp1", "cp2") else f"the {step} step"


def _arm_log(ctx: Context, recorded: ArmRecord):
    """The log the round wrote, as it wrote it (cpverify.course.recorded_log)."""
    return course.recorded_log(ctx.run_dir.root, recorded)


def evidence(ctx: Context, *, upto: int | None = None, parsed: dict | None = None) -> list[ArmEvidence]:
    """Every recorded round of every planned arm (rounds 1..upto) as the verdict's evidence, each log
    read as its round wrote it; an arm without a round, as the reason it has none. `parsed`: logs
    already read (a cache for the looks of one process)."""
    p, blocked, interrupted = ctx.profile, ctx.record.blocked, ctx.record.interrupted
    parsed = {} if parsed is None else parsed
    found = []
    for arm in ctx.plan.arms:
        recorded = [r for r in ctx.record.rounds_of(arm.name) if upto is None or r.round <= upto]
        for done in recorded:  # every round is evidence (a crash in round 3 is a crash); another run's is not ours
            key = (done.log, done.log_sha256)
            if key not in parsed:
                parsed[key] = _arm_log(ctx, done)
            found.append(ArmEvidence(done.result.arm, arm.cp, parsed[key], done.result,
                                     grad_norm_planned=GRAD_NORM_LOAD in arm.argv,
                                     expected_rollouts=p.planned_rollouts, log_path=ctx.run_dir.root / done.log,
                                     arm=arm.name, round=done.round, role=arm.role, seq_len=arm.seq_len,
                                     slime_ref=arm.slime_ref))
        if recorded:
            continue
        log_path = ctx.run_dir.log_path(arm.name)
        if blocked:
            result = ArmResult(arm.name, Outcome.BLOCKED, None, log_path, 0.0, reason=blocked.problem, fix=blocked.fix)
        elif interrupted:
            result = ArmResult(arm.name, Outcome.INTERRUPTED, None, log_path, 0.0,
                               reason=f"not run: the run was {interrupted.why} during {step_name(interrupted.step)}",
                               fix="rerun when ready (a new run id starts with fresh logs)")
        else:
            result = ArmResult(arm.name, Outcome.BLOCKED, None, log_path, 0.0, reason="the arm was never run",
                               fix=f"run `cpverify run --only {'cp1' if arm.cp == p.baseline_cp else 'cp2'}` first "
                                   "(or `nox -s verify_cp`)")
        found.append(ArmEvidence(arm.name, arm.cp, ParsedLog(), result, grad_norm_planned=GRAD_NORM_LOAD in arm.argv,
                                 expected_rollouts=p.planned_rollouts, role=arm.role, seq_len=arm.seq_len,
                                 slime_ref=arm.slime_ref))
    return found


def judge(ctx: Context, evidence: list[ArmEvidence], *, look: int | None, run_checks=()):
    """The verdict on `evidence` at sequential look `look`, with the A/B's analysis when the plan is one."""
    verdict = decide(evidence, comparisons=list(ctx.plan.comparisons), thresholds=Thresholds.of(ctx.profile),
                     workload=ctx.profile.kind, run_checks=run_checks, look=look)
    design = ab_design(ctx.plan)
    if design is not None:  # two slime revisions: is the candidate's CP overhead smaller?
        verdict.ab = ab.analyze(verdict, design)
    return verdict


def _write(ctx: Context, verdict) -> None:
    from cpverify import report  # tabulate, matplotlib: the verdict step's alone, not `cpverify --help`'s

    plan = ctx.plan
    env = {"cpverify_run": ctx.run_dir.run_id, "profile": dataclasses.asdict(ctx.profile),
           "runner": ctx.runner, "gpus": list(plan.gpus)}
    for key in ("doctor", "image", "model", "data", "rollouts", "compileall", "lint", "deep_lint", "workload_python"):
        if getattr(ctx.record, key) is not None:
            env[key] = getattr(ctx.record, key)
    # Secret flag values (--wandb-key V) sit in env.json's copy of the profile as plain list items.
    secrets = {value for arm in plan.arms for value in secret_values(arm.env, arm.argv)}
    ctx.redactor.add_secrets(secrets)
    env["sources"] = _sources(ctx)
    written = report.write_report(ctx.run_dir, verdict, env=env, commands_sh=plan.commands_sh(),
                                  redactor=ctx.redactor,
                                  command=shown_command(["cpverify", *sys.argv[1:]]))
    print(report.render_summary(verdict))
    ctx.say(f"verdict: {verdict.status} -> {ctx.run_dir.verdict_md}")
    print(report.share_lines(written), file=sys.stderr)


def _sources(ctx: Context) -> dict:
    """The slime commit the arms ran, where this machine can tell (an exported ref, a git checkout
    here); the image records its own slime and Megatron-LM commits (env.json's image)."""
    revs = ctx.revisions
    if revs:
        return {"slime": revs[0].commit, "slime_candidate": revs[1].commit if revs[1] else None}
    if ctx.spec.slime_dir and not ctx.site.remote:
        return {"slime": checkout(ctx.spec.slime_dir, BASE, must_exist=False).commit}
    return {}
