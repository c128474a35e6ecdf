"""verdict.md: GitHub-flavoured markdown a user pastes into an issue; the headline, the timings, the
comparisons, the arms, the checks with their fixes, the plots, the numerics, the failed arms' evidence
(the lines of their logs before the failure), the rule, the environment and the exact commands."""

from __future__ import annotations

import collections
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tabulate import tabulate

from cpverify import __version__
from cpverify.parse import strip_ansi
from cpverify.report.data import finite
from cpverify.verdict import ArmSummary, Verdict, short_metric, timing_metrics

# A check's row says what it means for the verdict: the status it forces, or that it decides nothing.
_MEANING_MARK = {"FAIL": "❌ FAIL", "INCONCLUSIVE": "❔ INCONCLUSIVE", "BLOCKED": "⛔ BLOCKED", "warning": "⚠️ warning",
                 "pass": "✅ pass", "not judged": "➖ not judged"}
EVIDENCE_LINES = 30  # lines of a failed arm's log shown before its failure



def _cell(value: Any) -> str:
    """One table cell: a pipe or a newline would break a GitHub table row."""
    text = "" if value is None else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def _table(rows: list[list[Any]], headers: list[str]) -> str:
    # disable_numparse: cells are pre-formatted strings; tabulate must not re-round them.
    return tabulate([[_cell(c) for c in row] for row in rows], headers=[_cell(h) for h in headers],
                    tablefmt="github", disable_numparse=True)


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.{digits}g}"


def _seconds(value: float) -> str:
    """Durations at a precision a reader can compare: 1756, 14.2, 1.02, 0.113."""
    magnitude = abs(value)
    decimals = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 1 else 3
    return f"{value:.{decimals}f}"


def _fenced(text: str, lang: str = "text") -> str:
    """A code block whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def _details(summary: str, body: str) -> str:
    # The blank lines let GitHub render markdown inside <details>.
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def _timings_table(verdict: Verdict) -> str:
    headers = ["metric"] + [f"{verdict.labels.get(a.name, a.name)} ({a.name})" if verdict.labels.get(a.name) != a.name
                            else a.name for a in verdict.arms]
    rows = []
    for metric in timing_metrics(verdict.thresholds):
        row = [short_metric(metric)]
        for arm in verdict.arms:
            s = arm.metrics.get(metric)
            row.append(f"{_seconds(s.median)} s [IQR {_seconds(s.q1)}–{_seconds(s.q3)}] n={s.n}" if s else "–")
        if any(cell != "–" for cell in row[1:]):
            rows.append(row)
    return _table(rows, headers) if rows else "_No train-side perf records were counted._"


def _comparisons_table(verdict: Verdict) -> str:
    conf = f"{verdict.thresholds.confidence:.0%} CI"
    rows = []
    for comp in verdict.comparisons:
        name = f"{verdict.labels[comp.candidate]} / {verdict.labels[comp.baseline]}"
        for metric in timing_metrics(verdict.thresholds):
            est = comp.metrics.get(metric)
            if est is None:
                continue
            ci = f"{est.ci[0]:.2f}–{est.ci[1]:.2f}" if est.ci else "–"
            primary = metric == verdict.thresholds.primary_metric
            rows.append([name, f"**{short_metric(metric)}**" if primary else short_metric(metric),
                         f"{est.ratio:.2f}×" if est.ratio is not None else "–", ci, _num(est.p_value, 2),
                         f"{est.n_baseline} / {est.n_candidate}", comp.status if primary else ""])
    if not rows:
        return "_No comparable timings._"
    return _table(rows, ["comparison", "metric", "ratio", conf, "Mann–Whitney p", "n (base / cand)", "status"])


def _arms_table(verdict: Verdict) -> str:
    rows = []
    for arm in verdict.arms:
        layout = " ".join(f"{k}={v}" for k, v in arm.layout.items()) if arm.layout else "–"
        rows.append([arm.name, arm.cp_requested, arm.cp_effective if arm.cp_effective is not None else "unconfirmed",
                     layout, arm.outcome or "–", len(arm.counted_rollouts), arm.nccl.get("version") or "–",
                     ", ".join(arm.nccl.get("transports") or []) or "–", arm.lines])
    return _table(rows, ["arm", "CP requested", "CP effective", "layout", "runner", "counted steps", "NCCL",
                         "transports", "log lines"])


def _checks_table(verdict: Verdict) -> str:
    order = {"FAIL": 0, "BLOCKED": 1, "INCONCLUSIVE": 2, "warning": 3, "pass": 4, "not judged": 5}
    checks = sorted(verdict.checks, key=lambda c: order[c.meaning])  # stable: what decided first
    rows = [[_MEANING_MARK[c.meaning], c.name, c.arm or "", c.detail, c.fix] for c in checks]
    return _table(rows, ["means", "check", "arm", "detail", "fix"])


def _numerics_table(verdict: Verdict) -> str:
    rows = [[f"{r['candidate_arm']} vs {r['baseline_arm']}", r["step"], r["metric"], _num(r["baseline"], 6),
             _num(r["candidate"], 6), _num(r["abs_diff"]), _num(r["rel_diff"]),
             "yes" if r["within_tolerance"] else "no"] for r in verdict.numerics]
    return _table(rows, ["comparison", "step", "metric", "baseline", "candidate", "abs diff", "rel diff",
                         f"within {verdict.thresholds.numerics_tolerance:g}"])


def _ratio_cell(estimate: dict) -> str:
    if estimate.get("ratio") is None:
        return "–"
    ci = estimate.get("ci")
    return f"{estimate['ratio']:.2f}× [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else f"{estimate['ratio']:.2f}× [no CI]"


def _ab_section(ab: dict) -> list[str]:
    """The A/B of two slime revisions: each revision's CP overhead and their ratio, per metric."""
    base, cand, cp1 = ab["base"]["label"], ab["candidate"]["label"], ab["baseline_cp"]
    conf = f"{ab['confidence']:.0%} CI"
    rows = []
    for row in ab["rows"]:
        primary = row["metric"] == ab["metric"]
        metric = short_metric(row["metric"])
        rows.append([f"CP={row['cp']}/CP={cp1}", f"**{metric}**" if primary else metric,
                     _ratio_cell(row["base_overhead"]), _ratio_cell(row["candidate_overhead"]),
                     _ratio_cell(row["ratio_of_ratios"]), _ratio_cell(row["baseline_cp_change"]),
                     row["conclusion"]])
    table = _table(rows, ["CP", "metric", f"base overhead [{conf}]", f"candidate overhead [{conf}]",
                          f"candidate / base [{conf}]", f"CP={cp1} candidate / base", "candidate overhead is"])
    return [f"### A/B of slime revisions: candidate `{cand}` vs base `{base}`", "",
            f"**Candidate CP overhead: {ab['conclusion']}** — {ab['summary']}", "", table, "",
            f"_Overhead = median CP=N / median CP={cp1} within one revision; candidate / base < 1 means the "
            f"candidate's CP costs less. Intervals: {ab['method']}._", ""]


