"""verdict.md: the comment a user pastes into a GitHub issue, read by a maintainer in an 800-px column.

The first screen answers the question: the status and the story in one line, the primary ratio with
its interval and threshold, the setup in one line, the exact command, ONE per-phase table (CP=1,
CP=2, their ratio and interval, what it means), a reading of it, and for a failure its root cause
with the log lines that lead to it. A sweep opens with its response-length × CP table. Then what
failed, with fixes (each thing once); what passed, folded; the details (every comparison, the arms,
numerics, the rule, the environment, the commands), folded.

Every piece of text that can come from a log or a user goes through cpverify.report.gfm (inert: no
mention, link, image, HTML) after `scrub` (redaction sees the raw text, before any escaping). The
whole stays under GitHub's 65,536-character limit whatever the input: blocks are dropped from the
least needed up, each leaving a line that points at the bundle (fit()).
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cpverify import __version__
from cpverify.lengths import length_label
from cpverify.model import CheckStatus
from cpverify.report import story
from cpverify.report.data import finite
from cpverify.report.gfm import code, details, fenced, prose, table
from cpverify.report.plots import arm_infos
from cpverify.terminal import inert, strip_csi
from cpverify.verdict import ArmSummary, Comparison, Verdict, across, short_metric, timing_metrics, worst
from cpverify.verdict.evidence import FAR_BEYOND_NOISE

EVIDENCE_LINES = 30  # lines of a failed arm's log shown up to its root cause
LIMIT = 65_536  # GitHub's longest comment, in UTF-16 code units (what its textarea counts)
BUDGET = 60_000  # verdict.md's own share: the rest is room for the words a user adds
_EVIDENCE_LINE_BYTES = 2000  # one runaway line (a 10 MB dict) must not fill verdict.md
_TEXT = 600  # the longest single piece of prose (a check's detail, a fix): the rest is in verdict.json


def size(text: str) -> int:
    """Length as GitHub counts it (UTF-16 code units: an emoji outside the BMP counts two)."""
    return len(text.encode("utf-16-le")) // 2


@dataclass
class Block:
    """A part of verdict.md. `drop`: None for the first screen (kept whatever the size), else the order
    in which blocks go when the whole is over budget (1 first); `gone`: the line left in its place."""

    text: str
    drop: int | None = None
    gone: str = ""


def render_markdown(verdict: Verdict, *, env: dict | None = None, commands: str | None = None,
                    scrub: Callable[[str], str] | None = None, plots: Sequence[tuple[str, str]] = (),
                    plot_note: str = "", evidence: dict[str, tuple[int, list[str]]] | None = None,
                    command: str | None = None, bundle: str = "") -> str:
    """verdict.md. `scrub` redacts every piece of the verdict's own text; env and commands are
    rendered as passed (redact them with Redactor.json/Redactor first, so that a field-aware rule --
    a version string kept in env.json -- is not undone by the plain-text one). `plots`: (title, file)
    of the PNGs beside verdict.md, named for attaching (a pasted comment cannot show a local file).
    `evidence`: per failed arm, (first line number, lines) of its log up to its root cause
    (failure_lines()). `command`: the command line that made the verdict. `bundle`: the archive to
    attach, named where evidence is trimmed."""
    r = _Renderer(verdict, scrub or (lambda text: text))
    pointer = f"`{bundle}`" if bundle else "the bundle"
    blocks = [*r.first_screen(env, command, evidence or {}), *r.problems(), *r.passed(), *r.plots(plots, plot_note),
              *r.detail_blocks(env, commands)]
    return fit(blocks, pointer) + "\n"


def fit(blocks: list[Block], pointer: str = "the bundle", budget: int = BUDGET) -> str:
    """The blocks joined, under `budget`: droppable blocks go in their order, each replaced by its
    `gone` line; a first screen still too long is cut at a block boundary with a note."""
    kept = list(blocks)
    total = size("\n\n".join(b.text for b in kept))
    for block in sorted((b for b in blocks if b.drop is not None), key=lambda b: b.drop or 0):
        if total <= budget:
            break
        note = block.gone.format(pointer=pointer)
        index = kept.index(block)
        kept[index] = Block(note)
        total -= size(block.text) - size(note)
    text = "\n\n".join(b.text for b in kept if b.text)
    if size(text) > budget:  # the first screen alone: cut at a block boundary, the end said
        note = f"_The rest is cut to stay under GitHub's {LIMIT:,}-character limit: see verdict.json in {pointer}._"
        out, used = [], size(note) + 2
        for block in kept:
            if used + size(block.text) + 2 > budget:
                break
            out.append(block.text)
            used += size(block.text) + 2
        text = "\n\n".join([*out, note])
    return text


class _Renderer:
    def __init__(self, verdict: Verdict, scrub: Callable[[str], str]) -> None:
        self.v = verdict
        self.scrub = scrub

    # Every text from outside (a log, a user) goes through one of these three.
    def p(self, text: str, limit: int = _TEXT) -> str:
        text = self.scrub(inert(text))
        return prose(text if len(text) <= limit else text[: limit - 1] + "…")

    def c(self, text: str, limit: int = _TEXT) -> str:
        text = self.scrub(inert(text))
        return code(text if len(text) <= limit else text[: limit - 1] + "…")

    def label(self, name: str) -> str:
        return self.v.labels.get(name, name)

    # -- the first screen ------------------------------------------------------------------------

    def first_screen(self, env: dict | None, command: str | None, evidence: dict) -> list[Block]:
        v, t = self.v, self.v.thresholds
        lines = [f"## cpverify verdict: {v.status}", "", f"**{v.status}** — {self.p(v.summary, 1200)}"]
        primary = v.primary.metrics.get(t.primary_metric)
        ratio = story.ratio_text(primary, t.pass_ratio)
        if ratio != "–" and f"{primary.ratio:.2f}×" not in v.summary:  # type: ignore[union-attr]
            lines += ["", f"**{self.label(v.primary.candidate)} / {self.label(v.primary.baseline)} "
                          f"{short_metric(t.primary_metric)}: {ratio}** — {t.confidence:.0%} interval; PASS needs "
                          f"its upper end ≤ {t.pass_ratio:.2f}"]
        lines += ["", f"**Setup:** {self.p(story.setup_line(v, env), 2000)}"]
        rounds = story.rounds_line(v)
        if rounds:
            lines += ["", f"**Rounds:** {self.p(rounds, 2000)}"]
        if command:
            lines += ["", f"**Command:** {self.c(command, 2000)}"]
        blocks = [Block("\n".join(lines))]
        sweep = self.sweep_table()
        if sweep:
            blocks.append(Block(sweep))
        if v.ab:
            blocks.append(Block(self.ab_section(v.ab)))
        blocks += self.phases()
        blocks += self.causes(evidence)
        return blocks

    def deciding(self) -> Comparison:
        """The comparison the headline tells: the worst, the primary when tied."""
        status = worst(c.status for c in self.v.comparisons)
        return next(c for c in self.v.comparisons if c.status == status)

    def phases(self) -> list[Block]:
        comp = self.deciding()
        rows = story.phase_rows(self.v, comp)
        if not rows:
            return [Block("_No train-side timings were counted: no phase to compare._")]
        b_label, c_label = self.label(comp.baseline), self.label(comp.candidate)
        body = []
        for metric, base, cand, est in rows:
            mark, words = story.meaning(metric, est, self.v)
            name = short_metric(metric)
            ratio = story.ratio_text(est, self.v.thresholds.pass_ratio)
            if metric == self.v.thresholds.primary_metric:
                name, ratio = f"**{name}**", f"**{ratio}**" if ratio != "–" else ratio
            body.append([name, _median(base, metric), _median(cand, metric), ratio,
                         f"{mark} {words}".strip()])
        title = ""
        if len(self.v.comparisons) > 1:
            title = f"Per phase, {self.p(c_label)} against {self.p(b_label)} (the comparison that decided):\n\n"
        head = table(body, ["phase", f"{b_label} median", f"{c_label} median",
                            f"{c_label} / {b_label} ({self.v.thresholds.confidence:.0%} CI)", "means"], "lrrrl")
        said = [*story.reading(self.v, comp), *story.outliers(self.v)]
        reading = "\n\n" + self.p(" ".join(said), 2000) if said else ""
        return [Block(title + head + reading)]

    def sweep_table(self) -> str:
        """A sweep (more than one comparison): response length × CP, each cell the ratio against the
        baseline CP at that length, with its interval and mark."""
        if len(self.v.comparisons) < 2 or self.v.ab:
            return ""
        infos = arm_infos(self.v)
        t = self.v.thresholds
        cps = sorted({infos[c.candidate].cp for c in self.v.comparisons})
        rows: dict[int | None, dict] = collections.OrderedDict()
        for comp in sorted(self.v.comparisons, key=lambda c: (infos[c.baseline].seq_len or 0, infos[c.candidate].cp)):
            row = rows.setdefault(infos[comp.baseline].seq_len, {"base": comp.baseline})
            est = comp.metrics.get(t.primary_metric)
            mark, _ = story.meaning(t.primary_metric, est, self.v)
            row[infos[comp.candidate].cp] = f"{mark} {story.ratio_text(est, t.pass_ratio)}".strip()
        base_cp = infos[self.v.primary.baseline].cp
        body = []
        for seq_len, row in rows.items():
            base = self.v.pooled(row["base"])
            body.append([length_label(seq_len) if seq_len else "–", _median(base, t.primary_metric),
                         *[row.get(cp, "–") for cp in cps]])
        metric = short_metric(t.primary_metric)
        return ("**Sweep:** " + f"{metric} at CP={base_cp} and each CP's ratio to it ({t.confidence:.0%} CI; "
                f"PASS needs ≤ {t.pass_ratio:.2f})\n\n"
                + table(body, ["response length", f"CP={base_cp} median", *[f"CP={cp} / CP={base_cp}" for cp in cps]],
                        "lr" + "r" * len(cps)))

    def causes(self, evidence: dict) -> list[Block]:
        """The root cause of each failure (deduplicated across arms) with its fix and its evidence."""
        blocks = []
        fixes = {(c.name, c.arm): c.fix for c in self.v.checks}
        for cause in story.root_causes(self.v):
            where = ", ".join(f"{arm} line {line}" if line else f"{arm} (end of log)" for arm, line in cause.where)
            if cause.cls:
                head = f"**Root cause:** {code(cause.cls)} in {self.p(where)}: {self.c(cause.text, 400)}"
            else:
                head = f"**Why it failed:** {self.p(cause.why)} ({self.p(where)})"
            first_arm = cause.where[0][0]
            fix = fixes.get((f"error:{cause.cls}", first_arm)) if cause.cls else ""
            lines = [head] + ([f"**Fix:** {self.p(fix)}"] if fix else [])
            shown = evidence.get(first_arm)
            if shown:
                first, text = shown
                numbered = "\n".join(f"{'▶' if first + i == cause.where[0][1] else ' '} {first + i:>6} | {line}"
                                     for i, line in enumerate(text))
                said = (f"{first_arm}, lines {first}–{first + len(text) - 1} (▶ the root cause):" if cause.where[0][1]
                        else f"{first_arm}, the last {len(text)} lines of its log (from line {first}):")
                lines += [said, fenced(self.scrub(inert(numbered)))]
            blocks.append(Block("\n\n".join(lines[:1 + bool(fix)]), None))
            if len(lines) > 1 + bool(fix):
                blocks.append(Block("\n\n".join(lines[1 + bool(fix):]), 3,
                                    "_The evidence lines are left out to keep this comment under GitHub's limit: "
                                    "see `logs/` in {pointer}._"))
        return blocks

    # -- what failed, what passed ----------------------------------------------------------------

    def problems(self) -> list[Block]:
        said, echoes = story.problems(self.v)  # the root cause is told above with its fix
        told = any(cause.cls for cause in story.root_causes(self.v))
        if not said and not echoes:
            return []
        items = []
        for s in said:
            mark = story.MARK[s.check.meaning]
            arms = f" ({self.p(s.where())})" if s.arms else ""
            detail = s.check.detail.replace(s.check.arm, "{arm}") if s.check.arm and len(s.arms) > 1 else s.check.detail
            item = f"- {mark} {code(s.name)}{arms}: {self.p(detail)}"
            if s.check.fix:
                item += f"\n  - fix: {self.p(s.check.fix)}"
            items.append(item)
        if echoes:
            items.append(f"- also matched, reporting the root cause: {', '.join(code(e) for e in echoes)}")
        failed = sum(1 for s in said if s.check.effect)
        warned = f", and warnings ({len(said) - failed})" if len(said) > failed else ""
        title = (f"**What else failed** ({failed}){warned}:" if told and failed else
                 f"**What failed** ({failed}){warned}:" if failed else "**Warnings:**")
        return [Block(title + "\n\n" + "\n".join(items), 4,
                      "_The list of failed checks is left out to keep this comment under GitHub's limit: see "
                      "verdict.json in {pointer}._")]

    def passed(self) -> list[Block]:
        rest = story.grouped([c for c in self.v.checks if c.status in (CheckStatus.PASS, CheckStatus.SKIP)], self.v)
        if not rest:
            return []
        rows = [[f"{story.MARK[s.check.meaning]} {code(s.name)}", self.p(s.where()), self.p(s.check.detail, 300)]
                for s in rest]
        passed = sum(1 for s in rest if s.check.status == CheckStatus.PASS)
        return [Block(details(f"{passed} checks passed, {len(rest) - passed} not judged", table(rows, ["check", "arm",
                                                                                                    "detail"])), 2,
                      "_The passed checks are left out to keep this comment under GitHub's limit: see verdict.json "
                      "in {pointer}._")]

    def plots(self, plots: Sequence[tuple[str, str]], note: str) -> list[Block]:
        if note:
            return [Block(f"_{self.p(note)}_", 5)]
        if not plots:
            return []
        files = ", ".join(f"{code(file)} ({self.p(title)})" for title, file in plots)
        return [Block(f"_Plots beside this file (drag one into the comment to show it): {files}._", 5)]

    # -- the details, folded -----------------------------------------------------------------------

    def detail_blocks(self, env: dict | None, commands: str | None) -> list[Block]:
        v = self.v
        blocks = [Block(details("Every comparison and timing", self.comparisons_table() + "\n\n" + self.timings()),
                            1, "_The comparison and timing tables are left out: see verdict.json in {pointer}._"),
                  Block(details("Arms", self.arms_table()), 6, "")]
        if v.numerics:
            gate = ("gated" if v.thresholds.deterministic else  # not deterministic: only a gap beyond noise decides
                    f"the runs were not deterministic: gated only where {FAR_BEYOND_NOISE:g}× apart")
            blocks.append(Block(details(f"Numerics (first common step; {gate})", self.numerics_table()), 1,
                                "_The numerics table is left out: see verdict.json in {pointer}._"))
        blocks.append(Block(details("Decision rule", self.p(v.rule, 10_000)), 7, ""))
        if env is not None:
            blocks.append(Block(details("Environment (env.json)", fenced(json.dumps(finite(env), indent=1,
                                                                                   ensure_ascii=False), "json")),
                                0, "_The environment is in env.json in {pointer}._"))
        if commands:
            blocks.append(Block(details("Exact commands (commands.sh)", fenced(commands, "bash")), 0,
                                "_The exact commands are in commands.sh in {pointer}._"))
        blocks.append(Block(f"<sub>cpverify {__version__} · verdict schema {v.to_json()['schema_version']}</sub>"))
        return blocks

    def comparisons_table(self) -> str:
        t = self.v.thresholds
        rows = []
        for comp in self.v.comparisons:
            name = f"{self.label(comp.candidate)} / {self.label(comp.baseline)}"
            for metric in timing_metrics(t):
                est = comp.metrics.get(metric)
                if est is None:
                    continue
                mark, words = story.meaning(metric, est, self.v)
                p = "–" if est.p_value is None else f"{est.p_value:.2g}"
                rows.append([self.p(name), short_metric(metric), story.ratio_text(est, t.pass_ratio), p,
                             across.sample_size(est), f"{mark} {words}".strip()])
        if not rows:
            return "_No comparable timings._"
        return table(rows, ["comparison", "metric", f"ratio ({t.confidence:.0%} CI)", "Mann–Whitney p", "n",
                            "means"], "llrrll")

    def timings(self) -> str:
        rows = []
        arms = self.v.per_arm()  # every round's steps together
        for metric in timing_metrics(self.v.thresholds):
            row = [short_metric(metric)]
            for arm in arms:
                s = arm.metrics.get(metric)
                row.append(f"{story.seconds(s.median)} [{story.seconds(s.q1)}–{story.seconds(s.q3)}] n={s.n}"
                           if s else "–")
            if any(cell != "–" for cell in row[1:]):
                rows.append(row)
        if not rows:
            return "_No train-side perf records were counted._"
        return table(rows, ["median [IQR] n", *[self.p(a.name) for a in arms]], "l" + "r" * len(arms))

    def arms_table(self) -> str:
        rows = []
        for arm in self.v.arms:
            layout = " ".join(f"{k}={v}" for k, v in arm.layout.items() if k != "source") if arm.layout else "–"
            rows.append([self.p(arm.name), str(arm.cp_requested),
                         str(arm.cp_effective) if arm.cp_effective is not None else "unconfirmed", self.p(layout),
                         self.p(arm.outcome or "–"), str(len(arm.counted_rollouts)),
                         self.p(arm.nccl.get("version") or "–"),
                         self.p(", ".join(arm.nccl.get("transports") or []) or "–"), str(arm.lines)])
        return table(rows, ["arm", "CP asked", "CP seen", "layout", "runner", "steps", "NCCL", "transports",
                            "log lines"], "lrrllrlll")

    def numerics_table(self) -> str:
        rows = [[self.p(f"{r['candidate_arm']} vs {r['baseline_arm']}"), str(r["step"]), self.p(r["metric"]),
                 _num(r["baseline"], 6), _num(r["candidate"], 6), _num(r["abs_diff"]), _num(r["rel_diff"]),
                 "yes" if r["within_tolerance"] else "no"] for r in self.v.numerics]
        return table(rows, ["comparison", "step", "metric", "baseline", "candidate", "abs diff", "rel diff",
                            f"within {self.v.thresholds.numerics_tolerance:g}"], "llllrrrl")

    def ab_section(self, ab: dict) -> str:
        """The A/B of two slime revisions: each revision's CP overhead and their ratio, per metric."""
        base, cand, cp1 = ab["base"]["label"], ab["candidate"]["label"], ab["baseline_cp"]
        conf = f"{ab['confidence']:.0%} CI"
        rows = []
        for row in ab["rows"]:
            metric = short_metric(row["metric"])
            rows.append([f"CP={row['cp']}/CP={cp1}", f"**{metric}**" if row["metric"] == ab["metric"] else metric,
                         _ratio_cell(row["base_overhead"]), _ratio_cell(row["candidate_overhead"]),
                         _ratio_cell(row["ratio_of_ratios"]), _ratio_cell(row["baseline_cp_change"]),
                         self.p(row["conclusion"])])
        return (f"**A/B of slime revisions:** candidate {self.c(cand)} vs base {self.c(base)} — candidate CP "
                f"overhead: **{self.p(ab['conclusion'])}** — {self.p(ab['summary'])}\n\n"
                + table(rows, ["CP", "metric", f"base overhead [{conf}]", f"candidate overhead [{conf}]",
                               f"candidate / base [{conf}]", f"CP={cp1} candidate / base", "candidate overhead is"])
                + f"\n\n_Overhead = median CP=N / median CP={cp1} within one revision; candidate / base < 1 means the "
                  f"candidate's CP costs less. Intervals: {self.p(ab['method'])}._")


