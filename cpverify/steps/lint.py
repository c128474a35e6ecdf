"""The lint step: every arm's arguments and environment before any GPU is held, statically and
then by slime's own parser in the workload's Python (cpverify.lint.deep)."""

from __future__ import annotations

import dataclasses
import io
import sys

from cpverify.artifacts import atomic_write_json
from cpverify.errors import EXIT_FAIL, EXIT_OK, EnvironmentBlocked
from cpverify.lint import deep as deep_lint
from cpverify.lint import format_findings, lint_plan
from cpverify.parse import parse_stream
from cpverify.steps.context import Context
from cpverify.workspace import CONTAINER_WORK


def step_lint(ctx: Context) -> int:
    plan = ctx.plan
    findings = lint_plan(plan)
    if ctx.kind == "slime":
        findings = _deep_lint(ctx, findings)
    if findings:
        print(format_findings(findings, redact=ctx.redactor), file=sys.stderr)
    errors = [f for f in findings if f.severity == "error"]
    ctx.record.lint = [dataclasses.asdict(f) for f in findings]
    ctx.save()
    if errors:
        ctx.say(f"lint: {len(errors)} error(s): fix them before any GPU is held")
        return EXIT_FAIL
    ctx.say(f"lint: {len(plan.arms)} arm(s) clean ({len(findings)} warning(s))")
    return EXIT_OK


def _deep_lint(ctx: Context, static: list) -> list:
    """slime's own parse_args() on every arm, in the workload's Python (cpverify.lint.deep)."""
    plan = ctx.plan
    arch = deep_lint.arch_from_doctor(ctx.record.doctor, plan.gpus)
    request = deep_lint.request(plan, arch if arch is not None else deep_lint.ASSUMED_ARCH)
    host_path = ctx.host_work_dir / "deep-lint-request.json"
    host_path.parent.mkdir(parents=True, exist_ok=True)
    # slime's parser needs the arguments' shape, not a secret's value: the file holds neither
    atomic_write_json(host_path, ctx.credentials_only.json(request))
    seen_path = f"{CONTAINER_WORK}/{host_path.name}" if ctx.site.isolated else str(host_path)
    python = plan.arms[0].argv[0]
    ctx.say("lint: slime's own parser on every arm, in the workload's Python (no GPU)")
    try:
        code, output = ctx.run_tool("deep-lint", [python, *deep_lint.TOOL, seen_path], env=ctx.profile.env)
    except EnvironmentBlocked as exc:
        code, output = -1, f"{exc.problem} ({exc.fix})"
    results = deep_lint.results_from(output)
    ctx.record.deep_lint = results
    deep = deep_lint.findings(plan, results, exit_code=code, output=output, arch_assumed=arch is None,
                              classify=error_classes)
    return deep_lint.merge(static, deep, results)


def error_classes(text: str) -> list[tuple[str, str]]:
    """(class, coarse class) of every error the log parser reads in `text`, the finest first: the
    line of slime_num_rollout_not_set also carries its coarse assertion_error. The deep lint's
    `classify`: slime's refusal of an argument gets the fix its line would get in a log."""
    records = parse_stream(io.BytesIO(text.encode())).errors
    classes = [(r.cls, getattr(r, "coarse", "") or r.cls) for r in records]
    return sorted(classes, key=lambda pair: pair[0] == pair[1])