def render_markdown(verdict: Verdict, *, env: dict | None = None, commands: str | None = None,
                    scrub: Callable[[str], str] | None = None, plots: list[tuple[str, str]] | None = None,
                    plot_note: str = "", evidence: dict[str, tuple[int, list[str]]] | None = None) -> str:
    """verdict.md. `scrub`, when given, redacts the verdict's own text; env and commands are
    rendered as passed (redact them with redact_json/redact_text first, so that a field-aware
    rule -- a version string kept in env.json -- is not undone by the plain-text one here).
    `plots`: (title, file name) of the PNGs written next to verdict.md, linked in a Plots section.
    `evidence`: per failed arm, (first line number, lines) of its log before the failure
    (failure_lines()); they are redacted with the rest by `scrub`."""
    parts = [f"## cpverify verdict: {verdict.status}", "", f"**{verdict.status}** — {verdict.summary}", ""]
    if verdict.ab:
        parts += _ab_section(verdict.ab)
    parts += [f"### Timings per arm (median over rollouts ≥ {verdict.thresholds.warmup})", "", _timings_table(verdict),
              "", "### Comparisons", "", _comparisons_table(verdict), "", "### Arms", "", _arms_table(verdict), "",
              "### Checks", "", _checks_table(verdict), ""]
    if plots or plot_note:
        parts += ["### Plots", ""]
        parts += [f"![{title}]({file})" for title, file in plots or []] if plots else [f"_{plot_note}_"]
        parts.append("")
    if verdict.numerics:
        gate = "gated" if verdict.thresholds.deterministic else "reported only; the runs were not deterministic"
        parts += [f"### Numerics (first common step; {gate})", "", _numerics_table(verdict), ""]
    for arm in verdict.arms:
        block = _evidence(verdict, arm.name, (evidence or {}).get(arm.name))
        if block:
            parts += [block, ""]
    parts += [_details("Decision rule", verdict.rule), ""]
    if scrub is not None:
        parts = [scrub("\n".join(parts))]
    if env is not None:
        parts += [_details("Environment", _fenced(json.dumps(finite(env), indent=2, ensure_ascii=False), "json")), ""]
    if commands:
        parts += [_details("Exact commands", _fenced(commands, "bash")), ""]
    parts.append(f"<sub>cpverify {__version__} · verdict schema {verdict.to_json()['schema_version']}</sub>")
    return _text_not_html("\n".join(parts)) + "\n"


