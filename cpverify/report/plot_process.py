"""The plots drawn by a child process forked before the logs are read (cpverify.forked): it imports
matplotlib at once, while this process reads the logs (0.25 s of CPU on a lean machine, 2.7 s in a
GPU host's torch environment: benchmarks/verdict_throughput.md), and draws once the verdict is
there. Every text it draws is redacted here, by this process's redactor, one request at a time: only
this process learns a host and numbers it, so a host is the same host-N in a PNG and in verdict.md.

Where no child could be forked, or the child gives nothing back, the plots are drawn here
(cpverify.report.plots.render), as they would have been without it. The verdict and the texts travel
pickled through a pipe made before the fork: only the two processes hold its ends (the one
unpickling of cpverify's besides forked.py's, tests/faults/test_hostile_logs.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe

from cpverify.forked import Children, Pending
from cpverify.report.plots import Plot, Rendered, drawn_now, png, redacted_figures, render
from cpverify.verdict import Verdict

Drawn = tuple[list[tuple[str, str, bytes]], str]  # ([(file, title, PNG)], note), as the child sends it


class PlotProcess:
    """`render` of cpverify.report.plots, in a child forked now (by `children`) if one may be."""

    def __init__(self, children: Children) -> None:
        self._pending: Pending[Drawn | None] | None = None
        if children.free():
            self._conn, theirs = Pipe()
            self._pending = children.start(functools.partial(_draw, theirs, self._conn), here=_nothing)
            theirs.close()  # the child's end: once it is gone, a read here ends

    def start(self, verdict: Verdict, scrub: Callable[[str], str]) -> Callable[[], Rendered]:
        """Hand the child `verdict` and redact the texts it will draw; the function returned waits for
        its drawing (render()'s answer: drawn here if the child gives nothing back)."""
        if self._pending is None:
            return drawn_now(verdict, scrub)
        try:
            self._conn.send(verdict)
            while (text := self._conn.recv()) is not None:  # the texts it will draw, each redacted here
                self._conn.send(scrub(text))
        except (OSError, EOFError):  # it ended early: what it drew, or nothing
            pass
        return functools.partial(self._finish, verdict, scrub)

    def _finish(self, verdict: Verdict, scrub: Callable[[str], str]) -> Rendered:
        assert self._pending is not None
        drawn = self._pending.result()
        self._conn.close()
        if drawn is None:
            return render(verdict, scrub=scrub)
        plots, note = drawn
        return [(Plot(file, title, None), image) for file, title, image in plots], note


def _nothing() -> None:
    return None


def _draw(conn: Connection, ours: Connection) -> Drawn:
    """The child: matplotlib imported before the verdict comes, every text sent back to be redacted."""
    ours.close()  # this process's end: a parent that is gone ends the wait below
    try:
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.figure  # noqa: F401
    except ImportError:
        pass  # redacted_figures says so
    verdict = conn.recv()

    def scrub(text: str) -> str:
        conn.send(text)
        return conn.recv()

    plots, note = redacted_figures(verdict, scrub)
    conn.send(None)  # every text redacted: this process draws on its own
    return [(plot.file, plot.title, png(plot.figure)) for plot in plots], note
