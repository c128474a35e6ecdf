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


try:
    import hyperscan
except ImportError:  # no wheels for Linux on ARM: every gate word is then one bytes.find pass
    hyperscan = None  # type: ignore[assignment]

ENGINES = ("find",) if hyperscan is None else ("hyperscan", "find")
ENGINE = ENGINES[0]  # the block scan parse_stream uses (tests and the benchmark try both)


class BlockScan:
    """Finds, in a block of whole lines, the starts of the lines that hold a gate word, and of
    the channel lines whose transport word the parser has not cached yet.

    "hyperscan" makes two compiled passes: the gate words, all at once (each line is taken at its
    first word: Hyperscan reports matches in the order they end); then the channel lines. "find" makes one bytes.find pass per gate
    word and one regex pass for the channel lines. Both give the same answer (a property test
    checks it). The channel pattern follows the parser's cache (`via_seen`): it changes when the
    cache grew, in the first blocks of a log, and is compiled once per process for each set of
    words (_compiled_via); the gate is compiled once per process (_compiled_gate).
    """

    def __init__(self, engine: str, via_seen: set[bytes]) -> None:
        self._engine, self._via_seen = engine, via_seen
        self._words = -1  # size of via_seen when self._via was compiled
        self._via: Any = None

    def scan(self, data: bytes, begin: int, end: int) -> tuple[list[int], list[int]]:
        """(starts of the gated lines, starts of the channel lines with an unseen word) of
        data[begin:end], each in order and once. Starts are indices into `data`; begin is a line start."""
        if self._words != len(self._via_seen):
            self._via = _compiled_via(self._engine, frozenset(self._via_seen))
            self._words = len(self._via_seen)
        if self._engine == "find":
            return ([begin + start for start in _gate_starts_by_find(data[begin:end])],
                    sorted({data.rfind(b"\n", 0, m.start()) + 1 for m in self._via.finditer(data, begin, end)}))
        view = memoryview(data)[begin:end]
        starts: list[int] = []
        vias: list[int] = []
        via_line_end = -1  # end of the last channel line found: another word on it adds nothing

        gate_line_end = -1  # end of the last gated line: another word on it adds nothing
        append, find, rfind = starts.append, data.find, data.rfind

        def on_gate(_pattern: int, _start: int, match_end: int, _flags: int, _context: Any) -> None:
            nonlocal gate_line_end
            if begin + match_end > gate_line_end:
                append(rfind(b"\n", 0, begin + match_end) + 1)
                gate_line_end = find(b"\n", begin + match_end) % (len(data) + 1)  # -1: the data's end

        def on_via(_pattern: int, _start: int, match_end: int, _flags: int, _context: Any) -> None:
            nonlocal via_line_end
            last = begin + match_end - 1  # the last byte: of the word, or the newline after it
            if last > via_line_end:
                vias.append(data.rfind(b"\n", 0, last) + 1)
                via_line_end = data.find(b"\n", last) % (len(data) + 1)  # -1: the data's end

        _compiled_gate().scan(view, match_event_handler=on_gate)
        self._via.scan(view, match_event_handler=on_via)
        return starts, vias


@functools.lru_cache(maxsize=1)
def _compiled_gate() -> Any:
    """All gate words, caseless, each a literal: 1 ms to compile, where one pattern reporting once
    per line (the words, then the rest of the line) took 10 ms of every `cpverify parse`."""
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=[re.escape(token) for token in _BLOCK_GATE],
                     flags=[hyperscan.HS_FLAG_CASELESS] * len(_BLOCK_GATE))
    return database


@functools.lru_cache(maxsize=16)
def _compiled_via(engine: str, via_seen: frozenset[bytes]) -> Any:
    """The channel pattern for a set of cached words: milliseconds, so once per process and set."""
    pattern = _unseen_via_pattern(sorted(via_seen))
    if engine == "find":
        return re.compile(pattern)
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=[pattern])
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
