"""What the checks read from an arm's parsed log, computed once: the counted rollouts, the timings
that are durations and those that are not, the work each step did, what the log states twice with
two values, the losses and grad norms that are not finite, the error records by class, the first
common step's numerics. `ArmFacts` carries an arm's evidence with what is derived from it."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from cpverify.parse import ConflictRecord, ParsedLog
from cpverify.parse.records import MAX_CONFLICTS, UNKNOWN_ROLLOUT
from cpverify.verdict import stats
from cpverify.verdict.rounds import warmup_end
from cpverify.verdict.terms import (
    ITERATION_METRIC,
    NUMERICS_METRICS,
    ArmEvidence,
    Thresholds,
    timing_metrics,
)

K = TypeVar("K", bound=Hashable)


def same_value(a: float, b: float) -> bool:
    """Equal as printed: two prints of `nan` say the same."""
    return a == b or (math.isnan(a) and math.isnan(b))


def merged(records: Iterable[tuple[K, int, dict[str, float]]],
           named: Callable[[K], str]) -> tuple[dict[K, dict[str, float]], list[ConflictRecord]]:
    """One metric dict per id (ids in the order first printed), from (id, line, metrics) records.

    A record printed twice is one record (a log copied twice, Ray's repeats); a metric printed with
    two different values for one id is a ConflictRecord -- two runs in one file, or an edited log --
    and its first value is kept, never silently: the checks say the arm cannot pass on it (the first
    MAX_CONFLICTS are listed). A dict returned is its record's own (a copy once a repeat adds to
    it): not to be changed.
    """
    kept: dict[K, dict[str, float]] = {}
    first_line: dict[K, int] = {}
    conflicts: list[ConflictRecord] = []
    copied: set[K] = set()  # ids whose dict is a copy: the record's own is never changed
    for key, line, metrics in records:
        mine = kept.get(key)
        if mine is None:  # the common case, an id printed once: its record's dict as it is
            kept[key], first_line[key] = metrics, line
            continue
        if key not in copied:
            mine = kept[key] = dict(mine)
            copied.add(key)
        for metric, value in metrics.items():
            if metric not in mine:
                mine[metric] = value
            elif not same_value(mine[metric], value) and len(conflicts) < MAX_CONFLICTS:
                conflicts.append(ConflictRecord(f"{named(key)} {metric}", f"{mine[metric]:.6g}", f"{value:.6g}",
                                                first_line[key], line))
    return kept, conflicts


def train_perf(parsed: ParsedLog) -> tuple[dict[int, dict[str, float]], list[ConflictRecord]]:
    """The train-side perf record of every rollout whose id was printed, merged (see merged()).

    slime prints one per rollout, on one rank (tp 0, the last pipeline stage, data-parallel rank 0
    with CP: slime/observability/train_metric_utils.py log_perf_data).
    """
    return merged(((r.rollout, r.line, r.metrics) for r in parsed.perf
                   if r.side == "train" and r.rollout != UNKNOWN_ROLLOUT), lambda rollout: f"perf {rollout}")


def counted_perf(parsed: ParsedLog, warmup: int) -> dict[int, dict[str, float]]:
    """Train-side perf records of rollouts >= warmup, one per rollout id, in rollout order.

    A rollout printed twice counts once (counting duplicates would inflate n and shrink the interval);
    two prints that disagree are a conflict (`conflicts()`), the first kept.
    """
    return {rollout: metrics for rollout, metrics in sorted(train_perf(parsed)[0].items()) if rollout >= warmup}


def _iterations(parsed: ParsedLog) -> tuple[dict[int, dict[str, float]], list[ConflictRecord]]:
    return merged(((i.iteration, i.line, {ITERATION_METRIC: i.elapsed_ms, **i.metrics}) for i in parsed.iterations
                   if i.elapsed_ms is not None), lambda iteration: f"iteration {iteration}")


def counted_iterations(parsed: ParsedLog, warmup: int) -> dict[int, dict[str, float]]:
    """Megatron-LM iteration times (with the rest of each iteration's line), one per logged iteration,
    the first `warmup` left out (the first interval carries start-up: compilation, NCCL setup, a
    checkpoint load)."""
    return dict(list(_iterations(parsed)[0].items())[warmup:])


def counted(parsed: ParsedLog, t: Thresholds) -> tuple[dict[int, dict[str, float]], int]:
    """The counted records of one round's log (train-side perf by rollout, or Megatron-LM
    iterations) and the warm-up left out: rollouts < it (iteration records before it). `t.warmup`
    when given; else found in the round's own primary timings (cpverify.verdict.rounds.warmup_end:
    the leading steps far above the round's median)."""
    iterations = t.primary_metric == ITERATION_METRIC
    if t.warmup is not None:
        return (counted_iterations(parsed, t.warmup) if iterations else counted_perf(parsed, t.warmup)), t.warmup
    every = list((counted_iterations(parsed, 0) if iterations else counted_perf(parsed, 0)).items())
    timed = [i for i, (_, metrics) in enumerate(every) if stats.is_duration(metrics.get(t.primary_metric))]
    cut = warmup_end([every[i][1][t.primary_metric] for i in timed])
    if not cut:
        return dict(every), 0
    last = timed[cut - 1]  # the last warm-up step: what follows it is counted from the next rollout on,
    # so a rollout missing right after the warm-up is a gap in the counted ones (check_complete)
    return dict(every[last + 1:]), last + 1 if iterations else every[last][0] + 1


