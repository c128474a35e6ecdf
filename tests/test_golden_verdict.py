"""What a user reads stays as recorded: verdict.md, verdict.json and the terminal summary of
`cpverify run` (the local runner and tests/fake_slime) and of `cpverify verdict` on real slime
logs, and every `cpverify <command> --help`.

The recordings live in tests/golden/verdict/<scenario>/ and tests/golden/help/. A change to how
the run is organised must leave them alone; a change that MEANS to alter what a user reads
rewrites them on purpose, and the diff shows what changed:

    CPVERIFY_UPDATE_GOLDEN=1 python3 -m pytest -q tests/test_golden_verdict.py

Only what legitimately varies is normalised: the temporary directory and the checkout's path,
the machine's interpreter (the arms run it: --python), Python version and platform, timestamps, and, for runs of the fake slime (which draws its timings at random per process),
numbers with a decimal point, and this repository's commit (the fake slime's). Integers (steps, rounds, exit codes, CP sizes) and every word stay.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cpverify.cli import build_parser
from cpverify.profiles import get_profile
from helpers.hfcache import make_model_cache

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
FAKE_SLIME = ROOT / "tests" / "fake_slime"
REAL_LOGS = ROOT / "tests" / "data" / "real-logs"
UPDATE = os.environ.get("CPVERIFY_UPDATE_GOLDEN") == "1"
PROFILE = get_profile("smoke")

TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
DECIMAL = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?:e[-+]?\d+)?(?![\w.])")


HEAD = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()


def _forms(path: str) -> list[str]:
    """A path as the files may show it: as it is, and under a home directory as the redaction writes it (~/...)."""
    home = os.path.expanduser("~")
    if home not in ("/", "/root") and path.startswith(home + os.sep):
        return [path, "~" + path[len(home):]]
    return [path]


# What the machine running the tests is: its interpreter (the arms' --python too), its Python version and platform.
MACHINE = {**{form: "<python>" for path in {sys.executable, os.path.realpath(sys.executable)} for form in _forms(path)},
           platform.platform(): "<platform>", f'"{platform.python_version()}"': '"<python-version>"'}


def normalised(text: str, tmp: Path, *, random_numbers: bool) -> str:
    for said, shown in MACHINE.items():
        text = text.replace(said, shown)
    if HEAD:  # tests/fake_slime is "slime" in this checkout: the commit under test is the repository's
        text = text.replace(HEAD, "<head>").replace(HEAD[:12], "<head>")
    for path, shown in ((str(tmp.resolve()), "<tmp>"), (str(tmp), "<tmp>"), (str(ROOT), "<root>")):
        for form in _forms(path):
            text = text.replace(form, shown)
    text = TIMESTAMP.sub("<time>", text)
    return DECIMAL.sub("<x>", text) if random_numbers else text


def normalised_json(value, tmp: Path, *, random_numbers: bool):
    if isinstance(value, dict):
        return {k: normalised_json(v, tmp, random_numbers=random_numbers) for k, v in value.items()}
    if isinstance(value, list):
        return [normalised_json(v, tmp, random_numbers=random_numbers) for v in value]
    if isinstance(value, float) and random_numbers:
        return "<x>"
    if isinstance(value, str):
        if value == platform.python_version():
            return "<python-version>"
        return normalised(value, tmp, random_numbers=random_numbers)
    return value


def compare(name: str, got: dict[str, str]) -> None:
    """`got` (file name -> text) is what tests/golden/<name>/ holds, file by file."""
    folder = GOLDEN / name
    if UPDATE:
        folder.mkdir(parents=True, exist_ok=True)
        for file, text in got.items():
            (folder / file).write_text(text, encoding="utf-8")
    recorded = {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir() if p.is_file()}
    assert sorted(got) == sorted(recorded), f"{name}: files differ from the recording"
    for file, text in got.items():
        assert text == recorded[file], f"{name}/{file} differs from the recording"


def outputs(proc, run_dir: Path, tmp: Path, *, random_numbers: bool) -> dict[str, str]:
    got = {"exit_code.txt": f"{proc.returncode}\n",
           "stdout.txt": normalised(proc.stdout, tmp, random_numbers=random_numbers)}
    if (run_dir / "verdict.md").is_file():
        got["verdict.md"] = normalised((run_dir / "verdict.md").read_text(encoding="utf-8"), tmp,
                                       random_numbers=random_numbers)
        verdict = json.loads((run_dir / "verdict.json").read_text(encoding="utf-8"))
        got["verdict.json"] = json.dumps(normalised_json(verdict, tmp, random_numbers=random_numbers),
                                         indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    return got


# -- cpverify run, local runner, the fake slime -------------------------------------------------

def fake_env(tmp: Path, **fake: str) -> str:
    """The profile's env, the fake slime's knobs, and its timings drawn in the same order every time."""
    seeds = tmp / "seeds"
    seeds.mkdir(exist_ok=True)
    pairs = (*PROFILE.env, ("FAKE_SLIME_STEP_S", "0.01"), ("FAKE_SLIME_SEED_DIR", str(seeds)), *fake.items())
    return "env=" + ",".join(f"{k}={v}" for k, v in pairs)


def cpverify_run(tmp: Path, *extra: str, run_id: str = "golden"):
    cmd = [sys.executable, "-m", "cpverify", "run", "--runner", "local", "--gpus", "none", "--python", sys.executable,
           "--slime-dir", str(FAKE_SLIME), "--cache", str(tmp / "cache"), "--out", str(tmp / "artifacts"),
           "--run-id", run_id, *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CPVERIFY_LOCK_DIR": str(tmp), "COLUMNS": "100"}
    for name in ("CPVERIFY_RUN_ID", "CPVERIFY_PROGRESS_S", "CPVERIFY_RUNNER"):
        env.pop(name, None)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)


STEPS = "fetch,compileall,lint,cp1,cp2,verdict"
RUNS = {
    # scenario: (the --only of each process in turn, the fake slime's knobs, other arguments)
    "run-pass": ((STEPS,), {}, ("--rounds", "auto")),
    "run-fail-slower": ((STEPS,), {"FAKE_SLIME_CP_FACTOR": "2.0"}, ("--rounds", "2")),
    "run-crash-sigkill": ((STEPS,), {"FAKE_SLIME_FAULT": "exit137"}, ("--rounds", "1")),
    "run-no-steps": ((STEPS,), {"FAKE_SLIME_FAULT": "no_steps"}, ("--rounds", "1")),
    "run-grad-drift": ((STEPS,), {"FAKE_SLIME_GRAD_DRIFT": "0.2"}, ("--rounds", "2")),
    # one run in three processes: each later one continues what plan.json and state.json recorded
    "run-split-steps": (("fetch,compileall,lint,cp1", "cp2", "verdict"), {}, ("--rounds", "2")),
    "run-verdict-only": (("verdict",), {}, ("--rounds", "1")),
}


@pytest.mark.parametrize("scenario", sorted(RUNS))
def test_a_run_writes_and_prints_as_recorded(tmp_path, scenario):
    steps, fake, extra = RUNS[scenario]
    make_model_cache(tmp_path / "cache" / "hf", PROFILE.model_repo, PROFILE.model_revision)
    got: dict[str, str] = {}
    for i, only in enumerate(steps):
        proc = cpverify_run(tmp_path, "--only", only, "--set", fake_env(tmp_path, **fake), *extra)
        step = outputs(proc, tmp_path / "artifacts" / "golden", tmp_path, random_numbers=True)
        if len(steps) > 1:  # every process's exit code and summary; the files the last one left
            got[f"{i + 1}-exit_code.txt"] = step.pop("exit_code.txt")
            got[f"{i + 1}-stdout.txt"] = step.pop("stdout.txt")
        got.update(step)
    compare(f"verdict/{scenario}", got)


# -- cpverify verdict on real slime logs --------------------------------------------------------

VERDICTS = {
    "verdict-h200-cp1-cp2": ("45_slime-h200x2-cp1-megatron-arguments-dump.log",
                             "44_slime-h200x2-cp2-megatron-arguments-dump.log", ()),
    "verdict-h200-swapped": ("44_slime-h200x2-cp2-megatron-arguments-dump.log",
                             "45_slime-h200x2-cp1-megatron-arguments-dump.log", ()),
    "verdict-crashed-candidate": ("45_slime-h200x2-cp1-megatron-arguments-dump.log",
                                  "09_slime-issue1951-oom-compute-log-probs.log", ("--candidate-cp", "2")),
}


@pytest.mark.parametrize("scenario", sorted(VERDICTS))
def test_a_verdict_on_real_logs_writes_and_prints_as_recorded(tmp_path, scenario):
    baseline, candidate, extra = VERDICTS[scenario]
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "cpverify", "verdict", "--baseline", str(REAL_LOGS / baseline),
           "--candidate", str(REAL_LOGS / candidate), "--out", str(out), *extra]
    env = {**os.environ, "COLUMNS": "100"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    compare(f"verdict/{scenario}", outputs(proc, out, tmp_path, random_numbers=False))


# -- every --help -------------------------------------------------------------------------------

SUBCOMMANDS = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
HELP = ["cpverify", *sorted(SUBCOMMANDS)]


def test_every_command_has_a_recorded_help():
    assert sorted(p.stem for p in (GOLDEN / "help").glob("*.txt")) == sorted(HELP)


@pytest.mark.parametrize("command", HELP)
def test_every_help_reads_as_recorded(tmp_path, command):
    argv = [] if command == "cpverify" else [command]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPVERIFY_")}  # defaults shown come from these
    proc = subprocess.run([sys.executable, "-m", "cpverify", *argv, "--help"], capture_output=True, text=True,
                          cwd=ROOT, env={**env, "COLUMNS": "100"}, check=True)
    path = GOLDEN / "help" / f"{command}.txt"
    got = normalised(proc.stdout, tmp_path, random_numbers=False)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got, encoding="utf-8")
    assert got == path.read_text(encoding="utf-8")
