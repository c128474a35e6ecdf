"""What the verdict decides exactly at its edges: an interval whose upper bound is the threshold
passes; the first counted rollout is counted when an arm is checked for every rollout it ran,
whether the warm-up is a fixed count or found in the data.

The arms are slime logs in slime's formats (tests/helpers/slime_log.py), parsed by the real
parser and judged by the real decide(); their timings are given exactly (no jitter). The interval
does not depend on the threshold, so the verdict's own bounds are the edges a threshold is set at.
"""

from __future__ import annotations

import io
import math

import pytest

from cpverify import verdict as v
from cpverify.model import CheckStatus
from cpverify.parse import parse_stream
from helpers.slime_log import SlimeLog, synthetic_arm

ROLLOUTS = 10  # 9 counted after a warm-up of 1: more than any interval needs
SLOW_START = 6.0  # rollout 0's actor_train time against a steady 1.0 (real slime's: 5-21x)


def _arm(name: str, cp: int, log: SlimeLog, **evidence) -> v.ArmEvidence:
    return v.ArmEvidence(name, cp, parse_stream(io.BytesIO(log.text().encode())), **evidence)


def _judge(base: v.ArmEvidence, cand: v.ArmEvidence, **thresholds) -> v.Verdict:
    return v.decide([base, cand], comparisons=[(base.name, cand.name)], thresholds=v.Thresholds(**thresholds))


def _row(verdict: v.Verdict, name: str, arm: str | None = None) -> v.Check:
    (row,) = [c for c in verdict.checks if c.name == name and (arm is None or c.arm == arm)]
    return row


SPEED = "speed:cp2 vs cp1"  # the primary metric's row (a secondary metric's is speed:<metric>:...)


def _constant_pair(ratio: float) -> tuple[v.ArmEvidence, v.ArmEvidence]:
    """CP=1 at 2.0 s and CP=2 at 2.0 * ratio s every rollout: each arm's median and mean are exact,
    the ratio is `ratio`. 2.0 and the ratio below are exact in binary floating point."""
    base = synthetic_arm(cp=1, actor_train_time=2.0, times=[2.0] * ROLLOUTS, secondary=2.0)
    cand = synthetic_arm(cp=2, actor_train_time=2.0 * ratio, times=[2.0 * ratio] * ROLLOUTS, secondary=2.0)
    return _arm("cp1", 1, base), _arm("cp2", 2, cand)


def _bounds(ratio: float) -> tuple[float, float]:
    """The interval the verdict states for the constant pair of `ratio` (whatever the threshold)."""
    low, high = _judge(*_constant_pair(ratio)).to_json()["decided_by"]["ci"]
    assert low < ratio < high
    return low, high


def test_an_interval_whose_upper_bound_is_the_threshold_passes():
    """PASS is "the upper bound <= the threshold": at the threshold itself the candidate is within it."""
    _, high = _bounds(1.25)
    verdict = _judge(*_constant_pair(1.25), pass_ratio=high)
    speed = _row(verdict, SPEED)
    assert speed.status == CheckStatus.PASS and speed.effect is None
    assert verdict.status == v.PASS
    assert _judge(*_constant_pair(1.25), pass_ratio=math.nextafter(high, 0)).status == v.INCONCLUSIVE


@pytest.mark.parametrize("below", [math.nextafter(1.0, 0), 0.8])
def test_an_interval_wholly_above_the_threshold_fails(below):
    """FAIL is "the lower bound > the threshold"; at the lower bound itself the interval straddles it."""
    low, _ = _bounds(1.25)
    verdict = _judge(*_constant_pair(1.25), pass_ratio=low * below)
    assert _row(verdict, SPEED).effect == v.FAIL and verdict.status == v.FAIL
    assert _judge(*_constant_pair(1.25), pass_ratio=low).status == v.INCONCLUSIVE


def _arm_without(cp: int, missing: int, *, arguments: dict | None = None) -> SlimeLog:
    """A clean arm of ROLLOUTS rollouts, rollout 0 slow, but rollout `missing`, which has no record at all."""
    log = SlimeLog()
    if arguments is not None:
        log.megatron_arguments({"context_parallel_size": cp, "data_parallel_size": 2 // cp, "world_size": 2,
                                **arguments})
    log.layout(cp=cp, dp=2 // cp)
    log.nccl_init()
    for rid in range(ROLLOUTS):
        if rid != missing:
            log.iteration(rid, actor_train_time=SLOW_START if rid == 0 else 1.0, world=2)
    return log


# The warm-up as a fixed count (`--warmup 1`) and as found in each round's data (the default): either
# way rollout 0, SLOW_START, is the warm-up and rollout 1 the first counted.
WARMUPS = pytest.mark.parametrize("warmup", [1, None], ids=["fixed", "found"])
FIRST_COUNTED = 1


def _full(**arguments) -> SlimeLog:
    return synthetic_arm(cp=1, actor_train_time=1.0, times=[SLOW_START] + [1.0] * (ROLLOUTS - 1),
                         arguments=arguments or None)


@WARMUPS
def test_the_first_counted_rollout_missing_leaves_the_arm_unfinished(warmup):
    """An arm checked against the rollouts its plan asked for lacks one when the first counted
    rollout (the first after the warm-up) is missing, as much as any later one."""
    verdict = _judge(_arm("cp1", 1, _full(), expected_rollouts=ROLLOUTS),
                     _arm("cp2", 2, _arm_without(2, FIRST_COUNTED), expected_rollouts=ROLLOUTS), warmup=warmup)
    assert [a.warmup for a in verdict.arms] == [FIRST_COUNTED, FIRST_COUNTED]  # counted from rollout 1 in both
    assert _row(verdict, "complete", "cp2").effect == v.INCONCLUSIVE
    assert _row(verdict, "complete", "cp1").status == CheckStatus.PASS
    assert verdict.status == v.INCONCLUSIVE


@WARMUPS
def test_the_first_counted_rollout_missing_from_a_log_that_states_its_num_rollout_leaves_it_unfinished(warmup):
    """Without a plan, the log's own --num-rollout (Megatron's argument dump) is what the arm was
    started with: from the first counted rollout on, each must be there."""
    stated = {"num_rollout": ROLLOUTS}
    verdict = _judge(_arm("cp1", 1, _full(**stated)),
                     _arm("cp2", 2, _arm_without(2, FIRST_COUNTED, arguments=stated)), warmup=warmup)
    assert _row(verdict, "complete", "cp2").effect == v.INCONCLUSIVE
    assert _row(verdict, "complete", "cp1").status == CheckStatus.PASS