def timing_records(parsed: ParsedLog) -> tuple:
    """Every timing record of a log (train-side perf by rollout, Megatron-LM iterations), as one
    comparable value; () when it has none. Two processes never time every step alike to the
    microsecond slime prints: two logs with the same records are one process's, however their bytes
    differ (a copy with a line added, line endings changed, compressed)."""
    found = [train_perf(parsed)[0], _iterations(parsed)[0]]
    return tuple(tuple(sorted((key, tuple(sorted(m.items()))) for key, m in records.items())) for records in found
                 if records)


def _steps(parsed: ParsedLog) -> tuple[dict[tuple[str, int], dict[str, float]], list[ConflictRecord]]:
    return merged((((s.kind, s.step), s.line, s.metrics) for s in parsed.steps), lambda key: f"{key[0]} {key[1]}")


def conflicts(parsed: ParsedLog) -> list[ConflictRecord]:
    """Every fact the log states twice, differently: the parser's (layout, arguments) and the
    records of one rollout, step or iteration that disagree."""
    return [*parsed.conflicts, *train_perf(parsed)[1], *_steps(parsed)[1], *_iterations(parsed)[1]]


def pretraining_only(parsed: ParsedLog) -> bool:
    """A Megatron-LM pretraining log: iteration times, and no slime training step at all."""
    return (not parsed.steps and not any(p.side == "train" for p in parsed.perf)
            and any(i.elapsed_ms is not None for i in parsed.iterations))


# -- the work of a step ---------------------------------------------------------------------------

# What one step processed, as a log states it. Two arms of one job (the same data, model and GPUs)
# did the same work whatever their CP: in the real train-only pairs of tests/data/real-logs/
# slime-train-only-h200x2, CP=1 and CP=2 agree to the token at every rollout, and the TFLOP per
# GPU of a world of one GPU (the A/A logs beside them) is twice a world of two's.
WORK = {"tokens": "tokens per step", "samples": "samples per step", "tflop_per_gpu": "TFLOP per GPU per step"}
_MEGATRON_THROUGHPUT = "throughput per GPU (TFLOP/s/GPU)"
_MEGATRON_BATCH = "global batch size"


