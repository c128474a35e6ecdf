"""`cpverify lint`: a pasted slime command line, a file, or a profile's plan, checked before any GPU is held."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict

from cpverify.cli._options import add_profile_arguments, plan_from_args, run_arguments
from cpverify.config import DEFAULT_RUNNER
from cpverify.errors import EXIT_FAIL, EXIT_OK
from cpverify.inputs import read_user_text
from cpverify.lint import (
    ERROR,
    ParsedCommand,
    format_findings,
    has_errors,
    lint_argv,
    lint_plan,
    misdashed,
    parallel_layout,
    parse_command,
)
from cpverify.lint.findings import redacted
from cpverify.plan import parse_gpus
from cpverify.redact import Redactor, redacted_terminal
from cpverify.runners.workload_env import secret_values


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "lint",
        help="check a slime command line (or a profile's plan) for mistakes before any GPU is held",
        description="Lint `-- TRAIN_ARGS...` (a pasted command, `python train.py ...` included), a --file, "
                    "or else the plan of --profile. Exit 1 when any finding is an error.",
    )
    add_profile_arguments(p)
    p.add_argument("--gpus", help="GPUs on the host that will run it: a count (2) or indices (0,1)")
    p.add_argument("--file", help="read the command from a file ('-' for stdin), e.g. a launch script")
    p.add_argument("--inherit-env", action="store_true",
                   help="count this shell's environment as the command's (e.g. an exported CUDA_DEVICE_MAX_CONNECTIONS)")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("train_args", nargs="*", metavar="-- TRAIN_ARGS", help="the slime command line to check")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    command: str | list[str] | None = None
    if args.file:
        command = read_user_text(args.file, what="--file")
    elif args.train_args:
        command = [a for a in args.train_args if a != "--"] if args.train_args[0] == "--" else list(args.train_args)
    gpus = len(parse_gpus(args.gpus)) if args.gpus else None
    layout_line = ""
    if command is not None:
        env = dict(os.environ) if args.inherit_env else None
        findings = lint_argv(command, env=env, gpus=gpus)
        parsed = parse_command(command, env=env)
        layout = parallel_layout(parsed)
        if layout:
            layout_line = "layout: " + " ".join(f"{k}={v}" for k, v in layout.items())
        subject = "command line"
        secrets = _command_secrets(parsed)
    else:
        # the plan a run of the profile makes by default (--gpus here is the host's GPU count, not the plan's)
        plan = plan_from_args(run_arguments(profile=args.profile, config=args.config, assignments=args.assignments,
                                            runner=DEFAULT_RUNNER, run_id=None))
        findings = lint_plan(plan, gpus=gpus)
        subject = f"profile {plan.profile.name} ({', '.join(a.name for a in plan.arms)})"
        secrets = [value for arm in plan.arms for value in secret_values(arm.env, arm.argv)]
    # A finding quotes the flags it is about, and their values with them: what the command holds
    # secret goes from every finding before it is shown, as JSON or as a table whose cells wrap.
    redactor = Redactor(secrets)
    with redacted_terminal(redactor):
        if args.json:
            print(json.dumps([asdict(f) for f in redacted(findings, redactor)], indent=2))
        else:
            errors = sum(f.severity == ERROR for f in findings)
            if findings:
                print(format_findings(findings, redact=redactor))
            print(f"{subject}: {errors} error(s), {len(findings) - errors} warning(s)"
                  + (f"; {layout_line}" if layout_line else ""))
    return EXIT_FAIL if has_errors(findings) else EXIT_OK


def _command_secrets(command: ParsedCommand) -> list[str]:
    """What a pasted command holds that no output may show: the values of its secret variables and
    flags (a mis-dashed or misspelt --wandb-key's too: its value is the same key) and the parts of
    any value that are credentials by their shape."""
    argv = [word for flag, values in command.options for word in (misdashed(flag) or flag, *values)]
    return secret_values(command.env, argv)
