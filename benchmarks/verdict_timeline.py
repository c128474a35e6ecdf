"""When each stage of one `cpverify verdict` begins and ends, in the command and in its children.

    python3 benchmarks/verdict_timeline.py --baseline cp1.log --candidate cp2.log [--out DIR]

Runs the command in this process (its children fork from it, as they do from the command) with
its stages wrapped to print `seconds-since-start pid > stage` and `< stage` to stderr: where the
time of the whole process goes, which stage waits for which, and what runs side by side. The
stages are looked up by name; one that no longer exists is said so, not silently left out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

START = time.monotonic()
REPO = Path(__file__).resolve().parents[1]

# (module, function): the bundle (each log's copy, the child's parse of a log as it is written),
# the decision, the report (the archive's logs, the plots' child's figures, verdict.md).
STAGES = [
    ("cpverify.given_logs", "bundle_logs"), ("cpverify.given_logs", "bundle_log"),
    ("cpverify.given_logs", "_kept_whole"), ("cpverify.given_logs", "_parse_written"),
    ("cpverify.cli.verdict", "decide"), ("cpverify.report", "write_report"),
    ("cpverify.report.write", "_write_logs"), ("cpverify.report.plots", "figures"),
    ("cpverify.report.write", "render_markdown"),
]


def _say(what: str) -> None:
    os.write(2, f"{time.monotonic() - START:7.3f} pid {os.getpid()} {what}\n".encode())


def _wrapped(module, name: str) -> None:
    original = getattr(module, name)

    def stage(*args, **kwargs):
        _say(f"> {name}")
        try:
            return original(*args, **kwargs)
        finally:
            _say(f"< {name}")

    setattr(module, name, stage)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--candidate", required=True)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "cpverify-timeline")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    import importlib

    from cpverify import cli

    _say("imported")
    for module_name, name in STAGES:
        module = importlib.import_module(module_name)
        if not hasattr(module, name):
            raise SystemExit(f"verdict_timeline: {module_name}.{name} is gone: update STAGES")
        _wrapped(module, name)
    shutil.rmtree(args.out, ignore_errors=True)
    sys.argv = ["cpverify", "verdict", "--baseline", args.baseline, "--candidate", args.candidate,
                "--out", str(args.out)]
    with open(os.devnull, "w") as quiet:
        saved, sys.stdout = sys.stdout, quiet
        try:
            code = cli.main()
        finally:
            sys.stdout = saved
    _say(f"end (exit {code})")


if __name__ == "__main__":
    main()
