"""The plots drawn by a child process (cpverify.report.plot_process): the same PNGs as drawn here,
every text redacted by this process's redactor (the one that numbers hosts), and drawn here when the
child gives nothing back."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from cpverify.forked import Children
from cpverify.redact import Redactor
from cpverify.report import plots
from cpverify.report.plot_process import PlotProcess
from test_plots import sweep  # noqa: F401  # the CP x length sweep's verdict: five plots, many texts

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="children are forked on Linux only")

PLANTED = "{name} on gpu-node-17.corp.example.com token=abc123secret"


def _planted(verdict) -> None:
    verdict.labels.update({name: PLANTED.format(name=name) for name in verdict.labels})


def _drawn(rendered) -> list[tuple[str, str, bytes]]:
    return [(plot.file, plot.title, image) for plot, image in rendered]


def test_the_child_draws_what_this_process_would_draw(sweep) -> None:  # noqa: F811
    verdict, _ = sweep
    _planted(verdict)
    here_scrub, there_scrub = Redactor(), Redactor()
    here, here_note = plots.render(verdict, scrub=here_scrub)
    with Children(limit=1) as children:
        process = PlotProcess(children)
        assert process._pending is not None  # a child was forked: what follows is its drawing
        there, there_note = process.start(verdict, there_scrub)()
    assert all(plot.figure is None for plot, _ in there)  # drawn in the child: only the PNGs came back
    assert _drawn(there) == _drawn(here) and there_note == here_note
    # Every text went through this process's redactor: it learned the host and numbered it, as here.
    assert there_scrub.pseudonyms.known_hosts()[0] == here_scrub.pseudonyms.known_hosts()[0] != []


def test_a_child_that_dies_leaves_the_plots_to_this_process(sweep) -> None:  # noqa: F811
    verdict, _ = sweep
    here, _ = plots.render(verdict, scrub=Redactor())
    with Children(limit=1) as children:
        process = PlotProcess(children)
        os.kill(process._pending._pid, signal.SIGKILL)  # type: ignore[union-attr, arg-type]
        there, _ = process.start(verdict, Redactor())()
    assert _drawn(there) == _drawn(here)
    assert all(plot.figure is not None for plot, _ in there)  # drawn here


def test_with_no_spare_cpu_the_plots_are_drawn_here(sweep) -> None:  # noqa: F811
    verdict, _ = sweep
    with Children(limit=0) as children:
        process = PlotProcess(children)
        assert process._pending is None
        there, _ = process.start(verdict, Redactor())()
    assert _drawn(there) == _drawn(plots.render(verdict, scrub=Redactor())[0])
