"""`cpverify run`'s command line is read once, into a RunSpec, and the run's plan is built once per
process from it: the steps read the spec and the Context, never the argparse Namespace."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cpverify import pipeline, workspace
from cpverify.artifacts import RunDir
from cpverify.cli import build_parser
from cpverify.errors import EXIT_BLOCKED, InputError
from cpverify.profiles import get_profile
from cpverify.run_spec import RunSpec, run_spec
from cpverify.run_state import RunRecord
from cpverify.steps.context import Context
from cpverify.workload_python import WorkloadPython
from helpers.hfcache import make_model_cache

ROOT = Path(__file__).resolve().parent.parent
FAKE_SLIME = ROOT / "tests" / "fake_slime"


def spec_of(tmp_path: Path, *argv: str) -> RunSpec:
    args = build_parser().parse_args(["run", "--runner", "local", "--slime-dir", str(FAKE_SLIME),
                                      "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out"),
                                      "--run-id", "s", *argv])
    return run_spec(args)


@pytest.mark.parametrize(("given", "gpus", "gpu_less", "pinned"), [
    ((), None, False, False),  # the profile's count, from GPU 0; the runner may choose
    (("--gpus", "none"), None, True, False),
    (("--gpus", "2"), (0, 1), False, True),
    (("--gpus", "3,1"), (3, 1), False, True),
])
def test_gpus_are_read_once_into_indices_or_none(tmp_path, given, gpus, gpu_less, pinned):
    spec = spec_of(tmp_path, *given)
    assert (spec.gpus, spec.gpu_less, spec.gpus_pinned) == (gpus, gpu_less, pinned)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.gpus = (0,)  # type: ignore[misc]


def test_a_bad_gpus_is_bad_input_before_the_run_directory_exists(tmp_path):
    args = build_parser().parse_args(["run", "--runner", "local", "--gpus", "0,x", "--out", str(tmp_path / "out"),
                                      "--run-id", "bad"])
    with pytest.raises(InputError) as raised:
        pipeline.run(args)
    assert "--gpus" in raised.value.problem
    assert not (tmp_path / "out" / "bad").exists()


def test_the_plan_is_built_once_per_process(tmp_path, monkeypatch):
    """Every step of one process works on the one plan that plan.json records."""
    make_model_cache(tmp_path / "cache" / "hf", get_profile("smoke").model_repo, get_profile("smoke").model_revision)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CPVERIFY_LOCK_DIR", str(tmp_path))
    built = []
    original = workspace.Workspace.plan

    def counted(self, **kwargs):
        built.append(kwargs["run_id"])
        return original(self, **kwargs)

    monkeypatch.setattr(workspace.Workspace, "plan", counted)
    args = build_parser().parse_args(["run", "--runner", "local", "--gpus", "none", "--slime-dir", str(FAKE_SLIME),
                                      "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out"),
                                      "--run-id", "once", "--only", "fetch,compileall,lint,verdict"])
    assert pipeline.run(args) == EXIT_BLOCKED  # the arms never ran: the verdict says so
    assert built == ["once"]


def _python(path: str) -> WorkloadPython:
    return WorkloadPython(path, "found on PATH", ("torch", "slime"))


def test_a_later_process_that_would_run_another_interpreter_is_refused(tmp_path, monkeypatch):
    """The arms run the interpreter plan.json names: one found anew by a later process of the run
    (PATH changed) is bad input, not a silent change of what the arms run."""
    monkeypatch.delenv("CPVERIFY_PYTHON", raising=False)
    spec = spec_of(tmp_path, "--gpus", "none")
    recorded = RunRecord(workload_python={**_python("/envs/a/bin/python3").to_json(), "requested": None})
    ctx = Context(spec=spec, run_dir=RunDir.create(base=spec.out, run_id="s"), record=recorded)
    assert ctx.plan.arms[0].argv[0] == "/envs/a/bin/python3"  # as the run's earlier process chose it

    monkeypatch.setattr(workspace.Workspace, "find_python", lambda self, flag: _python("/envs/b/bin/python3"))
    with pytest.raises(InputError) as raised:
        ctx.workload_python(refresh=True)
    assert "/envs/a/bin/python3" in raised.value.problem and "/envs/a/bin/python3" in raised.value.fix

    monkeypatch.setattr(workspace.Workspace, "find_python", lambda self, flag: _python("/envs/a/bin/python3"))
    assert ctx.workload_python(refresh=True).path == "/envs/a/bin/python3"

