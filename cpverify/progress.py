"""What a person sees while the arms run: one line per arm, `step k of n, elapsed, ETA, phase`.

The runners' log watcher reports each arm about once a second (cpverify.runners._watch.Progress);
ArmsDisplay turns the reports into

  * on a terminal, a rich live display redrawn in place, one line per arm of the step (the arms
    still to come say `waiting`, finished ones how they ended); what cpverify prints meanwhile
    goes above it, and leaving the `with` block (Ctrl-C included) stops it, cursor shown again;
  * elsewhere (CI, `nox ... 2>&1 | tee`, a compose service) plain lines, one per arm at most
    every `every_s` seconds (CPVERIFY_PROGRESS_S, default 30) and whenever the arm enters a
    phase it had not been in before (slime's timers recur every rollout: they add a line the
    first time only), e.g.

        [cpverify RUN] cp1: step 6 of 16, 1m05s elapsed, ETA 1m40s, phase actor_train

Both write to sys.stderr as it is when they write, so the run's terminal redaction
(cpverify.redact.redacted_terminal) sees every line, as it sees everything else cpverify prints.

`n` is what the plan starts every arm with (Profile.planned_rollouts: slime's --num-rollout, the
probe's warm-up plus measured steps); `k` counts from the last rollout with a train-side perf
record (the verdict counts rollouts the same way). The ETA leaves out start-up and the first
step seen: it is the time per step since then, times the steps left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cpverify.config import DEFAULT_PROGRESS_S

if TYPE_CHECKING:
    from rich.progress import Progress as Bars
    from rich.progress import TaskID

    from cpverify.parse import ParsedLog
    from cpverify.runners._watch import Progress

QUIET_AFTER_S = 60.0  # an arm silent this long says so (the hang limit is minutes away, not here)


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
        self.phase = report.phase
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
        `console`: a rich Console (tests pass one that records); by default one on sys.stderr."""
        from rich.console import Console

        self.total = total
        self.prefix = prefix
        self.every_s = every_s
        self.console = console if console is not None else Console(stderr=True)
        self.live = self.console.is_terminal
        self._arms = {name: _Arm(name) for name in arms}
        self._auto_refresh = auto_refresh
        self._bars: Bars | None = None
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> ArmsDisplay:
        if self.live:
            from rich.progress import BarColumn, Progress, TextColumn

            self._bars = bars = Progress(
                TextColumn("{task.fields[arm]}"), BarColumn(bar_width=24), TextColumn("{task.fields[text]}"),
                console=self.console, auto_refresh=self._auto_refresh, transient=False,
            )
            for name, arm in self._arms.items():
                self._tasks[name] = bars.add_task("", total=self.total, arm=name, text=arm.text(self.total))
            bars.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._bars is not None:
            self._bars.stop()  # on Ctrl-C too: the cursor comes back and the last frame stays
            self._bars = None

    def update(self, report: Progress) -> None:
        arm = self._arms.setdefault(report.arm, _Arm(report.arm))
        new_phase = arm.update(report)
        if self._bars is not None:
            self._show(arm)
        elif not self.live and (new_phase or arm.printed_at is None
                                or report.elapsed_s - arm.printed_at >= self.every_s):
            arm.printed_at = report.elapsed_s
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
