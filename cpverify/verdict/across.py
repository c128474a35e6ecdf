"""Ratios across rounds: what the verdict judges, and what each look of the sequential design asks.

An arm runs as one or more rounds, each a process of its own (cpverify.plan.rounds). A round is
summarised by one number per statistic over its counted steps (the median: a typical step; the
mean: what the round paid in total), and the candidate/baseline ratio of a metric is taken across
the rounds with the between-round interval of cpverify.verdict.rounds: the spread between
processes, which a single process's steps cannot show, is what a rerun meets. The result has
stats.RatioEstimate's shape, so the decision reads it as it reads any ratio: of the median's and
the mean's the worse decides (stats.RatioEstimate.against, cpverify.verdict.pair_checks.decisive).

`cpverify run` adds rounds while the primary ratio's interval straddles the threshold (`look`):
look k spends alpha / (k (k+1)) of the error rate, so the chance that ANY look's interval misses
stays at most 1 - confidence; the verdict reads the interval of the run's last look. With one
round per arm the interval is the recorded prior's alone (`PRIOR_SD`), and the verdict says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cpverify.verdict import stats
from cpverify.verdict.pair_checks import decisive, judged
from cpverify.verdict.rounds import (
    PRIOR_DF,
    PRIOR_SD,
    RoundsInterval,
    contrast_across_rounds,
    ratio_across_rounds,
    spent_alpha,
)
from cpverify.verdict.stats import MEDIAN, STATISTICS
from cpverify.verdict.terms import FAIL, INCONCLUSIVE, ArmSummary, Thresholds, Verdict, timing_metrics

METHOD = ("ratio of the arms' geometric means of per-round statistics (median and mean of each round's counted "
          "steps), each with a moderated-t interval from the between-round spread and the recorded A/A prior")
SINGLE_ROUND = (f"1 round per arm: between-round noise not measured; assumed sd {PRIOR_SD} (recorded A/A rounds of "
                "real slime)")


def round_statistic(values: Sequence[float], statistic: str) -> float | None:
    """One round's summary: the median or the mean of its counted steps (None without any)."""
    return stats.statistic_of(values, statistic) if len(values) else None


def confidence_at(t: Thresholds, look: int | None) -> float:
    """The confidence of the interval at sequential look `look` (None: a design without looks)."""
    return t.confidence if look is None else 1 - spent_alpha(1 - t.confidence, look)


@dataclass(frozen=True)
class RoundsStatistic(stats.Estimate):
    """One statistic's ratio across rounds (stats.Estimate: `ratio`, `ci`), with the rounds interval
    it comes from and each round's ratio (candidate round k over baseline round k, in run order)."""

    interval: RoundsInterval | None = None
    round_ratios: tuple[float, ...] = ()

    @classmethod
    def of(cls, statistic: str, interval: RoundsInterval, round_ratios: Sequence[float] = ()) -> RoundsStatistic:
        return cls(statistic, interval.ratio, (interval.low, interval.high), interval, tuple(round_ratios))

    @property
    def between_sd(self) -> float | None:
        return self.interval.between_sd if self.interval else None

    def to_json(self) -> dict:
        return {**super().to_json(), "round_ratios": list(self.round_ratios), "between_round_sd": self.between_sd,
                "across_rounds": self.interval.to_json() if self.interval else None}


@dataclass(frozen=True)
class RoundsEstimate(stats.RatioEstimate):
    """A metric's candidate/baseline ratios across rounds: stats.RatioEstimate's shape (one estimate
    per statistic, each a RoundsStatistic; `against` picks the one a decision uses), `rounds` the
    rounds of each arm; n_* count the steps. The Mann-Whitney p of steps does not apply (None)."""

    rounds: tuple[int, int] = (0, 0)

    @property
    def measured(self) -> bool:
        """Whether the rounds showed their own spread (an arm with two rounds or more)."""
        return any(isinstance(e, RoundsStatistic) and e.interval and e.interval.measured for e in self.estimates)

    def to_json(self) -> dict:
        return {**super().to_json(), "method": METHOD,
                "rounds": {"baseline": self.rounds[0], "candidate": self.rounds[1]}}


def sample_size(est: stats.RatioEstimate, *, short: bool = False) -> str:
    """What an estimate rests on, in words: `3 rounds each (45 steps each)`, `22 steps each`; short:
    `3/3 rounds`, `22/22` (steps)."""
    n_b, n_c = est.n_baseline, est.n_candidate
    if short:
        return f"{est.rounds[0]}/{est.rounds[1]} rounds" if isinstance(est, RoundsEstimate) else f"{n_b}/{n_c}"
    steps = f"{n_b} steps each" if n_b == n_c else f"{n_b} vs {n_c} steps"
    if not isinstance(est, RoundsEstimate):
        return steps
    r_b, r_c = est.rounds
    rounds = (f"{r_b} round{'s' if r_b != 1 else ''} each" if r_b == r_c else f"{r_b} vs {r_c} rounds")
    return f"{rounds} ({steps})"


