"""slime's own lines in their exact shape, read from their bytes: most of a slime log.

slime's logger prints `(Actor pid=N) [date time] file.py:N - ` and then, rollout after rollout, a
Timer line (`Timer NAME start`, `Timer NAME end (elapsed: Xs)`), a record (`step N: {...}`,
`perf N: {...}`, `rollout N: {...}`) or a Memory-Usage line (`[Rank N] Memory-Usage LABEL: {...}`).
A line in exactly that shape (PLAIN), its dict flat and of printable ASCII without quotes,
backslashes or parentheses, is read here without being decoded whole, taken apart piece by piece
or tried as any other kind: while no traceback or wrapped message is open, the line path
(LogParser._physical) gives such a line to its record, its timer or its memory reading and to
nothing else, because

  * nothing in it makes a traceback line (`File "`, the header's parentheses), an elastic table's
    row (a row starts with its words, never a timestamp; a signal's needs parentheses), a cpverify
    line is no record, a Ray repeat note or a `\\r` piece (no `[`, no `\\r` after the prefix);
  * its record is the first `N: {` the line path finds (none before it: the stamp and the file name
    hold no brace), and a Memory-Usage label ending in a digit, which the line path may read as a
    record, goes the long way; so do a line holding `NCCL INFO` (the parser reads it as NCCL's) and
    one longer than the parser reads.

Any other line, and every line while a traceback or a wrapped message is open, goes the long way.
A property test holds the two ways equal (tests/test_logs.py), each piece printed otherwise.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

from cpverify.parse.dicts import parse_plain_dict
from cpverify.parse.records import MemoryRecord
from cpverify.parse.signatures import integer

if TYPE_CHECKING:
    from cpverify.parse.parser import LogParser

_DICT = rb"(\{[^\n]*\})"  # what it may hold read() tests: a regex class costs ~3 ns a byte
# A dict's bytes, its braces aside, are printable ASCII but for " ( ) \ { }: translate() with these
# bytes deleted leaves nothing of it.
_FLAT = bytes(c for c in range(0x20, 0x7F) if chr(c) not in '"()\\{}')
_SHAPE = (
    rb"(?:(?:\x1b\[[0-9;]{0,8}m)?\(([A-Za-z_][\w.:-]*) pid=\d+(?:, ip=[\w.:-]+)?\)(?:\x1b\[[0-9;]{0,8}m)? )?"  # 1
    rb"(\[[\d :,.-]{1,40}\] \w{1,64}\.py:\d{1,6} - "  # 2: the message (the line without its Ray prefix)
    rb"(?:Timer (\w{1,200}) (?:(start)|end(?: \(elapsed: ([-+\d.eE]+|nan|inf)s\))?)"  # 3 4 5
    rb"|(critic-step|step|perf|rollout|eval) (\d{1,18}): " + _DICT  # 6 7 8
    + rb"|(?:\[Rank (\d{1,9})\] )?Memory-Usage ([\w .-]{0,200}?): " + _DICT + rb"))"  # 9 10 11
)
# One line in slime's shape; and every line of a block: (the line, then the shape's groups, b"" but
# where the line is in the shape). Group 0 (PLAIN) or 1 (LINES) is the line; read() takes either's.
PLAIN = re.compile(_SHAPE + rb"(?:\n|\Z)")
LINES = re.compile(rb"(" + _SHAPE + rb"(?=\n)|[^\n]*)\n")
_ACTORS: dict[bytes, str] = {}  # a log has a few actors, each on many lines


def read(parser: LogParser, groups: tuple[bytes, ...], lineno: int) -> bool:
    """Read PLAIN's groups of a line (b"" for a group that took no part, as findall gives them),
    read while no traceback or wrapped message is open, as the line path would; False when the
    line must go the long way."""
    _, raw_actor, msg, name, start, elapsed, kind, index, body, rank, label, memory = groups
    if name:
        parser._timers.timed(name.decode("ascii"), bool(start), elapsed.decode("ascii"), lineno)
        return True
    if msg.find(b"NCCL INFO") != -1 or (body or memory)[1:-1].translate(None, _FLAT):  # NCCL's line; not flat
        return False
    actor = None if not raw_actor else _ACTORS.get(raw_actor) or _ACTORS.setdefault(raw_actor, raw_actor.decode())
    if kind:
        if kind in (b"rollout", b"eval"):  # known dicts, not part of the contract
            return True
        number = integer(index.decode("ascii"))
        if number is None:
            return False
        at = len(msg) - len(body) - len(index) - len(kind) - 3  # where the record starts in the message
        parser._store_record(kind.decode("ascii"), number, body, actor, lineno, msg.decode("ascii"), at)
        return True
    if label[-1:].isdigit() or b"after torch distributed error" in label:  # a record, or an error to classify
        return False
    metrics, _ = parse_plain_dict(memory)
    parser._log.memory.append(MemoryRecord(sys.intern(label.decode("ascii")), lineno,
                                           int(rank) if rank else None, metrics))
    return True