def _median(arm: ArmSummary, metric: str) -> str:
    s = arm.metrics.get(metric)
    return story.seconds(s.median) if s else "–"


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}g}"


def _ratio_cell(estimate: dict) -> str:
    if estimate.get("ratio") is None:
        return "–"
    ci = estimate.get("ci")
    return f"{estimate['ratio']:.2f}× [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else f"{estimate['ratio']:.2f}× [no CI]"


def failure_lines(arm: ArmSummary, count: int = EVIDENCE_LINES) -> tuple[int, list[str]] | None:
    """(number of the first line, lines) of a failed arm's log: the `count` lines up to and
    including its root-cause line, or its last `count` lines; None when the arm did not fail or its
    log cannot be read. The lines are raw: render_markdown redacts them."""
    if arm.failure is None or arm.log_path is None:
        return None
    stop = arm.failure["line"]  # 1-based; None: the end of the log
    window: collections.deque[tuple[int, str]] = collections.deque(maxlen=count)
    try:
        with Path(arm.log_path).open("rb") as log:
            for number, raw in enumerate(log, start=1):
                if stop is not None and number > stop:
                    break
                window.append((number, strip_csi(raw[:_EVIDENCE_LINE_BYTES].decode("utf-8", "replace")).rstrip()))
    except OSError:
        return None
    return (window[0][0] if window else (stop or 1)), [text for _, text in window]
