"""cpverify.forked: calls run in forked children come back as the call's own result; a child that
fails gives the call back to this process; no child outlives the `Children` block, however it ends;
a child never runs this process's cleanups."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from cpverify.errors import InputError
from cpverify.forked import Children

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="children are forked on Linux only")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _children_of_this_process() -> set[int]:
    """This process's child processes, as the kernel lists them (zombies included: an unreaped child is one too)."""
    found = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        children = task / "children"
        if children.exists():
            found |= {int(pid) for pid in children.read_text().split()}
    return found


def test_a_call_comes_back_from_its_child_as_its_own_result() -> None:
    parent = os.getpid()
    with Children(limit=2) as children:
        pending = [children.start(lambda n=n: (n * n, os.getpid())) for n in range(2)]
        results = [p.result() for p in pending]
    assert [value for value, _ in results] == [0, 1]
    assert all(pid != parent for _, pid in results)  # each ran in a child


def test_with_no_child_allowed_the_call_runs_here() -> None:
    with Children(limit=0) as children:
        assert children.start(os.getpid).result() == os.getpid()


def test_past_the_limit_a_call_runs_here() -> None:
    with Children(limit=1) as children:
        first = children.start(lambda: (time.sleep(1), os.getpid())[1])
        second = children.start(os.getpid)
        assert second.result() == os.getpid()
        assert first.result() != os.getpid()


def test_a_call_that_raises_in_its_child_raises_here(tmp_path: Path) -> None:
    calls = tmp_path / "calls"

    def refuse() -> None:
        with calls.open("a") as f:
            f.write(f"{os.getpid()}\n")
        raise InputError("bad log", "pass another")

    with Children(limit=1) as children:
        pending = children.start(refuse)
        with pytest.raises(InputError) as raised:
            pending.result()
    assert raised.value.fix == "pass another"
    pids = [int(pid) for pid in calls.read_text().split()]
    assert len(pids) == 2 and pids[-1] == os.getpid()  # tried in the child, then here


def test_a_child_killed_gives_the_call_back_to_this_process() -> None:
    parent = os.getpid()
    with Children(limit=1) as children:
        pending = children.start(lambda: (time.sleep(30) if os.getpid() != parent else None, os.getpid())[1])
        os.kill(pending._pid, signal.SIGKILL)  # type: ignore[arg-type]  # as the OOM killer would
        assert pending.result() == parent


def test_a_child_never_runs_this_process_cleanups(tmp_path: Path) -> None:
    """A call that raises in the child ends the child there: the caller's `finally` runs once, here."""
    ran = tmp_path / "finally"

    def boom() -> None:
        raise RuntimeError("in the call")

    try:
        with Children(limit=1) as children:
            pending = children.start(boom)
            while not pending.finished():
                time.sleep(0.01)
    finally:
        with ran.open("a") as f:
            f.write(f"{os.getpid()}\n")
    assert ran.read_text().split() == [str(os.getpid())]


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_no_child_outlives_the_block(stop: type[BaseException]) -> None:
    before = _children_of_this_process()
    pids = []
    with pytest.raises(stop), Children(limit=2) as children:
        for _ in range(2):
            pending = children.start(lambda: time.sleep(60))
            pids.append(pending._pid)
        raise stop()
    assert not any(_alive(pid) for pid in pids)
    assert _children_of_this_process() == before  # killed and reaped: no zombie left either


def test_a_stop_that_comes_during_the_fork_leaves_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    real_fork = os.fork

    def fork_under_ctrl_c() -> int:
        os.kill(os.getpid(), signal.SIGINT)  # blocked around the fork: raised once start() lets it through
        return real_fork()

    monkeypatch.setattr(os, "fork", fork_under_ctrl_c)
    before = _children_of_this_process()
    with pytest.raises(KeyboardInterrupt), Children(limit=1) as children:
        children.start(lambda: time.sleep(60))
    assert _children_of_this_process() == before


def test_ctrl_c_in_the_terminal_stops_parent_and_child_and_leaves_nothing(tmp_path: Path) -> None:
    """SIGINT to the whole process group, as a terminal's Ctrl-C sends it, while a child runs."""
    script = tmp_path / "run.py"
    pids = tmp_path / "pids"
    script.write_text(f"""
import os, sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
from cpverify.forked import Children
with Children(limit=1) as children:
    pending = children.start(lambda: time.sleep(60))
    open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{pending._pid}}")
    pending.result()
""")
    import subprocess

    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not (pids.exists() and len(pids.read_text().split()) == 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    _, child = map(int, pids.read_text().split())
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and b"KeyboardInterrupt" in err  # the parent stopped as Ctrl-C stops it
    assert not _alive(child)