_FENCE = re.compile(r"^(`{3,})")
_OWN_HTML_LINE = re.compile(r"^(?:<details><summary>[^<>]*</summary>|</details>|<sub>[^<>]*</sub>)$")


def _text_not_html(markdown: str) -> str:
    """Outside code fences, `<` and `>` from a log line (`</details>`, `<img src=...>`) or from a
    redaction placeholder (`<host>`, which GitHub would drop as an unknown tag) must show as text;
    only this module's own <details>/<sub> lines stay HTML."""
    out, fence = [], None
    for line in markdown.split("\n"):
        opening = _FENCE.match(line)
        if fence is not None:
            fence = None if line.strip() == fence else fence
        elif opening:
            fence = opening.group(1)
        elif not _OWN_HTML_LINE.match(line):
            line = line.replace("<", "&lt;").replace(">", "&gt;")
        out.append(line)
    return "\n".join(out)


def failure_lines(arm: ArmSummary, count: int = EVIDENCE_LINES) -> tuple[int, list[str]] | None:
    """(number of the first line, lines) of a failed arm's log: the `count` lines before its
    first fatal error line, or its last `count` lines; None when the arm did not fail or its
    log cannot be read. The lines are raw: render_markdown's scrub redacts them."""
    if arm.failure is None or arm.log_path is None:
        return None
    stop = arm.failure["line"]  # 1-based; None: the end of the log
    window: collections.deque[tuple[int, str]] = collections.deque(maxlen=count)
    try:
        with Path(arm.log_path).open("rb") as log:
            for number, raw in enumerate(log, start=1):
                if stop is not None and number >= stop:
                    break
                window.append((number, strip_ansi(raw[:_EVIDENCE_LINE_BYTES].decode("utf-8", "replace")).rstrip()))
    except OSError:
        return None
    return (window[0][0] if window else (stop or 1)), [text for _, text in window]


_EVIDENCE_LINE_BYTES = 2000  # one runaway line (a 10 MB dict) must not fill verdict.md


def _evidence(verdict: Verdict, name: str, lines: tuple[int, list[str]] | None) -> str:
    """A failed arm's <details>: why, the matched error line, and the lines before the failure;
    or, for an arm that did not fail, the error lines it printed (warnings)."""
    arm = next(a for a in verdict.arms if a.name == name)
    errors = [e for e in verdict.errors if e["arm"] == name]
    if arm.failure is None and not errors:
        return ""
    body = []
    if arm.failure is not None:
        body.append(f"Why: {arm.failure['why']}")
        if arm.failure["line"] is not None:
            body.append(f"Matched error line {arm.failure['line']} (`{arm.failure['class']}`):\n\n"
                        f"{_fenced(arm.failure['text'])}")
    others = [e for e in errors if arm.failure is None or e["line"] != arm.failure["line"]]
    if others:
        body.append("Other error lines (first of each class):\n\n" + "\n".join(
            f"- line {e['line']} `{e['class']}`{'' if e['fatal'] else ' (warning only)'}: "
            f"`{' '.join(e['text'].split())[:300]}`" for e in others))
    if lines is not None:
        first, text = lines
        where = (f"before line {arm.failure['line']}" if arm.failure and arm.failure["line"] is not None
                 else "at the end of the log")
        body.append(f"The {len(text)} lines {where} (from line {first}):\n\n{_fenced(chr(10).join(text) or '(empty)')}"
                    if text else f"No lines {where}.")
    title = (f"Evidence: {name} failed" + (f" at line {arm.failure['line']} ({arm.failure['class']})"
                                           if arm.failure["line"] is not None else "")
             if arm.failure is not None else f"Error lines in {name} ({len(errors)}, warnings only)")
    return _details(title, "\n\n".join(body))
