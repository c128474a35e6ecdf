"""The logs given to `cpverify verdict`: each taken once, as it is when opened, parsed, and copied
into the bundle redacted (`bundle_log`); an output directory that holds one is refused first
(`check_out_apart`)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from cpverify.artifacts import DEFAULT_BASE, HashingReader, atomic_writer, fix_for_write, new_run_id
from cpverify.errors import ArtifactWriteError, InputError
from cpverify.forked import Children, Pending
from cpverify.inputs import shown_name
from cpverify.parse import ParsedLog, open_text, parse_stream
from cpverify.redact import BlockRedactor, Redactor


def check_out_apart(out: str | os.PathLike[str], inputs: dict[str, Path], *, flag: str = "--out") -> None:
    """Refuse an output directory that holds, at any depth, a file the run reads (`inputs`: the
    option that named it -> its path): the bundle written into it (logs/<arm>.log, verdict.md, ...)
    could replace it. Directories are compared by device and inode along each input's real path,
    so a relative, absolute, symlinked or bind-mounted spelling of one directory is that directory.
    An `out` that does not exist yet holds nothing; one that is not a directory is refused."""
    try:
        where = os.stat(out)  # following links: where the files would go
    except OSError:
        return  # nothing there (or unreachable: creating it names the problem)
    fresh = Path(out) / f"verdict-{new_run_id()}"
    if not stat.S_ISDIR(where.st_mode):
        raise InputError(f"{flag} {shown_name(str(out))} is a file, not a directory",
                         f"pass {flag} a directory for the bundle, e.g. {flag} {shown_name(str(Path(out).parent / fresh.name))}")
    for option, path in inputs.items():
        for folder in Path(os.path.realpath(path)).parents:
            with contextlib.suppress(OSError):
                if os.path.samestat(os.stat(folder), where):
                    raise InputError(
                        f"{flag} {shown_name(str(out))} holds {option} {shown_name(str(path))}: the bundle written "
                        "there (logs/<arm>.log, verdict.md, ...) could replace what this run reads",
                        f"pass {flag} a directory that holds no input, e.g. {flag} {shown_name(str(fresh))}, or "
                        f"leave {flag} out (a fresh {DEFAULT_BASE}/<run-id>/)")


# The bundle's copy of a log given to `cpverify verdict` is for reading and replaying, and a
# log may be anything (a 200 KiB gzip inflates to 200 GiB; a line may run for 160 MiB): the
# copy holds at most BUNDLED_LOG_MAX_BYTES, and of a line its first BUNDLED_LINE_MAX_BYTES
# (more than the parser reads of a line, MAX_LINE_BYTES, so a replay judges the same lines).
BUNDLED_LOG_MAX_BYTES = 64 << 20
BUNDLED_LINE_MAX_BYTES = 1 << 20
# A log parsed by a child (bundle_logs) has its whole redacted text on disk, next to the bundle's
# copies, meanwhile: past this, the rest is parsed here, as it is copied, and no more of it is kept.
APART_MAX_BYTES = 256 << 20
_BLOCK = 1 << 20
_UP_TO_LAST_SPACE = re.compile(rb"(?s).*\s")  # greedy: one pass back from the end
_WHOLE_LINE = re.compile(rb"[^\n]*\n")


def _without_cut_word(head: bytes, reach: int = 4096) -> bytes:
    """`head` without the word it ends in (within `reach` bytes): a line cut inside a credential
    must not keep the credential's head, whose shape the redaction rules may not know."""
    tail = head[-reach:]
    kept = _UP_TO_LAST_SPACE.match(tail)
    return head[: len(head) - len(tail) + (kept.end() if kept else 0)]


