"""Reading a log: files and streams, block by block, fed to the parser through the block scan.

Equivalent to feeding every line to LogParser.feed (the tests check it), but faster: each block
is searched for the gate words at once (cpverify.parse.scan), and only the lines they hit (plus
every line while a traceback or a wrapped message is open) are fed; a line in slime's own shape
is read from its bytes (cpverify.parse.plain). After a block whose lines were mostly in that
shape, as a slime log's rollouts are, the blocks are taken whole, line by line, unscanned
(_feed_dense), while more than half their lines are. Memory stays bounded whatever the file or
line length.

Storage: gzip (magic bytes 1f 8b) and UTF-16 (byte-order mark) logs are read transparently, as
they stream; ParsedLog.source (JSON "source") says how the log was stored, and "cut" when a
compressed log breaks off (what came before is kept).
"""

from __future__ import annotations

import codecs
import contextlib
import gc
import gzip
import io
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from cpverify.errors import InputError
from cpverify.inputs import shown_name
from cpverify.parse import parser as parsing  # parsing.MAX_LINE_BYTES is read where used: tests change it
from cpverify.parse import plain, scan
from cpverify.parse.parser import LogParser
from cpverify.parse.records import ParsedLog, TimerRecord

READ_BLOCK_BYTES = 1 << 20
_JUDGED_LINES = 8  # a block of fewer lines leaves how the next is read as it was (_judge)



class _Unread(io.RawIOBase):
    """A stream whose first bytes, read to recognise its format, are put back in front.

    It reads with read1 where the stream has it: a gzip stream's read(n) drops what it had
    inflated when the data then breaks off (a cut download), read1 hands over each piece."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._head or size < 0:
            return super().read(size)
        return getattr(self._rest, "read1", self._rest.read)(size)  # no copy through a buffer

    def readinto(self, buffer: Any) -> int:
        if not self._head:
            data = getattr(self._rest, "read1", self._rest.read)(len(buffer))
        else:
            data, self._head = self._head[: len(buffer)], self._head[len(buffer) :]
        buffer[: len(data)] = data
        return len(data)


class _Utf16AsUtf8(io.RawIOBase):
    """UTF-16 text (Windows tools write it, with a byte-order mark) read as UTF-8, block by block."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._decoder = codecs.getincrementaldecoder("utf-16")("replace")  # the BOM picks the byte order
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._raw.read(READ_BLOCK_BYTES)
            self._pending = self._decoder.decode(chunk, final=not chunk).encode("utf-8")
            if not chunk:
                break
        data, self._pending = self._pending[: len(buffer)], self._pending[len(buffer) :]
        buffer[: len(data)] = data
        return len(data)


class _EndsWhereCut(io.RawIOBase):
    """A decompressing stream that ends where its data breaks off (a cut download, a killed
    writer), reading with read1 (read(n) would drop what it inflated before the break): what came
    before counts and source["cut"] says why; broken before its first byte, it is no log at all."""

    def __init__(self, inner: gzip.GzipFile, source: dict[str, Any]) -> None:
        self._inner, self._source, self._read_any = inner, source, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._source.get("cut"):
            return 0
        try:
            data = self._inner.read1(len(buffer))
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            if not self._read_any:
                raise InputError(f"the log looks {self._source['compression']} but cannot be read: {exc}",
                                 fix="check the file (gzip -t LOG) or pass the uncompressed log") from None
            self._source["cut"] = (f"the {self._source['compression']} data breaks off ({exc}): "
                                   "the log was read up to there")
            return 0
        self._read_any = self._read_any or bool(data)
        buffer[: len(data)] = data
        return len(data)


def _head(stream: IO[bytes], size: int) -> bytes:
    head = b""
    while len(head) < size:
        more = stream.read(size - len(head))
        if not more:
            break
        head += more
    return head


def _decoded(stream: IO[bytes], source: dict[str, Any]) -> IO[bytes]:
    """The log's text as UTF-8 bytes, streamed: gzip is inflated and UTF-16 re-encoded, each
    recognised by its leading bytes (gzip's magic number, the byte-order mark), never by name."""
    head = _head(stream, 64)
    raw: IO[bytes] = _Unread(head, stream)  # type: ignore[assignment]
    if head[:2] == b"\x1f\x8b" and "compression" not in source:
        source["compression"] = "gzip"
        inflated = gzip.GzipFile(fileobj=raw, mode="rb")
        return _decoded(_EndsWhereCut(inflated, source), source)  # type: ignore[arg-type]
    source.setdefault("compression", None)
    # A BOM alone could be Latin-1 "ÿþ"; UTF-16 text also has the NUL half of its ASCII characters.
    if head[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE) and b"\x00" in head[2:]:
        source["encoding"] = "utf-16"
        return _Utf16AsUtf8(raw)  # type: ignore[return-value]
    source["encoding"] = "utf-8"
    if head[:3] == codecs.BOM_UTF8:
        raw.read(3)
    return raw


