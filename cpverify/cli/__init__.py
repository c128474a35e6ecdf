"""The `cpverify` command line: one module per subcommand (cpverify/cli/<command>.py).

Each exposes `register(subparsers)`, which adds its parser and sets `func(args) -> int`, and does
argparse and printing only: the work is the stages' and the edge's (ARCHITECTURE.md). The heavy
libraries (docker-py, ray, huggingface_hub, tabulate, rich, matplotlib) are imported only where a
command uses them, so `cpverify --help` stays fast and shows every command's help in a broken
environment.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from cpverify import __version__
from cpverify.errors import EXIT_INTERRUPTED, CpverifyError

# in the order --help shows them; each is the module cpverify.cli.<name>
COMMANDS = ("run", "lint", "parse", "verdict", "doctor", "probe", "fetch", "plan")


def build_parser(commands: tuple[str, ...] = COMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cpverify",
        description="Run slime at CP=1 and CP=2 on the same GPUs and write a pasteable verdict.",
    )
    parser.add_argument("--version", action="version", version=f"cpverify {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands:
        importlib.import_module(f"cpverify.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None, *, commands: tuple[str, ...] = COMMANDS) -> int:
    """`cpverify`; `commands` narrows it to some subcommands (`python -m cpverify.doctor` is the
    doctor alone: it imports nothing the other commands need, so it works where they are broken)."""
    argv = sys.argv[1:] if argv is None else argv
    # A command named first needs only its own module: `cpverify parse` does not import the
    # pipeline and the runners (half its start-up). --help and a misspelt command see them all.
    parser = build_parser(tuple(name for name in commands if argv[:1] == [name]) or commands)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from cpverify.redact import Redactor, redacted_terminal  # only once a command runs

    if getattr(sys.stdout, "errors", None) == "strict" and hasattr(sys.stdout, "reconfigure"):
        # A path from argv may hold bytes that are not UTF-8 (Python holds them as surrogates): they
        # are printed back as those bytes, as Python does under the C locale, not a traceback.
        sys.stdout.reconfigure(errors="surrogateescape")

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
