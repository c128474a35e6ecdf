"""`cpverify <command> --help` is what a new user reads first: every command says what it does,
every option says what it means, and the defaults that decide where a run goes are shown."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cpverify.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


SUBCOMMANDS = _subcommands()


def _help(*argv: str, env: dict | None = None) -> str:
    proc = subprocess.run([sys.executable, "-m", "cpverify", *argv, "--help"], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, check=True)
    return proc.stdout


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_command_has_a_description_and_every_option_a_help_text(name):
    parser = SUBCOMMANDS[name]
    assert (parser.description or "").strip(), f"`cpverify {name} --help` has no description"
    silent = [a.option_strings or [a.dest] for a in parser._actions
              if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()]
    assert silent == [], f"`cpverify {name}`: options without help: {silent}"


def test_doctor_help_is_written_for_users_not_developers():
    text = _help("doctor")
    for developer_note in ("collect()", "seed 001", "orchestrator", "dict"):
        assert developer_note not in text
    assert "Exit code: 0 when no required check fails, 4 (BLOCKED)" in text


def test_run_help_shows_where_a_run_goes_by_default():
    text = " ".join(_help("run", env={"CPVERIFY_RUNNER": "", "CPVERIFY_ARTIFACTS": ""}).split())
    assert "(default: smoke)" in text
    assert "(default: docker; CPVERIFY_RUNNER sets it)" in text
    assert "(default: artifacts; CPVERIFY_ARTIFACTS sets it)" in text


def test_run_help_shows_the_default_the_environment_chose():
    text = " ".join(_help("run", env={"CPVERIFY_RUNNER": "local"}).split())
    assert "(default: local; CPVERIFY_RUNNER sets it)" in text


def test_a_misspelled_runner_in_the_environment_is_bad_input(tmp_path):
    """argparse checks --runner's choices, not a default taken from CPVERIFY_RUNNER: a typo there
    must not silently pick another runner."""
    proc = subprocess.run([sys.executable, "-m", "cpverify", "run", "--only", "lint", "--out", str(tmp_path)], check=False,
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "CPVERIFY_RUNNER": "dockr"})
    assert proc.returncode == 2, proc.stderr
    assert "CPVERIFY_RUNNER='dockr' is not a runner" in proc.stderr
    assert "docker, local, ray" in proc.stderr


def test_help_imports_no_heavy_library():
    """`cpverify --help` must answer at once and in an environment where docker-py, ray or
    matplotlib is broken: a command imports those where it runs, not where it registers."""
    heavy = ("tabulate", "docker", "ray", "rich", "matplotlib", "numpy", "huggingface_hub", "torch", "jsonschema")
    code = ("import sys; from cpverify.cli import build_parser; build_parser(); "
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert proc.stdout.strip() == "[]", proc.stdout


def test_a_command_imports_no_other_commands_module():
    """`cpverify parse LOG` needs its own module only: importing every command's (the pipeline, the
    runners, the verdict) was half of its start-up (benchmarks/parse_throughput.md)."""
    log = ROOT / "tests" / "data" / "real-logs" / "02_slime-issue1136-cp-step11-train-metrics.log"
    code = ("import sys; from cpverify.cli import COMMANDS, main; main(['parse', sys.argv[1], '--json']); "
            "print(sorted(set(sys.modules) & {f'cpverify.cli.{c}' for c in COMMANDS} | "
            "{m for m in sys.modules if m.startswith('cpverify.pipeline')}), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, cwd=ROOT, check=True)
    assert proc.stderr.strip() == "['cpverify.cli.parse']", proc.stderr
    assert json.loads(proc.stdout)["steps"]