def open_text(stream: IO[bytes], source: dict[str, Any] | None = None) -> IO[bytes]:
    """A log's text as a buffered binary UTF-8 stream, read as it streams: gzip inflated (up to
    where it breaks off), UTF-16 re-encoded, a UTF-8 byte-order mark dropped. `source`, if given,
    is filled with how the log was stored (ParsedLog.source)."""
    return io.BufferedReader(_decoded(stream, {} if source is None else source))  # type: ignore[type-var]


def parse_stream(stream: IO[bytes]) -> ParsedLog:
    """Parse a binary stream. Memory stays bounded whatever the file or line length.

    gzip-compressed and UTF-16 logs are recognised by their first bytes and read as they stream.
    Equivalent to feeding every line to LogParser.feed (the tests check it), but faster:
    each block is searched for the gate words at once, and only the lines they hit
    (plus every line while a traceback or a wrapped message is open) are fed.
    """
    parser = LogParser()
    block_scan = scan.BlockScan(scan.ENGINE, parser._nccl.via_seen)
    source: dict[str, Any] = {}
    stream = _decoded(stream, source)
    first = stream.read(READ_BLOCK_BYTES)
    lineno = 0  # lines completed so far
    carry = b""  # the unfinished last line of the previous block (at most MAX_LINE_BYTES+1)
    overlong = False  # the carried line passed MAX_LINE_BYTES: its tail is being dropped
    block = first
    while block:
        last_nl = block.rfind(b"\n")
        if last_nl == -1:
            if not overlong:
                carry += block
                if len(carry) > parsing.MAX_LINE_BYTES:
                    carry, overlong = carry[: parsing.MAX_LINE_BYTES + 1], True
            block = stream.read(READ_BLOCK_BYTES)
            continue
        begin = 0
        if carry or overlong:
            # The line carried from the previous block ends in this one: it is read apart, so
            # the block is scanned where it lies (joining them would copy a megabyte).
            begin = block.find(b"\n") + 1
            if overlong:  # only its head is read
                lineno += 1
                parser.feed(carry, lineno)
            else:
                head = carry + block[:begin]
                lineno = _feed_block(parser, block_scan, head, 0, len(head), lineno)
        carry, overlong = block[last_nl + 1 :], False
        if len(carry) > parsing.MAX_LINE_BYTES:
            carry, overlong = carry[: parsing.MAX_LINE_BYTES + 1], True
        lineno = _feed_block(parser, block_scan, block, begin, last_nl + 1, lineno)
        block = stream.read(READ_BLOCK_BYTES)
    if carry:
        lineno += 1
        parser.feed(_without_cut_pair(carry), lineno)
    parser.mark_read(lineno)
    parsed = parser.result()
    parsed.source = source
    return parsed


def _without_cut_pair(line: bytes) -> bytes:
    """A file's last line without a newline was usually cut (a killed writer, a full disk,
    `head -c`). If it holds an unclosed dict, its last `'key': value` may be cut inside the
    number (1.0348 -> 1.0) and salvaged as a wrong value: keep only pairs a comma closed."""
    body = line.rstrip()
    if b"{" not in body or body.endswith(b"}"):
        return line
    comma = body.rfind(b",")
    return body[: comma + 1] if comma > body.find(b"{") else body[: body.find(b"{") + 1]


def _feed_block(parser: LogParser, block_scan: scan.BlockScan, data: bytes, begin: int, end: int, lineno: int) -> int:
    """Feed the lines of data[begin:end] (whole lines) that the gate lets through; lineno is
    the number of the line before `begin`. Returns the number of the last line."""
    if block_scan.dense:  # the last block was mostly slime's own lines: this one likely too
        return _feed_dense(parser, block_scan, data, begin, end, lineno)
    hits, vias = block_scan.scan(data, begin, end)
    # Channel lines first, so the transports keep the order in which the log first names them.
    for start in vias:
        line = data[start : data.find(b"\n", start)]
        if line.find(b"NCCL") != -1:
            parser._nccl.info_line(line[: parsing.MAX_LINE_BYTES])
    count, find, feed, cap = data.count, data.find, parser._feed_gated, parsing.MAX_LINE_BYTES
    tracebacks, match, read = parser._tracebacks, plain.PLAIN.match, plain.read
    h, pos, first, shaped = 0, begin, lineno, 0  # pos: start of the first unread line, number lineno + 1
    while pos < end:
        if tracebacks.open is None and parser._held is None:  # not parser.wants_every_line, inlined
            while h < len(hits) and hits[h] < pos:
                h += 1
            if h == len(hits):
                break
            start = hits[h]
            lineno += count(b"\n", pos, start) + 1
            m = match(data, start, end)  # a line in slime's own shape (plain), read from its bytes
            if m is not None and m.end() - start <= cap and read(parser, (b"", *m.groups(b"")), lineno):
                pos, shaped = m.end(), shaped + 1
                continue
        else:
            start = pos
            lineno += 1
        stop = find(b"\n", start)
        if stop - start <= cap:
            feed(data[start:stop], lineno)
        else:  # only its head is read, and gated as LogParser.feed gates it: a word past the head lets in nothing
            parser.feed(data[start : start + cap], lineno)
        pos = stop + 1
    lineno += count(b"\n", pos, end)
    _judge(block_scan, shaped, lineno - first)
    return lineno


