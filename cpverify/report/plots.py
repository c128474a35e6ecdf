"""Plots written next to verdict.md (PNG). A pasted comment cannot show a local file, so verdict.md
names them and the terminal says which to attach: ratio.png is the one made for that.

  ratio.png    the question at a glance: per phase, the larger CP's time over the smaller's with its
               interval as whiskers, the threshold and the ideal 1.0 drawn, each row labelled with
               both medians (a sweep: one row per comparison, the primary metric)
  steps.png    the primary metric and perf/step_time per counted rollout, one line per arm
  phases.png   per phase (log_probs / ref_log_probs / actor_train), the arms' medians side by side,
               IQR as error bars: CP=1 against CP=2 within a phase
  cp.png       sweeps: median time vs CP, one line per sequence length (and revision), each
               with its ideal t(smallest CP) x smallest CP / CP: perfect splitting of the work
  seq.png      sweeps: median time vs sequence length, one line per CP

matplotlib's object API on the Agg canvas: no pyplot, so no global backend or state, and it
works headless and inside other programs. matplotlib is imported only here and only when
plotting; without it `render()` returns no images and a note that the report prints. Each PNG is
laid out once and drawn once (`png()`); only a figure whose texts do not fit it is drawn again.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cpverify.lengths import length_label
from cpverify.verdict import Verdict, short_metric, worst

PHASES = ("perf/log_probs_time", "perf/ref_log_probs_time", "perf/actor_train_time")
STEP_TIME = "perf/step_time"
MISSING_NOTE = "Plots skipped: matplotlib is not installed (`pip install matplotlib`, or `pip install 'cpverify[plot]'`)."
_DOTTED_POINTS = 300  # steps.png: rollouts per line drawn with a dot each (a few pixels apart at most)


@dataclass(frozen=True)
class ArmInfo:
    """What an arm varied: its CP, its sequence length (probe sweeps), its slime revision (A/B)."""

    name: str
    cp: int
    seq_len: int | None = None
    revision: str | None = None


@dataclass
class Plot:
    file: str  # file name next to verdict.md
    title: str  # alt text and caption in verdict.md
    figure: Any  # the matplotlib Figure (tests inspect it)


Rendered = tuple[list[tuple[Plot, bytes]], str]  # ([(plot, PNG bytes)], note): render()'s answer


def arm_infos(verdict: Verdict) -> dict[str, ArmInfo]:
    """Per planned arm, what it varied, as the verdict's summaries carry it from the plan's arms
    (`cpverify verdict`: from its options and the logs)."""
    return {s.name: ArmInfo(s.name, s.cp_requested, s.seq_len, s.slime_ref or s.role) for s in verdict.per_arm()}


def _new_figure(width: float, height: float, cols: int = 1):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)  # Agg explicitly: PNG without a display, whatever the default backend
    axes = [fig.add_subplot(1, cols, i + 1) for i in range(cols)]
    return fig, axes


def _label(verdict: Verdict, name: str) -> str:
    label = verdict.labels.get(name, name)
    return label if label == name else f"{label} ({name})"


def _y_scale(ax, values: Sequence[float]) -> None:
    """Linear from zero (gaps read as ratios), unless the values span more than 20x (a sequence-length
    sweep): then logarithmic, or the short sequences would lie flat on the axis."""
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 20:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)


def _legend(ax, entries: int) -> None:
    # many arms: outside the plot, to the right, so no line hides behind it (png() keeps it in the image)
    if entries > 5:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(fontsize=7)


def _ticks(axis, positions: Sequence[float], labels: Sequence[str]) -> None:
    """Ticks at `positions` named `labels`. A tick's label is written from its axis's formatter at
    every draw: a FixedFormatter holds them where scrub_texts redacts them (Axis.set_ticks(ticks,
    labels) keeps them in a mapping of its own)."""
    from matplotlib.ticker import FixedFormatter

    axis.set_ticks(positions)
    axis.set_major_formatter(FixedFormatter(list(labels)))


def _short(metric: str) -> str:
    short = short_metric(metric)
    return "step time" if short == "step" else short  # a bare "step" reads as a step number


def step_times(verdict: Verdict):
    """Primary metric and step_time per counted rollout, one line per arm; None without data."""
    primary = verdict.thresholds.primary_metric
    metrics = [primary] + ([STEP_TIME] if STEP_TIME != primary and any(a.samples.get(STEP_TIME) for a in verdict.per_arm())
                           else [])
    if not any(a.values.get(primary) for a in verdict.per_arm()):
        return None
    fig, axes = _new_figure(5.5 * len(metrics), 3.8, cols=len(metrics))
    for ax, metric in zip(axes, metrics, strict=True):
        plotted: list[float] = []
        for arm in verdict.per_arm():
            values = arm.values.get(metric) if metric == primary else arm.samples.get(metric)
            if not values:
                continue
            # step_time is listed per counted rollout too; when a value is missing the ids are unknown
            xs = arm.counted_rollouts if len(arm.counted_rollouts) == len(values) else \
                list(range(arm.warmup, arm.warmup + len(values)))
            # a dot per rollout while dots can be told apart; thousands overlap into the line itself
            # and cost a marker each to draw
            ax.plot(xs, values, marker="o" if len(values) <= _DOTTED_POINTS else "", markersize=3, linewidth=1.2,
                    label=_label(verdict, arm.name))
            plotted.extend(values)
        ax.set_xlabel("rollout (counted: after each round's warm-up)" if verdict.thresholds.warmup is None
                      else f"rollout (counted: >= {verdict.thresholds.warmup})")
        ax.set_ylabel(f"{_short(metric)} [s]")
        ax.set_title(f"{_short(metric)} per rollout", fontsize=10)
        _y_scale(ax, plotted)
        ax.grid(alpha=0.3)
    _legend(axes[-1], len(verdict.planned_arms))
    return fig


def phase_medians(verdict: Verdict, infos: dict[str, ArmInfo]):
    """Grouped bars: per phase (log_probs, ref_log_probs, actor_train), each arm's median side by
    side, so CP=1 and CP=2 are compared within a phase."""
    phases = [p for p in PHASES if any(p in a.metrics for a in verdict.per_arm())]
    arms = [a for a in verdict.per_arm() if any(p in a.metrics for p in phases)]
    if not phases or not arms:
        return None
    fig, (ax,) = _new_figure(max(6.0, 0.5 * len(arms) * len(phases) + 2), 4.0)
    width = 0.8 / len(arms)
    medians: list[float] = []
    for j, arm in enumerate(arms):
        xs, heights, low, high = [], [], [], []
        for i, phase in enumerate(phases):
            s = arm.metrics.get(phase)
            if s is None:
                continue
            xs.append(i + (j - (len(arms) - 1) / 2) * width)
            heights.append(s.median)
            low.append(s.median - s.q1)
            high.append(s.q3 - s.median)
        ax.bar(xs, heights, width, yerr=[low, high], capsize=2, label=_label(verdict, arm.name))
        medians.extend(heights)
    _ticks(ax.xaxis, range(len(phases)), [_short(p) for p in phases])
    ax.set_xlabel("phase")
    ax.set_ylabel("median per rollout [s] (bars: IQR)")
    ax.set_title("per-phase medians: the arms side by side", fontsize=10)
    _y_scale(ax, medians)
    ax.grid(axis="y", alpha=0.3)
    _legend(ax, len(arms))
    return fig


def phase_ratios(verdict: Verdict):
    """The chart to attach: per phase of the deciding comparison (a sweep: per comparison, the primary
    metric), the ratio as a dot, its interval as whiskers, the threshold and 1.0 as vertical lines."""
    from cpverify.report import story

    t = verdict.thresholds
    status = worst(c.status for c in verdict.comparisons)
    deciding = next(c for c in verdict.comparisons if c.status == status)
    labels = verdict.labels
    rows: list[tuple[str, Any, str]] = []  # (label, estimate with a ratio, note)
    if len(verdict.comparisons) == 1:
        for metric, base, cand, est in story.phase_rows(verdict, deciding):
            # each phase's ratio as the table shows it: the one its decision reads (story.shown)
            if (shown := story.shown(est, t.pass_ratio)) is None:
                continue
            b, c = base.metrics.get(metric), cand.metrics.get(metric)
            note = f"{story.seconds(b.median) if b else '–'} → {story.seconds(c.median) if c else '–'}"
            by = "" if shown.statistic == "median" else f" (by the {shown.statistic})"
            rows.append((_short(metric), shown, note + by))
    else:
        for comp in verdict.comparisons:
            if (shown := story.shown(comp.metrics.get(t.primary_metric), t.pass_ratio)) is not None:
                rows.append((f"{comp.candidate} / {comp.baseline}", shown, ""))
    if not rows:
        return None
    fig, (ax,) = _new_figure(7.2, 0.55 * len(rows) + 1.6)
    ys = list(range(len(rows)))[::-1]
    for y, (_, est, note) in zip(ys, rows, strict=True):
        colour = ("tab:green" if est.ci and est.ci[1] <= t.pass_ratio else
                  "tab:red" if est.ci and est.ci[0] > t.pass_ratio else "tab:orange")
        if est.ci:
            ax.plot(est.ci, [y, y], color=colour, linewidth=2.5, solid_capstyle="butt")
        ax.plot([est.ratio], [y], "o", color=colour, markersize=7)
        text = f"{est.ratio:.2f}×" + (f" ({est.ci[0]:.2f}–{est.ci[1]:.2f})" if est.ci else " (no interval)")
        ax.annotate(f"{text}  {note}".rstrip(), (max(est.ci[1] if est.ci else est.ratio, est.ratio), y),
                    xytext=(6, 0), textcoords="offset points", va="center", fontsize=8)
    ax.axvline(1.0, color="grey", linewidth=1, linestyle=":")
    ax.axvline(t.pass_ratio, color="black", linewidth=1, linestyle="--")
    _ticks(ax.yaxis, ys, [label for label, _, _ in rows])
    high = max(max(est.ci[1] if est.ci else est.ratio, est.ratio) for _, est, _ in rows)
    ax.set_xlim(0, max(high * 1.45, t.pass_ratio * 1.3))
    pair = f"{labels.get(deciding.candidate, deciding.candidate)} / {labels.get(deciding.baseline, deciding.baseline)}"
    # two lines: on one it is wider than the figure
    ax.set_xlabel(f"ratio of medians, or of means where they decide ({t.confidence:.0%} interval)\n"
                  f"dashed: threshold {t.pass_ratio:.2f}, dotted: 1.0")
    ax.set_title(f"{verdict.status}: {pair if len(verdict.comparisons) == 1 else 'each CP against the baseline'}"
                 f" — {_short(t.primary_metric)} decides", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return fig


def _series(verdict: Verdict, infos: dict[str, ArmInfo], key) -> dict[Any, list[tuple[float, float, int]]]:
    """Median primary time per arm, grouped by key(info): {group: [(x, median, cp), ...]}."""
    metric = verdict.thresholds.primary_metric
    groups: dict[Any, list[tuple[float, float, int]]] = {}
    for arm in verdict.per_arm():
        summary = arm.metrics.get(metric)
        info = infos[arm.name]
        if summary is None or summary.median <= 0:
            continue
        group, x = key(info)
        if x is None:
            continue
        groups.setdefault(group, []).append((x, summary.median, info.cp))
    return {g: sorted(points) for g, points in groups.items()}


def time_vs_cp(verdict: Verdict, infos: dict[str, ArmInfo]):
    """Median time against CP, one line per (revision, sequence length), with the ideal 1/CP line."""
    groups = _series(verdict, infos, lambda i: ((i.revision, i.seq_len), i.cp))
    groups = {g: pts for g, pts in groups.items() if len({cp for _, _, cp in pts}) >= 2}
    cps = {cp for pts in groups.values() for _, _, cp in pts}
    seq_lens = {seq_len for _, seq_len in groups}
    if len(cps) < 3 and len(seq_lens) < 2:  # a plain CP=1 vs CP=2 run: the tables say it all
        return None
    metric = _short(verdict.thresholds.primary_metric)
    fig, (ax,) = _new_figure(8.0, 4.2)
    for (revision, seq_len), points in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)):
        name = " ".join(part for part in (revision, f"seq {length_label(seq_len)}" if seq_len else None) if part) or metric
        xs = [cp for cp, _, _ in points]
        (line,) = ax.plot(xs, [t for _, t, _ in points], marker="o", label=name)
        first_cp, first_t = xs[0], points[0][1]
        ax.plot(xs, [first_t * first_cp / cp for cp in xs], linestyle="--", linewidth=1, color=line.get_color(),
                alpha=0.7, label=f"ideal {name}: t(CP={first_cp})·{first_cp}/CP")
    return _finish_scaling(fig, ax, sorted(cps), [str(cp) for cp in sorted(cps)], "context-parallel size (CP)", metric,
                           f"{metric} vs CP (dashed: ideal 1/CP)")


def time_vs_seq_len(verdict: Verdict, infos: dict[str, ArmInfo]):
    """Median time against sequence length, one line per (revision, CP), ideal t(CP=1)/CP dashed."""
    groups = _series(verdict, infos, lambda i: ((i.revision, i.cp), i.seq_len))
    groups = {g: pts for g, pts in groups.items() if len(pts) >= 2}
    if not groups:
        return None
    metric = _short(verdict.thresholds.primary_metric)
    fig, (ax,) = _new_figure(8.0, 4.2)
    lowest: dict[Any, tuple[int, dict[float, float]]] = {}
    for (revision, cp), points in groups.items():
        if revision not in lowest or cp < lowest[revision][0]:
            lowest[revision] = (cp, {x: t for x, t, _ in points})
    seq_lens = sorted({x for pts in groups.values() for x, _, _ in pts})
    for (revision, cp), points in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        name = " ".join(part for part in (revision, f"CP={cp}") if part)
        (line,) = ax.plot([x for x, _, _ in points], [t for _, t, _ in points], marker="o", label=name)
        base_cp, base = lowest[revision]
        if cp != base_cp:
            xs = [x for x, _, _ in points if x in base]
            ax.plot(xs, [base[x] * base_cp / cp for x in xs], linestyle="--", linewidth=1, color=line.get_color(),
                    alpha=0.7, label=f"ideal {name}: t(CP={base_cp})·{base_cp}/{cp}")
    return _finish_scaling(fig, ax, seq_lens, [length_label(int(s)) for s in seq_lens], "sequence length [tokens]", metric,
                           f"{metric} vs sequence length (dashed: ideal 1/CP)")


def _finish_scaling(fig, ax, ticks, tick_labels, xlabel: str, metric: str, title: str):
    """Both scaling plots: log-log axes (ideal 1/CP is then a straight line), labelled ticks, legend."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _ticks(ax.xaxis, ticks, tick_labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"median {metric} [s]")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    _legend(ax, len(ax.get_lines()))
    return fig


