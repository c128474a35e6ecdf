"""The statistics of an A/B of two slime revisions: is the candidate's CP overhead smaller than the base's?

The question a CP performance patch (slime PR #1102, "Optimize CP loss communication")
has to answer: with everything else the same, does CP=2 cost less against CP=1 on the
candidate revision than on the base? So both revisions run at CP=1 and CP=2 on the same
GPUs (4 arms: base-cp1, base-cp2, cand-cp1, cand-cp2; more with `--cp 1,2,4`), each
revision's overhead is the ratio of medians cpN/cp1, and the answer is the ratio of those
ratios, candidate/base, with a percentile-bootstrap interval that resamples all four arms
independently (the same method and seed as cpverify.verdict.stats uses for one ratio):

    < 1 with the whole interval below 1  ->  the candidate's CP overhead is smaller
    > 1 with the whole interval above 1  ->  larger
    an interval that contains 1          ->  no clear difference at this sample size

The revisions come from cpverify.revisions (two git refs of one checkout, or two checkouts);
the plan that runs them, and which arm is which, from cpverify.plan.ab.
"""

from __future__ import annotations

from collections.abc import Sequence

from cpverify.plan.ab import Design
from cpverify.verdict import stats
from cpverify.verdict.model import Verdict, short_metric, timing_metrics


def bootstrap_ratio_of_ratios_ci(base_1: Sequence[float], base_n: Sequence[float], cand_1: Sequence[float],
                                 cand_n: Sequence[float], *, confidence: float = 0.95,
                                 resamples: int = stats.DEFAULT_RESAMPLES,
                                 seed: int = stats.DEFAULT_SEED) -> tuple[float, float]:
    """Percentile-bootstrap interval of (med(cand_n)/med(cand_1)) / (med(base_n)/med(base_1)).

    Each of the four samples is resampled independently (they are four separate runs); fewer
    values in one than an interval needs (stats.min_sample) is a ValueError.
    """
    samples = (base_1, base_n, cand_1, cand_n)
    if any(not s for s in samples):
        raise ValueError("the ratio of ratios needs values in all four arms")
    stats.check_samples(confidence, *samples)
    import numpy as np  # not at the top: `cpverify --help` imports this module (stats says why)

    rng = np.random.default_rng(seed)
    b1, bn, c1, cn = (stats.bootstrap(s, stats.MEDIAN, resamples=resamples, rng=rng) for s in samples)
    return stats.percentile_interval((cn / c1) / (bn / b1), confidence)


SMALLER, LARGER, UNCLEAR, UNKNOWN = "smaller", "larger", "no clear difference", "unknown"


def _estimate(value: float | None, ci: tuple[float, float] | None, note: str = "") -> dict:
    return {"ratio": value, "ci": list(ci) if ci else None, "note": note}


def _row(verdict: Verdict, d: Design, cp: int, metric: str) -> dict:
    t = verdict.thresholds
    arms = {a.name: a for a in verdict.arms}
    b1, bn = arms[d.base[d.baseline_cp]].samples.get(metric, []), arms[d.base[cp]].samples.get(metric, [])
    c1, cn = arms[d.candidate[d.baseline_cp]].samples.get(metric, []), arms[d.candidate[cp]].samples.get(metric, [])

    def compare(baseline: list[float], candidate: list[float]) -> stats.RatioEstimate:
        return stats.compare(baseline, candidate, min_n=t.min_counted_steps, confidence=t.confidence,
                             resamples=t.resamples, seed=t.seed, statistics=(stats.MEDIAN,))

    base_overhead = compare(b1, bn)
    cand_overhead = compare(c1, cn)
    cp1_change = compare(b1, c1)  # does the candidate change the CP=1 baseline itself?
    row = {"cp": cp, "metric": metric, "base_overhead": base_overhead.to_json(),
           "candidate_overhead": cand_overhead.to_json(), "baseline_cp_change": cp1_change.to_json()}
    if base_overhead.ratio is None or cand_overhead.ratio is None or base_overhead.ratio <= 0:
        note = base_overhead.note or cand_overhead.note or "no overhead ratio"
        row.update(ratio_of_ratios=_estimate(None, None, note), conclusion=UNKNOWN)
        return row
    value = cand_overhead.ratio / base_overhead.ratio
    if min(len(s) for s in (b1, bn, c1, cn)) < t.min_counted_steps:
        row.update(ratio_of_ratios=_estimate(value, None, f"too few counted steps for an interval (need >= "
                                                          f"{t.min_counted_steps} per arm)"), conclusion=UNKNOWN)
        return row
    ci = bootstrap_ratio_of_ratios_ci(b1, bn, c1, cn, confidence=t.confidence, resamples=t.resamples, seed=t.seed)
    conclusion = SMALLER if ci[1] < 1 else LARGER if ci[0] > 1 else UNCLEAR
    row.update(ratio_of_ratios=_estimate(value, ci), conclusion=conclusion)
    return row


def analyze(verdict: Verdict, d: Design) -> dict:
    """The `ab` section of verdict.json: per candidate CP and timing metric, both overheads and their ratio.

    The primary metric's rows decide `conclusion`; the other timings show where the change lands.
    """
    t = verdict.thresholds
    cps = [cp for cp in sorted(d.base) if cp != d.baseline_cp]
    rows = []
    for cp in cps:
        for metric in timing_metrics(t):
            if any(arm.samples.get(metric) for arm in verdict.arms):
                rows.append(_row(verdict, d, cp, metric))
    primary = [r for r in rows if r["metric"] == t.primary_metric]
    return {
        "base": {"label": d.base_label, "arms": {str(cp): name for cp, name in sorted(d.base.items())}},
        "candidate": {"label": d.candidate_label, "arms": {str(cp): name for cp, name in sorted(d.candidate.items())}},
        "baseline_cp": d.baseline_cp,
        "metric": t.primary_metric,
        "confidence": t.confidence,
        "method": ("ratio of the candidate's to the base's CP overhead, each overhead the ratio of medians "
                   "cpN/cp1; percentile bootstrap resampling the four arms independently"),
        "conclusion": _overall(primary),
        "summary": summary_line(primary, d, t.confidence, short_metric(t.primary_metric)),
        "rows": rows,
    }


def _overall(primary_rows: list[dict]) -> str:
    found = {r["conclusion"] for r in primary_rows}
    if not found or UNKNOWN in found:
        return UNKNOWN
    return found.pop() if len(found) == 1 else UNCLEAR


def _fmt(estimate: dict, confidence: float) -> str:
    if estimate.get("ratio") is None:
        return "–"
    ci = estimate.get("ci")
    return f"{estimate['ratio']:.2f}×" + (f" ({confidence:.0%} CI {ci[0]:.2f}–{ci[1]:.2f})" if ci else " (no CI)")


def summary_line(primary_rows: list[dict], d: Design, confidence: float, metric: str) -> str:
    """One sentence per candidate CP, e.g. for the headline of verdict.md."""
    parts = []
    for r in primary_rows:
        cp = f"CP={r['cp']}/CP={d.baseline_cp}"
        verdict_word = {SMALLER: "smaller", LARGER: "LARGER", UNCLEAR: "no clear difference",
                        UNKNOWN: "undetermined"}[r["conclusion"]]
        parts.append(f"{metric} overhead {cp}: candidate {d.candidate_label} {_fmt(r['candidate_overhead'], confidence)}"
                     f" vs base {d.base_label} {_fmt(r['base_overhead'], confidence)}; candidate/base "
                     f"{_fmt(r['ratio_of_ratios'], confidence)} → {verdict_word}")
    return "; ".join(parts) if parts else "no comparable timings"