def _pooled(rounds: Sequence[Sequence[float]], statistic: str) -> float:
    return round_statistic([v for r in rounds for v in r], statistic)  # type: ignore[return-value]


def estimate(base: Sequence[Sequence[float]], cand: Sequence[Sequence[float]], *, confidence: float,
             min_n: int = 1, statistics: Sequence[str] = STATISTICS) -> stats.RatioEstimate:
    """One metric's ratios across rounds, one per statistic: `base` and `cand` hold each round's
    counted values, in round order. A round without values is left out (its arm's checks say why); a
    round with fewer than `min_n` leaves the ratios without an interval (the prior describes rounds
    of many steps, and a round of two says little of its own process)."""
    b_rounds, c_rounds = [list(v) for v in base if v], [list(v) for v in cand if v]
    n_b, n_c = sum(map(len, b_rounds)), sum(map(len, c_rounds))
    if not b_rounds or not c_rounds:
        missing = "either arm" if not b_rounds and not c_rounds else "the baseline" if not b_rounds else "the candidate"
        return stats.RatioEstimate((), None, n_b, n_c, confidence, f"no values in {missing}")
    fewest = min(map(len, b_rounds + c_rounds))
    if fewest < min_n:
        return stats.RatioEstimate(
            tuple(stats.Estimate(s, _pooled(c_rounds, s) / _pooled(b_rounds, s), None) for s in statistics), None,
            n_b, n_c, confidence, f"too few values for an interval ({fewest} in a round; need >= {min_n} each)")
    found = []
    for statistic in statistics:
        b = [round_statistic(v, statistic) for v in b_rounds]
        c = [round_statistic(v, statistic) for v in c_rounds]
        interval = ratio_across_rounds(b, c, confidence=confidence)  # type: ignore[arg-type]
        found.append(RoundsStatistic.of(statistic, interval, [ci / bi for bi, ci in zip(b, c, strict=False)]))  # type: ignore[operator]
    note = "" if any(e.interval.measured for e in found if e.interval) else SINGLE_ROUND
    return RoundsEstimate(tuple(found), None, n_b, n_c, confidence, note, (len(b_rounds), len(c_rounds)))


def estimates(base: Sequence[ArmSummary], cand: Sequence[ArmSummary], t: Thresholds, *, confidence: float,
              ) -> dict[str, stats.RatioEstimate]:
    """Every timing metric's ratios across the rounds of two arms (each a list of round summaries):
    the primary metric's median and mean (the decision reads both), the others' medians (as
    cpverify.verdict.pair_checks reads them)."""
    found = {}
    for metric in timing_metrics(t):
        b = [arm.samples.get(metric, []) for arm in base]
        c = [arm.samples.get(metric, []) for arm in cand]
        if any(b) or any(c):
            found[metric] = estimate(b, c, confidence=confidence, min_n=t.min_counted_steps,
                                     statistics=STATISTICS if metric == t.primary_metric else (MEDIAN,))
    return found


def aa_reading(rounds: Sequence[ArmSummary], metric: str, statistic: str, confidence: float) -> dict | None:
    """An arm with two rounds or more against itself: its odd rounds against its even rounds, the
    noise floor of this host (the true ratio is 1). None with fewer than two rounds of values."""
    values = [round_statistic(arm.samples.get(metric, []), statistic) for arm in rounds]
    odd, even = [v for v in values[0::2] if v], [v for v in values[1::2] if v]
    if not odd or not even:
        return None
    interval = ratio_across_rounds(odd, even, confidence=confidence)
    return {"arm": rounds[0].planned, "metric": metric, "statistic": statistic, "ratio": interval.ratio,
            "ci": [interval.low, interval.high], "rounds": {"odd": len(odd), "even": len(even)},
            "covers_1": interval.low <= 1.0 <= interval.high}


def section(groups: Mapping[str, Sequence[ArmSummary]], comparisons: Sequence[tuple[str, str]],
            primary: Mapping[tuple[str, str], stats.RatioEstimate | None], t: Thresholds, look: int | None) -> dict:
    """verdict.json's `rounds`: rounds per arm, the look, each comparison's round ratios and spread (of
    the statistic its decision uses: pair_checks.decisive), the A/A readings (of the primary
    comparison's deciding statistic), and what one round per arm cannot show."""
    rows, first = [], None
    for pair in comparisons:
        est = primary.get(pair)
        row: dict = {"baseline": pair[0], "candidate": pair[1], "metric": t.primary_metric}
        chosen = decisive(est, t)
        if isinstance(est, RoundsEstimate) and isinstance(chosen, RoundsStatistic):
            first = first or chosen
            row.update(statistic=chosen.statistic, ratio=chosen.ratio, ci=list(chosen.ci) if chosen.ci else None,
                       round_ratios=list(chosen.round_ratios), between_round_sd=chosen.between_sd,
                       measured=est.measured)
        rows.append(row)
    statistic = first.statistic if first else MEDIAN
    compared = dict.fromkeys(name for pair in comparisons for name in pair)
    aa = [reading for name in compared if len(groups.get(name, ())) >= 2
          and (reading := aa_reading(groups[name], t.primary_metric, statistic, t.confidence))]
    per_arm = {name: len(groups.get(name, ())) for name in compared}
    single = bool(per_arm) and max(per_arm.values()) == 1
    return {"per_arm": per_arm, "look": look, "confidence": confidence_at(t, look), "method": METHOD,
            "prior": {"sd": PRIOR_SD, "df": PRIOR_DF}, "measured": not single,
            "note": SINGLE_ROUND if single else "", "comparisons": rows, "aa": aa}


