"""The rounds of a run: how many, in which order, and when to stop (cpverify.pipeline runs them).

An arm runs as one or more **rounds**: the same command, each a process of its own with its own
log (`logs/cp1.log`, `logs/cp1.r2.log`, ...), because one process's steps describe that process,
not the host (cpverify.verdict.rounds). Rounds are interleaved so that the host's drift (heat, a
neighbour's job, a cache filling) falls on every arm alike: round 1 runs the arms in plan order
(the baselines, then the candidates: the cp1 and cp2 steps), round 2 in reverse order, round 3 in
plan order again: CP1 CP2 | CP2 CP1 | CP1 CP2 (an ABBA design).

Two designs (`Design`):
  fixed       --rounds N: N rounds of every arm.
  sequential  --rounds auto, the default: MIN_ROUNDS rounds of every arm, then one more round of
              every arm at a time while the verdict's interval for the primary ratio straddles the
              threshold (cpverify.verdict.sequential: every look spends part of the error rate, so
              looking often does not make a wrong verdict likelier), up to --max-rounds.
Both stop before a round that would take the arms past --budget (the time the arms hold the GPUs,
the next round estimated from each arm's rounds so far), and after a round that did not end ok:
that round decides the verdict (a crash is a crash), more rounds would add nothing to it.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cpverify.errors import InputError
from cpverify.model import Arm

MIN_ROUNDS = 2  # the fewest rounds per arm that show their spread (the sequential design's first look)
MAX_ROUNDS = 10  # the sequential design's default cap per arm
MOST_ROUNDS = 100  # no design asks for more: a larger number is a typo

# Why the rounds stopped (state.json's and verdict.json's rounds.stopped.reason).
DECIDED, BUDGET, MAX, FIXED, ARM_FAILED = "decided", "budget", "max_rounds", "fixed_rounds", "arm_failed"
STOP_REASONS = (DECIDED, BUDGET, MAX, FIXED, ARM_FAILED)

_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


def parse_duration(text: str, *, flag: str = "--budget") -> float:
    """`90s`, `20m`, `1h`, `1h30m` -> seconds. A bare number is refused: 20 what?"""
    match = _DURATION.fullmatch(text.strip().lower())
    if not text.strip() or match is None or not any(match.groups()):
        raise InputError(f"{flag} {text!r} is not a duration", f"write it with a unit: {flag} 90s, 20m, 1h or 1h30m")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if not total > 0:
        raise InputError(f"{flag} {text!r} is no time at all", f"give the arms some time: {flag} 20m")
    return total


@dataclass(frozen=True)
class Design:
    """How many rounds: `rounds` of every arm (fixed), or None for the sequential design (at least
    `min_rounds`, at most `max_rounds`); either capped by `budget_s` seconds of arm time."""

    rounds: int | None = None
    max_rounds: int = MAX_ROUNDS
    budget_s: float | None = None
    min_rounds: int = MIN_ROUNDS

    @property
    def sequential(self) -> bool:
        return self.rounds is None

    @classmethod
    def of(cls, rounds: str | int | None = "auto", *, max_rounds: int | None = None,
           budget: str | None = None) -> Design:
        """The design `cpverify run --rounds R --max-rounds M --budget D` asks for (bad input: exit 2)."""
        budget_s = parse_duration(budget) if budget else None
        text = "auto" if rounds is None else str(rounds).strip().lower()
        if text == "auto":
            cap = MAX_ROUNDS if max_rounds is None else max_rounds
            if not MIN_ROUNDS <= cap <= MOST_ROUNDS:
                raise InputError(f"--max-rounds {cap}: the sequential design runs at least {MIN_ROUNDS} rounds per "
                                 f"arm and at most {MOST_ROUNDS}",
                                 f"pass --max-rounds between {MIN_ROUNDS} and {MOST_ROUNDS} (or --rounds 1 for one "
                                 "process per arm)")
            return cls(None, cap, budget_s)
        try:
            count = int(text)
        except ValueError:
            raise InputError(f"--rounds {rounds!r} is neither a count nor 'auto'",
                             "write --rounds 3 (three rounds of every arm) or --rounds auto (add rounds until the "
                             "interval decides)") from None
        if not 1 <= count <= MOST_ROUNDS:
            raise InputError(f"--rounds {count}: an arm runs between 1 and {MOST_ROUNDS} rounds",
                             "write e.g. --rounds 3, or --rounds auto")
        if max_rounds is not None:
            raise InputError(f"--max-rounds {max_rounds} caps the sequential design, and --rounds {count} fixes the "
                             "count", f"drop --max-rounds, or pass --rounds auto --max-rounds {max_rounds}")
        return cls(count, count, budget_s)

    def to_json(self) -> dict:
        return {"mode": "sequential" if self.sequential else "fixed", "rounds": self.rounds,
                "min_rounds": self.min_rounds if self.sequential else self.rounds,
                "max_rounds": self.max_rounds, "budget_s": self.budget_s}

    @classmethod
    def from_json(cls, data: Mapping) -> Design:
        return cls(data.get("rounds"), int(data.get("max_rounds") or MAX_ROUNDS), data.get("budget_s"),
                   int(data.get("min_rounds") or MIN_ROUNDS) if data.get("mode") == "sequential" else MIN_ROUNDS)

    def describe(self) -> str:
        budget = f", within {_minutes(self.budget_s)} of arm time" if self.budget_s else ""
        if self.sequential:
            return f"sequential: {self.min_rounds} to {self.max_rounds} rounds per arm until decided{budget}"
        return f"fixed: {self.rounds} round{'s' if self.rounds != 1 else ''} per arm{budget}"


@dataclass(frozen=True)
class Stop:
    """Why no further round runs: one of STOP_REASONS, said in words."""

    reason: str
    detail: str

    def to_json(self) -> dict:
        return {"reason": self.reason, "detail": self.detail}


def is_baseline(arm: Arm, baseline_cp: int) -> bool:
    return arm.cp == baseline_cp


def round_order(arms: Sequence[Arm], baseline_cp: int, k: int) -> list[Arm]:
    """The planned arms in the order round k runs them: odd rounds the baselines then the
    candidates (plan order), even rounds the reverse, so that no arm always runs first."""
    ordered = [a for a in arms if is_baseline(a, baseline_cp)] + [a for a in arms if not is_baseline(a, baseline_cp)]
    return ordered if k % 2 else ordered[::-1]


def arm_seconds(durations: Mapping[str, Sequence[float]]) -> float:
    """The time the arms held the GPUs: every recorded round's duration."""
    return sum(sum(d) for d in durations.values())


