"""What `cpverify verdict` and `cpverify run` print in a terminal: the headline, the ratios, the rule in
one line, the problems and their fixes."""

from __future__ import annotations

from tabulate import tabulate

from cpverify.verdict import Verdict, short_metric, short_rule, timing_metrics


def render_summary(verdict: Verdict) -> str:
    """What `cpverify verdict` prints in a terminal: the headline, the ratios, the problems and their fixes."""
    lines = [verdict.headline, ""]
    rows = []
    for comp in verdict.comparisons:
        for metric in timing_metrics(verdict.thresholds):
            est = comp.metrics.get(metric)
            if est is not None and est.ratio is not None:
                ci = f"{est.ci[0]:.2f}–{est.ci[1]:.2f}" if est.ci else "–"
                rows.append([f"{comp.candidate}/{comp.baseline}", short_metric(metric), f"{est.ratio:.2f}", ci,
                             f"{est.n_baseline}/{est.n_candidate}"])
    if rows:
        lines += [tabulate(rows, headers=["comparison", "metric", "ratio", "CI", "n"], tablefmt="simple",
                           disable_numparse=True), ""]
    if verdict.ab:
        lines += [f"A/B: candidate CP overhead {verdict.ab['conclusion']} — {verdict.ab['summary']}", ""]
    lines += [f"rule: {short_rule(verdict.thresholds)}", ""]
    for check in verdict.checks:
        if check.status in ("fail", "warn"):  # the row names the status it forces (or that it only warns)
            where = f" [{check.arm}]" if check.arm else ""
            lines.append(f"{check.meaning.upper()} {check.name}{where}: {check.detail}")
            if check.fix:
                lines.append(f"    fix: {check.fix}")
    return "\n".join(lines).rstrip() + "\n"
