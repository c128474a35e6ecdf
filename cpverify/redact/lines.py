"""A log's lines redacted a block at a time: line for line what Redactor.lines() makes of them, found
cheaply (the bundle's copy of a given log, the logs in the archive: tens of MiB).

Every rule of cpverify.redact.credentials and cpverify.redact.identity runs on a line only where a cheap test
says it can match: a gate word, a literal secret, a name, a pattern such as `\\d.\\d+.\\d+.\\d`. Per
line, those tests cost more than the rest of a verdict. Here one scan of a block finds the lines
that hold any of them (Hyperscan, every term at once; where it is not installed, one bytes.find
pass per word and one regex pass per pattern), and only those lines, and every line while a PEM
block is open, go through Redactor.lines(); the others are the line redactor's answer already,
the bytes as they came. A line that is not ASCII always goes through: there `str.lower()` and
`\\d` read more than bytes do. A host learned on a line (Redactor.gate_terms grows) is looked for
in the rest of the block too. tests/test_redact_lines.py checks the equality on any input;
benchmarks/verdict_throughput.md measures it.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cpverify.redact.credentials import GATE_PATTERNS, GATE_WORDS, Credentials
from cpverify.scan_engines import ENGINES, hyperscan

if TYPE_CHECKING:
    from cpverify.redact.redactor import Redactor


_NOT_ASCII = re.compile(rb"[\x80-\xff]")


def _ascii(words: Iterable[str]) -> list[bytes]:
    """The words that can occur in an ASCII line, as bytes (the others only in lines that go through anyway)."""
    return sorted({word.encode() for word in words if word and word.isascii()})


class _Terms:
    """What a scan looks for: words in any case, words in their case, patterns in their case, patterns
    of lower-case text in any case (bytes)."""

    def __init__(self, anycase: list[bytes], cased: list[bytes], patterns: list[bytes], engine: str,
                 anycase_patterns: tuple[bytes, ...] = ()) -> None:
        self.anycase, self.cased = anycase, cased
        self.patterns = [re.compile(pattern) for pattern in patterns]
        self.anycase_patterns = [re.compile(pattern) for pattern in anycase_patterns]
        self._database: Any = None
        if engine == "hyperscan":
            self._database = _compiled(tuple(anycase), tuple(cased), tuple(patterns), anycase_patterns)

    def lines(self, block: bytes, begin: int = 0) -> set[int]:
        """Where the lines of `block` from offset `begin` (a line's start) on that hold a term start."""
        hot: set[int] = set()
        if self._database is not None:
            line_end = -1

            def on_match(_id: int, _start: int, end: int, _flags: int, _context: Any) -> None:
                nonlocal line_end
                last = begin + end - 1  # the match's last byte
                if last >= line_end:  # matches come in the order they end: one report a line
                    hot.add(block.rfind(b"\n", 0, last) + 1)
                    line_end = block.find(b"\n", last) + 1 or len(block)

            if self.anycase or self.cased or self.patterns or self.anycase_patterns:
                self._database.scan(memoryview(block)[begin:], match_event_handler=on_match)
            return hot
        lowered = block.lower()  # bytes.lower(): ASCII letters only, the offsets are the block's
        for text, words in ((lowered, self.anycase), (block, self.cased)):
            for word in words:
                _hits(hot, block, lambda at, w=word, t=text: t.find(w, at), begin)
        for text, patterns in ((block, self.patterns), (lowered, self.anycase_patterns)):
            for pattern in patterns:
                _hits(hot, block, lambda at, p=pattern, t=text: (m.start() if (m := p.search(t, at)) else -1), begin)
        return hot


def _hits(hot: set[int], block: bytes, find: Any, at: int) -> None:
    """Add to `hot` where each line that `find(at)` finds its term on starts; after a hit, it goes on at the next line."""
    found = find(at)
    while found != -1:
        hot.add(block.rfind(b"\n", 0, found) + 1)
        end = block.find(b"\n", found)
        if end == -1:
            return
        found = find(end + 1)


def _expression(word: bytes) -> bytes:
    """A literal as a Hyperscan expression: letters and digits as they are (CASELESS reads them), the rest \\xHH."""
    return b"".join(bytes([c]) if chr(c).isalnum() else b"\\x%02x" % c for c in word)


@functools.lru_cache(maxsize=8)
def _compiled(anycase: tuple[bytes, ...], cased: tuple[bytes, ...], patterns: tuple[bytes, ...],
              anycase_patterns: tuple[bytes, ...]) -> Any:
    """One Hyperscan database for every term: milliseconds to compile, so once per set of terms."""
    expressions = [*map(_expression, anycase), *map(_expression, cased), *patterns, *anycase_patterns]
    if not expressions:
        return None
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=expressions, ids=list(range(len(expressions))),
                     flags=[hyperscan.HS_FLAG_CASELESS] * len(anycase) + [0] * (len(cased) + len(patterns))
                     + [hyperscan.HS_FLAG_CASELESS] * len(anycase_patterns))
    return database


