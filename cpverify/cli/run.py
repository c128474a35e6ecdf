"""`cpverify run`: the whole verification, or the steps --only names (cpverify.pipeline)."""

from __future__ import annotations

import argparse

from cpverify.cli._options import add_run_arguments
from cpverify.pipeline import run as run_pipeline
from cpverify.runners.watch import terminate_as_interrupt


def run(args: argparse.Namespace) -> int:
    # One signal policy for the whole process: SIGTERM and SIGHUP (nox, systemd, a closed ssh
    # session) are a Ctrl-C, in whatever step they arrive.
    with terminate_as_interrupt():
        return run_pipeline(args)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="the whole verification (or --only some steps): doctor, image, fetch, compileall, lint, cp1, cp2, verdict",
        description="Run the verification: doctor, image, fetch, compileall, lint, cp1, cp2, verdict (or the "
                    "steps --only names), and write artifacts/<run-id>/verdict.md, verdict.json, env.json and "
                    "commands.sh. No GPU is held before the lint has passed. Exit code: 0 PASS, 1 FAIL (or lint "
                    "errors), 2 bad input, 3 INCONCLUSIVE, 4 BLOCKED, 130 interrupted.")
    add_run_arguments(p)
    p.set_defaults(func=run)
