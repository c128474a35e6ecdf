"""`cpverify lint`: a pasted slime command line, a file, or a profile's plan, checked before any GPU is held."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict

from cpverify._inputs import read_user_text
from cpverify.cli._options import add_profile_arguments, plan_from_args
from cpverify.errors import EXIT_FAIL, EXIT_OK
from cpverify.lint import ERROR, format_findings, has_errors, lint_argv, lint_plan, parallel_layout, parse_command
from cpverify.plan import parse_gpus


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
        layout = parallel_layout(parse_command(command))
        if layout:
            layout_line = "layout: " + " ".join(f"{k}={v}" for k, v in layout.items())
        subject = "command line"
    else:
        args.gpus = None  # for a profile, --gpus is the host's GPU count, not the plan's indices
        plan = plan_from_args(args)
        findings = lint_plan(plan, gpus=gpus)
        subject = f"profile {plan.profile.name} ({', '.join(a.name for a in plan.arms)})"
    if args.json:
        print(json.dumps([asdict(f) for f in findings], indent=2))
    else:
        errors = sum(f.severity == ERROR for f in findings)
        if findings:
            print(format_findings(findings))
        print(f"{subject}: {errors} error(s), {len(findings) - errors} warning(s)" + (f"; {layout_line}" if layout_line else ""))
    return EXIT_FAIL if has_errors(findings) else EXIT_OK
