"""GPU locks: a second cpverify run on the same GPUs refuses at once, naming the first.
(The same mechanism keeps a second cpverify out of a run directory in use: RunDirLock.)

Two runs sharing GPUs would measure each other (and OOM each other), so the numbers of
both would be worthless. Each GPU gets a lock file, `<dir>/cpverify-gpu-<id>.lock`,
held with flock(2) for as long as the run lasts:
  * the kernel drops the lock when the holding process exits, however it exits
    (kill -9, OOM killer, power loss of the shell): there is never a stale lock to delete;
  * the file holds the holder's pid, run id, host and start time, so the refusal can say
    who to wait for.
The default directory is /tmp, not $TMPDIR, because two users with different TMPDIRs
share the same GPUs; CPVERIFY_LOCK_DIR overrides it (e.g. a directory on a shared mount
is NOT safe: flock over NFS is not reliable, keep it local). Anyone can put a file in /tmp,
so a lock file is opened without following a link and only if it is a regular file of one
name (artifacts.open_in_place), and who holds it is read from the descriptor that was locked.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import os
import re
import socket
from collections.abc import Iterable
from pathlib import Path

from cpverify import config
from cpverify.artifacts import fix_for_write, open_in_place
from cpverify.config import LOCK_DIR_ENV
from cpverify.errors import ArtifactWriteError, InputError, LockHeld


def lock_path(gpu_id: int | str, directory: Path | None = None) -> Path:
    name = str(gpu_id)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise InputError(f"GPU id {gpu_id!r} is not an index or a UUID", fix="use ids like 0, 1 or GPU-<uuid>")
    return (directory or config.lock_dir()) / f"cpverify-gpu-{name}.lock"


def read_holder(path: Path) -> dict | None:
    """Who holds (or last held) a lock file, as written by its holder; None if unknown."""
    try:
        fd = open_in_place(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return _holder_of(fd)
    finally:
        os.close(fd)


def _holder_of(fd: int) -> dict | None:
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8")
        holder = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


class _Flocks:
    """flock(2) on some lock files for as long as a run lasts, each recording its holder.
    All or nothing: a refusal releases what was taken. Use as a context manager."""

    def __init__(self, paths: list[Path], *, run_id: str) -> None:
        self.paths = paths
        self.run_id = run_id
        self._fds: list[int] = []

    @property
    def held(self) -> bool:
        return bool(self._fds)

    def _refusal(self, path: Path, holder: dict | None) -> LockHeld:
        raise NotImplementedError

    def acquire(self):
        if self._fds:
            return self
        try:
            for path in self.paths:
                fd, writable = _open(path)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = _holder_of(fd)  # the file that is locked, whatever its name points at now
                    os.close(fd)
                    raise self._refusal(path, holder) from None
                self._fds.append(fd)
                if writable:
                    _write_holder(fd, self.run_id)
        except BaseException:
            self.release()  # all or nothing: never keep GPU 0 when GPU 1 is taken
            raise
        return self

    def release(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            try:
                os.ftruncate(fd, 0)  # no stale holder info for the next reader
            except OSError:
                pass
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


class GpuLock(_Flocks):
    """Exclusive use of some GPUs for one run.

        with GpuLock([0, 1], run_id=run_id):
            ... run both arms ...
    """

    def __init__(self, gpu_ids: Iterable[int | str], *, run_id: str, directory: Path | str | None = None) -> None:
        self.directory = Path(directory) if directory is not None else config.lock_dir()
        # Sorted and de-duplicated: every run takes the locks in the same order.
        self.gpu_ids = sorted({str(g) for g in gpu_ids}, key=lambda g: (len(g), g))
        super().__init__([lock_path(g, self.directory) for g in self.gpu_ids], run_id=run_id)

    def acquire(self) -> GpuLock:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(
                f"cannot create the lock directory {self.directory}: {exc.strerror or exc}",
                fix=f"set {LOCK_DIR_ENV} to a writable local directory",
            ) from exc
        try:
            return super().acquire()
        except OSError as exc:
            path = Path(exc.filename or self.directory)
            raise InputError(
                f"cannot use the GPU lock file {path}: {exc.strerror or exc}",
                fix=(f"remove {path}: cpverify makes a regular file there, never a link; or " if exc.errno == errno.ELOOP
                     else "") + f"set {LOCK_DIR_ENV} to a local directory every user of these GPUs can write",
            ) from exc

    def _refusal(self, path: Path, holder: dict | None) -> LockHeld:
        gpu = self.gpu_ids[self.paths.index(path)]
        who, stop = _holder(path, holder)
        return LockHeld(
            f"GPU {gpu} is in use by cpverify {who}; lock file {path}",
            fix=f"wait for that run to finish {stop}; the lock frees itself when that process exits, "
            "so there is nothing to delete. To run now, choose other GPUs.",
        )


class RunDirLock(_Flocks):
    """One cpverify process at a time in a run directory (artifacts/<run-id>/.lock).

    Two processes on one run id would rename each other's live logs and judge each other's
    arms; the second is refused, naming the first, the way a GPU lock refuses."""

    def __init__(self, root: Path, *, run_id: str, new_run_id: str) -> None:
        super().__init__([Path(root) / ".lock"], run_id=run_id)
        self.root, self.new_run_id = Path(root), new_run_id

    def acquire(self) -> RunDirLock:
        try:
            return super().acquire()
        except OSError as exc:  # a read-only or full artifacts disk: nothing of the run can be written
            raise ArtifactWriteError(f"could not write {self.paths[0]}: {exc.strerror or exc}",
                                     fix_for_write(exc, self.paths[0])) from exc

    def _refusal(self, path: Path, holder: dict | None) -> LockHeld:
        who, stop = _holder(path, holder)
        return LockHeld(
            f"run directory {self.root} is in use by cpverify {who}",
            fix=f"wait for that run to finish {stop}, or start another run: --run-id {self.new_run_id}",
        )


def _open(path: Path) -> tuple[int, bool]:
    # A non-inheritable descriptor (O_CLOEXEC): the workload must not inherit it, or an
    # orphaned child would keep the GPUs locked after cpverify is gone.
    try:
        fd = open_in_place(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        # Another user's lock file: flock works on a read-only descriptor too; we just
        # cannot record who we are.
        return open_in_place(path, os.O_RDONLY), False
    try:
        os.fchmod(fd, 0o666)  # other users must be able to open it (the umask took bits away)
    except OSError:
        pass
    return fd, True


def _write_holder(fd: int, run_id: str) -> None:
    info = {
        "pid": os.getpid(),
        "run_id": run_id,
        "host": socket.gethostname(),
        "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)


def _holder(path: Path, holder: dict | None) -> tuple[str, str]:
    """(who holds the lock at `path`, as `holder` recorded it; how to stop them) for a refusal."""
    if holder:
        who = (
            f"run {holder.get('run_id', '?')} (pid {holder.get('pid', '?')} on {holder.get('host', '?')}, "
            f"since {holder.get('since', '?')})"
        )
        return who, (f"or stop it (`kill {holder['pid']}`)" if holder.get("pid") else "or stop it")
    return "another cpverify process (it did not record its pid)", f"or find it with `fuser {path}`"
