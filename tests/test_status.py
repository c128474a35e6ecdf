"""The run's status, machine-readable however the pipeline was started: `<artifacts>/latest`
points at the last run (its verdict.json holds the status), and `nox -s verify_cp`, which can
only exit 0 or 1, ends its output with `status: <STATUS> (exit N from cpverify run --only STEP)`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cpverify.artifacts import LATEST, RunDir, latest_run_id, point_latest
from cpverify.errors import ArtifactWriteError, InputError

ROOT = Path(__file__).resolve().parent.parent


def _cpverify(out: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpverify", "run", "--runner", "local", "--gpus", "none",
                           "--profile", "probe", "--out", str(out), *args],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})},
                          timeout=120, check=False)


def test_every_run_points_latest_at_itself_and_latest_continues_it(tmp_path):
    first = _cpverify(tmp_path, "--run-id", "first", "--only", "lint")
    assert first.returncode == 0, first.stderr
    assert os.readlink(tmp_path / LATEST) == "first"  # relative: valid in a container's mount too
    second = _cpverify(tmp_path, "--run-id", "second", "--only", "lint")
    assert second.returncode == 0, second.stderr
    assert os.readlink(tmp_path / LATEST) == "second"
    # `--run-id latest` (compose's steps after the doctor) continues that run, under its own name
    cont = _cpverify(tmp_path, "--run-id", LATEST, "--only", "verdict")
    assert cont.returncode == 4, cont.stderr  # the arms never ran: BLOCKED, saying so
    assert "[cpverify second]" in cont.stderr
    verdict = json.loads((tmp_path / LATEST / "verdict.json").read_text())
    assert verdict["status"] == "BLOCKED"
    assert (tmp_path / "second" / "verdict.json").is_file() and not (tmp_path / "first" / "verdict.json").exists()


def test_latest_without_a_run_is_bad_input_naming_the_fix(tmp_path):
    proc = _cpverify(tmp_path, "--only", "lint", env={"CPVERIFY_RUN_ID": LATEST})
    assert proc.returncode == 2
    problem, fix = proc.stderr.split("fix:", 1)
    assert str(tmp_path / LATEST) in problem and fix.strip()  # the link it followed, then what to do
    with pytest.raises(InputError):
        latest_run_id(tmp_path)


def test_a_directory_named_latest_is_left_alone_and_the_run_goes_on(tmp_path):
    (tmp_path / LATEST).mkdir()
    (tmp_path / LATEST / "keep.txt").write_text("mine")
    with pytest.raises(ArtifactWriteError, match="remove or rename"):
        point_latest(RunDir.create(base=tmp_path, run_id="r1"))
    proc = _cpverify(tmp_path, "--run-id", "r2", "--only", "lint")
    assert proc.returncode == 0, proc.stderr
    assert str(tmp_path / LATEST) in proc.stderr  # the run goes on; the warning names the link it left alone
    assert (tmp_path / LATEST / "keep.txt").read_text() == "mine"
    assert not list(tmp_path.glob(".latest.*"))  # no temporary link left behind


def test_latest_is_replaced_atomically(tmp_path):
    """While runs keep starting, a reader always finds `latest` pointing at some run."""
    runs = [RunDir.create(base=tmp_path, run_id=f"r{i}") for i in range(2)]
    point_latest(runs[0])
    stop, misses = threading.Event(), []

    def read() -> None:
        while not stop.is_set():
            try:
                os.readlink(tmp_path / LATEST)
            except OSError as exc:
                misses.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(2000):
            point_latest(runs[i % 2])
    finally:
        stop.set()
        reader.join()
    assert misses == []


@pytest.fixture(scope="session")
def nox_tool_venv(tmp_path_factory) -> dict[str, str]:
    """The noxfile's tool environment, built once per test session (test_containers shares it)."""
    return {"CPVERIFY_TOOL_VENV": str(tmp_path_factory.getbasetemp() / "nox-tool-venv"), "CPVERIFY_TOOL_EXTRAS": ""}


def test_nox_says_what_the_tool_environment_build_does_and_how_long_it_took(nox_tool_venv):
    """A first run spends about a minute in `pip install -q`: nox says before what it installs and
    why it takes time, and after how long it took; a later run reuses the environment, silently."""
    env = {**os.environ, **nox_tool_venv}
    (Path(nox_tool_venv["CPVERIFY_TOOL_VENV"]) / ".pyproject.sha256").unlink(missing_ok=True)  # built or not: rebuild

    def nox_help() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "doctor", "--",
                               "--help"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False)

    first = nox_help()
    assert first.returncode == 0, first.stderr[-3000:]
    said = [line for line in first.stderr.splitlines() if "tool environment" in line]
    venv = nox_tool_venv["CPVERIFY_TOOL_VENV"]
    assert said[0] == (f"nox > building the shared tool environment {venv}: pip downloads and installs cpverify's "
                       "dependencies, quietly; about a minute on a first run, then reused until pyproject.toml or "
                       "CPVERIFY_TOOL_EXTRAS changes")
    assert re.fullmatch(r"nox > tool environment ready in \d+s", said[1]), said
    assert first.stderr.index(said[0]) < first.stderr.index("pip install -q") < first.stderr.index(said[1])
    again = nox_help()
    assert again.returncode == 0 and "tool environment" not in again.stderr, again.stderr[-3000:]


def test_nox_ends_with_the_status_of_a_blocked_run(tmp_path, nox_tool_venv):
    """The headline command, really run: GPU 99 exists nowhere (and this machine has no GPU at all),
    so the doctor blocks; nox exits 1 as it does for any failed session, and its last line says
    BLOCKED and which step said so, after the aborted sessions."""
    env = {**os.environ, **nox_tool_venv}
    env.pop("CPVERIFY_RUN_ID", None)
    proc = subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "verify_cp", "--",
         "--profile", "probe", "--runner", "local", "--gpus", "0,99", "--out", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Session verify_cp aborted" in proc.stderr
    assert lines[-1] == "status: BLOCKED (exit 4 from cpverify run --only doctor)", lines[-5:]
    run_id = os.readlink(tmp_path / LATEST)
    assert lines[-2] == f"verdict: {tmp_path / run_id / 'verdict.md'} ({tmp_path / LATEST} points at it)"
    assert json.loads((tmp_path / LATEST / "verdict.json").read_text())["status"] == "BLOCKED"
    assert "uv binary not found" not in proc.stderr + proc.stdout


def test_nox_stops_at_its_first_step_on_a_missing_checkout_naming_it(tmp_path, nox_tool_venv):
    """`nox -s verify_cp -- --slime-dir ~/src/slime` with no such directory: bad input from the
    first session, naming the path, not a BLOCKED run after the doctor (and on a GPU host, the
    image build and the download)."""
    env = {**os.environ, **nox_tool_venv}
    env.pop("CPVERIFY_RUN_ID", None)
    missing = tmp_path / "src" / "slime"
    proc = subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "verify_cp", "--",
         "--slime-dir", str(missing), "--out", str(tmp_path / "artifacts")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and lines[-1] == "status: bad input (exit 2 from cpverify run --only doctor)", lines[-5:]
    said = (proc.stdout + proc.stderr).splitlines()  # nox passes the step's own output on to its stdout
    assert [line for line in said if "--slime-dir" in line and str(missing) in line]  # the option and its value
    assert not (tmp_path / "artifacts" / LATEST).exists()  # no run started
