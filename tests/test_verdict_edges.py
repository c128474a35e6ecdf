"""What the verdict decides exactly at its edges: an interval whose upper bound is the threshold
passes; the first counted rollout is counted when an arm is checked for every rollout it ran.

The arms are slime logs in slime's formats (tests/helpers/slime_log.py), parsed by the real
parser and judged by the real decide(); their timings are given exactly (no jitter), so the
interval is known before the resampler runs.
"""

from __future__ import annotations

import io

import pytest

from cpverify import verdict as v
from cpverify.parse import parse_stream
from helpers.slime_log import SlimeLog, synthetic_arm

ROLLOUTS = 10  # 9 counted after the default warm-up of 1: more than any interval needs


def _arm(name: str, cp: int, log: SlimeLog, **evidence) -> v.ArmEvidence:
    return v.ArmEvidence(name, cp, parse_stream(io.BytesIO(log.text().encode())), **evidence)


def _judge(base: v.ArmEvidence, cand: v.ArmEvidence, **thresholds) -> v.Verdict:
    return v.decide([base, cand], comparisons=[(base.name, cand.name)], thresholds=v.Thresholds(**thresholds))


def _row(verdict: v.Verdict, name: str, arm: str | None = None) -> v.Check:
    (row,) = [c for c in verdict.checks if c.name == name and (arm is None or c.arm == arm)]
    return row


SPEED = "speed:cp2 vs cp1"  # the primary metric's row (a secondary metric's is speed:<metric>:...)


def _constant_pair(ratio: float) -> tuple[v.ArmEvidence, v.ArmEvidence]:
    """CP=1 at 2.0 s and CP=2 at 2.0 * ratio s every rollout: every resample's ratio is `ratio`, so
    the interval is (ratio, ratio). 2.0 and the ratios below are exact in binary floating point."""
    base = synthetic_arm(cp=1, actor_train_time=2.0, times=[2.0] * ROLLOUTS, secondary=2.0)
    cand = synthetic_arm(cp=2, actor_train_time=2.0 * ratio, times=[2.0 * ratio] * ROLLOUTS, secondary=2.0)
    return _arm("cp1", 1, base), _arm("cp2", 2, cand)


def test_an_interval_whose_upper_bound_is_the_threshold_passes():
    """PASS is "the upper bound <= the threshold": at the threshold itself the candidate is within it."""
    verdict = _judge(*_constant_pair(1.25), pass_ratio=1.25)
    speed = _row(verdict, SPEED)
    assert speed.status == "pass" and speed.effect is None
    assert verdict.status == v.PASS


@pytest.mark.parametrize("pass_ratio", [1.2499, 1.0])
def test_an_interval_wholly_above_the_threshold_fails(pass_ratio):
    verdict = _judge(*_constant_pair(1.25), pass_ratio=pass_ratio)
    assert _row(verdict, SPEED).effect == v.FAIL and verdict.status == v.FAIL


def _arm_without(cp: int, missing: int, *, arguments: dict | None = None) -> SlimeLog:
    """A clean arm of ROLLOUTS rollouts but rollout `missing`, which has no record at all."""
    log = SlimeLog()
    if arguments is not None:
        log.megatron_arguments({"context_parallel_size": cp, "data_parallel_size": 2 // cp, "world_size": 2,
                                **arguments})
    log.layout(cp=cp, dp=2 // cp)
    log.nccl_init()
    for rid in range(ROLLOUTS):
        if rid != missing:
            log.iteration(rid, actor_train_time=1.0, world=2)
    return log


def test_the_first_counted_rollout_missing_leaves_the_arm_unfinished():
    """An arm checked against the rollouts its plan asked for lacks one when the first counted
    rollout (the first after the warm-up) is missing, as much as any later one."""
    thresholds = v.Thresholds()
    first_counted = thresholds.warmup
    full = synthetic_arm(cp=1, actor_train_time=1.0, rollouts=ROLLOUTS, jitter=0.0)
    verdict = _judge(_arm("cp1", 1, full, expected_rollouts=ROLLOUTS),
                     _arm("cp2", 2, _arm_without(2, first_counted), expected_rollouts=ROLLOUTS))
    assert _row(verdict, "complete", "cp2").effect == v.INCONCLUSIVE
    assert _row(verdict, "complete", "cp1").status == "pass"
    assert verdict.status == v.INCONCLUSIVE


def test_the_first_counted_rollout_missing_from_a_log_that_states_its_num_rollout_leaves_it_unfinished():
    """Without a plan, the log's own --num-rollout (Megatron's argument dump) is what the arm was
    started with: from the first counted rollout on, each must be there."""
    first_counted = v.Thresholds().warmup
    stated = {"num_rollout": ROLLOUTS}
    full = synthetic_arm(cp=1, actor_train_time=1.0, rollouts=ROLLOUTS, jitter=0.0, arguments=stated)
    verdict = _judge(_arm("cp1", 1, full), _arm("cp2", 2, _arm_without(2, first_counted, arguments=stated)))
    assert _row(verdict, "complete", "cp2").effect == v.INCONCLUSIVE
    assert _row(verdict, "complete", "cp1").status == "pass"