class _BundledCopy(io.RawIOBase):
    """A log's text as the bundle keeps it, read as a stream: its lines redacted a block at a time
    by `redact` (cpverify.redact.BlockRedactor), a line longer than `line_bytes` cut to its
    head (saying how much was left out), and the first `max_bytes` written to `out` as they pass.
    Whoever reads it (the parser) reads every line; the copy stops at a line's end once full
    (`complete` False). Memory: a block and a line."""

    def __init__(self, text: IO[bytes], out: IO[bytes], redact: BlockRedactor, *,
                 max_bytes: int, line_bytes: int) -> None:
        self._text, self._out, self._redact = text, out, redact
        self._max_bytes, self._line_bytes = max_bytes, line_bytes
        self._held = b""  # the head of the line being read
        self._dropped = 0  # bytes of that line past line_bytes
        self._ready, self._at = b"", 0  # redacted text not yet handed to the reader, from _at
        self._eof = False
        self.sha256 = hashlib.sha256()  # of what the copy holds
        self.copied = self.text_bytes = self.lines = self.copied_lines = self.lines_cut = 0
        self.complete = True
        self.ends_line = True  # the copy ends with a newline (or is empty)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._at == len(self._ready) and not self._eof:
            self._ready, self._at = self._fill(), 0
        n = min(len(buffer), len(self._ready) - self._at)
        buffer[:n] = memoryview(self._ready)[self._at : self._at + n]
        self._at += n
        return n

    def _fill(self) -> bytes:
        """The next block's lines, redacted (the copy takes those that fit)."""
        block = self._text.read(_BLOCK)
        if not self._dropped and len(block) <= self._line_bytes:  # each line begun in the block fits
            data = self._held + block  # the line held from the last block, ended in this one
            whole = data.rfind(b"\n") + 1
            if whole and block.find(b"\n") + len(self._held) <= self._line_bytes and data.isascii():
                # Most blocks: lines that fit, UTF-8 already: redacted as one block, not split into lines.
                text, self._held = self._redact.block(data[:whole]), data[whole:]
                self.lines += data.count(b"\n", 0, whole)
                return self._took(text)
        lines: list[bytes] = []
        cut: dict[int, int] = {}  # line -> bytes of it past line_bytes
        if not block:
            self._eof = True
            if self._held or self._dropped:  # a last line without its newline
                self._take(lines, cut, b"")
        start = 0
        if not self._held and not self._dropped and len(block) <= self._line_bytes:  # each line in it fits
            start = block.rfind(b"\n") + 1
            lines += _WHOLE_LINE.findall(block, 0, start)
        while start < len(block):
            nl = block.find(b"\n", start)
            stop = len(block) if nl == -1 else nl
            if not self._held and not self._dropped and stop - start <= self._line_bytes and nl != -1:
                lines.append(block[start : nl + 1])  # the common case: a whole line in this block
                start = nl + 1
                continue
            room = max(self._line_bytes - len(self._held), 0)
            self._held += block[start : start + min(room, stop - start)]
            self._dropped += max(stop - start - room, 0)
            if nl == -1:
                break
            self._take(lines, cut, b"\n")
            start = nl + 1
        self.lines += len(lines)  # a last line without its newline is a line too, as the parser counts it
        if not all(map(bytes.isascii, lines)):  # the copy is UTF-8 text: bytes that are not UTF-8 read as U+FFFD
            lines = [line if line.isascii() else line.decode("utf-8", "replace").encode() for line in lines]
        raw, lines = lines, self._redact(lines)
        for i, dropped in cut.items():  # a cut line says so, after its redacted head
            newline = b"\n" if raw[i].endswith(b"\n") else b""
            lines[i] = (lines[i][: len(lines[i]) - len(newline)]
                        + f" [cpverify: line cut here, {dropped} more bytes not copied]".encode() + newline)
        return self._took(b"".join(lines))

    def _took(self, text: bytes) -> bytes:
        """`text`, the next lines redacted, counted and into the copy as far as it fits."""
        self.text_bytes += len(text)
        if self.complete and text:
            self._copy(text)
        return text

    def _take(self, lines: list[bytes], cut: dict[int, int], newline: bytes) -> None:
        """The held line, with its newline, into `lines` (cut to a whole word when it ran past line_bytes)."""
        head, dropped = self._held, self._dropped
        self._held, self._dropped = b"", 0
        if dropped:
            kept = _without_cut_word(head)
            cut[len(lines)] = dropped + len(head) - len(kept)
            self.lines_cut += 1
            head = kept
        lines.append(head + newline)

    def _copy(self, text: bytes) -> None:
        """Into the copy, the whole lines of `text` that fit; the first that does not ends it."""
        room = self._max_bytes - self.copied
        if len(text) > room:
            self.complete = False
            text = text[: text.rfind(b"\n", 0, room) + 1]
        if text:
            self._out.write(text)
            self.sha256.update(text)
            self.copied += len(text)
            self.copied_lines += text.count(b"\n")
            self.ends_line = text.endswith(b"\n")

    def close_note(self, log: dict) -> None:
        """End a copy that stopped early with a line saying so, naming the log it was cut from."""
        if self.complete:
            return
        note = (f"{'' if self.ends_line else chr(10)}[cpverify: this copy stops here, after line "
                f"{self.copied_lines} of {self.lines}: it holds {self.copied} of the {self.text_bytes} bytes of "
                f"text in the log ({log['bytes']} bytes as given, sha256 {log['sha256']}); the verdict "
                "read every line]\n").encode()
        self._out.write(note)
        self.sha256.update(note)


