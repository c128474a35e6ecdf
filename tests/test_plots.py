"""Plots: rendered from verdicts of real-format logs, inspected as Figures, read back as PNGs.

The sweep's logs are written in the probe workload's real line format (the recorded H200
logs in tests/data/probe show it); their timings follow a known law (time ~ seq^2 / CP x
an overhead), so the plotted points and the ideal lines can be checked exactly.
"""

from __future__ import annotations

import string
import struct
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure
from matplotlib.image import imread  # in the test extra: a missing matplotlib fails, it never skips

from cpverify import report
from cpverify.artifacts import RunDir
from cpverify.overrides import with_overrides
from cpverify.parse import parse_file
from cpverify.plan import build_plan
from cpverify.profiles import get_profile
from cpverify.report import plots
from cpverify.verdict import ArmEvidence, Thresholds, decide

HERE = Path(__file__).resolve().parent
PROBE_LOGS = HERE / "data" / "probe"
REAL_PAIR = HERE / "data" / "real-logs" / "slime-train-only-h200x2"
OVERHEAD = {1: 1.0, 2: 1.15, 4: 1.4}


def probe_log(path: Path, *, cp: int, seq_len: int, steps: int = 12, warmup: int = 3) -> Path:
    """A probe arm's log in the workload's format: layout lines, then `perf N: {...}` per measured step."""
    attention = 0.05 * (seq_len / 16384) ** 2 / cp * OVERHEAD[cp]
    lines = [f"cpverify-layout rank={r} world=4 tp=1 pp=1 cp={cp} dp={4 // cp}" for r in range(4)]
    for i in range(warmup, warmup + steps):
        t = attention * (1 + 0.01 * ((i * 7) % 5 - 2))  # +-2%, deterministic
        lines.append(f"[2026-11-22 13:39:12] workload.py:348 - perf {i}: {{'perf/actor_train_time': {t:.6f}, "
                     f"'perf/train_time': {t * 1.2:.6f}, 'perf/step_time': {t * 1.2:.6f}, "
                     f"'perf/tokens_per_gpu_per_sec': {seq_len / t / 4:.1f}}}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def sweep(tmp_path):
    """A CP {1,2,4} x seq {8K,32K,128K} probe sweep: (verdict, plan)."""
    profile = with_overrides(get_profile("probe"), gpus=4, cp_sizes=(1, 2, 4), seq_lens=(8192, 32768, 131072))
    plan = build_plan(profile, run_id="sweep")
    evidence = [ArmEvidence(arm.name, arm.cp, parse_file(probe_log(tmp_path / f"{arm.name}.log", cp=arm.cp,
                                                                        seq_len=arm.seq_len)), seq_len=arm.seq_len)
                for arm in plan.arms]
    thresholds = Thresholds(pass_ratio=profile.pass_ratio, warmup=profile.warmup_steps,
                            min_counted_steps=profile.min_counted_steps)
    return decide(evidence, comparisons=list(plan.comparisons), thresholds=thresholds), plan


def medians(verdict):
    return {a.name: a.metrics["perf/actor_train_time"].median for a in verdict.arms}


def test_sweep_figures_show_time_vs_cp_with_the_ideal_line(sweep):
    verdict, plan = sweep
    figures = {p.file: p for p in plots.figures(verdict)}
    assert set(figures) == {"ratio.png", "steps.png", "phases.png", "cp.png", "seq.png"}

    (ax,) = figures["cp.png"].figure.axes
    assert ax.get_xlabel() == "context-parallel size (CP)" and ax.get_ylabel() == "median actor_train [s]"
    lines = {line.get_label(): line for line in ax.get_lines()}
    med = medians(verdict)
    for size in ("8K", "32K", "128K"):
        data, ideal = lines[f"seq {size}"], lines[f"ideal seq {size}: t(CP=1)·1/CP"]
        k = size.lower()
        assert list(data.get_xdata()) == [1, 2, 4]
        assert list(data.get_ydata()) == [med[f"cp{cp}-s{k}"] for cp in (1, 2, 4)]
        assert list(ideal.get_ydata()) == pytest.approx([med[f"cp1-s{k}"] / cp for cp in (1, 2, 4)])
        assert ideal.get_linestyle() == "--"
    # the measured CP=4 point sits above the ideal by the overhead the logs were made with
    assert lines["seq 32K"].get_ydata()[2] / lines["ideal seq 32K: t(CP=1)·1/CP"].get_ydata()[2] == \
        pytest.approx(OVERHEAD[4], rel=0.03)

    (ax,) = figures["seq.png"].figure.axes
    assert ax.get_xlabel() == "sequence length [tokens]"
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert {"CP=1", "CP=2", "CP=4", "ideal CP=2: t(CP=1)·1/2", "ideal CP=4: t(CP=1)·1/4"} == set(lines)
    assert list(lines["CP=4"].get_xdata()) == [8192, 32768, 131072]


def test_step_and_phase_figures(sweep):
    verdict, plan = sweep
    figures = {p.file: p for p in plots.figures(verdict)}
    primary, step = figures["steps.png"].figure.axes
    assert primary.get_ylabel() == "actor_train [s]" and step.get_ylabel() == "step time [s]"
    assert len(primary.get_lines()) == len(plan.arms) == 9
    first = next(line for line in primary.get_lines() if line.get_label() == "cp1-s8k")
    assert list(first.get_xdata()) == list(range(3, 15))  # the counted steps: warm-up excluded
    (bars,) = figures["phases.png"].figure.axes
    assert [t.get_text() for t in bars.get_xticklabels()] == ["actor_train"]  # the probe has one phase
    assert len(bars.patches) == 9  # one bar per arm within it
    heights = sorted(round(p.get_height(), 9) for p in bars.patches)
    assert heights == sorted(round(m, 9) for m in medians(verdict).values())


def test_slime_phases_and_no_sweep_plots_for_a_plain_cp1_cp2_run(tmp_path):
    from helpers.slime_log import synthetic_arm

    evidence = [ArmEvidence(f"cp{cp}", cp, parse_file(synthetic_arm(cp=cp, actor_train_time=t, seed=cp)
                                                       .write(tmp_path / f"cp{cp}.log")))
                for cp, t in ((1, 1.0), (2, 1.1))]
    verdict = decide(evidence, comparisons=[("cp1", "cp2")])
    figures = {p.file: p for p in plots.figures(verdict)}
    assert set(figures) == {"ratio.png", "steps.png", "phases.png"}  # two points make no curve
    (ax,) = figures["phases.png"].figure.axes
    # grouped by phase: CP=1 and CP=2 side by side within each
    assert [t.get_text() for t in ax.get_xticklabels()] == ["log_probs", "ref_log_probs", "actor_train"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["CP=1 (cp1)", "CP=2 (cp2)"]
    cp1_bars, cp2_bars = ax.patches[:3], ax.patches[3:]
    assert all(a.get_x() < b.get_x() < a.get_x() + 1 for a, b in zip(cp1_bars, cp2_bars, strict=True))
    (ax,) = figures["ratio.png"].figure.axes  # the chart to attach: one row per phase, whiskers, threshold
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows == ["actor_train", "log_probs", "ref_log_probs", "train", "step time"]
    comp = verdict.primary.metrics["perf/actor_train_time"]
    whiskers = [list(line.get_xdata()) for line in ax.get_lines() if len(line.get_xdata()) == 2
                and line.get_ydata()[0] == line.get_ydata()[1]]
    assert list(comp.ci) in whiskers
    assert any(list(line.get_xdata()) == [1.3, 1.3] for line in ax.get_lines())  # the threshold


def test_what_an_arm_varied_is_read_from_its_evidence_never_from_its_name():
    """Recorded probe logs under names that say nothing (or the wrong thing): the plots place each arm
    by the CP, length and revision its evidence carries."""
    arms = {"short-base": (1, 16384, "cp1-s16k"), "cp1-s64k": (2, 16384, "cp2-s16k"), "base-x": (2, 65536, "cp2-s64k")}
    evidence = [ArmEvidence(name, cp, parse_file(PROBE_LOGS / f"h200x2-{log}.log"), seq_len=seq_len, slime_ref="main")
                for name, (cp, seq_len, log) in arms.items()]
    verdict = decide(evidence, comparisons=[("short-base", "cp1-s64k")], thresholds=Thresholds(warmup=5))
    infos = plots.arm_infos(verdict)
    assert {name: (i.cp, i.seq_len, i.revision) for name, i in infos.items()} == \
        {name: (cp, seq_len, "main") for name, (cp, seq_len, _) in arms.items()}
    figures = {p.file: p for p in plots.figures(verdict)}
    (ax,) = figures["seq.png"].figure.axes  # only CP=2 has two lengths
    assert [line.get_label() for line in ax.get_lines()] == ["main CP=2"]
    assert "cp.png" not in figures


def test_report_writes_pngs_next_to_verdict_md_and_names_them(sweep, tmp_path):
    verdict, plan = sweep
    run_dir = RunDir.create(tmp_path / "run")
    written = report.write_report(run_dir, verdict, env={}, commands_sh=None)
    md = written["verdict.md"].read_text()
    for name in ("ratio.png", "steps.png", "phases.png", "cp.png", "seq.png"):
        path = written[name]
        assert path.parent == run_dir.root and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        image = imread(path)
        assert image.ndim == 3 and 300 < image.shape[0] < 2000 and 500 < image.shape[1] < 4000
        assert image.std() > 0.05  # something is drawn
        assert f"`{name}`" in md
    assert "](" not in md and "![" not in md  # a pasted comment cannot show a local file: named, not linked


def test_missing_matplotlib_skips_plots_with_a_note(sweep, tmp_path, monkeypatch):
    verdict, plan = sweep
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    assert plots.render(verdict) == ([], plots.MISSING_NOTE)
    written = report.write_report(tmp_path, verdict, env={}, commands_sh=None)
    assert set(written) == {"verdict.md", "verdict.json", "commands.sh", "env.json", "archive"}
    assert "Plots skipped: matplotlib is not installed" in written["verdict.md"].read_text()


def test_every_text_drawn_is_redacted(sweep):
    """A PNG cannot be redacted once drawn: titles, legends and ticks pass through the scrubber first
    (an A/B revision label is a directory or branch name; a label may quote a host)."""
    from matplotlib.text import Text

    from cpverify.redact import Redactor

    verdict, plan = sweep
    planted = {name: f"{name} on gpu-node-17.corp.example.com token=abc123secret" for name in verdict.labels}
    verdict.labels.update(planted)
    rendered, _ = plots.render(verdict, scrub=Redactor())
    texts = [t.get_text() for plot, _ in rendered for t in plot.figure.findobj(Text) if t.get_text()]
    assert any("host-1" in text for text in texts)  # the labels were drawn, redacted
    assert not [text for text in texts if "corp.example.com" in text or "abc123secret" in text]


@pytest.mark.parametrize("steps", [12, plots._DOTTED_POINTS + 1])
def test_steps_plot_draws_every_rollout_and_dots_each_only_while_they_can_be_told_apart(tmp_path, steps):
    logs = [probe_log(tmp_path / f"cp{cp}.log", cp=cp, seq_len=8192, steps=steps) for cp in (1, 2)]
    verdict = decide([ArmEvidence(f"cp{cp}", cp, parse_file(log)) for cp, log in zip((1, 2), logs, strict=True)],
                     comparisons=[("cp1", "cp2")], thresholds=Thresholds(warmup=3))
    lines = [line for ax in plots.step_times(verdict).axes for line in ax.get_lines()]
    assert lines and all(len(line.get_xdata()) == steps for line in lines)
    assert {line.get_marker() for line in lines} == ({"o"} if steps <= plots._DOTTED_POINTS else {""})



def test_every_text_drawn_passes_through_the_scrubber(sweep):
    """Titles, axis labels, legends, notes and tick labels alike: a tick's label is written from its
    formatter at every draw (ratio.png's rows name the arms), so what is looked at is what was drawn."""
    from matplotlib.text import Text

    verdict, plan = sweep
    rendered, _ = plots.render(verdict, scrub=lambda text: text.replace("c", "\u00e7"))  # numbers hold no "c"
    rows = next(plot for plot, _ in rendered if plot.file == "ratio.png").figure.axes[0].get_yticklabels()
    assert rows[0].get_text() == "\u00e7p2-s8k / \u00e7p1-s8k"  # the arms' names, drawn scrubbed
    drawn = [t.get_text() for plot, _ in rendered for t in plot.figure.findobj(Text) if t.get_visible()]
    assert len(drawn) > 100 and not [text for text in drawn if "c" in text]


def _pair(tmp_path: Path):
    """A CP=1 vs CP=2 verdict of two probe logs: two arms, every legend inside its axes."""
    logs = [probe_log(tmp_path / f"cp{cp}.log", cp=cp, seq_len=8192) for cp in (1, 2)]
    return decide([ArmEvidence(f"cp{cp}", cp, parse_file(log)) for cp, log in zip((1, 2), logs, strict=True)],
                  comparisons=[("cp1", "cp2")], thresholds=Thresholds(warmup=3))


def _drawn_once(monkeypatch, figure) -> bytes:
    """png(figure), checking that the figure was drawn once (a layout pass draws nothing)."""
    draws = []
    draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: (draws.append(self), draw(self, renderer))[1])
    image = plots.png(figure)
    monkeypatch.undo()
    assert len(draws) == 1
    return image


def _outside_the_image(figure, image: bytes) -> list[str]:
    """What was drawn (matplotlib's tight box of the figure: every text, tick label, legend and line)
    beyond the PNG written of it. A PNG of the figure's size shows the figure; any other size is the
    figure cut around the whole drawing (bbox "tight"), which holds it by construction."""
    width, height = struct.unpack(">II", image[16:24])  # the IHDR chunk
    renderer = figure.canvas.get_renderer()
    drawn = figure.get_tightbbox(renderer)  # inches
    if (width, height) != figure.canvas.get_width_height(physical=True):
        cut = drawn.padded(0.1)  # savefig's pad_inches
        assert (width, height) == pytest.approx((cut.width * figure.dpi, cut.height * figure.dpi), abs=1)
        return []
    margins = {"left": drawn.x0, "bottom": drawn.y0, "right": figure.get_figwidth() - drawn.x1,
               "top": figure.get_figheight() - drawn.y1}
    return [f"{side} by {-margin * figure.dpi:.0f} px" for side, margin in margins.items() if margin < -1 / figure.dpi]


def test_a_legend_placed_outside_the_axes_is_inside_the_image_drawn_once(sweep, monkeypatch):
    """Nine arms: each legend stands right of its axes; the layout makes room for it in the figure."""
    verdict, plan = sweep
    outside = 0
    for plot in plots.figures(verdict):
        legends = [legend for ax in plot.figure.axes if (legend := ax.get_legend()) is not None]
        image = _drawn_once(monkeypatch, plot.figure)
        assert struct.unpack(">II", image[16:24]) == plot.figure.canvas.get_width_height(physical=True)
        assert _outside_the_image(plot.figure, image) == []
        renderer = plot.figure.canvas.get_renderer()
        for legend in legends:
            box, axes = legend.get_window_extent(renderer), legend.axes.get_window_extent(renderer)
            outside += box.x0 >= axes.x1
            assert plot.figure.bbox.contains(box.x0, box.y0) and plot.figure.bbox.contains(box.x1, box.y1)
    assert outside == 3  # steps.png (its last axes), phases.png, cp.png (six lines); seq.png's five sit inside


def _slime_pair(tmp_path: Path, seed: int):
    from helpers.slime_log import synthetic_arm

    return [ArmEvidence(f"cp{cp}", cp, parse_file(synthetic_arm(cp=cp, actor_train_time=t, rollouts=20, seed=seed * cp)
                                                   .write(tmp_path / f"cp{cp}.log"))) for cp, t in ((1, 1.0), (2, 1.05))]


@pytest.mark.parametrize("logs", ["real", "by the mean"])
def test_a_cp1_cp2_verdicts_plots_are_each_drawn_once(tmp_path, monkeypatch, logs):
    """The real pair of tests/data; and a pair whose ratio of means decides, which ratio.png's note says
    (a note anchored in the data, long enough to stand past the axes)."""
    pair = ([ArmEvidence(f"cp{cp}", cp, parse_file(REAL_PAIR / f"slime-cp{cp}.log")) for cp in (1, 2)] if logs == "real"
            else _slime_pair(tmp_path, seed=2))
    verdict = decide(pair, comparisons=[("cp1", "cp2")])
    rendered = plots.figures(verdict)
    assert [plot.file for plot in rendered] == ["ratio.png", "steps.png", "phases.png"]
    notes = [text.get_text() for text in rendered[0].figure.axes[0].texts]
    assert any(note.endswith("(by the mean)") for note in notes) == (logs == "by the mean")
    for plot in rendered:
        image = _drawn_once(monkeypatch, plot.figure)
        assert struct.unpack(">II", image[16:24]) == plot.figure.canvas.get_width_height(physical=True)
        assert _outside_the_image(plot.figure, image) == []


# a label of 1 to 200 characters, words or one long word
_LABEL = st.builds(lambda text, length: (text * length)[:length],
                   st.text(string.ascii_letters + string.digits + " -_./:=()", min_size=1, max_size=12),
                   st.integers(1, 200))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=_LABEL, cand=_LABEL)
@example(base="CP=1", cand="x" * 200).via("a title wider than the figure, no space to wrap at")
def test_no_text_falls_outside_the_image_whatever_the_labels(tmp_path, base, cand):
    """The arms' labels stand in the legends and in ratio.png's title: any length, with or without
    spaces, they are drawn inside the image."""
    verdict = _pair(tmp_path)
    verdict.labels.update(cp1=base, cp2=cand)
    for plot, image in plots.render(verdict)[0]:
        assert _outside_the_image(plot.figure, image) == [], plot.file


def test_long_arm_names_and_labels_of_a_sweep_stay_inside_the_image(sweep):
    """ratio.png's rows name the arms compared, the legends their labels; nine of them, each long."""
    verdict, plan = sweep
    long = {name: f"{name} built from refs/heads/feature/context-parallel-{'ring-attention-' * 3}{name}"
            for name in verdict.labels}
    verdict.labels.update(long)
    for comparison in verdict.comparisons:
        comparison.candidate = long[comparison.candidate]  # rows: "candidate / baseline"
    for plot, image in plots.render(verdict)[0]:
        assert _outside_the_image(plot.figure, image) == [], plot.file
