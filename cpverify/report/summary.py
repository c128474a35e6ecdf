"""What `cpverify verdict` and `cpverify run` print in a terminal: the headline, the ratios, the rule in
one line, the problems and their fixes (each said once, not once per arm), wrapped at word boundaries
to the terminal's width; and the last lines: what to paste and what to attach."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from tabulate import tabulate

from cpverify.report import story
from cpverify.terminal import width as terminal_width
from cpverify.terminal import wrap
from cpverify.verdict import Verdict, across, short_metric, short_rule, timing_metrics
from cpverify.verdict.stats import MEDIAN


def render_summary(verdict: Verdict, *, columns: int | None = None) -> str:
    """The headline, the ratios, the rule and the problems with their fixes, `columns` wide (default:
    the terminal's). The text is plain: the terminal stream makes it inert (cpverify.terminal)."""
    columns = columns or terminal_width()
    lines = [wrap(verdict.headline, columns=columns), ""]
    rows = []
    for comp in verdict.comparisons:
        for metric in timing_metrics(verdict.thresholds):
            est = comp.metrics.get(metric)
            e = story.shown(est, verdict.thresholds.pass_ratio)
            if est is not None and e is not None:
                mark, words = story.meaning(metric, est, verdict)
                ci = f"{e.ci[0]:.2f}–{e.ci[1]:.2f}" if e.ci else "–"
                by = "" if e.statistic == MEDIAN else f" ({e.statistic})"
                rows.append([f"{comp.candidate}/{comp.baseline}", short_metric(metric), f"{e.ratio:.2f}{by}", ci,
                             across.sample_size(est, short=True), words.split(":")[0].split(" (")[0]])
    if rows:
        lines += [tabulate(rows, headers=["comparison", "metric", "ratio", "CI", "n", "means"], tablefmt="simple",
                           disable_numparse=True), ""]
    rounds = story.rounds_line(verdict)
    if rounds:
        lines += [wrap(f"rounds: {rounds}", indent="    ", columns=columns), ""]
    if verdict.ab:
        lines += [wrap(f"A/B: candidate CP overhead {verdict.ab['conclusion']} — {verdict.ab['summary']}",
                       columns=columns), ""]
    for cause in story.root_causes(verdict):
        where = ", ".join(f"{arm} line {line}" if line else f"{arm} (end of log)" for arm, line in cause.where)
        if cause.cls:
            lines.append(wrap(f"root cause: {cause.cls} in {where}: {' '.join(cause.text.split())[:300]}",
                              indent="    ", columns=columns))
            fix = next((c.fix for c in verdict.checks if c.name == f"error:{cause.cls}" and c.fix), "")
            if fix:
                lines.append(wrap(fix, first="    fix: ", indent="         ", columns=columns))
    said_all, echoes = story.problems(verdict)
    if echoes:
        lines.append(wrap(f"also matched, reporting the root cause: {', '.join(echoes)}", indent="    ",
                          columns=columns))
    if lines[-1]:
        lines.append("")
    lines += [wrap(f"rule: {short_rule(verdict.thresholds)}", indent="    ", columns=columns), ""]
    for said in said_all:
        check = said.check
        where = f" [{said.where()}]" if said.arms else ""
        detail = check.detail.replace(check.arm, "{arm}") if check.arm and len(said.arms) > 1 else check.detail
        lines.append(wrap(f"{check.meaning.upper()} {check.name}{where}: {detail}", indent="    ", columns=columns))
        if check.fix:
            lines.append(wrap(check.fix, first="    fix: ", indent="         ", columns=columns))
    return "\n".join(lines).rstrip() + "\n"


def share_lines(written: Mapping[str, Path], *, columns: int | None = None) -> str:
    """The last lines a run prints: the file to paste as the comment and the ones to attach; the `gh`
    command when gh is installed (it posts the text; attachments are dragged into the comment)."""
    columns = columns or terminal_width()
    comment = written.get("verdict.md")
    if comment is None:
        return ""
    attach = [str(written[name]) for name in ("archive", "ratio.png") if name in written]
    lines = [wrap(f"share: paste {comment} as the issue comment"
                  + (f", and attach {' and '.join(attach)} (drag them into the comment box)" if attach else ""),
                  indent="    ", columns=columns)]
    if shutil.which("gh"):
        lines.append(wrap(f"gh issue comment <issue> --repo THUDM/slime --body-file {comment}", first="  with gh: ",
                          indent="    ", columns=columns))
    return "\n".join(lines)
