"""Lines in their exact shape, read from their bytes: slime's own (most of a slime log) and
Megatron-LM's iteration line (most of a pretraining log's records).

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

Megatron-LM's iteration line (ITERATION, `iteration`) is read so too: its fields are split at
their `|` and `:` bytes and each value read by float(), as LogParser._iteration reads the decoded
line, when every field is ` NAME: VALUE |` in ASCII and each VALUE a number (a field the long way
would skip sends the line the long way), and no name holds what the line path tries before an
iteration (_LONG_WAY).

Any other line, and every line while a traceback or a wrapped message is open, goes the long way.
Property tests hold the two ways equal (tests/test_parse_plain.py), each piece printed otherwise.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

from cpverify.parse.dicts import parse_plain_dict
from cpverify.parse.records import IterationRecord, MemoryRecord
from cpverify.parse.signatures import TB_HEADER, integer

if TYPE_CHECKING:
    from cpverify.parse.parser import LogParser

_DICT = rb"(\{[^\n]*\})"  # what it may hold read() tests: a regex class costs ~3 ns a byte
# A dict's bytes, its braces aside, are printable ASCII but for " ( ) \ { }: translate() with these
# bytes deleted leaves nothing of it.
_FLAT = bytes(c for c in range(0x20, 0x7F) if chr(c) not in '"()\\{}')
# Ray's prefix, `(Actor pid=N) `, in colour or not (line_text.unprefixed takes it off the same).
_ACTOR = rb"(?:(?:\x1b\[[0-9;]{0,8}m)?\(([A-Za-z_][\w.:-]*) pid=\d+(?:, ip=[\w.:-]+)?\)(?:\x1b\[[0-9;]{0,8}m)? )?"
_SHAPE = (
    _ACTOR  # 1
    + rb"(\[[\d :,.-]{1,40}\] \w{1,64}\.py:\d{1,6} - "  # 2: the message (the line without its Ray prefix)
    rb"(?:Timer (\w{1,200}) (?:(start)|end(?: \(elapsed: ([-+\d.eE]+|nan|inf)s\))?)"  # 3 4 5
    rb"|(critic-step|step|perf|rollout|eval) (\d{1,18}): " + _DICT  # 6 7 8
    + rb"|(?:\[Rank (\d{1,9})\] )?Memory-Usage ([\w .-]{0,200}?): " + _DICT + rb"))"  # 9 10 11
)
# One line in slime's shape (read() takes its groups after the line).
PLAIN = re.compile(_SHAPE + rb"(?:\n|\Z)")
_ACTORS: dict[bytes, str] = {}  # a log has a few actors, each on many lines

# Most of a slime log's lines are Timer lines, and they come in a few shapes: a line with each digit
# written as 0 (SHAPED) is the same bytes for each actor, timer and width of the elapsed time. PLAIN
# matches a line exactly where it matches that shape, with the same spans (PLAIN reads a digit only
# as \d, \w or in a class holding every digit, and its literals hold none), so a Timer line whose
# shape was matched once is read from those spans (stream._feed_dense): its name's and its elapsed
# time's (-1 where it has none), and whether it starts the timer. Kept up to a bounded number.
SHAPED = bytes.maketrans(b"123456789", b"000000000")
TIMER_SHAPES: dict[bytes, tuple[int, int, bool, int, int]] = {}
_MAX_TIMER_SHAPES = 1024
TIMER_NAMES: dict[bytes, str] = {}  # a name's bytes -> its text, interned, as Timers.timed keeps it
_MAX_TIMER_NAMES = 4096


def timer_shape(shape: bytes, m: re.Match[bytes]) -> None:
    """Keep the shape of a line PLAIN matched as a Timer line (m: the match, on the line itself)."""
    if len(TIMER_SHAPES) < _MAX_TIMER_SHAPES:
        TIMER_SHAPES[shape] = (m.start(3), m.end(3), m.start(4) != -1, m.start(5), m.end(5))


def timer_name(raw: bytes) -> str:
    """A timer's name, from its bytes (ASCII: PLAIN's word bytes), interned."""
    name = TIMER_NAMES.get(raw)
    if name is None:
        name = sys.intern(raw.decode("ascii"))
        if len(TIMER_NAMES) < _MAX_TIMER_NAMES:
            TIMER_NAMES[raw] = name
    return name


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


# Megatron-LM's training_log (megatron/training/training.py) prints ` [2026-08-21 10:00:00.123456]`
# (older releases: nothing), ` iteration {:8d}/{:8d} |`, then ` NAME: VALUE |` per field: consumed
# samples (`{:12d}`), consumed bins or skipped samples where the run has them, elapsed time per
# iteration (ms) (`{:.1f}`), throughput, energy and power where asked for, learning rate (`{:.6E}`),
# global batch size (`{:5d}`), each loss while it is > 0 (`{:.6E}`, any name), loss scale (`{:.1f}`),
# grad norm (`{:.3f}`), num zeros, params norm where there is one, and the skipped and nan iteration
# counts (`{:3d}`): which fields a line has, and in which order, varies; a number may be nan, inf, NAN,
# INF or -INF.
ITERATION = re.compile(_ACTOR + rb" ?(?:\[[\d :.-]{1,40}\] )?iteration +(\d{1,18})/ *(\d{1,18}) \|")
_ELAPSED = "elapsed time per iteration"  # a field named so is the record's elapsed_ms (LogParser._iteration)
# What a name may hold that LogParser._physical and _segment read before an iteration: colour codes
# (taken out of the whole line), a traceback's header (opens one), the signal row of an elastic table
# (an error), a cpverify line, a timer, NCCL's line. Nothing else they try first can match: the head
# holds none of it, a number none, a name no `:` or `|`, and the line ends in `|` (no Ray repeat note).
_LONG_WAY = (b"\x1b", TB_HEADER.encode(), b"received by PID", b"cpverify-", b"Timer ", b"NCCL INFO")
_NOT_SEPARATOR = bytes(c for c in range(256) if c not in b":|\r\n")
# A log has a few sets of fields, each on many lines: their plans are kept, up to a bounded size.
_PLANS: dict[tuple[bytes, ...], tuple[str, ...]] = {}
_MAX_PLANS, _MAX_PLANNED_BYTES = 256, 4096


def iteration(parser: LogParser, line: bytes, lineno: int) -> bool:
    """Read a line (newline optional) in Megatron-LM's iteration shape, read while no traceback or
    wrapped message is open, as the line path would; False when the line must go the long way."""
    m = ITERATION.match(line)
    if m is None:
        return False
    fields = line[m.end() : -1 if line[-1:] == b"\n" else len(line)]
    # ` NAME: VALUE |` each: one `:` (the long way splits at the first), no other piece (`\r`) or line
    # after the last `|`, and ASCII, where a byte is the character the long way reads.
    separators = fields.translate(None, _NOT_SEPARATOR)
    if separators != b":|" * (len(separators) >> 1) or fields[-1:] != b"|" or not fields.isascii():
        return False
    parts = fields.replace(b"|", b":").split(b":")  # name, value, name, value, ..., b""
    names = tuple(parts[0:-1:2])
    plan = _PLANS.get(names)
    if plan is None:
        plan = _plan(names)
    if not plan:
        return False
    try:
        metrics = dict(zip(plan, map(float, parts[1::2]), strict=True))
    except ValueError:  # a value that is no number, which the long way skips
        return False
    elapsed = metrics.pop(_ELAPSED, None)  # the last elapsed field's, as the long way keeps it
    parser._log.iterations.append(IterationRecord(int(m.group(2)), lineno, elapsed, metrics, int(m.group(3))))
    return True


def _plan(names: tuple[bytes, ...]) -> tuple[str, ...]:
    """The metric name of each field (_ELAPSED for the elapsed time's), as the long way strips and
    interns it; () where a name holds what the line path reads before an iteration."""
    joined = b"|".join(names)
    plan: tuple[str, ...] = ()
    if not any(word in joined for word in _LONG_WAY):
        stripped = [name.decode("ascii").strip() for name in names]
        plan = tuple(_ELAPSED if name.startswith(_ELAPSED) else sys.intern(name) for name in stripped)
    if len(_PLANS) < _MAX_PLANS and len(joined) <= _MAX_PLANNED_BYTES:
        _PLANS[names] = plan
    return plan
