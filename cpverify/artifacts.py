"""Where a verification's files live, and how they are written without ever being half-written.

Layout of one run (a contract, see ARCHITECTURE.md):
    artifacts/<run-id>/verdict.md, verdict.json, env.json, commands.sh, logs/<arm>.log

Every artifact goes through `atomic_writer`: the text lands in a temporary file in the
*same* directory (os.replace is only atomic within one filesystem), is fsync'ed, then
replaces the target in one step. A crash, a full disk or a read-only directory leaves
either the previous good file or no file -- never a truncated one that a user might paste.

No path cpverify writes is followed through a link someone planted there (an artifacts
directory may be shared, and cpverify may run as root): a temporary is made by mkstemp
(O_CREAT|O_EXCL, an unpredictable name) or has no name at all (TemporaryFile), os.replace
swaps a link for the file instead of writing through it, and a file written in place (a
log as it streams, a lock) is opened by `open_in_place` (O_NOFOLLOW, a regular file of one
name).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import secrets
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cpverify.config import RUN_ID_ENV
from cpverify.errors import ArtifactWriteError, InputError

DEFAULT_BASE = Path("artifacts")
# A run id or an arm name becomes a file name, a container name, a Ray job id and a word of
# commands.sh: a name, not a path (no "/", "..", leading "." or "-") and nothing a shell reads.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
RUN_ID_MAX = 64
RUN_ID_RULE = f"letters, digits, '.', '_' and '-', starting with a letter or digit, at most {RUN_ID_MAX} characters"


def new_run_id(now: float | None = None) -> str:
    """The one run id generator (cpverify and the noxfile): sortable UTC time plus 6 random hex
    digits, e.g. 20260821-100028-3fa2c1."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{stamp}-{secrets.token_hex(3)}"


def check_run_id(run_id: str) -> str:
    """`run_id` if it is a name (see _NAME); else InputError. `--run-id ../x` or a newline in
    CPVERIFY_RUN_ID would put the bundle outside --out or a command into commands.sh."""
    if len(run_id) > RUN_ID_MAX or not _NAME.fullmatch(run_id):
        raise InputError(f"run id {run_id!r} (--run-id or {RUN_ID_ENV}) is not a name: use {RUN_ID_RULE}",
                         f"pass e.g. --run-id {new_run_id()}, or unset {RUN_ID_ENV} for a fresh one")
    return run_id


LATEST = "latest"  # <artifacts root>/latest -> the directory of the last run started there


def latest_run_id(base: str | os.PathLike[str]) -> str:
    """The run id `<base>/latest` points at: `--run-id latest` continues the last run (compose's
    steps after the doctor find the run the doctor started this way)."""
    link = Path(base) / LATEST
    try:
        target = os.readlink(link)
    except OSError:
        raise InputError(f"--run-id {LATEST}: {link} does not point at a run",
                         "start a run first (the doctor step, or any step without --run-id), or name its run id") from None
    return check_run_id(target)


def point_latest(run_dir: RunDir) -> Path:
    """Make `<artifacts root>/latest` a relative symlink to this run, replaced atomically: a script
    reading `artifacts/latest/verdict.json` sees the previous run or this one, never nothing."""
    link = run_dir.root.parent / LATEST
    tmp = link.with_name(f".{LATEST}.{secrets.token_hex(8)}.tmp")  # symlink(2) never replaces: a fresh name
    try:
        os.symlink(run_dir.run_id, tmp)
        os.replace(tmp, link)  # rename(2) over the old link: atomic
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ArtifactWriteError(f"could not point {link} at {run_dir.run_id}: {exc.strerror or exc}",
                                 f"remove or rename {link} (it must be cpverify's symlink), or use a filesystem "
                                 "that holds symlinks") from exc
    return link


def fix_for_write(exc: OSError, path: Path, flag: str = "--out") -> str:
    """The fix for a file that could not be written; `flag` is the option that chose where it goes."""
    if exc.errno == errno.ELOOP:  # open_in_place: a link (or no regular file) in the way
        return (f"remove {path} (cpverify writes its own files there and never through a link), or pass {flag} "
                "to a directory that only you can write")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"free disk space on the filesystem of {path.parent}, or pass {flag} to a directory on another disk"
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"make {path.parent} writable (permissions, read-only mounts), or pass {flag} to a writable directory"
    return f"check that {path.parent} exists and is writable, or pass {flag} to another directory"


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], *, mode: int = 0o644, binary: bool = False,
                  flag: str = "--out") -> Iterator[IO]:
    """Yield a handle (UTF-8 text, or bytes if `binary`); on clean exit its content atomically becomes `path`.

    On any failure the temporary file is removed and the target is left untouched;
    OS errors become ArtifactWriteError naming the path and the fix.
    """
    target = Path(path)
    tmp_name: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        # backslashreplace: a path from argv may hold bytes that are not UTF-8 (surrogates); in JSON,
        # the escape it leaves (\udcff) reads back as the same path
        opened = (os.fdopen(fd, "wb") if binary
                  else os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="\n"))
        with opened as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
            # mkstemp creates 0600; artifacts are meant to be read (and commands.sh run) by the user.
            # By descriptor: the name may have been swapped since mkstemp made it.
            os.fchmod(handle.fileno(), mode)
        os.replace(tmp_name, target)
        tmp_name = None
        _fsync_dir(target.parent)
    except OSError as exc:
        raise ArtifactWriteError(
            f"could not write {target}: {exc.strerror or exc}", fix_for_write(exc, target, flag)
        ) from exc
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)