def bundle_log(source: Path, bundled: Path, scrub: Redactor, *, max_bytes: int = BUNDLED_LOG_MAX_BYTES,
               line_bytes: int = BUNDLED_LINE_MAX_BYTES) -> tuple[dict, ParsedLog]:
    """Take the log `source` once, as it is now (a log still being written: its size when opened),
    and parse its text, redacted by `scrub` (a log may hold tokens, keys or host names), while the
    bundle's copy `bundled` is written from the same stream: the verdict judges the text the copy
    holds, line for line, and goes on reading where a capped copy stops (BUNDLED_LOG_MAX_BYTES).
    Returns (record, parsed log). The record is env.json's `inputs` entry: the digests of the bytes
    read and of the bytes written; "stored", how the log was stored (ParsedLog.source: gzip, UTF-16,
    where it breaks off); "copy", when a line or the copy was cut, the counts (the copy's last line
    says so too)."""
    with _copying(source, bundled, scrub, max_bytes, line_bytes) as (copy, record, how):
        parsed = parse_stream(copy)  # type: ignore[arg-type]
    parsed.source = how  # how the log was stored, not the copy's (plain UTF-8 text)
    return record, parsed


def bundle_logs(logs: Sequence[tuple[Path, Path]], scrub: Redactor, begun: list[Path], *,
                meanwhile: Callable[[], object] | None = None) -> list[tuple[dict, ParsedLog]]:
    """bundle_log of each (source, bundled), in their order, with the parses side by side (a parse is
    one CPU's work; cpverify.forked): while a CPU is spare, a log is parsed by a child process from
    its redacted text as this process writes it (kept whole in a nameless file, the child told how
    far it may read: _Written), while the copy goes on and the next log is copied; any other is
    parsed here as it is copied. The copies are written one after the other, in the
    order given, so the redactor learns hosts in that order and a host is the same host-N however
    the parses ran. Each copy's path is added to `begun` before it is written. `meanwhile` runs once
    the copies are written, while children may still parse (what the caller needs next)."""
    with Children() as children, contextlib.ExitStack() as texts:
        pending: list[tuple[dict, Pending[ParsedLog], dict[str, Any]]] = []
        for source, bundled in logs:
            begun.append(bundled)
            if not children.free():
                record, parsed = bundle_log(source, bundled, scrub)
                pending.append((record, Pending.done(parsed), parsed.source))
                continue
            text = texts.enter_context(tempfile.TemporaryFile(dir=bundled.parent))  # nameless: no path to plant a link at
            written = texts.enter_context(_Written())
            child = children.start(functools.partial(_parse_written, text.fileno(), written),
                                   here=functools.partial(_parse_text, text))
            written.forked()
            with _copying(source, bundled, scrub, BUNDLED_LOG_MAX_BYTES, BUNDLED_LINE_MAX_BYTES) as (copy, record, how):
                whole = _kept_whole(copy, text, written)
                if not whole:  # a text past APART_MAX_BYTES (a gzip that inflates on and on): parsed here
                    child.kill()
                    text.seek(0)
                    child = Pending.done(parse_stream(io.BufferedReader(_Then(text, copy))))
            written.close()
            pending.append((record, child, how))
        if meanwhile is not None:
            meanwhile()
        return [(record, _stored(parsed.result(), how)) for record, parsed, how in pending]


