"""The `cpverify` command line.

Each subcommand lives in the module that does the work; that module exposes
`register(subparsers)`, which adds its parser and sets `func(args) -> int`.
Modules keep heavy imports (docker, ray, torch) inside functions so that
`cpverify --help` and `cpverify parse` stay fast and work in a broken environment.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from cpverify import __version__
from cpverify.errors import EXIT_INTERRUPTED, CpverifyError

# name -> module that registers it (order is the order shown in --help)
COMMANDS = {
    "run": "cpverify.orchestrate",
    "lint": "cpverify.lint",
    "parse": "cpverify.logs",
    "verdict": "cpverify.verdict",
    "doctor": "cpverify.doctor",
    "probe": "cpverify.probe",
    "fetch": "cpverify.fetch",
    "plan": "cpverify.plan",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cpverify",
        description="Run slime at CP=1 and CP=2 on the same GPUs and write a pasteable verdict.",
    )
    parser.add_argument("--version", action="version", version=f"cpverify {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMANDS.values():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # a module not written yet must not break the others
            if exc.name != module_name:
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from cpverify.redact import Redactor, redacted_terminal

    # Everything printed is redacted like verdict.md (an error may quote a URL with a password,
    # a summary a host name); `run` swaps in its own rules, sharing its files' placeholders.
    with redacted_terminal(Redactor(identity=not getattr(args, "no_redact", False))):
        try:
            return int(args.func(args) or 0)
        except CpverifyError as exc:
            print(f"cpverify: error: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            print("cpverify: interrupted; logs written so far are kept.", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BrokenPipeError:  # `cpverify parse big.log | head`
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            return 0


if __name__ == "__main__":
    raise SystemExit(main())