def look_of(verdict: Verdict) -> dict:
    """A look of the sequential design, read off the verdict on the rounds so far (at the look's
    confidence): `failed`, what decides the verdict but the speed (a crash, a log cut short, a CP that
    did not take effect, another job: more rounds would not change it), in words, or ""; `decided`,
    the speed intervals are clear. Every comparison's interval (of the statistic that decides it,
    pair_checks.decisive) clear of the threshold, or one above it (a FAIL decides the run whatever the
    others show); an A/B asks each revision's comparison to be clear and its ratio of ratios clear of 1
    (CP's cost changed, either way), so a change the rounds cannot tell from none keeps them going to
    the budget."""
    t = verdict.thresholds
    failed = next((c for c in verdict.checks if c.effect and not c.name.startswith("speed:")), None)
    found = {}
    for comp in verdict.comparisons:
        chosen = decisive(comp.metrics.get(t.primary_metric), t)
        found[comp.baseline, comp.candidate] = INCONCLUSIVE if chosen is None else judged(chosen, t)
    statuses = list(found.values())
    if verdict.ab:
        rors = [row["ratio_of_ratios"] for row in verdict.ab["rows"] if row["metric"] == t.primary_metric]
        decided = INCONCLUSIVE not in statuses and all(r["ci"] is not None and not r["ci"][0] <= 1.0 <= r["ci"][1]
                                                       for r in rors)
    else:
        decided = bool(statuses) and (FAIL in statuses or INCONCLUSIVE not in statuses)
    said = "" if failed is None else failed.brief or (f"{failed.arm}: " if failed.arm else "") + failed.detail
    return {"decided": decided, "failed": said,
            "confidence": verdict.rounds.get("confidence", t.confidence),
            "comparisons": [{"baseline": b, "candidate": c, "status": status} for (b, c), status in found.items()],
            **({"ab": verdict.ab["conclusion"]} if verdict.ab else {})}


def least_changed(est: stats.RatioEstimate) -> stats.Estimate | None:
    """Of a ratio of ratios' statistics (an A/B: did CP's cost change?), the one that says less: the one
    whose interval holds 1 (no change), else the one whose interval comes nearer to it. None without
    an interval."""

    def says(e: stats.Estimate) -> tuple[bool, float]:
        low, high = e.ci  # type: ignore[misc]
        return not low <= 1.0 <= high, min(abs(math.log(low)), abs(math.log(high)))

    return min((e for e in est.estimates if e.ci), key=says, default=None)


def ratio_of_ratios(arms: Sequence[Sequence[Sequence[float]]], *, confidence: float,
                    min_n: int = 1) -> stats.RatioEstimate:
    """An A/B's (candidate CP=N / candidate CP=1) / (base CP=N / base CP=1) across rounds, the median's
    and the mean's: `arms` holds the four arms' rounds (base CP=1, base CP=N, candidate CP=1,
    candidate CP=N), each a list of rounds' counted values; the four arms' rounds are independent
    processes. Its conclusion reads least_changed(). A round with fewer than `min_n` values leaves it
    without an interval (as estimate())."""
    kept = [[v for v in arm if v] for arm in arms]
    counts = [sum(map(len, arm)) for arm in kept]
    if not all(kept):
        return stats.RatioEstimate((), None, counts[0], counts[-1], confidence,
                                   "no values in " + ", ".join(str(i) for i, a in enumerate(kept) if not a))
    fewest = min(len(v) for arm in kept for v in arm)
    if fewest < min_n:
        def pooled(s: str) -> float:
            b1, bn, c1, cn = (_pooled(arm, s) for arm in kept)
            return (cn / c1) / (bn / b1)

        return stats.RatioEstimate(tuple(stats.Estimate(s, pooled(s), None) for s in STATISTICS), None, counts[0],
                                   counts[-1], confidence,
                                   f"too few values for an interval ({fewest} in a round; need >= {min_n} each)")
    found = []
    for statistic in STATISTICS:
        stat = [[round_statistic(v, statistic) for v in arm] for arm in kept]
        found.append(RoundsStatistic.of(statistic, contrast_across_rounds(
            list(zip(stat, (+1, -1, -1, +1), strict=True)), confidence=confidence)))  # type: ignore[arg-type]
    note = "" if any(e.interval.measured for e in found if e.interval) else SINGLE_ROUND
    return RoundsEstimate(tuple(found), None, counts[0], counts[-1], confidence, note, (len(kept[0]), len(kept[-1])))
