"""slime's Timer lines (`Timer actor_train start`, `Timer actor_train end (elapsed: 2.9s)`): the
durations of the timers that ended, and the ones still open where the log stops."""

from __future__ import annotations

import re
import sys

from cpverify.parse.records import TimerRecord
from cpverify.parse.signatures import number

TIMER = re.compile(r"\bTimer (\S{1,200}) (start|end)\b(?: \(elapsed: ([-+\d.eE]+|nan|inf)s\))?")
# A Timer line as slime prints it (`(Actor pid=N) [date time] timer.py:N - Timer NAME start`, or `end
# (elapsed: Xs)`), in bytes. To the parser such a line is a timer and nothing else: none of its
# characters make a traceback, a record, a cpverify line, a repeat or a piece of a `\r` line, and an
# elastic table's row starts with its words, never a timestamp. So while no traceback or wrapped
# message is open it is read without being decoded or tried as any other kind (LogParser._feed_gated);
# any other timer line goes the long way. A slime log is mostly these lines.
PLAIN_TIMER = re.compile(
    rb"(?:\([A-Za-z_][\w.:-]* pid=\d+(?:, ip=[\w.:-]+)?\) )?\[[\d :,.-]{1,40}\] \w{1,64}\.py:\d{1,6} - "
    rb"Timer (\w{1,200}) (?:(start)|end(?: \(elapsed: ([-+\d.eE]+|nan|inf)s\))?)")


class Timers:
    """Reads Timer lines; the durations go to `kept`, `open` holds each started timer's line."""

    def __init__(self, kept: list[TimerRecord]) -> None:
        self.kept = kept
        self.open: dict[str, int] = {}

    def plain(self, line: bytes, lineno: int) -> bool:
        """Read `line` if it is a Timer line in slime's own shape (PLAIN_TIMER)."""
        m = PLAIN_TIMER.fullmatch(line) if b" - Timer " in line else None
        if m is None:
            return False
        self._timed(m.group(1).decode("ascii"), m.group(2) is not None, (m.group(3) or b"").decode("ascii"), lineno)
        return True

    def line(self, msg: str, lineno: int) -> bool:
        """Read a message that holds `Timer `; False when it is no timer line."""
        m = TIMER.search(msg, msg.find("Timer "))  # a match starts with it
        if m is None:
            return False
        self._timed(m.group(1), m.group(2) == "start", m.group(3) or "", lineno)
        return True

    def _timed(self, name: str, start: bool, elapsed: str, lineno: int) -> None:
        """Timer `name` started, or ended after `elapsed` seconds (as printed; "" when not)."""
        name = sys.intern(name)
        if start:
            self.open[name] = lineno
            return
        self.open.pop(name, None)
        seconds = number(elapsed)
        if seconds is not None:
            self.kept.append(TimerRecord(name, seconds, lineno))
