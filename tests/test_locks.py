"""GPU locks with real flock(2) between real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from cpverify.config import LOCK_DIR_ENV
from cpverify.errors import EXIT_BLOCKED, InputError, LockHeld
from cpverify.locks import GpuLock, lock_path, read_holder
from helpers.runner_util import TESTS, pid_alive


def hold_in_child(tmp_path, gpus, run_id):
    """A separate process holding GpuLock(gpus) until killed; returns it once it holds."""
    code = textwrap.dedent(f"""
        import sys, time
        from cpverify.locks import GpuLock
        lock = GpuLock({list(gpus)!r}, run_id={run_id!r}, directory={str(tmp_path)!r}).acquire()
        print("held", flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(TESTS.parent)})
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_second_run_on_the_same_gpu_is_refused_naming_the_holder(tmp_path):
    child = hold_in_child(tmp_path, [0, 1], "run-first")
    try:
        with pytest.raises(LockHeld) as raised:
            GpuLock([1], run_id="run-second", directory=tmp_path).acquire()
        message = str(raised.value)
        assert "GPU 1" in message and "run-first" in message and f"pid {child.pid}" in message
        assert f"kill {child.pid}" in raised.value.fix
        assert raised.value.exit_code == EXIT_BLOCKED
    finally:
        child.kill()
        child.wait()


def test_the_lock_frees_itself_when_the_holder_dies_even_by_sigkill(tmp_path):
    child = hold_in_child(tmp_path, [0], "run-killed")
    child.send_signal(signal.SIGKILL)
    child.wait()
    with GpuLock([0], run_id="run-next", directory=tmp_path) as lock:
        assert lock.held
        assert read_holder(lock_path(0, tmp_path))["run_id"] == "run-next"


def test_all_or_nothing_when_one_gpu_is_taken(tmp_path):
    child = hold_in_child(tmp_path, [1], "run-on-gpu1")
    try:
        lock = GpuLock([0, 1], run_id="wants-both", directory=tmp_path)
        with pytest.raises(LockHeld):
            lock.acquire()
        assert not lock.held
        with GpuLock([0], run_id="wants-gpu0", directory=tmp_path):  # GPU 0 was given back
            pass
    finally:
        child.kill()
        child.wait()


def test_disjoint_gpus_do_not_conflict_and_release_frees(tmp_path):
    first = GpuLock([0, 1], run_id="a", directory=tmp_path).acquire()
    with GpuLock([2, 3], run_id="b", directory=tmp_path):
        pass
    with pytest.raises(LockHeld):  # flock conflicts between two opens in one process as well
        GpuLock([1], run_id="c", directory=tmp_path).acquire()
    first.release()
    assert read_holder(lock_path(0, tmp_path)) is None  # no stale holder info left behind
    with GpuLock([1], run_id="c", directory=tmp_path):
        pass


def test_children_of_the_holder_do_not_inherit_the_lock(tmp_path):
    """An orphaned workload process must not keep the GPUs locked after cpverify is gone."""
    lock = GpuLock([0], run_id="parent", directory=tmp_path).acquire()
    workload = subprocess.Popen(["sleep", "30"], close_fds=False)
    try:
        lock.release()
        assert pid_alive(workload.pid)
        with GpuLock([0], run_id="next", directory=tmp_path):
            pass
    finally:
        workload.kill()
        workload.wait()


def test_lock_dir_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    with GpuLock(["GPU-3f2a9c1e-0000-1111-2222-333344445555"], run_id="uuid-run"):
        files = list((tmp_path / "locks").iterdir())
        assert [f.name for f in files] == ["cpverify-gpu-GPU-3f2a9c1e-0000-1111-2222-333344445555.lock"]


def test_a_gpu_id_that_is_not_a_file_name_is_rejected(tmp_path):
    with pytest.raises(InputError, match="not an index or a UUID"):
        GpuLock(["../etc/passwd"], run_id="x", directory=tmp_path)

