"""What a person sees while the arms run (cpverify.progress): the live display on a terminal, the
plain lines elsewhere, the phase as real slime and probe logs give it, the ETA, Ctrl-C.

The display is driven with the watcher's own reports (cpverify.runners.watch.Progress) at chosen
moments: the reports carry the arm's elapsed time, so they are the clock, and every frame and
line is exact. Both modes render through a real rich Console: one that records, with
`force_terminal=True` for the live display. tests/test_pipeline.py checks the plain lines of a
real `cpverify run`, tests/faults the live display of one interrupted by Ctrl-C.
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from cpverify.parse import LogParser
from cpverify.progress import ArmsDisplay, duration, phase_of
from cpverify.redact import Redactor, redacted_terminal
from cpverify.runners.watch import Progress

DATA = Path(__file__).parent / "data"
SLIME_CP2 = DATA / "real-logs" / "slime-train-only-h200x2" / "kit-check-12rollouts" / "slime-cp2.log"
PROBE_CP2 = DATA / "probe" / "h200x2-cp2-s16k.log"


def report(at: float, rollout: int | None = None, phase: str = "actor_train", arm: str = "cp1",
           idle: float = 0.0) -> Progress:
    return Progress(step=rollout, train_records=0 if rollout is None else rollout + 1, lines=100, elapsed_s=at,
                    idle_s=idle, arm=arm, rollout=rollout, phase=phase)


def terminal(width: int = 120) -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=width, color_system=None)


def plain() -> Console:
    return Console(file=io.StringIO(), force_terminal=False, width=120)


# Each redraw of a rich Live starts with a carriage return and erases the lines of the frame before.
REDRAW = re.compile(r"\r\x1b\[2K(?:\x1b\[1A\x1b\[2K)*")


def frames(console: Console) -> list[list[str]]:
    """What the terminal received, one list of lines per redraw (printed lines come first in theirs)."""
    raw = console.file.getvalue().replace("\x1b[?25l", "").replace("\x1b[?25h", "")
    return [[line.rstrip() for line in chunk.splitlines()] for chunk in REDRAW.split(raw) if chunk]


def last_frame(console: Console, arms: int) -> list[str]:
    """The arms' lines as the terminal shows them now, runs of spaces as one (columns are aligned)."""
    return [" ".join(line.split()) for line in frames(console)[-1][-arms:]]


# -- the live display ---------------------------------------------------------------------------

def test_the_live_display_has_one_line_per_arm_with_step_elapsed_eta_and_phase():
    console = terminal()
    with ArmsDisplay(["cp1", "cp2"], 16, console=console, auto_refresh=False) as display:
        display.update(report(2.0, None, "starting"))
        display.update(report(10.0, 0))  # the first step: no rate yet
        frame = last_frame(console, 2)
        assert frame[0].startswith("cp1 ") and "step 1 of 16, 10s elapsed, ETA ?, phase actor_train" in frame[0]
        assert frame[1] == "cp2 waiting"
        display.update(report(12.0, 1))
        display.update(report(14.0, 2, "train_wait"))  # 2 s a step, 13 to go
        frame = last_frame(console, 2)
        assert "step 3 of 16, 14s elapsed, ETA 26s, phase train_wait" in frame[0]
        assert "━" in frame[0]  # the bar
        display.finish("cp1", "failed (exit 1)")
        display.update(report(1.0, None, "starting", arm="cp2"))
    frame = last_frame(console, 2)
    assert frame[0].endswith("step 3 of 16, 14s elapsed, failed (exit 1)")
    assert frame[1].endswith("step 0 of 16, 1s elapsed, ETA ?, phase starting")
    raw = console.file.getvalue()
    assert raw.startswith("\x1b[?25l") and raw.endswith("\x1b[?25h")  # cursor hidden while live, shown after


def test_what_cpverify_prints_meanwhile_goes_above_the_display():
    console = terminal()
    with ArmsDisplay(["cp1"], 16, console=console, auto_refresh=False) as display:
        display.update(report(3.0, 0))
        print("[cpverify r] cp1: the earlier attempt's log is kept")  # what ctx.say does
    printed = next(frame for frame in frames(console) if "the earlier attempt's log is kept" in frame[0])
    assert printed[0] == "[cpverify r] cp1: the earlier attempt's log is kept"
    assert "step 1 of 16" in printed[1]  # the display, redrawn below it


