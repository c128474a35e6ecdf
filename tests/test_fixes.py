"""One fix per failure (cpverify.fixes): the advice for a failure does not depend on the path that
found it -- the runners' watcher (ArmResult.fix), the verdict on a run's results, the verdict on the
log alone (`cpverify verdict`), the deep lint on slime's refusal of an argument.

The arms' output comes from tests/helpers/slime_log.py (real failure lines in slime's formats), fed
to the real watcher and parser; the workload is an in-process generator (no GPU, no slime here).
"""

from __future__ import annotations

import threading

import pytest

from cpverify import fixes
from cpverify import verdict as v
from cpverify.lint import deep as deep_lint
from cpverify.model import Limits, Outcome
from cpverify.parse import parse_file
from cpverify.steps.lint import error_classes
from cpverify.plan import build_plan
from cpverify.profiles import get_profile
from cpverify.runners.watch import LogWatcher
from helpers.slime_log import ERROR_LINES, synthetic_arm

LIMITS = Limits(deadline_s=20, hang_s=10, stall_s=10)


def _watched(tmp_path, text: str, *, exit_code: int | None):
    """The watcher's result for a workload that prints `text`, then exits with `exit_code` or, when
    that is None, sits there (as a real one does in the NCCL watchdog's teardown) until stopped."""
    stopped = threading.Event()
    code: list[int | None] = [None]

    def source():
        yield from text.splitlines(keepends=True)
        if exit_code is None:
            stopped.wait(10)
        code[0] = 143 if stopped.is_set() else exit_code

    def stop():
        stopped.set()

    log = tmp_path / "cp2.log"
    result = LogWatcher(log, LIMITS, arm_name="cp2").watch(source(), stop=stop, poll_exit=lambda: code[0])
    return result, log


def _verdict(tmp_path, failing_log, result=None):
    baseline = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "cp1.log")
    evidence = [v.ArmEvidence("cp1", 1, parse_file(baseline)), v.ArmEvidence("cp2", 2, parse_file(failing_log), result)]
    return v.decide(evidence, comparisons=[("cp1", "cp2")])


def _check(verdict, name):
    return next(c for c in verdict.checks if c.arm == "cp2" and c.name == name)


# A fatal error of each kind: a class with its own fix whose line also carries a fatal coarse twin
# (nccl_cuda_failure beside nccl_error), a fine class without a fix of its own (its coarse class's
# applies), a fatal class with no twin.
FATAL_LINES = {
    "nccl_cuda_failure": "misc/cudawrap.cc:123 NCCL WARN Cuda failure 209 'no kernel image is available for execution'",
    "nccl_remote_error": ERROR_LINES["nccl_remote_error"],
    "cuda_illegal_memory_access": ERROR_LINES["cuda_illegal_memory_access"],
}


@pytest.mark.parametrize("cls", FATAL_LINES)
def test_a_fatal_error_gets_one_fix_from_the_watcher_and_both_verdicts(tmp_path, cls):
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, rollouts=3)
    log.raw(f"(MegatronTrainRayActor pid=7) {FATAL_LINES[cls]}", mark="error")  # as Ray prints an actor's line
    result, written = _watched(tmp_path, log.text(), exit_code=None)
    record = next(e for e in parse_file(written).errors if e.cls == cls)
    expected = fixes.for_error(record.cls, record.coarse)
    assert (result.outcome, result.error_class) == (Outcome.FATAL, cls)
    assert result.fix == expected  # what state.json records for the arm

    run = _verdict(tmp_path, written, result)  # `cpverify run`: the runner's result and the log
    assert _check(run, "runner").fix == expected
    assert _check(run, f"error:{cls}").fix == expected
    alone = _verdict(tmp_path, written)  # `cpverify verdict` on the same log
    assert _check(alone, f"error:{cls}").fix == expected


@pytest.mark.parametrize("cls", ["slime_num_rollouts_lt_global_batch", "megatron_cuda_device_max_connections",
                                 "argparse_invalid_choice"])
def test_slimes_refusal_gets_the_fix_its_log_line_gets(tmp_path, cls):
    """The deep lint quotes slime's message before any GPU is held; the verdict reads the same line in
    an arm's log after the run: one fix."""
    message = ERROR_LINES[cls]
    plan = build_plan(get_profile("smoke"), run_id="fixes")
    stage = "argparse" if cls.startswith("argparse") else "validation"
    found = deep_lint.findings(plan, [{"name": "cp2", "stage": stage, "error": message, "unknown": []}],
                               exit_code=0, output="", arch_assumed=False, classify=error_classes)
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, rollouts=3)
    log.error(cls)
    alone = _verdict(tmp_path, log.write(tmp_path / "cp2.log"))
    assert [f.fix for f in found] == [_check(alone, f"error:{cls}").fix]


def test_an_outcome_without_an_error_class_gets_the_outcomes_fix(tmp_path):
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, rollouts=3)
    result, written = _watched(tmp_path, log.text(), exit_code=1)
    assert result.outcome == Outcome.FAILED and result.error_class == ""
    assert result.fix == fixes.OUTCOME_FIXES[Outcome.FAILED]
    assert _check(_verdict(tmp_path, written, result), "runner").fix == result.fix
    assert fixes.for_outcome(Outcome.OK) == ""