class BlockRedactor:
    """Redactor.lines() for a block of lines at once (bytes, each ending in "\\n" but perhaps the
    last, decoded as UTF-8 with replacement where a rule reads them). Holds the line redactor's
    state from block to block (an open PEM block), as it would."""

    def __init__(self, redactor: Redactor, engine: str | None = None, *, only: Iterable[str] | None = None) -> None:
        """`only`: the text was redacted by `redactor` already, before it learned these host names: the
        lines that hold one are all that may change."""
        self._redactor = redactor
        self._rules = Credentials(redactor.literals)
        self._line = functools.partial(redactor.line_of, self._rules)  # Redactor.lines(), its state in reach
        engine = engine or ENGINES[0]
        anycase, cased, patterns = redactor.gate_terms()
        self._names, self._known = set(anycase), set(anycase)  # hosts learned after these are scanned apart
        self._fixed = (_Terms(_ascii(only), [], [], engine) if only is not None else
                       _Terms(_ascii([*GATE_WORDS, *anycase]), _ascii([*self._rules.literals, *cased]),
                              [pattern.pattern.encode() for pattern in patterns], engine,
                              tuple(pattern.encode() for pattern in GATE_PATTERNS)))

    def __call__(self, lines: list[bytes]) -> list[bytes]:
        out = list(lines)
        if not lines:
            return out
        edits = self._edits(b"".join(lines))
        if edits:
            index = {start: i for i, start in enumerate(itertools.accumulate(map(len, lines[:-1]), initial=0))}
            for start, _, line in edits:
                out[index[start]] = line
        return out

    def block(self, data: bytes) -> bytes:
        """A block of whole lines (the last may lack its newline), redacted as __call__ would redact
        its lines: a block in which no line changes (most of a log) comes back as it is, unsplit."""
        edits = self._edits(data)
        if not edits:
            return data
        parts: list[bytes] = []
        at = 0
        for start, end, line in edits:
            parts += (data[at:start], line)
            at = end
        parts.append(data[at:])
        return b"".join(parts)

    def _edits(self, block: bytes) -> list[tuple[int, int, bytes]]:
        """(start, end, the line redacted) of each line of `block` that goes through the rules: those a
        scan finds a term on, every line while a PEM block is open, and, after a line that names a
        host not known before, the later lines that hold its name."""
        self._names.update(self._redactor.gate_terms()[0])  # hosts the run learned elsewhere meanwhile
        hot = self._fixed.lines(block) | self._learned(block, 0)
        if not block.isascii():
            _hits(hot, block, lambda at: (m.start() if (m := _NOT_ASCII.search(block, at)) else -1), 0)
        order, h, at, n = sorted(hot), 0, 0, len(block)
        edits: list[tuple[int, int, bytes]] = []
        while at < n:
            if not self._rules.in_pem:  # else every line goes through until the block closes
                while h < len(order) and order[h] < at:
                    h += 1
                if h == len(order):
                    break
                at = order[h]
            end = block.find(b"\n", at) + 1 or n
            known = len(self._names)
            edits.append((at, end, self._line(block[at:end].decode("utf-8", "replace")).encode()))
            at = end
            if at < n and self._learned_since(known):  # a host named on this line: its name, in the rest
                more = self._learned(block, at) - hot
                if more:
                    hot |= more
                    order = sorted(hot)
                    h = 0
        return edits

    def _learned_since(self, known: int) -> bool:
        self._names.update(self._redactor.gate_terms()[0])
        return len(self._names) != known

    def _learned(self, block: bytes, begin: int) -> set[int]:
        """Where the lines from offset `begin` on that hold a host name learned since the scan was compiled start."""
        names = _ascii(self._names - self._known)
        return _Terms(names, [], [], "find").lines(block, begin) if names else set()