def work(metrics: dict[str, float], cp: int) -> dict[str, float]:
    """The work of one step (keys of WORK), from what its record states.

    slime: actor_train_tok_per_s is the rollout batch's tokens over actor_train_time, and
    actor_train_tflops 3x its forward FLOPs over the world size and actor_train_time
    (slime/observability/train_metric_utils.py): times actor_train_time, they are the batch's
    tokens and each GPU's TFLOP. The probe: tokens_per_gpu_per_sec is one sequence's tokens over cp
    and step_time. Megatron-LM: the global batch size, and its throughput per GPU times the
    iteration's seconds.
    """
    def product(*factors: float | None) -> float | None:  # of positive, finite factors only
        for f in factors:
            if f is None or not stats.is_duration(f):
                return None
        return math.prod(factors)  # type: ignore[arg-type]

    facts = {
        "tokens": product(metrics.get("perf/actor_train_tok_per_s"), metrics.get("perf/actor_train_time"))
        or product(metrics.get("perf/tokens_per_gpu_per_sec"), metrics.get("perf/step_time"), cp),
        "samples": product(metrics.get(_MEGATRON_BATCH)),
        "tflop_per_gpu": product(metrics.get("perf/actor_train_tflops"), metrics.get("perf/actor_train_time"))
        or product(metrics.get(_MEGATRON_THROUGHPUT), metrics.get(ITERATION_METRIC), 1e-3),
    }
    return {fact: value for fact, value in facts.items() if value is not None}


# -- numerics -------------------------------------------------------------------------------------

# slime's step dicts name their losses `train/<…>loss` and the norm `train/grad_norm` (a critic's
# `train/critic-…`); Megatron-LM's iteration lines say `lm loss` and `grad norm` ("loss scale" is
# neither), and count the iterations whose loss was NaN or inf.
_LOSS_OR_GRAD_NORM = re.compile(r"(?:loss|grad[ _]norm)$")
_NAN_ITERATIONS = "number of nan iterations"


def nonfinite_numerics(parsed: ParsedLog) -> list[tuple[str, int, str]]:
    """(record, line, what) for every loss or grad norm the log prints as NaN or infinite: training
    broke there, whatever any timing says."""
    found = [(f"{s.kind} {s.step}", s.line, f"{key} {value}") for s in parsed.steps
             for key, value in s.metrics.items() if not math.isfinite(value) and _LOSS_OR_GRAD_NORM.search(key)]
    for i in parsed.iterations:
        found += [(f"iteration {i.iteration}", i.line, f"{key} {value}") for key, value in i.metrics.items()
                  if not math.isfinite(value) and _LOSS_OR_GRAD_NORM.search(key)]
        nan_iterations = i.metrics.get(_NAN_ITERATIONS, 0.0)
        if nan_iterations != 0:
            found.append((f"iteration {i.iteration}", i.line, f"{_NAN_ITERATIONS} {nan_iterations:g}"))
    return found


# A first step on identical inputs (the same weights, the same rollouts) differs between CP=1 and
# CP=2 by rounding only: in the real train-only pairs (tests/data/real-logs/slime-train-only-h200x2)
# the step-0 grad norm by 0.04-0.16 % and the entropy loss by < 1e-6 relative, and two CP=1 runs
# (A/A, on H100 and H200) by < 0.01 %. Over the steps of one run, whose rollouts differ as sampled
# rollouts differ between two runs, the grad norm stays within a factor of 1.6 and the entropy
# within 0.02 %. A factor of 10 between the arms' first steps is beyond any of that: a broken
# computation, deterministic runs or not.
FAR_BEYOND_NOISE = 10.0


def far_apart(baseline: float, candidate: float, floor: float) -> bool:
    """Two finite values more than FAR_BEYOND_NOISE times apart (or of opposite signs), and further
    apart than `floor` (slime's absolute tolerance: values near zero differ by little)."""
    if not (math.isfinite(baseline) and math.isfinite(candidate)) or abs(candidate - baseline) <= floor:
        return False
    small, large = sorted((abs(baseline), abs(candidate)))
    return baseline * candidate < 0 or large > FAR_BEYOND_NOISE * small


def measurements(per_rollout: dict[int, dict[str, float]], metric: str) -> tuple[list[float], list[tuple[int, float]]]:
    """The metric's durations per counted rollout, and the (rollout, value) pairs that are not durations."""
    values = [metrics[metric] for metrics in per_rollout.values() if metric in metrics]
    if stats.all_durations(values):  # the common case: every one a duration, checked at once
        return list(map(float, values)), []
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