def _feed_dense(parser: LogParser, block_scan: scan.BlockScan, data: bytes, begin: int, end: int, lineno: int) -> int:
    """_feed_block for a block whose lines are mostly slime's own (a slime log's rollouts): no
    block scan; every line is taken, a Timer line of a shape seen before (plain.TIMER_SHAPES) read
    from its spans, any other line in slime's shape from PLAIN's groups (plain.read), any other fed
    to LogParser.feed, which gates it itself. The next block is read so too while more than half
    of this one's lines were in slime's shape."""
    if begin == end:  # no line (the block's one newline ended the line carried into it)
        return lineno
    feed, read, match, cap = parser.feed, plain.read, plain.PLAIN.match, parsing.MAX_LINE_BYTES
    timers, shapes, names, name_of = parser._timers, plain.TIMER_SHAPES, plain.TIMER_NAMES, plain.timer_name
    opened, kept = timers.open, timers.kept
    tracebacks, shaped, first = parser._tracebacks, 0, lineno
    idle = tracebacks.open is None and parser._held is None  # not parser.wants_every_line, inlined
    block = data[begin : end - 1]  # its lines, the last newline aside
    for line, shape in zip(block.split(b"\n"), block.translate(plain.SHAPED).split(b"\n"), strict=True):
        lineno += 1
        if idle and len(line) < cap:
            spans = shapes.get(shape)
            if spans is not None:  # Timers.timed, inlined: the most common line
                raw = line[spans[0] : spans[1]]
                name = names.get(raw) or name_of(raw)  # a name is never empty
                if spans[2]:
                    opened[name] = lineno
                else:
                    opened.pop(name, None)
                    if spans[3] != -1:
                        try:
                            kept.append(TimerRecord(name, float(line[spans[3] : spans[4]]), lineno))
                        except ValueError:  # no number (signatures.number: None): no duration kept
                            pass
                shaped += 1
                continue
            m = match(line)
            if m is not None:
                groups = (line, *m.groups(b""))
                if groups[3]:
                    plain.timer_shape(shape, m)
                if read(parser, groups, lineno):
                    shaped += 1
                    continue
        feed(line, lineno)
        idle = tracebacks.open is None and parser._held is None
    _judge(block_scan, shaped, lineno - first)
    return lineno


def _judge(block_scan: scan.BlockScan, shaped: int, lines: int) -> None:
    """Read the next block whole while more than half of this one's lines were in slime's shape; a
    few lines (the one a block's end cut, carried into the next) say nothing of the log."""
    if lines >= _JUDGED_LINES:
        block_scan.dense = shaped * 2 > lines


@contextlib.contextmanager
def records_kept() -> Iterator[None]:
    """No cycle collection while a command makes records that live until it ends: the collector
    would only walk them again and again (a tenth of a records-dense log's parse, benchmarks/
    parse_throughput.md; a sixth of a verdict's two slime logs, benchmarks/verdict_throughput.md)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def parse_file(path: str | Path) -> ParsedLog:
    """Parse one log file, streamed in binary mode. Unreadable -> InputError with the fix."""
    path = Path(path)
    name = shown_name(str(path))  # printable: a name may hold bytes that are not UTF-8, or escapes
    try:
        with path.open("rb") as stream:
            return parse_stream(stream)
    except FileNotFoundError:
        raise InputError(
            f"log file {name} does not exist",
            fix="check the path (a cpverify run keeps its logs under artifacts/<run-id>/logs/<arm>.log)",
        ) from None
    except IsADirectoryError:
        raise InputError(
            f"log path {name} is a directory, not a log file",
            fix="pass one log file inside it (a cpverify run keeps one per arm in artifacts/<run-id>/logs/)",
        ) from None
    except PermissionError:
        raise InputError(
            f"log file {name} is not readable by this user",
            fix=f"make it readable (chmod a+r {name}) or run cpverify as its owner",
        ) from None
    except OSError as exc:
        raise InputError(
            f"log file {name} could not be read: {exc.strerror or exc}",
            fix="copy the log to a local disk and parse the copy",
        ) from None