def figures(verdict: Verdict) -> list[Plot]:
    """Every plot that has data, as matplotlib Figures. Raises ImportError without matplotlib."""
    infos = arm_infos(verdict)
    candidates = [
        ("ratio.png", "per-phase ratio with its interval", phase_ratios(verdict)),
        ("steps.png", "step times per rollout", step_times(verdict)),
        ("phases.png", "per-phase medians, the arms side by side", phase_medians(verdict, infos)),
        ("cp.png", "time vs CP with the ideal 1/CP", time_vs_cp(verdict, infos)),
        ("seq.png", "time vs sequence length", time_vs_seq_len(verdict, infos)),
    ]
    return [Plot(file, title, fig) for file, title, fig in candidates if fig is not None]


def scrub_texts(figure, scrub: Callable[[str], str]) -> None:
    """Redact every text of a figure (titles, axis and tick labels, legend entries) before it is
    drawn: a PNG cannot be redacted afterwards, and labels carry revision names and paths. A tick's
    label is written from its axis's formatter at each draw: the labels _ticks gave (arm names,
    phases) are redacted in their formatter (the others format numbers)."""
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter

    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(labels := axis.get_major_formatter(), FixedFormatter):  # written by _ticks
                axis.set_major_formatter(FixedFormatter([scrub(str(label)) for label in labels.seq]))
    for text in figure.findobj(Text):
        shown = text.get_text()
        if shown:
            text.set_text(scrub(shown))