def ranges(ids: Iterable[int]) -> str:
    """[1, 2, 3, 5] -> "1-3, 5"."""
    spans: list[list[int]] = []
    for i in sorted(ids):
        if spans and spans[-1][1] == i - 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return spans_text([(a, b) for a, b in spans])


def gaps(seen: Iterable[int], start: int, stop: int) -> list[tuple[int, int]]:
    """The (first, last) spans of start..stop-1 missing from `seen`, found from the ids seen: a
    count a log states (--num-rollout 20000000) stays a count, never a list of its ids."""
    spans, expected = [], start
    for i in sorted({i for i in seen if start <= i < stop}):
        if i > expected:
            spans.append((expected, i - 1))
        expected = i + 1
    if expected < stop:
        spans.append((expected, stop - 1))
    return spans


def spans_text(spans: Sequence[tuple[int, int]], limit: int = 12) -> str:
    """[(1, 3), (5, 5)] -> "1-3, 5"; past `limit` spans, how many more."""
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans[:limit])
    return text + (f", … ({len(spans) - limit} more)" if len(spans) > limit else "")


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
    """First common step's numerics, side by side. Only rollout 0 can match across runs.

    `within_tolerance`: both finite and close (inf beside inf is no match); `beyond_noise`: far_apart().
    """
    b_steps, c_steps = (_steps(log)[0] for log in (base, cand))
    common = sorted(key[1] for key in b_steps.keys() & c_steps.keys() if key[0] == "step")
    if not common:
        return []
    step = common[0]
    rows = []
    for metric in NUMERICS_METRICS:
        b, c = b_steps["step", step].get(metric), c_steps["step", step].get(metric)
        if not isinstance(b, (int, float)) or not isinstance(c, (int, float)):
            continue
        abs_diff = abs(c - b)
        rel_diff = abs_diff / abs(b) if b else (0.0 if c == 0 else None)
        finite = math.isfinite(b) and math.isfinite(c)
        rows.append({"baseline_arm": b_name, "candidate_arm": c_name, "step": step, "metric": metric,
                     "baseline": b, "candidate": c, "abs_diff": abs_diff, "rel_diff": rel_diff,
                     "within_tolerance": finite and math.isclose(c, b, rel_tol=t.numerics_tolerance,
                                                                 abs_tol=t.numerics_tolerance),
                     "beyond_noise": far_apart(b, c, t.numerics_tolerance)})
    return rows


@dataclass
class ArmFacts:
    """One arm's evidence, the thresholds and whose advice (`workload`), with what every check reads:
    its counted rollouts and, per timing metric, the durations kept and the (rollout, value) pairs
    that are not durations; the work of each counted step; what its log states twice, differently;
    its losses and grad norms that are not finite."""

    ev: ArmEvidence
    t: Thresholds
    workload: str
    per_rollout: dict[int, dict[str, float]]
    measured: dict[str, tuple[list[float], list[tuple[int, float]]]]
    work: dict[int, dict[str, float]]
    conflicts: list[ConflictRecord]
    nonfinite: list[tuple[str, int, str]]
    warmup: int = 0  # left out: rollouts < warmup (iteration records before it); see counted()

    @classmethod
    def of(cls, ev: ArmEvidence, t: Thresholds, workload: str) -> ArmFacts:
        parsed = ev.parsed
        per_rollout, warmup = counted(parsed, t)
        cp = parsed.layout.cp if parsed.layout else ev.cp_requested
        return cls(ev, t, workload, per_rollout, {m: measurements(per_rollout, m) for m in timing_metrics(t)},
                   {r: w for r, m in per_rollout.items() if (w := work(m, cp))}, conflicts(parsed),
                   nonfinite_numerics(parsed), warmup)

    @property
    def parsed(self) -> ParsedLog:
        return self.ev.parsed

    @property
    def samples(self) -> dict[str, list[float]]:
        return {m: kept for m, (kept, _) in self.measured.items()}
