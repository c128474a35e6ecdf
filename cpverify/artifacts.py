"""Where a verification's files live, and how they are written without ever being half-written.

Layout of one run (a contract, see ARCHITECTURE.md):
    artifacts/<run-id>/verdict.md, verdict.json, env.json, commands.sh, logs/<arm>.log

Every artifact goes through `atomic_writer`: the text lands in a temporary file in the
*same* directory (os.replace is only atomic within one filesystem), is fsync'ed, then
replaces the target in one step. A crash, a full disk or a read-only directory leaves
either the previous good file or no file -- never a truncated one that a user might paste.
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
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from cpverify.config import RUN_ID_ENV
from cpverify.errors import ArtifactWriteError, InputError

if TYPE_CHECKING:
    from cpverify.redact import Redactor

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
    tmp = link.with_name(f".{LATEST}.{os.getpid()}.tmp")
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
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
        opened = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        with opened as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; artifacts are meant to be read (and commands.sh run) by the user.
        os.chmod(tmp_name, mode)
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


@dataclass(frozen=True)
class RunDir:
    """One verification's directory: artifacts/<run-id>/ with a logs/ subdirectory."""

    root: Path

    @classmethod
    def create(cls, out: str | os.PathLike[str] | None = None, *, base: str | os.PathLike[str] = DEFAULT_BASE,
               run_id: str | None = None) -> RunDir:
        """`out` if given (the user's --out), else base/<run-id>; creates root and logs/."""
        root = Path(out) if out is not None else Path(base) / (check_run_id(run_id) if run_id else new_run_id())
        run_dir = cls(root)
        try:
            run_dir.logs_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ArtifactWriteError(f"could not create {run_dir.logs_dir}: {exc.strerror or exc}",
                                     fix_for_write(exc, run_dir.logs_dir)) from exc
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


def snapshot_log(source: Path, bundled: Path, scrub: Redactor) -> dict:
    """Copy the log `source` once, as it is now (it may still be growing), then write the bundle's
    copy `bundled` from that snapshot, redacted by `scrub` (a log may hold tokens, keys or host
    names). The digests name the bytes read and written, so env.json, the bundled log and the
    verdict describe the same log."""
    # Here, not at the top: the noxfile imports this module with the standard library alone.
    from cpverify.parse import open_log

    snapshot = bundled.with_name(f".{bundled.name}.snapshot")
    written = hashlib.sha256()
    try:
        with source.open("rb") as src, snapshot.open("wb") as copy:
            read = HashingReader(src)
            shutil.copyfileobj(read, copy)
        # open_log: a gzip or UTF-16 log is copied as the text it holds. newline="": a "\r" (a
        # progress bar) stays in its line, so the bundled log's line numbers are the source's.
        with atomic_writer(bundled) as out, open_log(snapshot) as raw:
            line = scrub.lines()  # a private-key block may span lines
            for text in io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=""):
                redacted = line(text)
                written.update(redacted.encode("utf-8"))
                out.write(redacted)
    except OSError as exc:
        raise InputError(f"could not read {source}: {exc.strerror or exc}",
                         "copy the log to a local disk and pass the copy") from None
    finally:
        snapshot.unlink(missing_ok=True)
    return {"file": source.name, "sha256": read.sha256.hexdigest(), "bytes": read.size,
            "bundled": f"logs/{bundled.name}", "bundled_sha256": written.hexdigest()}