# zlib level 1: pixels as at Pillow's default 6, in ~70% of the time, files 5-10% larger (benchmarks/verdict_throughput.md)
_PNG = {"pil_kwargs": {"compress_level": 1}}


def png(figure) -> bytes:
    """The figure laid out (tight_layout: axes placed so that their tick labels, legends and notes fit)
    and drawn once. What that layout leaves to chance (_unplaced) is looked at on the drawn figure:
    where any of it lies outside, the figure is drawn again around everything drawn (bbox "tight")."""
    _lay_out(figure)
    if not _inside(figure, [note for ax in figure.axes for note in ax.texts]):
        # the layout takes what stands outside the axes to keep its size; a note anchored in the data
        # (ratio.png's) moves with the axes it shrank, and a second pass places it
        _lay_out(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", **_PNG)
    if not _inside(figure, _unplaced(figure)):
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", bbox_inches="tight", **_PNG)
    return buffer.getvalue()


def _lay_out(figure) -> None:
    """tight_layout, without the placeholder engine figure.tight_layout() leaves behind (for which
    savefig lays out the whole figure again before it draws). rect None, as tight_layout() passes it:
    a rect makes the engine compute the layout twice. Where what it must place does not fit, it warns
    and leaves the axes as they are: png() then draws the figure around everything, no warning to show."""
    from matplotlib.layout_engine import TightLayoutEngine

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        # None is what tight_layout() passes, though matplotlib's stubs type rect as a tuple; passed as
        # a keyword mapping so mypy reads it alike with matplotlib installed or not (nox's lint_code).
        unset_rect: dict[str, Any] = {"rect": None}
        TightLayoutEngine(**unset_rect).execute(figure)


def _unplaced(figure) -> list:
    """What tight_layout may leave outside the figure: a title longer than the figure, an axis label
    longer than its side (it places their height, not their length), and, where it gives up (what it
    must place does not fit), the legends, notes and tick labels written here (the numbers' tick
    labels fit the margins it then leaves)."""
    from matplotlib.ticker import FixedFormatter

    artists = [*figure.legends, *figure.texts]
    for ax in figure.axes:
        artists += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        artists += [legend] if (legend := ax.get_legend()) is not None else []
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(axis.get_major_formatter(), FixedFormatter):
                artists += axis.get_majorticklabels()
    return [a for a in artists if a.get_visible() and (not hasattr(a, "get_text") or a.get_text())]


def _inside(figure, artists) -> bool:
    """Whether `artists`, as last drawn, lie within the figure (to a pixel)."""
    renderer = figure.canvas.get_renderer()
    bounds = figure.bbox.padded(1)
    return all(bounds.contains(box.x0, box.y0) and bounds.contains(box.x1, box.y1)
               for box in (a.get_window_extent(renderer) for a in artists))


def render(verdict: Verdict, scrub: Callable[[str], str] | None = None) -> Rendered:
    """([(plot, PNG bytes)], note): no plots and a note when matplotlib is missing; never raises for that.
    `scrub` redacts every text drawn (and the titles verdict.md shows)."""
    plots, note = redacted_figures(verdict, scrub)
    return [(plot, png(plot.figure)) for plot in plots], note


def drawn_now(verdict: Verdict | None, scrub: Callable[[str], str] | None = None) -> Callable[[], Rendered]:
    """render() at once, as what draws the plots for cpverify.report.write gives it: a function that
    returns them (no plots for no verdict)."""
    rendered: Rendered = render(verdict, scrub=scrub) if verdict is not None else ([], "")
    return lambda: rendered


def redacted_figures(verdict: Verdict, scrub: Callable[[str], str] | None = None) -> tuple[list[Plot], str]:
    """render()'s figures, every text redacted by `scrub`, not drawn yet."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return [], MISSING_NOTE
    plots = figures(verdict)
    if scrub is not None:
        for plot in plots:
            scrub_texts(plot.figure, scrub)
            plot.title = scrub(plot.title)
    return plots, ""
