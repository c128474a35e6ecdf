"""tqdm progress bars in a log: the pace a bar measured, and a bar that never moved.

A bar that measured its pace (`Update weights:   6%|▋   | 1/16 [11:01<2:45:20, 661.36s/it]`) says
how long its next item should take: a slow one is watched until it moves on or finishes (the parser,
cpverify.parse.parser.LogParser._bar) and gives the watcher's hang limit its patience
(cpverify.runners.watch). A bar still at 0/N after HANG_NO_PROGRESS_S is printed only when tqdm closes
or redraws it: it never moved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

SLOW_SECONDS_PER_ITEM = 300.0  # a tqdm bar this slow per item may be stuck: it is watched until it moves
HANG_NO_PROGRESS_S = 600.0  # a bar at 0/N for this long is stuck
# A tqdm bar that measured its rate: `desc: 6%|▋   | 1/16 [11:01<2:45:20, 661.36s/it]`.
_TQDM_RATE = re.compile(
    r"(?<!\d)([0-9]{1,12})/([0-9]{1,12}) \[((?:[0-9]{1,6}:)?[0-9]{1,2}:[0-9]{2})<[^,\]]*,"
    r"\s*([0-9]{1,12}(?:\.[0-9]{1,6})?)s/it\]"
)
_TQDM_PERCENT = re.compile(r"\s*\d{1,3}%\|[^|]*\|\s*$")
TQDM_STILL = re.compile(r"\b0/([0-9]{1,12}) \[((?:[0-9]{1,6}:)?[0-9]{1,2}:[0-9]{2})<\?, \?it/s\]")


def clock_s(text: str) -> float:
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


@dataclass(frozen=True)
class Bar:
    """The last state a tqdm bar printed: its description, items done of total, seconds so far and per item."""

    desc: str
    done: int
    total: int
    elapsed_s: float
    s_per_it: float

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    @property
    def slow(self) -> bool:
        return self.s_per_it >= SLOW_SECONDS_PER_ITEM

    def detail(self) -> dict[str, Any]:
        return {"s_per_it": self.s_per_it, "done": self.done, "total": self.total, "elapsed_s": self.elapsed_s}


def last_bar(text: str) -> Bar | None:
    """The last tqdm state in `text` that shows a rate in seconds per item (`... 1/16 [11:01<2:45:20,
    661.36s/it]`); None when it holds none. A bar redrawn with carriage returns: its last drawing."""
    at = text.rfind("s/it]")
    if at == -1:
        return None
    start = text.rfind("\r", 0, at) + 1
    m = None
    for found in _TQDM_RATE.finditer(text, start):  # the last drawing on the line
        m = found
    if m is None:
        return None
    desc = _TQDM_PERCENT.sub("", text[start : m.start()]).strip().removesuffix(":")  # tqdm: `{desc}: {pct}%|`
    return Bar(desc, int(m.group(1)), int(m.group(2)), clock_s(m.group(3)), float(m.group(4)))


def still_bar(m: re.Match[str] | None, _t: str) -> dict[str, Any] | None:
    assert m is not None
    elapsed = clock_s(m.group(2))
    return {"done": 0, "total": int(m.group(1)), "elapsed_s": elapsed} if elapsed >= HANG_NO_PROGRESS_S else None