def open_in_place(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """os.open(path, flags, mode) for a file written where it lies (a log as it streams, a lock):
    a symbolic link at `path` is never followed (O_NOFOLLOW), and only a regular file of one name
    is taken (a hard link or a FIFO planted there would let the write reach another file, or hang
    it). O_TRUNC is applied only once that is checked. Anything else in the way: OSError ELOOP
    (fix_for_write names the fix)."""
    truncate = flags & os.O_TRUNC
    try:
        fd = os.open(path, (flags & ~os.O_TRUNC) | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # ENXIO: a FIFO nobody reads (O_NONBLOCK)
            what = "a symbolic link" if exc.errno == errno.ELOOP else "not a regular file"
            raise OSError(errno.ELOOP, f"{what} is in its place", str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            what = "a file with other names (hard links)" if stat.S_ISREG(st.st_mode) else "not a regular file"
            raise OSError(errno.ELOOP, f"{what} is in its place", str(path))
        os.set_blocking(fd, True)
        if truncate:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not possible on every platform/filesystem, and not fatal.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, mode: int = 0o644, flag: str = "--out") -> Path:
    with atomic_writer(path, mode=mode, flag=flag) as handle:
        handle.write(text)
    return Path(path)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> Path:
    with atomic_writer(path, mode=mode, binary=True) as handle:
        handle.write(data)
    return Path(path)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, mode: int = 0o644, flag: str = "--out") -> Path:
    # Serialise first: a value json cannot encode must fail before the target is touched.
    text = json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False, allow_nan=False) + "\n"
    return atomic_write_text(path, text, mode=mode, flag=flag)


def run_root(base: str | os.PathLike[str], run_id: str | None) -> Path:
    """Where run `run_id` (checked: a name) lies under `base`; a fresh id when None."""
    return Path(base) / (check_run_id(run_id) if run_id else new_run_id())


@dataclass(frozen=True)
class RunDir:
    """One verification's directory: artifacts/<run-id>/ with a logs/ subdirectory."""

    root: Path

    @classmethod
    def create(cls, out: str | os.PathLike[str] | None = None, *, base: str | os.PathLike[str] = DEFAULT_BASE,
               run_id: str | None = None) -> RunDir:
        """`out` if given (the user's --out), else base/<run-id>; creates root and logs/. A link is
        followed only where the user named it (--out): cpverify makes base/<run-id> and logs/ as
        directories, so a link in their place was planted there."""
        root = Path(out) if out is not None else run_root(base, run_id)
        run_dir = cls(root)
        try:
            # mkdir(exist_ok) takes a link to a directory for a directory: each is checked before use
            if out is None and root.is_symlink():
                raise OSError(errno.ELOOP, "a symbolic link is in its place", str(root))
            run_dir.logs_dir.mkdir(parents=True, exist_ok=True)
            if run_dir.logs_dir.is_symlink():
                raise OSError(errno.ELOOP, "a symbolic link is in its place", str(run_dir.logs_dir))
        except OSError as exc:
            where = Path(exc.filename) if exc.errno == errno.ELOOP else run_dir.logs_dir  # the link, or what was asked
            raise ArtifactWriteError(f"could not create {where}: {exc.strerror or exc}",
                                     fix_for_write(exc, where)) from exc
        return run_dir

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    def log_path(self, arm: str) -> Path:
        if not _NAME.fullmatch(arm):
            raise InputError(f"arm name {arm!r} cannot be used as a file name",
                             "use letters, digits, '.', '_' or '-' (for example cp1, cp2, probe-16k)")
        return self.logs_dir / f"{arm}.log"

    @property
    def plan_json(self) -> Path:
        return self.root / "plan.json"

    @property
    def state_json(self) -> Path:
        return self.root / "state.json"

    @property
    def verdict_md(self) -> Path:
        return self.root / "verdict.md"

    @property
    def verdict_json(self) -> Path:
        return self.root / "verdict.json"

    @property
    def env_json(self) -> Path:
        return self.root / "env.json"

    @property
    def commands_sh(self) -> Path:
        return self.root / "commands.sh"



class HashingReader(io.RawIOBase):
    """A binary stream hashed as it is read: what is parsed through it is what is hashed."""

    def __init__(self, raw) -> None:
        self._raw = raw
        self.sha256 = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._raw.readinto(buffer)
        if n:
            self.sha256.update(memoryview(buffer)[:n])
            self.size += n
        return n or 0

    def drain(self) -> HashingReader:
        while self.read(1 << 20):
            pass
        return self


def file_digest(path: Path) -> tuple[str, int]:
    """(sha256 hex, size) of a file, read in 1 MiB blocks."""
    with path.open("rb") as raw:
        reader = HashingReader(raw).drain()
    return reader.sha256.hexdigest(), reader.size