def test_ctrl_c_stops_the_live_display_and_gives_the_terminal_back():
    console = terminal()
    stdout, stderr = sys.stdout, sys.stderr
    with pytest.raises(KeyboardInterrupt):
        with ArmsDisplay(["cp1", "cp2"], 16, console=console, auto_refresh=True) as display:
            display.update(report(3.0, 0))
            assert sys.stdout is not stdout  # live: prints go above the display
            raise KeyboardInterrupt
    assert sys.stdout is stdout and sys.stderr is stderr
    assert console.file.getvalue().endswith("\x1b[?25h")  # the cursor is back
    assert not display._bars  # the refresh thread is gone with the Live


def test_an_arm_silent_for_a_minute_says_so():
    console = terminal(width=160)
    with ArmsDisplay(["cp1"], 16, console=console, auto_refresh=False) as display:
        display.update(report(100.0, 3, idle=75.0))
    assert last_frame(console, 1)[0].endswith("phase actor_train, no output for 1m15s")


def test_without_a_planned_count_the_line_has_no_total_and_no_eta():
    console = plain()
    with ArmsDisplay(["cp1"], None, console=console) as display:
        for t, rollout in ((5.0, 0), (7.0, 1), (9.0, 2)):
            display.update(report(t, rollout, "starting" if t == 5.0 else "actor_train"))
        assert display.line("cp1") == "cp1: step 3, 9s elapsed, ETA ?, phase actor_train"


# -- plain lines --------------------------------------------------------------------------------

def test_plain_lines_come_every_n_seconds_and_at_a_new_phase_not_once_a_step():
    """Steps come every second for 100 s; slime's timers recur every step (they add a line the
    first time only), and four new ones within a second of start-up make one line, after the gap."""
    console = plain()
    with ArmsDisplay(["cp1"], 100, prefix="[cpverify r] ", console=console, every_s=30) as display:
        display.update(report(0.0, None, "starting"))
        display.update(report(0.5, None, "ranks up (cp=2)"))
        for t in range(1, 100):
            # phases alternate within each step, as slime's do
            display.update(report(t, t - 1, "actor_train"))
            display.update(report(t + 0.5, t - 1, "train_wait"))
            if t == 50:
                display.update(report(t + 0.7, t - 1, "save_model"))  # new: a line at once
    lines = console.file.getvalue().splitlines()
    assert [line.split(", ")[1] for line in lines] == [
        "0s elapsed", "5s elapsed",  # starting; then ranks up, actor_train, train_wait as one line, 5 s on
        "35s elapsed", "50s elapsed", "1m21s elapsed"]  # >= 30 s after the last line, whatever its reason
    assert lines[1] == "[cpverify r] cp1: step 5 of 100, 5s elapsed, ETA 1m35s, phase actor_train"
    assert lines[3].endswith("phase save_model")
    assert all(line.startswith("[cpverify r] cp1: step ") and "\x1b" not in line for line in lines)