def next_round_estimate(durations: Mapping[str, Sequence[float]]) -> float:
    """What one more round of every arm should take: each arm's mean round so far."""
    return sum(statistics.fmean(d) for d in durations.values() if d)


def stop_before(design: Design, *, completed: int, durations: Mapping[str, Sequence[float]],
                decided: bool = False, failed: str = "") -> Stop | None:
    """Whether to stop before round completed+1 (None: run it). `durations`: each planned arm's
    rounds' durations so far; `decided`: the last look's interval cleared the threshold (sequential);
    `failed`: a recorded round that did not end ok, in words."""
    if failed:
        return Stop(ARM_FAILED, f"{failed}: that round decides the verdict, more rounds would not change it")
    if not design.sequential and completed >= (design.rounds or 1):
        return Stop(FIXED, f"{completed} round{'s' if completed != 1 else ''} per arm, as --rounds asked")
    if design.sequential and decided:
        return Stop(DECIDED, f"after {completed} rounds per arm the intervals decide (each clear of its threshold)")
    if design.sequential and completed >= design.max_rounds:
        return Stop(MAX, f"{completed} rounds per arm, the most --max-rounds allows, and still undecided")
    if design.budget_s is not None:
        used, more = arm_seconds(durations), next_round_estimate(durations)
        if used + more > design.budget_s:
            return Stop(BUDGET, f"the arms have used {_minutes(used)} of the {_minutes(design.budget_s)} budget and "
                                f"another round of every arm should take {_minutes(more)}")
    return None


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "no limit"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{math.ceil(seconds)} s"
