"""Which Python runs a local workload (--python, CPVERIFY_PYTHON, else the first Python on PATH
that imports what the workload imports), the doctor's torch/NCCL facts from that Python, and a
run BLOCKED before any GPU is held when it cannot import them.

torch cannot be installed on CI machines (no registry there, and no GPU to use it), so "a Python
with torch" is this test's Python behind a wrapper script whose PYTHONPATH holds a stand-in torch
package: the attributes the doctor reads (version, CUDA runtime, NCCL) and nothing else. A
Python without torch is this test's Python, which has none. Both are real interpreters, found on
PATH and started as the workload would be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cpverify.errors import InputError
from cpverify.profiles import get_profile
from cpverify.workload_python import workload_python
from helpers.hfcache import make_model_cache

ROOT = Path(__file__).resolve().parent.parent
FAKE_SLIME = ROOT / "tests" / "fake_slime"
STAND_IN_TORCH = {
    "torch/__init__.py": '__version__ = "2.11.0+stand-in"\nfrom . import cuda, version\n',
    "torch/version.py": 'cuda = "12.9"\n',
    "torch/cuda/__init__.py": "from . import nccl\n\ndef is_available():\n    return False\n\n"
                              "def device_count():\n    return 0\n",
    "torch/cuda/nccl.py": "def version():\n    return (2, 28, 9)\n",
}


def _python(directory: Path, pythonpath: Path | None = None) -> Path:
    """`directory/python3`: this test's interpreter, with `pythonpath` in front of its path."""
    directory.mkdir(parents=True)
    script = directory / "python3"
    prefix = f'PYTHONPATH="{pythonpath}${{PYTHONPATH:+:$PYTHONPATH}}" ' if pythonpath else ""
    script.write_text(f'#!/bin/sh\n{prefix}exec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    return script


@pytest.fixture
def pythons(tmp_path) -> tuple[Path, Path]:
    """(a python3 without torch, a python3 with the stand-in torch), each in a directory of its own."""
    stubs = tmp_path / "site"
    for name, text in STAND_IN_TORCH.items():
        (stubs / name).parent.mkdir(parents=True, exist_ok=True)
        (stubs / name).write_text(text)
    return _python(tmp_path / "plain"), _python(tmp_path / "torch-env", stubs)


def _path(*dirs: Path, rest: str | None = None) -> str:
    return os.pathsep.join([*map(str, dirs), rest if rest is not None else os.environ["PATH"]])


# ----------------------------------------------------------------------------- the choice itself


def test_the_first_python_on_path_that_imports_torch_is_chosen(pythons):
    plain, with_torch = pythons
    env = {**os.environ, "PATH": _path(plain.parent, with_torch.parent)}
    chosen = workload_python(needs=("torch",), env=env)
    assert chosen.path == str(with_torch) and chosen.ok
    assert chosen.chosen_by == "the first Python on PATH that imports torch"
    assert chosen.tried[:2] == (str(plain), str(with_torch))  # the plain one was asked first


def test_when_no_python_imports_torch_the_first_is_named_with_what_it_lacks(pythons):
    plain, _ = pythons
    env = {**os.environ, "PATH": _path(plain.parent)}
    chosen = workload_python(needs=("torch",), env=env)
    if chosen.ok:
        pytest.skip(f"{chosen.path} on this machine's PATH imports torch")
    assert chosen.path == str(plain)
    assert chosen.missing == {"torch": "ModuleNotFoundError: No module named 'torch'"}
    assert str(plain) in chosen.fix() and "--python" in chosen.fix() and "CPVERIFY_PYTHON" in chosen.fix()


def test_an_explicit_python_is_used_as_given_even_without_torch(pythons):
    plain, with_torch = pythons
    env = {**os.environ, "PATH": _path(with_torch.parent)}
    chosen = workload_python(str(plain), chosen_by="CPVERIFY_PYTHON", needs=("torch",), env=env)
    assert chosen.path == str(plain) and chosen.chosen_by == "CPVERIFY_PYTHON"
    assert "torch" in chosen.missing
    assert chosen.problem().startswith(f"the workload's Python {plain} (CPVERIFY_PYTHON) cannot import torch")


def test_an_explicit_python_that_does_not_exist_is_bad_input(tmp_path):
    with pytest.raises(InputError) as raised:
        workload_python(str(tmp_path / "nope" / "python3"))
    assert raised.value.exit_code == 2
    assert str(tmp_path / "nope" / "python3") in raised.value.problem and "--python" in raised.value.fix


def test_imports_are_checked_from_the_workload_directory(pythons):
    """slime's train.py imports `slime` from its own checkout, as the check does."""
    _, with_torch = pythons
    env = {**os.environ, "PATH": _path(with_torch.parent)}
    assert workload_python(str(with_torch), needs=("torch", "slime"), cwd=FAKE_SLIME, env=env).ok
    elsewhere = workload_python(str(with_torch), needs=("torch", "slime"), cwd=ROOT / "tests", env=env)
    assert list(elsewhere.missing) == ["slime"] and "--slime-dir" in elsewhere.fix()


# ----------------------------------------------------------------------------- cpverify run


def _doctor(run_dir):
    """The doctor's facts and checks (by name) as the run recorded them in env.json."""
    doctor = json.loads((run_dir / "env.json").read_text())["doctor"]
    return doctor["facts"], {c["name"]: c for c in doctor["checks"]}


@pytest.fixture
def run(tmp_path, two_gpu_host):
    """`cpverify run --runner local` on the recorded 2x H200 host (its doctor's GPU checks pass)."""
    make_model_cache(tmp_path / "cache" / "hf", get_profile("smoke").model_repo, get_profile("smoke").model_revision)

    def go(*args: str, path: str = two_gpu_host["PATH"], env: dict | None = None, run_id: str = "w1"):
        argv = [sys.executable, "-m", "cpverify", "run", "--runner", "local", "--out", str(tmp_path / "out"),
                "--cache", str(tmp_path / "cache"), "--run-id", run_id, *args]
        full = {k: v for k, v in os.environ.items() if k != "CPVERIFY_PYTHON"}
        full.update(PATH=path, HF_HUB_OFFLINE="1", CPVERIFY_LOCK_DIR=str(tmp_path), **(env or {}))
        proc = subprocess.run(argv, capture_output=True, text=True, env=full, cwd=ROOT, timeout=300, check=False)
        return proc, tmp_path / "out" / run_id

    return go


def test_probe_without_torch_is_blocked_by_the_doctor_naming_the_python_and_the_fix(run, pythons):
    plain, _ = pythons
    proc, run_dir = run("--profile", "probe", "--gpus", "0,1", "--python", str(plain),
                        "--only", "doctor,lint,cp1,cp2,verdict")
    assert proc.returncode == 4, proc.stderr[-3000:]
    facts, checks = _doctor(run_dir)
    chosen = facts["workload_python"]
    assert (chosen["value"]["path"], chosen["source"], list(chosen["value"]["missing"])) == (str(plain), "--python",
                                                                                          ["torch"])
    assert checks["workload_python"]["status"] == "fail" and checks["workload_python"]["required"]
    assert checks["gpu_count"]["status"] == "pass"  # the recorded host has its two GPUs
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["status"] == "BLOCKED"
    runners = [c for c in verdict["checks"] if c["name"] == "runner"]
    assert runners and {(c["effect"], c["fix"]) for c in runners} == {("BLOCKED", checks["workload_python"]["fix"])}
    fixes = " ".join(c["fix"] for c in verdict["checks"])
    assert "--num-rollout" not in verdict["headline"] and "custom-megatron" not in fixes  # no slime advice
    assert not list((run_dir / "logs").glob("cp*.log"))  # no arm ran: no GPU was held
    env = json.loads((run_dir / "env.json").read_text())
    assert env["workload_python"]["path"] == str(plain) and "torch" in env["workload_python"]["missing"]


def test_the_arm_steps_check_the_python_even_without_the_doctor(run, pythons):
    plain, _ = pythons
    proc, run_dir = run("--profile", "probe", "--gpus", "0,1", "--only", "lint,cp1,verdict",
                        env={"CPVERIFY_PYTHON": str(plain)})
    assert proc.returncode == 4, proc.stderr[-3000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["status"] == "BLOCKED"
    # the arm's reason is its only record of the interpreter: it names the path and how it was chosen
    assert str(plain) in verdict["headline"] and "CPVERIFY_PYTHON" in verdict["headline"]
    assert not list((run_dir / "logs").glob("cp*.log"))


def test_slime_profile_needs_torch_and_slime_from_the_checkout(run, pythons):
    plain, with_torch = pythons
    proc, run_dir = run("--profile", "smoke", "--gpus", "0,1", "--slime-dir", str(FAKE_SLIME), "--python",
                        str(plain), "--only", "doctor,verdict")
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert json.loads((run_dir / "verdict.json").read_text())["status"] == "BLOCKED"
    facts, checks = _doctor(run_dir)
    assert "torch" in facts["workload_python"]["value"]["missing"] and checks["workload_python"]["status"] == "fail"
    proc, run_dir = run("--profile", "smoke", "--gpus", "0,1", "--slime-dir", str(FAKE_SLIME), "--python",
                        str(with_torch), "--only", "doctor,lint", run_id="w2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # doctor and lint alone write no env.json: the terminal's line is the only record of the choice
    assert f"workload python: {with_torch} (--python)\n" in proc.stderr


def test_the_default_is_a_python_that_imports_torch_and_the_doctor_asks_it(run, pythons, two_gpu_host):
    """The issue's case: cpverify itself runs from a Python without torch (nox's tool environment);
    the workload's Python is found on PATH, named, used for the arms, and asked for torch and NCCL."""
    plain, with_torch = pythons
    proc, run_dir = run("--profile", "probe", "--gpus", "0,1", "--only", "doctor,lint,verdict",
                        path=_path(plain.parent, with_torch.parent, rest=two_gpu_host["PATH"]))
    assert proc.returncode == 4, proc.stderr[-3000:]  # BLOCKED only because the arms never ran
    env = json.loads((run_dir / "env.json").read_text())
    chosen = env["doctor"]["facts"]["workload_python"]
    assert chosen["value"]["path"] == str(with_torch) and chosen["value"]["tried"][0] == str(plain)  # PATH's order
    torch = env["doctor"]["facts"]["torch"]
    assert torch["value"]["torch"] == "2.11.0+stand-in" and torch["source"].startswith(str(with_torch))
    checks = {c["name"]: c for c in env["doctor"]["checks"]}
    assert checks["nccl_version"]["status"] == "pass" and "2.28.9 (torch)" in checks["nccl_version"]["value"]
    assert checks["workload_python"]["status"] == "pass"
    commands = (run_dir / "commands.sh").read_text()
    assert f"{with_torch} -m torch.distributed.run" in commands  # the arms run with it, and say so
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["status"] == "BLOCKED" and not [a for a in verdict["arms"] if a["log_lines"]]  # never run


def test_the_standalone_probe_uses_the_same_choice(pythons):
    plain, with_torch = pythons
    env = {**os.environ, "PATH": _path(plain.parent, with_torch.parent)}
    env.pop("CPVERIFY_PYTHON", None)
    dry = subprocess.run([sys.executable, "-m", "cpverify", "probe", "--dry-run"], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120, check=False)
    assert dry.returncode == 0, dry.stderr
    assert f"{with_torch} -m torch.distributed.run" in dry.stdout
    blocked = subprocess.run([sys.executable, "-m", "cpverify", "probe", "--python", str(plain)], capture_output=True,
                             text=True, env=env, cwd=ROOT, timeout=120, check=False)
    assert blocked.returncode == 4
    problem, fix = blocked.stderr.split("fix:", 1)  # the error names the interpreter, then the fix
    assert str(plain) in problem and "--python" in fix


def test_a_python_without_torch_for_the_probe_is_told_the_extra_that_installs_it():
    from cpverify.workload_python import PROBE_EXTRA, WorkloadPython

    lacks = {"torch": "ModuleNotFoundError: No module named 'torch'"}
    searched = ("/usr/bin/python3", sys.executable)  # none was named: cpverify looked on PATH and at itself
    probe = WorkloadPython("/usr/bin/python3", "first on PATH", ("torch", "cpverify.probe.workload"), lacks, searched)
    slime = WorkloadPython("/usr/bin/python3", "first on PATH", ("torch", "slime"), lacks, searched)
    assert PROBE_EXTRA in probe.fix() and PROBE_EXTRA not in slime.fix()  # slime needs more than torch
