"""slime's Timer lines (`Timer actor_train start`, `Timer actor_train end (elapsed: 2.9s)`): the
durations of the timers that ended, and the ones still open where the log stops."""

from __future__ import annotations

import re
import sys

from cpverify.parse.records import TimerRecord
from cpverify.parse.signatures import number

TIMER = re.compile(r"\bTimer (\S{1,200}) (start|end)\b(?: \(elapsed: ([-+\d.eE]+|nan|inf)s\))?")


class Timers:
    """Reads Timer lines; the durations go to `kept`, `open` holds each started timer's line."""

    def __init__(self, kept: list[TimerRecord]) -> None:
        self.kept = kept
        self.open: dict[str, int] = {}

    def line(self, msg: str, lineno: int) -> bool:
        """Read a message that holds `Timer `; False when it is no timer line."""
        m = TIMER.search(msg, msg.find("Timer "))  # a match starts with it
        if m is None:
            return False
        self.timed(m.group(1), m.group(2) == "start", m.group(3) or "", lineno)
        return True

    def timed(self, name: str, start: bool, elapsed: str, lineno: int) -> None:
        """Timer `name` started, or ended after `elapsed` seconds (as printed; "" when not)."""
        name = sys.intern(name)
        if start:
            self.open[name] = lineno
            return
        self.open.pop(name, None)
        seconds = number(elapsed)
        if seconds is not None:
            self.kept.append(TimerRecord(name, seconds, lineno))
