"""What the checks read from an arm's parsed log, computed once: the counted rollouts, the timings
that are durations and those that are not, the error records by class, the first common step's
numerics. `ArmFacts` carries an arm's evidence with what is derived from it."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cpverify.parse import ParsedLog
from cpverify.verdict import stats
from cpverify.verdict.model import (
    ITERATION_METRIC,
    NUMERICS_METRICS,
    ArmEvidence,
    Thresholds,
    timing_metrics,
)


def counted_perf(parsed: ParsedLog, warmup: int) -> dict[int, dict[str, float]]:
    """Train-side perf records of rollouts >= warmup, one per rollout id (the first one printed).

    Several ranks can print the same rollout's perf line; the first is rank 0's in slime's
    output order, and counting duplicates would inflate n and shrink the interval.
    """
    kept: dict[int, dict[str, float]] = {}
    for record in parsed.perf:
        if record.side == "train" and record.rollout >= warmup and record.rollout not in kept:
            kept[record.rollout] = record.metrics
    return dict(sorted(kept.items()))


def counted_iterations(parsed: ParsedLog, warmup: int) -> dict[int, dict[str, float]]:
    """Megatron-LM iteration times, one per logged iteration, the first `warmup` records left out
    (the first interval carries start-up: compilation, NCCL setup, a checkpoint load)."""
    kept: dict[int, dict[str, float]] = {}
    timed = [(i.iteration, i.elapsed_ms) for i in parsed.iterations if i.elapsed_ms is not None]
    for iteration, elapsed_ms in timed[warmup:]:
        kept.setdefault(iteration, {ITERATION_METRIC: elapsed_ms})
    return kept


def pretraining_only(parsed: ParsedLog) -> bool:
    """A Megatron-LM pretraining log: iteration times, and no slime training step at all."""
    return (not parsed.steps and not any(p.side == "train" for p in parsed.perf)
            and any(i.elapsed_ms is not None for i in parsed.iterations))


def measurements(per_rollout: dict[int, dict[str, float]], metric: str) -> tuple[list[float], list[tuple[int, float]]]:
    """The metric's durations per counted rollout, and the (rollout, value) pairs that are not durations."""
    kept, rejected = [], []
    for rollout, metrics in per_rollout.items():
        if metric not in metrics:
            continue
        if stats.is_duration(metrics[metric]):
            kept.append(float(metrics[metric]))
        else:
            rejected.append((rollout, metrics[metric]))
    return kept, rejected


# slime starts train_wait when a step ends (it times the wait for the next rollout), so every
# complete log ends with it open; any other timer left open means the log ends inside a step.
IDLE_TIMERS = frozenset({"train_wait"})



def ranges(ids: Sequence[int]) -> str:
    """[1, 2, 3, 5] -> "1-3, 5"."""
    parts: list[list[int]] = []
    for i in sorted(ids):
        if parts and parts[-1][1] == i - 1:
            parts[-1][1] = i
        else:
            parts.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)


# "[rank0]:[E0821 10:11:26.712922209 ProcessGroupNCCL.cpp:616] [Rank 0] " carries no meaning in a headline.
LEADING_TAGS = re.compile(r"^(?:\s*\[[^\]]*\]:?)+\s*")


def excerpt(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def coarse_class(parsed: ParsedLog, cls: str) -> str:
    """The coarse class the parser gave `cls` in this log ("" when the log has no such error)."""
    return next((getattr(e, "coarse", "") for e in parsed.errors if e.cls == cls), "") if cls else ""


def errors_by_class(errors: Sequence) -> dict[str, list]:
    """Error records grouped by their finest class, in order of first appearance.

    The parser reports a fine class and, on the same line, its coarse twin (nccl_cuda_failure
    and nccl_error); the twin adds nothing, so it is dropped when its fine class is present.
    """
    groups: dict[str, list] = {}
    for e in errors:
        finer_on_same_line = any(other.line == e.line and other.cls != e.cls and getattr(other, "coarse", "") == e.cls
                                 for other in errors)
        if not finer_on_same_line:
            groups.setdefault(e.cls, []).append(e)
    return groups



def first_step_numerics(base: ParsedLog, cand: ParsedLog, b_name: str, c_name: str, t: Thresholds) -> list[dict]:
    """First common step's numerics, side by side. Only rollout 0 can match across runs."""
    b_steps = {s.step: s for s in base.steps if s.kind == "step"}
    c_steps = {s.step: s for s in cand.steps if s.kind == "step"}
    common = sorted(set(b_steps) & set(c_steps))
    if not common:
        return []
    step = common[0]
    rows = []
    for metric in NUMERICS_METRICS:
        b, c = b_steps[step].metrics.get(metric), c_steps[step].metrics.get(metric)
        if not isinstance(b, (int, float)) or not isinstance(c, (int, float)):
            continue
        abs_diff = abs(c - b)
        rel_diff = abs_diff / abs(b) if b else (0.0 if c == 0 else None)
        rows.append({"baseline_arm": b_name, "candidate_arm": c_name, "step": step, "metric": metric,
                     "baseline": b, "candidate": c, "abs_diff": abs_diff, "rel_diff": rel_diff,
                     "within_tolerance": math.isclose(c, b, rel_tol=t.numerics_tolerance,
                                                      abs_tol=t.numerics_tolerance)})
    return rows


@dataclass
class ArmFacts:
    """One arm's evidence, the thresholds and whose advice (`workload`), with what every check reads:
    its counted rollouts and, per timing metric, the durations kept and the (rollout, value) pairs
    that are not durations."""

    ev: ArmEvidence
    t: Thresholds
    workload: str
    per_rollout: dict[int, dict[str, float]]
    measured: dict[str, tuple[list[float], list[tuple[int, float]]]]

    @classmethod
    def of(cls, ev: ArmEvidence, t: Thresholds, workload: str) -> ArmFacts:
        per_rollout = (counted_iterations(ev.parsed, t.warmup) if t.primary_metric == ITERATION_METRIC
                       else counted_perf(ev.parsed, t.warmup))
        return cls(ev, t, workload, per_rollout, {m: measurements(per_rollout, m) for m in timing_metrics(t)})

    @property
    def parsed(self) -> ParsedLog:
        return self.ev.parsed

    @property
    def samples(self) -> dict[str, list[float]]:
        return {m: kept for m, (kept, _) in self.measured.items()}
