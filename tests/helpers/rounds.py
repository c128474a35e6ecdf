"""An arm as rounds (separate processes, each its own log), for verdict tests: the verdict takes its
ratio's interval from the spread between rounds, and one round per arm shows none (it then stands
on the recorded prior, too wide to decide a 5% effect against 1.3)."""

from __future__ import annotations

from cpverify.parse import ParsedLog
from cpverify.verdict import ArmEvidence
from helpers.slime_log import synthetic_arm

ROUNDS = 4  # rounds per arm that let the between-round interval decide a 5% effect against 1.3


def arm_rounds(name: str, cp: int, factor: float, *, rounds: int = ROUNDS, seed: int = 1,
               parsed: ParsedLog | None = None, result=None, **kwargs) -> list[ArmEvidence]:
    """`rounds` rounds of arm `name`: each a synthetic log with its own seed, or `parsed` every time
    (rounds with no spread between them)."""
    return [ArmEvidence(name if k == 1 else f"{name}.r{k}", cp,
                        parsed or synthetic_arm(cp=cp, actor_train_time=factor, seed=seed + 1000 * (k - 1),
                                                **kwargs).expected(), result, arm=name, round=k)
            for k in range(1, rounds + 1)]