def test_plain_lines_of_two_arms_keep_their_own_cadence():
    console = plain()
    with ArmsDisplay(["cp1", "cp2"], 8, console=console, every_s=10) as display:
        for t in range(25):
            display.update(report(t, t // 3, arm="cp1"))
            display.update(report(t, t // 3, arm="cp2"))
    lines = console.file.getvalue().splitlines()
    for arm in ("cp1", "cp2"):
        assert [line.split(", ")[1] for line in lines if line.startswith(arm)] == [
            "0s elapsed", "10s elapsed", "20s elapsed"]


@pytest.mark.parametrize("live", [True, False])
def test_the_display_is_redacted_like_every_terminal_line(capsys, live):
    """The default console writes to sys.stderr as it is at each write: the run's redacting stream."""
    secret, home_path = "s3cr3t-t0ken-value-123", "/home/alice/runs/x"
    with redacted_terminal(Redactor([secret])):
        console = Console(stderr=True, force_terminal=live, width=200, color_system=None)
        with ArmsDisplay(["cp1"], 16, console=console, auto_refresh=False) as display:
            display.update(report(1.0, None, f"{secret}:{home_path}"))
    err = capsys.readouterr().err
    assert secret not in err and home_path not in err
    assert "phase " in err


# -- the ETA ------------------------------------------------------------------------------------

@given(per_step=st.floats(0.01, 1e4), start=st.floats(0, 1e4), first=st.integers(0, 50),
       seen=st.integers(2, 50), extra=st.integers(0, 50), wait=st.floats(0, 1))
def test_at_a_steady_pace_the_eta_is_the_steps_left_times_the_pace(per_step, start, first, seen, extra, wait):
    """Start-up and the first step seen (warm-up, or the probe's unprinted warm-up steps) do not count."""
    total = first + seen + extra
    display = ArmsDisplay(["cp1"], total, console=plain(), every_s=1e9)
    for i in range(seen):
        display.update(report(start + i * per_step, first + i))
    at = start + (seen - 1 + wait) * per_step  # a while after the last step: the ETA counts down
    display.update(report(at, first + seen - 1))
    eta = display._arms["cp1"].eta_s(total)
    assert eta == pytest.approx(max(0.0, (extra - wait) * per_step), rel=1e-6, abs=1e-6)


def test_duration_words():
    assert [duration(s) for s in (-1, 0, 0.6, 59.9, 60, 185, 3599, 3600, 3725)] == [
        "0s", "0s", "0s", "59s", "1m00s", "3m05s", "59m59s", "1h00m", "1h02m"]
    assert [duration(s, up=True) for s in (-1, 0, 0.1, 59.1, 60)] == ["0s", "0s", "1s", "1m00s", "1m00s"]


# -- the phase, as real logs give it ------------------------------------------------------------

def phases(path: Path) -> list[str]:
    """The phases a display would show while `path` is being written, in order, each once."""
    parser, shown = LogParser(), []
    for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        parser.feed(line, lineno)
        phase = phase_of(parser.result())
        if not shown or shown[-1] != phase:
            shown.append(phase)
    return shown


def test_slime_phases_are_its_timers_the_innermost_running_one():
    shown = phases(SLIME_CP2)
    assert shown[:2] == ["starting", "ranks up (cp=2)"]
    first_rollout = shown[2:shown.index("actor_train") + 1]
    assert first_rollout == ["train_wait", "update_weights", "train_wait", "data_preprocess", "train_wait", "train",
                             "ref_log_probs", "train", "log_probs", "train", "actor_train"]
    assert shown[-1] == "train_wait"  # the last timer that ran stays shown


def test_probe_phases_come_from_its_layout_check_and_perf_lines():
    assert phases(PROBE_CP2) == ["starting", "ranks up (cp=2)", "warm-up steps", "timed steps"]


@given(st.lists(st.tuples(st.floats(0.01, 3.0), st.sampled_from(["starting", "train_wait", "ref_log_probs", "log_probs",
                                                                 "actor_train", "train", "save_model"])),
                max_size=60))
def test_no_two_plain_lines_of_an_arm_come_within_the_phase_gap(steps):
    from cpverify.progress import PHASE_GAP_S

    console, at = plain(), 0.0
    with ArmsDisplay(["cp1"], 16, console=console, every_s=30) as display:
        for gap, phase in steps:
            at += gap
            display.update(report(at, None, phase))
    shown = _elapsed(console)  # whole seconds, rounded down
    assert all(b - a >= PHASE_GAP_S - 1 for a, b in zip(shown, shown[1:]))


def _elapsed(console: Console) -> list[int]:
    """The elapsed seconds each plain line states."""
    return [int(duration_s) for duration_s in re.findall(r", (\d+)s elapsed", console.file.getvalue())]


def test_log_text_in_a_phase_cannot_act_on_the_terminal():
    console = terminal()
    with ArmsDisplay(["cp1"], 16, console=console, auto_refresh=False) as display:
        display.update(report(3.0, 0, "actor_train\x1b]52;c;ZWNobyBwd25lZA==\x07\rPASS[bold]x[/bold]"))
    raw = console.file.getvalue()
    assert "\x1b]52" not in raw and "\x07" not in raw
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07\\x0dPASS[bold]x[/bold]" in raw  # shown, markup as text
