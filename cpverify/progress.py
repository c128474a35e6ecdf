"""What a person sees while the arms run: one line per arm, `step k of n, elapsed, ETA, phase`.

The runners' log watcher reports each arm about once a second (cpverify.runners.watch.Progress);
ArmsDisplay turns the reports into

  * on a terminal, a rich live display redrawn in place, one line per arm of the step (the arms
    still to come say `waiting`, finished ones how they ended); what cpverify prints meanwhile
    goes above it, and leaving the `with` block (Ctrl-C included) stops it, cursor shown again;
  * elsewhere (CI, `nox ... 2>&1 | tee`, a compose service) plain lines, one per arm at most
    every `every_s` seconds (CPVERIFY_PROGRESS_S, default 30) and when the arm enters a phase it
    had not been in before (slime's timers recur every rollout: they add a line the first time
    only), but never two lines of an arm within PHASE_GAP_S (slime passes through four timers in
    a second at start-up: the line after the gap says where it is then), e.g.

        [cpverify RUN] cp1: step 6 of 16, 1m05s elapsed, ETA 1m40s, phase actor_train

Both write through the run's terminal stream (cpverify.redact.redacted_terminal), so every line
is redacted and made inert (cpverify.terminal.inert) as everything else cpverify prints. The live
display draws with rich's cursor sequences: it writes them through the stream's `with_controls()`
view, after making the text it draws (the phase is a log's text) inert itself, and what is printed
meanwhile is made inert before rich's proxy puts it above the display.

`n` is what the plan starts every arm with (Profile.planned_rollouts: slime's --num-rollout, the
probe's warm-up plus measured steps); `k` counts from the last rollout with a train-side perf
record (the verdict counts rollouts the same way). The ETA leaves out start-up and the first
step seen: it is the time per step since then, times the steps left.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cpverify.config import DEFAULT_PROGRESS_S
from cpverify.terminal import inert

if TYPE_CHECKING:
    from rich.progress import Progress as Bars
    from rich.progress import TaskID

    from cpverify.parse import ParsedLog
    from cpverify.runners.watch import Progress

QUIET_AFTER_S = 60.0  # an arm silent this long says so (the hang limit is minutes away, not here)
PHASE_GAP_S = 5.0  # plain mode: a new phase adds a line, but not within this long of the arm's last one


def phase_of(parsed: ParsedLog) -> str:
    """What the workload is doing now, as its log says so far."""
    if parsed.timers_open:
        return parsed.timers_open[-1][0]  # slime: the last of its Timers that started and is running
    if parsed.timers:
        return parsed.timers[-1].name  # between two, or after the last: the one that just ended
    if parsed.checks:  # only the probe prints cpverify-check lines: its correctness gate ran
        return "timed steps" if parsed.perf else "warm-up steps"
    if parsed.layout is not None:
        return f"ranks up (cp={parsed.layout.cp})"
    return "starting"


def duration(seconds: float, *, up: bool = False) -> str:
    """`45s`, `3m05s`, `1h02m`: short, fixed words, easy to grep and to read. Whole seconds down
    (what has run), or `up` (what is left: an ETA never says 0s while a step is still to come)."""
    seconds = max(0, math.ceil(seconds) if up else math.floor(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


@dataclass
class _Arm:
    name: str
    done: int = 0  # steps finished
    elapsed_s: float = 0.0
    idle_s: float = 0.0
    phase: str = ""
    phases: set[str] = field(default_factory=set)
    first: tuple[float, int] | None = None  # (elapsed, done) when a finished step was first seen
    last: tuple[float, int] | None = None  # (elapsed, done) when `done` last grew
    printed_at: float | None = None  # plain mode: the elapsed time of the last line
    unsaid: bool = False  # plain mode: a new phase came within PHASE_GAP_S of the last line
    ended: str = ""  # how the arm ended, once it has

    def update(self, report: Progress) -> bool:
        """Take a report; True when it shows a phase this arm had not shown before."""
        step = report.rollout if report.rollout is not None else report.step
        done = 0 if step is None else step + 1
        self.elapsed_s, self.idle_s = report.elapsed_s, report.idle_s
        if done > self.done:
            self.done = done
            self.last = (report.elapsed_s, done)
            self.first = self.first or self.last
        self.phase = inert(report.phase)  # a log's text: it reaches the terminal
        new = report.phase not in self.phases
        self.phases.add(report.phase)
        return new

    def eta_s(self, total: int | None) -> float | None:
        if total is None or self.first is None or self.last is None or self.last[1] == self.first[1]:
            return None
        per_step = (self.last[0] - self.first[0]) / (self.last[1] - self.first[1])
        return max(0.0, (total - self.done) * per_step - (self.elapsed_s - self.last[0]))

    def text(self, total: int | None) -> str:
        """`step 6 of 16, 1m05s elapsed, ETA 1m40s, phase actor_train`, the same in both modes."""
        if not self.phases and not self.ended:
            return "waiting"
        words = [f"step {self.done}" + (f" of {total}" if total is not None else ""),
                 f"{duration(self.elapsed_s)} elapsed"]
        if self.ended:
            return ", ".join([*words, self.ended])
        eta = self.eta_s(total)
        words.append("ETA " + ("?" if eta is None else duration(eta, up=True)))
        words.append(f"phase {self.phase}")
        if self.idle_s >= QUIET_AFTER_S:
            words.append(f"no output for {duration(self.idle_s)}")
        return ", ".join(words)


class ArmsDisplay:
    """The arms of one step, shown while they run (a context manager; `update` is the runners'
    on_progress callback, `finish` marks an arm ended)."""

    def __init__(self, arms: list[str], total: int | None, *, prefix: str = "", console=None,
                 every_s: float = DEFAULT_PROGRESS_S, auto_refresh: bool = True) -> None:
        """`total`: the steps each arm is planned to run, None when the plan does not say.
        `console`: a rich Console (tests pass one that records); by default one on sys.stderr's
        terminal, drawing through its `with_controls()` view where it has one (the run's stream)."""
        from rich.console import Console

        self.total = total
        self.prefix = prefix
        self.every_s = every_s
        if console is None:
            console = Console(stderr=True)
            drawing = getattr(sys.stderr, "with_controls", None)
            if console.is_terminal and drawing is not None:
                console = Console(file=drawing())
        self.console = console
        self.live = self.console.is_terminal
        self._arms = {name: _Arm(name) for name in arms}
        self._auto_refresh = auto_refresh
        self._bars: Bars | None = None
        self._tasks: dict[str, TaskID] = {}
        self._streams: tuple = ()

    def __enter__(self) -> ArmsDisplay:
        if self.live:
            from rich.file_proxy import FileProxy
            from rich.progress import BarColumn, Progress, TextColumn

            # markup=False: `[` in a log's text is text, not rich markup
            self._bars = bars = Progress(
                TextColumn("{task.fields[arm]}", markup=False), BarColumn(bar_width=24),
                TextColumn("{task.fields[text]}", markup=False),
                console=self.console, auto_refresh=self._auto_refresh, transient=False,
                redirect_stdout=False, redirect_stderr=False,
            )
            for name, arm in self._arms.items():
                self._tasks[name] = bars.add_task("", total=self.total, arm=name, text=arm.text(self.total))
            bars.start()
            # What is printed meanwhile goes above the display (rich's proxy), made inert before the
            # proxy's ANSI decoder reads it (it would act on a log's \r and colours).
            self._streams = (sys.stdout, sys.stderr)
            sys.stdout, sys.stderr = (_Above(FileProxy(self.console, stream)) for stream in self._streams)
        return self

    def __exit__(self, *exc) -> None:
        if self._streams:
            for proxy in (sys.stdout, sys.stderr):
                proxy.flush()
            sys.stdout, sys.stderr = self._streams
            self._streams = ()
        if self._bars is not None:
            self._bars.stop()  # on Ctrl-C too: the cursor comes back and the last frame stays
            self._bars = None

    def update(self, report: Progress) -> None:
        arm = self._arms.setdefault(report.arm, _Arm(report.arm))
        new_phase = arm.update(report)
        if self._bars is not None:
            self._show(arm)
        elif not self.live:
            since = None if arm.printed_at is None else report.elapsed_s - arm.printed_at
            arm.unsaid = arm.unsaid or new_phase
            if since is None or since >= self.every_s or (arm.unsaid and since >= PHASE_GAP_S):
                arm.printed_at, arm.unsaid = report.elapsed_s, False
                self._print(arm)

    def finish(self, name: str, how: str) -> None:
        """The arm ended (`ok (exit 0)`, `failed (exit 1)`): its line says so from now on."""
        arm = self._arms.setdefault(name, _Arm(name))
        arm.ended = how
        self._show(arm)

    def line(self, name: str) -> str:
        """The arm's plain line, as a non-terminal shows it."""
        return f"{self.prefix}{name}: {self._arms[name].text(self.total)}"

    def _show(self, arm: _Arm) -> None:
        bars, text = self._bars, arm.text(self.total)
        if bars is None:
            return
        if arm.name not in self._tasks:  # an arm the step did not name: a line of its own
            self._tasks[arm.name] = bars.add_task("", total=self.total, arm=arm.name, text=text)
        bars.update(self._tasks[arm.name], completed=arm.done, text=text)
        if not self._auto_refresh:
            bars.refresh()

    def _print(self, arm: _Arm) -> None:
        # Through the console's file, which for the default console is sys.stderr as it is now
        # (the run's redacting stream): no markup, no colour, no wrapping, one line.
        out = self.console.file
        out.write(self.line(arm.name) + "\n")
        out.flush()


class _Above:
    """sys.stdout or sys.stderr while the live display runs: rich's proxy, which prints above the
    display, fed inert text (inert() is safe on any piece of a line: it never joins two)."""

    def __init__(self, proxy) -> None:
        self._proxy = proxy

    def write(self, text: str) -> int:
        self._proxy.write(inert(text))
        return len(text)

    def __getattr__(self, name: str):  # flush, isatty, fileno, encoding: the proxy's
        return getattr(self._proxy, name)
