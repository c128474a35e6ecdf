"""The statistics of an A/B of two slime revisions: is the candidate's CP overhead smaller than the base's?

The question a CP performance patch (slime PR #1102, "Optimize CP loss communication")
has to answer: with everything else the same, does CP=2 cost less against CP=1 on the
candidate revision than on the base? So both revisions run at CP=1 and CP=2 on the same
GPUs (4 arms: base-cp1, base-cp2, cand-cp1, cand-cp2; more with `--cp 1,2,4`), each as
rounds (cpverify.plan.rounds), each revision's overhead is its ratio cpN/cp1 across rounds,
and the answer is the ratio of those ratios, candidate/base, with the between-round interval
of the four arms' rounds (cpverify.verdict.across.ratio_of_ratios; the same machinery as one
ratio, cpverify.verdict.rounds.contrast_across_rounds):

    < 1 with the whole interval below 1  ->  the candidate's CP overhead is smaller
    > 1 with the whole interval above 1  ->  larger
    an interval that contains 1          ->  no clear difference at this sample size

A change that costs the same at every CP (a slower tokenizer, an extra copy at every step)
moves both of a revision's arms alike: its ratio of ratios stays at 1, and is not reported
as a change of CP's cost (the CP=1 change row shows it instead).

The revisions come from cpverify.revisions (two git refs of one checkout, or two checkouts);
the plan that runs them, and which arm is which, from cpverify.plan.ab.
"""

from __future__ import annotations

from cpverify.plan.ab import Design
from cpverify.verdict import across, stats
from cpverify.verdict.terms import Verdict, short_metric, timing_metrics

SMALLER, LARGER, UNCLEAR, UNKNOWN = "smaller", "larger", "no clear difference", "unknown"


def _estimate(value: float | None, ci: tuple[float, float] | None, note: str = "",
              est: stats.RatioEstimate | None = None) -> dict:
    return {**(est.to_json() if est is not None else {}), "ratio": value, "ci": list(ci) if ci else None, "note": note}


def _row(verdict: Verdict, d: Design, cp: int, metric: str) -> dict:
    t = verdict.thresholds
    confidence = verdict.rounds.get("confidence", t.confidence)

    def rounds(name: str) -> list[list[float]]:
        return [arm.samples.get(metric, []) for arm in verdict.rounds_of(name)]

    b1, bn = rounds(d.base[d.baseline_cp]), rounds(d.base[cp])
    c1, cn = rounds(d.candidate[d.baseline_cp]), rounds(d.candidate[cp])

    def compare(baseline: list[list[float]], candidate: list[list[float]]) -> stats.RatioEstimate:
        return across.estimate(baseline, candidate, confidence=confidence, min_n=t.min_counted_steps,
                               statistics=(stats.MEDIAN,))

    base_overhead = compare(b1, bn)
    cand_overhead = compare(c1, cn)
    cp1_change = compare(b1, c1)  # does the candidate change the CP=1 baseline itself?
    ror = across.ratio_of_ratios([b1, bn, c1, cn], confidence=confidence, min_n=t.min_counted_steps)
    said = across.least_changed(ror)  # of the median's and the mean's, the one that says less
    row = {"cp": cp, "metric": metric, "base_overhead": base_overhead.to_json(),
           "candidate_overhead": cand_overhead.to_json(), "baseline_cp_change": cp1_change.to_json(),
           "ratio_of_ratios": _estimate(said.ratio if said else ror.ratio, said.ci if said else None, ror.note, ror),
           "decided_by": said.to_json() if said else None}
    if said is None or said.ci is None:
        row["conclusion"] = UNKNOWN
    else:
        row["conclusion"] = SMALLER if said.ci[1] < 1 else LARGER if said.ci[0] > 1 else UNCLEAR
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
        "method": ("ratio of the candidate's to the base's CP overhead, each overhead the ratio cpN/cp1 across "
                   "rounds; the interval from the four arms' rounds (between-round spread pooled, moderated by the "
                   "recorded A/A prior)"),
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
