"""LogParser: one physical line at a time, what a slime / Megatron / SGLang / NCCL / Ray log says.

A line is split on `\r` (tqdm bars share physical lines; every piece keeps the physical line's
number), of a line longer than MAX_LINE_BYTES only the head is read, and each piece, its colour
codes and Ray prefix taken off (line_text), goes to what reads its kind: tracebacks and elastic
tables (tracebacks), slime's records (metrics), cpverify's own lines (here), timers (timers),
Megatron's iterations and argument dump (here), NCCL's lines (nccl), progress bars (bars), and last
the error signatures (signatures). A Timer, record or Memory-Usage line in slime's own shape, and
Megatron-LM's iteration line, is read from its bytes before all that (plain). What each kind looks
like and what the parse reports of it is ARCHITECTURE.md's "What the parse reads".
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import replace
from typing import Any

from cpverify.parse import plain
from cpverify.parse.bars import Bar, last_bar
from cpverify.parse.dicts import parse_dict
from cpverify.parse.line_text import REPEATED, excerpt, unprefixed
from cpverify.parse.metrics import (
    MIN_WRAP_WIDTH,
    Fragment,
    WrappedRecord,
    fragment_pairs,
    memory_match,
    record_match,
    record_of,
)
from cpverify.parse.nccl import NcclLines
from cpverify.parse.records import (
    MAX_CONFLICTS,
    BandwidthRecord,
    CheckRecord,
    ConflictRecord,
    ErrorRecord,
    IterationRecord,
    Layout,
    MemoryRecord,
    NcclFacts,
    ParsedLog,
    PerfRecord,
    _finite_value,
)
from cpverify.parse.signatures import SIGNATURES, TB_HEADER, Signature, coarse_class, gated, integer, number
from cpverify.parse.timers import Timers
from cpverify.parse.tracebacks import ElasticTable, Ended, Tracebacks
from cpverify.redact import is_secret_name

# A logical line is never kept longer than this: a 10 MB tqdm line or binary junk
# must not make memory grow with the line.
MAX_LINE_BYTES = 64 * 1024
_MAX_SLOW_BARS = 64  # slow bars not finished yet, remembered at once

# ---------------------------------------------------------------------------- patterns

_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")
_OWN = re.compile(r"cpverify-(layout|check|busbw)\b(.*)$")
_KV = re.compile(r'(?<!\w)(\w{1,64})=("(?:[^"\\]|\\.)*"|\S+)')
# Megatron-LM prints its arguments on rank 0 at start-up (`_print_args`, megatron/training/
# arguments.py): `  context_parallel_size ........................... 2`, a name, a space, dots up
# to column 50 (48 - len(name) of them), a space, the value. The layout is read from that dump
# where the log has no cpverify-layout line (pretraining logs, runs without the hook).
_MEGATRON_LAYOUT_ARGS = {
    "context_parallel_size": "cp",
    "data_parallel_size": "dp",
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "world_size": "world",
}
# Every argument is kept (ParsedLog.arguments): the verdict compares the two arms' dumps, which
# must differ only in CP (a CP=1 log at 32K tokens against a CP=2 log at 1K is no CP comparison).
# A name of 48 characters or more gets no dots and is not read.
_MEGATRON_ARG = re.compile(r"  ([A-Za-z_]\w*) (\.+) (.*?)\s*$")
_MEGATRON_DOTS_END = 48  # len(name) + dots
# What _segment recognises before it classifies errors (each holds a gate token too).
_RECORD_MARKERS = (
    ".. ",  # Megatron's argument dump
    ": {",
    "perf/",
    "Timer ",
    "elapsed time per iteration",
    "cpverify-",
    " via ",
    "NCCL version",
    "Using network",
    "NET/IB : Using",
    TB_HEADER,
    'File "',
)
# ---------------------------------------------------------------------------- helpers
def _kv(text: str) -> dict[str, str]:
    out = {}
    for key, value in _KV.findall(text):
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        out[key] = value
    return out


def _insert_by_line(errors: list[ErrorRecord], records: list[ErrorRecord]) -> None:
    """Add records in line order: most come in order; a hang is known only when the run stops under
    its progress bar, lines later."""
    if not records:
        return
    at = len(errors)
    while at and errors[at - 1].line > records[0].line:
        at -= 1
    errors[at:at] = records


def _possible_layout(sizes: dict[str, Any], world: int | None) -> bool:
    """Could a job run with these sizes? Each at least 1, and cp*dp*tp*pp the world size where it
    is given (Megatron splits the world into exactly these groups)."""
    dims = [sizes["cp"], sizes["dp"], sizes["tp"], sizes["pp"]]
    return min(dims) >= 1 and (world is None or math.prod(dims) == world)


class LogParser:
    """Feed physical lines in order; ask for the ParsedLog whenever you like."""

    def __init__(self) -> None:
        self._log = ParsedLog()
        self._seen: set[str] = set()
        self._last_step: dict[str, int] = {}
        self._timers = Timers(self._log.timers)
        self._fragment: Fragment | None = None
        self._tracebacks = Tracebacks(self._log.tracebacks)
        self._nccl = NcclLines(self._log.nccl)
        self._records: dict[str, list[ErrorRecord]] = {}  # class -> its records (fine and coarse twin)
        # a message that may go on: an error message (its signature, text, line, actor) or a record
        self._held: tuple[Signature, str, int, str | None] | WrappedRecord | None = None
        self._width = 0  # the width of the physical line (its piece) being read: a hard wrap's measure
        self._elastic = ElasticTable()
        self._megatron_args: dict[str, int] = {}  # cp, dp, tp, pp, world of Megatron's argument dump
        self._slow_bars: dict[str, tuple[Bar, int, str]] = {}  # desc -> a slow bar not finished yet, its line
        self._megatron_lines: dict[str, int] = {}  # where the dump stated each of them
        self._layout_line: int | None = None  # the first cpverify-layout line

    @property
    def wants_every_line(self) -> bool:
        """True while a traceback is open or a wrapped message may go on: those lines hold no gate word."""
        return self._tracebacks.open is not None or self._held is not None

    def mark_read(self, lineno: int) -> None:
        """Lines up to `lineno` were read (parse_stream skips noise without feeding it)."""
        if lineno > self._log.lines:
            self._log.lines = lineno

    # -- input -----------------------------------------------------------------------
    def feed(self, line: str | bytes, lineno: int) -> None:
        """One physical line (str or bytes, newline optional) and its 1-based number in the file."""
        self.mark_read(lineno)
        if isinstance(line, str):
            # the cap is in bytes, as the file holds the line: a character may take up to four
            if len(line) > MAX_LINE_BYTES // 4 and len(raw := line.encode("utf-8", "surrogateescape")) > MAX_LINE_BYTES:
                line = raw[:MAX_LINE_BYTES].decode("utf-8", "replace")
        elif len(line) > MAX_LINE_BYTES:
            line = line[:MAX_LINE_BYTES]
        if isinstance(line, (bytes, bytearray)):
            line = bytes(line)
            if self.wants_every_line or line.find(b"NCCL INFO") != -1 or gated(line.lower()):
                self._feed_gated(line, lineno)
        elif self.wants_every_line or gated(line.lower()):
            self._physical(line, lineno)

    def _feed_gated(self, line: bytes, lineno: int) -> None:
        """A line past the gate (parse_stream's block scan found a gate word in it; it marks the
        lines read when it is done)."""
        if self._tracebacks.open is None and self._held is None:
            m = plain.PLAIN.match(line)
            if m is not None and m.end() == len(line) and plain.read(self, (b"", *m.groups(b"")), lineno):
                return
            if plain.iteration(self, line, lineno):  # Megatron-LM's iteration line, from its bytes too
                return
        text = line.decode("utf-8", "replace")  # `in` on str: on bytes it first tries an int
        if "NCCL INFO" in text and self._tracebacks.open is None and self._held is None and "\r" not in text:
            self._nccl.info_line(line)
        else:
            self._physical(text, lineno)

    def result(self) -> ParsedLog:
        """A snapshot of everything parsed so far (feeding may go on afterwards)."""
        log = self._log
        nccl = log.nccl
        layout = log.layout
        held = self._held.record() if type(self._held) is WrappedRecord else None  # not closed yet: so far
        perf = sorted([*log.perf, *self._fragment_records(), *([held] if isinstance(held, PerfRecord) else [])],
                      key=lambda p: p.line)
        errors = [replace(e, detail=dict(e.detail)) for e in log.errors]
        cut = self._tracebacks.open  # the log ends inside a traceback: the run was stopped, and the paste cut
        hang = self._stopped_waiting("a traceback cut before its exception", cut.line) if cut is not None else None
        if hang is not None:
            _insert_by_line(errors, [ErrorRecord("hang", hang["line"], excerpt(hang["msg"], 0), "hang", hang["detail"])])
        return ParsedLog(
            steps=[*log.steps, *([held] if held is not None and not isinstance(held, PerfRecord) else [])],
            perf=perf,
            timers=list(log.timers),
            iterations=list(log.iterations),
            # Copies: a later line may still add detail to a reported error (LogParser._enrich).
            errors=errors,
            nccl=NcclFacts(
                nccl.version, list(nccl.transports), nccl.network, nccl.cuda, list(nccl.versions), nccl.ib_link
            ),
            # The hook's line wins: every rank prints it once its process groups exist.
            layout=self._megatron_layout()
            if layout is None
            else Layout(layout.cp, layout.dp, layout.tp, layout.pp, layout.world, list(layout.ranks), layout.source),
            lines=log.lines,
            checks=list(log.checks),
            bandwidth=list(log.bandwidth),
            memory=list(log.memory),
            tracebacks=list(log.tracebacks),
            timers_open=sorted(self._timers.open.items(), key=lambda kv: kv[1]),
            arguments=dict(log.arguments),
            conflicts=[*log.conflicts, *self._layout_conflict(layout)],
        )

    def _layout_conflict(self, hook: Layout | None) -> list[ConflictRecord]:
        """The hook's line and Megatron's argument dump stating different sizes (each size the dump
        states, whether or not they make a job): the hook's layout is kept (see result()), but a log
        that says both is two runs pasted together, or an edited one."""
        dumped = self._megatron_args
        if hook is None or not dumped:
            return []
        hook_sizes = {"cp": hook.cp, "dp": hook.dp, "tp": hook.tp, "pp": hook.pp, "world": hook.world}
        differ = [name for name, value in dumped.items() if hook_sizes[name] is not None and hook_sizes[name] != value]
        if not differ:
            return []
        names = [name for name in hook_sizes if name in dumped and hook_sizes[name] is not None]
        return [ConflictRecord("layout", " ".join(f"{name}={hook_sizes[name]}" for name in names) + " (cpverify-layout)",
                               " ".join(f"{name}={dumped[name]}" for name in names) + " (Megatron's argument dump)",
                               self._layout_line, min(self._megatron_lines[name] for name in differ))]

    # -- one physical line -------------------------------------------------------------
    def _physical(self, text: str, lineno: int) -> None:
        actor: str | None = None
        text = text.rstrip("\n")
        for piece in text.split("\r") if "\r" in text else (text,):
            line = unprefixed(piece)
            self._width = len(piece)
            if line is None:
                self._end_held()  # a wrapped message does not go on after a blank line
                if self._tracebacks.open is not None:
                    self._tracebacks.idle()
                continue
            actor, seg = line[0] or actor, line[1]
            repeat = None
            if "[repeated " in seg:  # `in` first: str.find parses its arguments, `in` does not
                at = seg.rfind("[repeated ")
                m = REPEATED.match(seg, at)
                if m:
                    repeat = integer(m.group(1))
                    seg = seg[:at].rstrip()
            self._segment(seg, actor, lineno, repeat)

    def _segment(self, msg: str, actor: str | None, lineno: int, repeat: int | None) -> None:
        piece = False  # a piece of a wrapped record: its pairs are the record's, no fragment of their own
        if type(self._held) is WrappedRecord:
            piece = self._join_record(msg, actor)
        elif self._held is not None:
            self._join_held(msg)
        if self._elastic.root_cause_until >= lineno or "Root Cause" in msg or "exitcode" in msg or "received by PID" in msg:
            self._elastic_row(msg, lineno)
        if (self._tracebacks.open is not None or 'File "' in msg or TB_HEADER in msg) and self._traceback(msg, actor, lineno):
            return
        if ": {" in msg and self._record(msg, actor, lineno):
            return
        if "cpverify-" in msg and self._own(msg, lineno):
            return
        if "Timer " in msg and self._timers.line(msg, lineno):
            return
        if "iteration" in msg and self._iteration(msg, lineno):
            return
        if "NCCL" in msg:
            self._nccl.fact(msg)
            if " NCCL INFO " in msg:
                return
        if ".. " in msg and self._megatron_argument(msg, lineno):
            return
        if "perf/" in msg and not piece and self._fragment_line(msg, lineno):
            return
        if "s/it]" in msg:
            self._bar(msg, lineno)
        self._classify(msg, actor, lineno, repeat)

    # -- records -----------------------------------------------------------------------
    def _record(self, msg: str, actor: str | None, lineno: int) -> bool:
        m = record_match(msg)
        if m is None:
            return "Memory-Usage " in msg and self._memory(msg, actor, lineno)
        kind, index = m.group(1), integer(m.group(2))
        if kind in ("rollout", "eval") or index is None:
            return True  # known dicts, not part of the contract: never mistaken for errors
        body = m.group(3)
        if self._width >= MIN_WRAP_WIDTH and not body.rstrip().endswith("}"):
            self._held = WrappedRecord(kind, index, body, actor, lineno, msg, m.start(), self._width)
            return True
        self._store_record(kind, index, body, actor, lineno, msg, m.start())
        return True

    def _store_record(self, kind: str, index: int, body: str | bytes, actor: str | None, lineno: int, msg: str,
                      at: int) -> None:
        """Keep a record (`at`: where it starts in `msg`, its first line)."""
        record = record_of(kind, index, body, actor, lineno)
        if isinstance(record, PerfRecord):
            self._log.perf.append(record)
            return
        last = self._last_step.get(kind)
        if last is not None and index < last:
            self._error("run_restarted", lineno, msg, at, {"step": index, "after_step": last, "kind": kind})
        self._last_step[kind] = index
        self._log.steps.append(record)

    def _join_record(self, msg: str, actor: str | None) -> bool:
        """The line after a record that did not close: True when it is the record's next piece."""
        held = self._held
        assert type(held) is WrappedRecord
        if actor is not None or not held.join(msg, self._width, MAX_LINE_BYTES):
            self._end_held()
            return False
        if held.closed:
            self._held = None
            self._store_record(held.kind, held.index, held.body, held.actor, held.line, held.msg, held.at)
        return True

    def _end_held(self) -> None:
        """No more pieces: a record that never closed is read as far as it goes."""
        held, self._held = self._held, None
        if type(held) is WrappedRecord:
            self._store_record(held.kind, held.index, held.unclosed, held.actor, held.line, held.msg, held.at)

    def _memory(self, msg: str, actor: str | None, lineno: int) -> bool:
        m = memory_match(msg)
        if m is None:
            return False
        metrics, _ = parse_dict(m.group(3))
        rank = integer(m.group(1)) if m.group(1) else None
        self._log.memory.append(MemoryRecord(sys.intern(m.group(2)), lineno, rank, metrics))
        if "after torch distributed error" in msg:  # slime logs memory when c10d raised
            self._classify(msg, actor, lineno, None)
        return True

    def _own(self, msg: str, lineno: int) -> bool:
        m = _OWN.search(msg)
        if m is None:
            return False
        kind, kv = m.group(1), _kv(m.group(2))
        if kind == "layout":
            return self._layout(kv, msg, lineno)
        if kind == "check":
            if "name" not in kv or "status" not in kv:
                return False
            status = kv["status"].lower()
            value = number(kv["value"]) if "value" in kv else None
            bound = number(kv["bound"]) if "bound" in kv else None
            self._log.checks.append(CheckRecord(kv["name"], status, lineno, value, bound, kv.get("detail", "")))
            if status == "fail":
                self._error(
                    "cp_correctness", lineno, msg, m.start(), {"check": kv["name"], "value": value, "bound": bound}
                )
            return True
        if "op" not in kv:
            return False
        size = number(kv.get("bytes", ""))
        self._log.bandwidth.append(
            BandwidthRecord(
                kv["op"],
                lineno,
                int(size) if size is not None and math.isfinite(size) else None,
                number(kv.get("busbw_gbps", "")),
                number(kv.get("algbw_gbps", "")),
                {k: v for k, v in kv.items() if k not in ("op", "bytes", "busbw_gbps", "algbw_gbps")},
            )
        )
        return True

    def _layout(self, kv: dict[str, str], msg: str, lineno: int) -> bool:
        try:
            dims: dict[str, Any] = {k: int(kv[k]) for k in ("cp", "dp", "tp", "pp")}
        except (KeyError, ValueError):
            return False
        world, rank = integer(kv.get("world", "")), integer(kv.get("rank", ""))
        if not _possible_layout(dims, world):
            return False  # not a layout: an edited or garbled line cannot state (or orient) a CP
        current = self._log.layout
        if current is None:
            self._log.layout = Layout(**dims, world=world, ranks=[] if rank is None else [rank])
            self._layout_line = lineno
        elif dims == {"cp": current.cp, "dp": current.dp, "tp": current.tp, "pp": current.pp}:
            if rank is not None and rank not in current.ranks:
                current.ranks.append(rank)
        else:
            first = {"cp": current.cp, "dp": current.dp, "tp": current.tp, "pp": current.pp}
            self._error("layout_mismatch", lineno, msg, 0, {"rank": rank, "reported": dims, "first": first})
        return True

    def _megatron_argument(self, msg: str, lineno: int) -> bool:
        m = _MEGATRON_ARG.search(msg)
        if m is None or len(m.group(2)) != _MEGATRON_DOTS_END - len(m.group(1)):
            return False
        name, text = m.group(1), m.group(3)
        if not is_secret_name(name):  # --wandb-key's value is kept nowhere, not even as "None"
            first = self._log.arguments.setdefault(name, text)  # the first dump counts
            if first != text and len(self._log.conflicts) < MAX_CONFLICTS:  # a second dump that says otherwise
                self._log.conflicts.append(ConflictRecord(f"argument {name}", first, text, None, lineno))
        value = integer(text) if name in _MEGATRON_LAYOUT_ARGS else None
        if value is not None and _MEGATRON_LAYOUT_ARGS[name] not in self._megatron_args:
            self._megatron_args[_MEGATRON_LAYOUT_ARGS[name]] = value
            self._megatron_lines[_MEGATRON_LAYOUT_ARGS[name]] = lineno
        return True

    def _megatron_layout(self) -> Layout | None:
        """The layout of Megatron's argument dump, when it names every size."""
        args = self._megatron_args
        if not {"cp", "dp", "tp", "pp"} <= args.keys() or not _possible_layout(args, args.get("world")):
            return None
        return Layout(args["cp"], args["dp"], args["tp"], args["pp"], args.get("world"), [0], "megatron-arguments")

    def _iteration(self, msg: str, lineno: int) -> bool:
        m = _ITERATION.search(msg)
        if m is None:
            return False
        elapsed_ms = None
        metrics: dict[str, float] = {}
        for part in m.group(3).split("|"):
            name, sep, value = part.partition(":")
            field_value = number(value) if sep else None
            if field_value is None:
                continue
            name = name.strip()
            if name.startswith("elapsed time per iteration"):
                elapsed_ms = field_value
            else:
                metrics[sys.intern(name)] = field_value  # one str per name, not one per line
        iteration = integer(m.group(1))
        if iteration is None:
            return False
        self._log.iterations.append(IterationRecord(iteration, lineno, elapsed_ms, metrics, integer(m.group(2))))
        return True

    # -- hand-copied fragments -----------------------------------------------------------
    def _fragment_line(self, msg: str, lineno: int) -> bool:
        pairs = fragment_pairs(msg)
        if not pairs:
            return False
        frag = self._fragment
        if frag is None or lineno > frag.last_line + 1:
            self._log.perf.extend(self._fragment_records())
            frag = self._fragment = Fragment(lineno)
        frag.last_line = lineno
        frag.pairs.extend((k, v, lineno) for k, v in pairs)
        return True

    def _fragment_records(self) -> list[PerfRecord]:
        return [] if self._fragment is None else self._fragment.records()

    # -- progress bars -------------------------------------------------------------------
    def _bar(self, msg: str, lineno: int) -> None:
        """A slow bar that has not finished is remembered until it finishes or the run stops under it
        (_stopped_waiting): a ten-minute step that completes is slow, not hung."""
        bar = last_bar(msg)
        if bar is None:
            return
        self._slow_bars.pop(bar.desc, None)
        if bar.slow and not bar.finished:
            if len(self._slow_bars) >= _MAX_SLOW_BARS:  # bars named anew each time: forget the oldest
                del self._slow_bars[next(iter(self._slow_bars))]
            self._slow_bars[bar.desc] = (bar, lineno, msg)

    def _stopped_waiting(self, how: str, before: int) -> dict[str, Any] | None:
        """The hang of the last slow bar still running when the run was stopped at line `before`."""
        waiting = [entry for entry in self._slow_bars.values() if entry[1] < before]
        if not waiting or "hang" in self._seen:
            return None
        bar, lineno, msg = max(waiting, key=lambda entry: entry[1])
        return {"line": lineno, "msg": msg, "detail": {**bar.detail(), "stopped_by": how}}

    # -- tracebacks ----------------------------------------------------------------------
    def _traceback(self, msg: str, actor: str | None, lineno: int) -> bool:
        """Follow a Python traceback; True when the segment was a traceback line only."""
        consumed, ended = self._tracebacks.follow(msg, lineno)
        if ended is not None:
            self._traceback_ended(ended, lineno, actor)
        return consumed

    def _traceback_ended(self, ended: Ended, lineno: int, actor: str | None) -> None:
        """python_traceback names the exception that ended it; a traceback without its header (cut from
        the paste, or Ray's remote one) is one all the same once frames end in an exception line."""
        tb, msg = ended.record, ended.msg
        if ended.sglang_startup:
            self._error("sglang_server_startup_failure", lineno, msg, 0, {"exception": ended.exception})
        if not ended.headed:
            detail = {"exception": ended.exception, "frames_from": tb.line, **({"actor": actor} if actor else {})}
            self._error("python_traceback", lineno, msg, 0, detail)
        else:
            for record in self._records.get("python_traceback", ()):
                if record.line == tb.line:
                    record.detail.setdefault("exception", ended.exception)
        hang = self._stopped_waiting(ended.name, tb.line) if ended.gave_up else None
        if hang is not None:
            self._error("hang", hang["line"], hang["msg"], 0, hang["detail"])

    # -- errors --------------------------------------------------------------------------
    def _classify(self, msg: str, actor: str | None, lineno: int, repeat: int | None) -> None:
        seen = self._seen
        for sig in SIGNATURES:
            if sig.cls in seen and not sig.enriches:
                continue
            for trigger in sig.triggers:
                if trigger in msg:
                    break
            else:
                continue
            if sig.unless and any(word in msg for word in sig.unless):
                continue
            m = None
            if sig.regex is not None:
                m = sig.regex.search(msg)
                if m is None:
                    if sig.joins and self._held is None and sig.cls not in seen:
                        self._held = (sig, msg, lineno, actor)
                    continue
            detail = sig.detail(m, msg) if sig.detail else {}
            if detail is None:
                continue
            if sig.cls in seen:
                self._enrich(sig.cls, detail)
                continue
            if actor:
                detail["actor"] = actor
            if repeat:
                detail["repeated"] = repeat
            self._error(sig.cls, lineno, msg, m.start() if m else msg.find(trigger), detail)
            if sig.then is not None and self._held is None:
                self._held = (sig, msg, lineno, actor)

    def _join_held(self, msg: str) -> None:
        """The line after a message cut short: a terminal's hard wrap split it without a character."""
        sig, head, lineno, actor = self._held  # type: ignore[misc]
        self._held = None
        if sig.cls in self._seen or sig.regex is None:
            if sig.then is not None:
                self._enrich(sig.cls, sig.then(msg))
            return
        joined = head + msg
        m = sig.regex.search(joined)
        if m is None:
            return
        detail = sig.detail(m, joined) if sig.detail else {}
        if detail is not None:
            if actor:
                detail["actor"] = actor
            detail["joined_lines"] = 2
            self._error(sig.cls, lineno, joined, m.start(), detail)

    def _elastic_row(self, msg: str, lineno: int) -> None:
        """A row of a ChildFailedError table: the root cause's exit code and signal."""
        row = self._elastic.row(msg, lineno)
        if row is None:
            return
        detail, root_cause = row
        if "launcher_failed" in self._seen:
            # The table's root cause outranks the agent's `failed (exitcode: N)` line, which names
            # whichever rank it saw first; rows of other failures only fill in what is missing.
            self._enrich("launcher_failed", detail, overwrite=root_cause)
        else:
            self._error("launcher_failed", lineno, msg, 0, detail)

    def _enrich(self, cls: str, detail: dict[str, Any], overwrite: bool = False) -> None:
        for record in self._records.get(cls, ()):
            for key, value in detail.items():
                if overwrite or key not in record.detail:
                    record.detail[key] = value

    def _error(self, cls: str, lineno: int, msg: str, pos: int, detail: dict[str, Any]) -> None:
        text = excerpt(msg, pos)
        coarse = coarse_class(cls)
        detail = {k: _finite_value(v) if isinstance(v, float) else v for k, v in detail.items()}
        added = []
        for name in (cls, coarse):
            if name not in self._seen:
                self._seen.add(name)
                added.append(ErrorRecord(name, lineno, text, coarse, dict(detail)))
        _insert_by_line(self._log.errors, added)
        # Both twins take later detail (a fine class's coarse twin may be reported already).
        self._records.setdefault(cls, []).extend(added)
        if coarse != cls:
            self._records.setdefault(coarse, []).extend(r for r in added if r.cls == coarse)