def _stored(parsed: ParsedLog, how: dict[str, Any]) -> ParsedLog:
    parsed.source = how  # how the log was stored, not the copy's (plain UTF-8 text)
    return parsed


def _kept_whole(copy: _BundledCopy, text: IO[bytes], written: _Written) -> bool:
    """Write `copy`'s text into `text` up to APART_MAX_BYTES, telling `written` how far it is on
    disk: True when that was all of it (and `written` is told so); else the first block past it is
    written too, and the rest is left in `copy`. Called while the bundle's copy is being written:
    a full disk fails as it does (ArtifactWriteError, from atomic_writer)."""
    while block := copy.read(_BLOCK):
        text.write(block)
        text.flush()  # on disk now, inside that writer (and nothing left in the buffer a child inherits)
        if text.tell() > APART_MAX_BYTES:
            return False
        written.up_to(text.tell())
    written.up_to(text.tell(), whole=True)
    return True


class _Written:
    """How far a file this process is writing may be read, told to the child reading it: on a pipe,
    each size it reaches (8 bytes: a write that short is never split), the last with END set. The
    child sees the pipe's end without END when this process gives up the text or dies."""

    END = 1 << 63

    def __init__(self) -> None:
        self.reader, self._writer = os.pipe()

    def __enter__(self) -> _Written:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def forked(self) -> None:
        """This process has forked its reader: the pipe's reading end is the child's alone."""
        self._close_reader()

    def up_to(self, size: int, whole: bool = False) -> None:
        if self._writer == -1:
            return
        try:
            os.write(self._writer, (size | (self.END if whole else 0)).to_bytes(8, "little"))
        except BrokenPipeError:  # the child is gone: its parse is run here (forked.Pending)
            self.close()

    def close(self) -> None:
        self._close_reader()
        if self._writer != -1:
            os.close(self._writer)
            self._writer = -1

    def _close_reader(self) -> None:
        if self.reader != -1:
            os.close(self.reader)
            self.reader = -1

    def in_child(self) -> None:
        """In the child: the writing end is this process's parent's alone (its end is then seen)."""
        os.close(self._writer)
        self._writer = -1


class _GrowingFile(io.RawIOBase):
    """In the child: the file its parent is writing (`fd`), read at this reader's own offsets (the
    parent's writes move the file's shared one) up to the size last told on `sizes`, to its end."""

    def __init__(self, fd: int, sizes: int) -> None:
        self._fd, self._sizes = fd, sizes
        self._at = self._size = 0
        self._whole = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._at == self._size:
            if self._whole:
                return 0
            told = b""
            while len(told) < 8:
                more = os.read(self._sizes, 8 - len(told))
                if not more:
                    raise EOFError("the text was given up before its end")
                told += more
            size = int.from_bytes(told, "little")
            self._size, self._whole = size & (_Written.END - 1), bool(size & _Written.END)
        n = os.preadv(self._fd, [memoryview(buffer)[: self._size - self._at]], self._at)
        if n == 0:
            raise EOFError("the text is shorter than told")
        self._at += n
        return n


def _parse_written(fd: int, written: _Written) -> ParsedLog:
    """In the child: the parse of a log's redacted text as the parent writes it (bundle_logs)."""
    written.in_child()
    return parse_stream(io.BufferedReader(_GrowingFile(fd, written.reader), _BLOCK))


