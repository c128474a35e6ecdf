"""The block scan: which lines of a block the parser must read.

A line is only decoded when its lower-cased bytes hold one of GATE_TOKENS (cpverify.parse.
signatures); anything the parser recognises contains one. The scan finds them in each block
in one pass (Hyperscan, all words at once, one report per line; where it is not installed, one
bytes.find pass per word). A second pass finds NCCL channel lines (`... via X`) whose transport
word the parser has not read yet: a channel line is decoded only when it may name a new
transport, never skipped when it does (BlockScan). Numbers: benchmarks/parse_throughput.md.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from cpverify.parse.signatures import GATE_BYTES
from cpverify.scan_engines import ENGINES, hyperscan

# The block scan's gate: channel lines (` via `) are found by _unseen_via_pattern instead.
_BLOCK_GATE = tuple(token for token in GATE_BYTES if token != b" via ")


def _unseen_via_pattern(words: Iterable[bytes]) -> bytes:
    """A regex for ` via W` where W, the run of non-space bytes after it, is none of `words`.

    NCCL prints a channel line per channel, rank and communicator, with few distinct transport
    words: once a word is read, its lines need not be. Hyperscan has no lookahead, so "none of
    these words" is spelled out from their trie: at each byte, a byte no word has there, or the
    end of W where no word ends. Every byte is written as \\xHH, which both engines read alike.
    """
    trie: dict[int, Any] = {}
    for word in words:
        node = trie
        for byte in word:
            node = node.setdefault(byte, {})
        node[-1] = {}  # a word ends here

    def branch(node: dict[int, Any], root: bool) -> bytes:
        nexts = [byte for byte in node if byte >= 0]
        alternatives = [b"\\x%02x" % byte + branch(node[byte], False) for byte in nexts]
        alternatives.append(b"[^\\s" + b"".join(b"\\x%02x" % byte for byte in nexts) + b"]")
        if not root and -1 not in node:
            alternatives.append(rb"(?:\s|$)")
        return b"(?:" + b"|".join(alternatives) + b")"

    return rb" via " + branch(trie, True)


ENGINE = ENGINES[0]  # the block scan parse_stream uses (tests and the benchmark try both)


class BlockScan:
    """Finds, in a block of whole lines, the starts of the lines that hold a gate word, and of
    the channel lines whose transport word the parser has not cached yet.

    "hyperscan" makes one compiled pass for both: each gate word a caseless literal, and the
    channel pattern (matches come in the order they end: a line is taken at its first). "find"
    makes one bytes.find pass per gate word and one regex pass for the channel lines. Both give
    the same answer (a property test checks it). The channel pattern follows the parser's cache
    (`via_seen`): it changes when the cache grew, in the first blocks of a log, and what scans
    for it is compiled once per process for each set of words (_compiled).
    """

    def __init__(self, engine: str, via_seen: set[bytes]) -> None:
        self._engine, self._via_seen = engine, via_seen
        # The last block was mostly lines in slime's own shape (parse.plain): the next is read whole,
        # unscanned (stream._feed_dense).
        self.dense = False
        self._words = -1  # size of via_seen when self._compiled was compiled
        self._compiled: Any = None

    def scan(self, data: bytes, begin: int, end: int) -> tuple[list[int], list[int]]:
        """(starts of the gated lines, starts of the channel lines with an unseen word) of
        data[begin:end], each in order and once. Starts are indices into `data`; begin is a line start."""
        if self._words != len(self._via_seen):
            self._compiled = _compiled(self._engine, frozenset(self._via_seen))
            self._words = len(self._via_seen)
        if self._engine == "find":
            return ([begin + start for start in _gate_starts_by_find(data[begin:end])],
                    sorted({data.rfind(b"\n", 0, m.start()) + 1 for m in self._compiled.finditer(data, begin, end)}))
        starts: list[int] = []
        vias: list[int] = []
        # Where the last line taken of each kind ends: another match on it adds nothing.
        gate_line_end = via_line_end = -1
        find, rfind, size = data.find, data.rfind, len(data) + 1  # % size: find's -1 (no newline) is the end

        def on_match(pattern: int, _start: int, match_end: int, _flags: int, _context: Any) -> None:
            nonlocal gate_line_end, via_line_end
            last = begin + match_end - 1  # the last byte matched: a channel pattern's may be the newline
            if pattern != _VIA:
                if last > gate_line_end:
                    starts.append(rfind(b"\n", 0, last) + 1)
                    gate_line_end = find(b"\n", last) % size
            elif last > via_line_end:
                vias.append(rfind(b"\n", 0, last) + 1)
                via_line_end = find(b"\n", last) % size

        self._compiled.scan(memoryview(data)[begin:end], match_event_handler=on_match)
        return starts, vias


_VIA = len(_BLOCK_GATE)  # the channel pattern's id in a compiled scan; the gate words' are 0.._VIA-1


@functools.lru_cache(maxsize=16)
def _compiled(engine: str, via_seen: frozenset[bytes]) -> Any:
    """What scans for the gate words and the channel pattern of a set of cached words: a
    milliseconds' compile, so once per process and set. Each gate word is a literal of its own
    (1 ms to compile, where one pattern reporting once per line took 10 ms)."""
    via = _unseen_via_pattern(sorted(via_seen))
    if engine == "find":
        return re.compile(via)
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=[*(re.escape(token) for token in _BLOCK_GATE), via], ids=list(range(_VIA + 1)),
                     flags=[hyperscan.HS_FLAG_CASELESS] * _VIA + [0])
    return database


def _gate_starts_by_find(data: bytes) -> list[int]:
    """Starts of the lines of `data` holding a gate word: one bytes.find pass per word."""
    lowered = data.lower()
    starts = set()
    for token in _BLOCK_GATE:
        hit = lowered.find(token)
        while hit != -1:
            starts.add(lowered.rfind(b"\n", 0, hit) + 1)
            hit = lowered.find(token, lowered.find(b"\n", hit) + 1)
    return sorted(starts)
