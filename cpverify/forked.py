"""Calls run in forked child processes while this process goes on: the logs given to `cpverify
verdict` are parsed side by side, one per spare CPU (a parse is pure Python, one CPU's work).

`Children` owns the children's lives (a context manager): leaving it, by an error or Ctrl-C,
kills and reaps every child not yet waited for. A child writes its call's result, pickled, into a
nameless file this process opened, and ends with `os._exit`, so it never runs this process's
cleanups (an atomic writer's `finally` would delete what this process is writing). A child that
fails in any way (its call raised, it was killed, its result would not pickle) gives nothing back,
and the call runs again in this process: its error, or its result, is then this process's own.

Only on Linux, where fork is cheap; and only from a process whose other threads the child never
needs (cpverify verdict has one, numpy's BLAS pool, which prepares itself for a fork and which no
child uses). Elsewhere, or with one usable CPU, no child is forked and every call runs here.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import tempfile
from collections.abc import Callable
from types import TracebackType
from typing import IO, Generic, TypeVar

T = TypeVar("T")

_STOPS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def usable_cpus() -> int:
    """The CPUs this process may run on (a container's or taskset's share, not the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Pending(Generic[T]):
    """A call's result: from the child running it, or (no child) the call's own."""

    def __init__(self, call: Callable[[], T], pid: int | None = None, out: IO[bytes] | None = None,
                 here: Callable[[], T] | None = None) -> None:
        self._call, self._pid, self._out, self._status = here or call, pid, out, 0
        self._value: T | None = call() if pid is None else None

    @classmethod
    def done(cls, value: T) -> Pending[T]:
        """A result there already."""
        return cls(lambda: value)

    def finished(self) -> bool:
        """Its child has ended (or it had none): a result is there to read."""
        if self._pid is None:
            return True
        pid, status = os.waitpid(self._pid, os.WNOHANG)
        if pid == 0:
            return False
        self._pid, self._status = None, status
        return True

    def result(self) -> T:
        if self._out is None:
            return self._value  # type: ignore[return-value]
        if self._pid is not None:
            _, self._status = os.waitpid(self._pid, 0)
            self._pid = None
        with self._out as out:
            self._out = None
            if os.waitstatus_to_exitcode(self._status) == 0:
                out.seek(0)
                with contextlib.suppress(Exception):
                    self._value = pickle.load(out)
                    return self._value
        self._value = self._call()  # the child gave nothing back: its error, or its result, is this process's own
        return self._value

    def kill(self) -> None:
        """Stop the child now and reap it (a result not yet read is dropped)."""
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            os.waitpid(self._pid, 0)
            self._pid = None
        if self._out is not None:
            self._out.close()
            self._out = None


class Children:
    """Forks a child per `start`ed call, at most `limit` at once (by default one per usable CPU but
    the one this process runs on)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = max(usable_cpus() - 1, 0) if limit is None else limit
        if not sys.platform.startswith("linux"):
            self.limit = 0
        self._started: list[Pending] = []

    def __enter__(self) -> Children:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        for pending in self._started:
            pending.kill()

    def free(self) -> bool:
        """A child may be forked now: fewer than `limit` are running."""
        return sum(not pending.finished() for pending in self._started) < self.limit

    def start(self, call: Callable[[], T], *, here: Callable[[], T] | None = None) -> Pending[T]:
        """`call()` in a child process; here, at once, when no child may be forked now. `here`: what
        this process runs instead when the child gives nothing back (by default `call` again)."""
        if not self.free():
            return Pending(call)
        out = tempfile.TemporaryFile()  # nameless; the result waits there, however large, until it is read
        # Stop signals wait, blocked, until each side has set itself up: in the child, one before its
        # own handlers would unwind this process's stack there; here, one is raised only once the
        # child is in `_started`, where leaving the block kills and reaps it.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        try:
            try:
                pid = os.fork()
            except BaseException:
                out.close()
                raise
            if pid == 0:
                _child(call, out, blocked)
            pending: Pending[T] = Pending(call, pid, out, here)
            self._started.append(pending)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return pending


def _child(call: Callable[[], object], out: IO[bytes], blocked: set[int | signal.Signals]) -> None:
    """The child's whole life: the call, its result into `out`, and `os._exit` whatever happens."""
    status = 1
    try:
        for stop in _STOPS:
            signal.signal(stop, signal.SIG_DFL)  # stopped, it just ends: nothing of its own to clean
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        pickle.dump(call(), out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()
        status = 0
    finally:
        os._exit(status)