class _Then(io.RawIOBase):
    """The bytes of `first` from where it stands, then those of `then`."""

    def __init__(self, first: IO[bytes], then: _BundledCopy) -> None:
        self._streams = [first, then]

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._streams:
            n = self._streams[0].readinto(buffer)  # type: ignore[attr-defined]
            if n:
                return n
            self._streams.pop(0)
        return 0


def _parse_text(text: IO[bytes]) -> ParsedLog:
    """The parse of a log's redacted text kept whole (bundle_logs: its child gave nothing back)."""
    text.seek(0)
    return parse_stream(text)


@contextlib.contextmanager
def _copying(source: Path, bundled: Path, scrub: Redactor, max_bytes: int,
             line_bytes: int) -> Iterator[tuple[_BundledCopy, dict, dict[str, Any]]]:
    """(the log's text as the bundle keeps it, read as a stream that writes the copy `bundled` as it
    passes; its env.json record; how the log was stored), for bundle_log: whoever reads the stream
    reads it to its end; the record is complete, and the redactor vouches for the copy, when the
    block ends."""
    how: dict[str, Any] = {}
    begun = scrub.learned()  # a host learned as the copy is written may stand bare in its earlier lines
    with _snapshot(source, bundled.parent) as (snapshot, record):
        with atomic_writer(bundled, binary=True) as out:
            copy = _BundledCopy(open_text(snapshot, how), out, BlockRedactor(scrub), max_bytes=max_bytes,
                                line_bytes=line_bytes)
            yield copy, record, how
            copy.close_note(record)
    record.update(stored=how, bundled=f"logs/{bundled.name}", bundled_sha256=copy.sha256.hexdigest())
    scrub.vouch(bundled, copy.sha256.hexdigest(), begun)  # the archive takes the copy as it is (cpverify.report.write)
    if not copy.complete or copy.lines_cut:
        record["copy"] = {"complete": copy.complete, "lines": copy.copied_lines, "of_lines": copy.lines,
                          "bytes": copy.copied, "of_bytes": copy.text_bytes, "lines_cut": copy.lines_cut,
                          "max_bytes": max_bytes, "max_line_bytes": line_bytes}


@contextlib.contextmanager
def _snapshot(source: Path, directory: Path) -> Iterator[tuple[IO[bytes], dict]]:
    """(a copy of `source` as it is now, opened at its start; {"file", "sha256", "bytes"} of it). The
    copy has no name (O_TMPFILE, or unlinked at once): there is no path to plant a link at. A log
    still being written is taken at its size when opened, not chased while it grows."""
    def unreadable(exc: OSError) -> InputError:
        return InputError(f"could not read {shown_name(str(source))}: {exc.strerror or exc}",
                          "copy the log to a local disk and pass the copy")

    def unwritable(exc: OSError) -> ArtifactWriteError:
        return ArtifactWriteError(f"could not write in {directory}: {exc.strerror or exc}",
                                  fix_for_write(exc, directory / source.name))

    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not hang the open
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise InputError(f"{shown_name(str(source))} is not a regular file (a pipe, a device, a directory)",
                             "save the log to a file and pass that file")
        os.set_blocking(fd, True)
        src, size = os.fdopen(fd, "rb"), st.st_size
    except OSError as exc:
        raise unreadable(exc) from None
    with src:
        try:
            snapshot = tempfile.TemporaryFile(dir=directory)
        except OSError as exc:
            raise unwritable(exc) from exc
        with snapshot:
            read = HashingReader(src)
            while read.size < size:  # what was there when it was opened
                try:
                    block = read.read(min(_BLOCK, size - read.size))
                except OSError as exc:
                    raise unreadable(exc) from None
                if not block:  # truncated meanwhile: what there was
                    break
                try:
                    snapshot.write(block)
                except OSError as exc:
                    raise unwritable(exc) from exc
            snapshot.seek(0)
            yield snapshot, {"file": shown_name(source.name), "sha256": read.sha256.hexdigest(), "bytes": read.size}
