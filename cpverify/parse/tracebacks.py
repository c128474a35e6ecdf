"""Python tracebacks and torch.distributed.elastic's failure tables, followed line by line.

A traceback (`tracebacks` of the parse) is its header line, its frames with their source line
and the exception line that ends it. A paste may lose the header (and Ray prints none for a
remote one): frames alone open one. One cut before its exception is given up after a few lines
without a frame. torchrun prefixes each rank's line with `[rankN]:`, which is taken off, and so
is the margin Python 3.11+ draws around an exception group's tracebacks (`  + Exception Group
Traceback ...`, then `  | ` before each of its lines, nested ones further in).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cpverify.parse.line_text import excerpt
from cpverify.parse.records import FrameRecord, TracebackRecord
from cpverify.parse.signatures import TB_HEADER, integer, signal_detail

MAX_TRACEBACKS = 50
MAX_FRAMES = 40
_PATIENCE = 8  # lines without a frame before a cut traceback is given up
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s?")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (.+?))?\s*$')
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
# `RuntimeError: ...`, `torch.OutOfMemoryError`, and the bare base classes: SGLang raises `Exception(...)`,
# asyncio's TaskGroup an `ExceptionGroup`. Any class can be raised (StopIteration, a UserWarning made an
# error, a project's own): a CamelCase name of two words or more is one too; a lone word (INFO:, Note:)
# is a logger's line that fell inside the traceback, not its end.
_EXCEPTION = re.compile(r"^((?:[A-Za-z_][\w.]*?(?:Error|Exception|Interrupt|Exit|ExceptionGroup|Warning)|Exception"
                        r"|ExceptionGroup|(?:[A-Za-z_][\w]*\.)*[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)"
                        r"(?:\([\w.]*\))?)(?::\s*(.*))?$")
_GROUP_MARGIN = re.compile(r"^\s*[|+] ")  # traceback.TracebackException.format of an exception group
# An exception under these SGLang frames is a server that never came up.
_SGLANG_STARTUP_FUNCS = frozenset(
    {
        "initialize_model_parallel",
        "init_model_parallel_group",
        "init_distributed_environment",
        "init_torch_distributed",
        "launch_server",
        "_launch_subprocesses",
        "_wait_and_warmup",
        "launch_engine",
        "load_model",
        "init_memory_pool",
        "init_cuda_graphs",
    }
)
# An exception that says someone stopped waiting: Ctrl-C, a wait that timed out (ray.get's GetTimeoutError).
_GAVE_UP = frozenset({"KeyboardInterrupt", "TimeoutError", "GetTimeoutError"})


@dataclass(frozen=True)
class Ended:
    """A traceback its exception line closed."""

    record: TracebackRecord
    exception: str  # as printed: `torch.distributed.DistBackendError`, `CalledProcessError(...)`
    headed: bool  # it began with its `Traceback (most recent call last):`
    msg: str  # the exception's line, without torchrun's rank prefix

    @property
    def sglang_startup(self) -> bool:
        """Its frames are SGLang's start-up: the server never came up."""
        return any("sglang" in f.file and f.func in _SGLANG_STARTUP_FUNCS for f in self.record.frames)

    @property
    def name(self) -> str:
        """The exception's class: `DistBackendError`."""
        return self.exception.partition("(")[0].rsplit(".", 1)[-1]

    @property
    def gave_up(self) -> bool:
        """The exception says someone stopped waiting (Ctrl-C, a timed-out wait)."""
        return self.name in _GAVE_UP


class Tracebacks:
    """Follows the traceback a log is in, if any; the ones it opens are appended to `kept`."""

    def __init__(self, kept: list[TracebackRecord]) -> None:
        self.kept = kept
        self.open: TracebackRecord | None = None
        self._quiet = 0  # lines since the traceback last grew
        self._headed = False
        self._awaits_code = False
        self._code_of = FrameRecord("", 0, "")  # the frame whose source line comes next

    def follow(self, msg: str, lineno: int) -> tuple[bool, Ended | None]:
        """(whether the line was a traceback line only, the traceback it ended)."""
        if msg.startswith("[rank"):  # torchrun's per-rank prefix: "[rank0]:   File ..."
            msg = _RANK_PREFIX.sub("", msg, count=1)
        if "| " in msg or "+ " in msg:
            msg = _GROUP_MARGIN.sub("", msg, count=1)
        if TB_HEADER in msg:
            self._start(lineno, headed=True)
            return False, None  # the header is classified (python_traceback, or what precedes it)
        frame = _FRAME.match(msg)
        if frame:
            if self.open is None:  # a paste that lost its header, or Ray's remote traceback (it prints none)
                self._start(lineno, headed=False)
            assert self.open is not None
            record = FrameRecord(frame.group(1), integer(frame.group(2)) or 0, frame.group(3) or "")
            if len(self.open.frames) < MAX_FRAMES:
                self.open.frames.append(record)
            # Its source line follows; consumed even past the cap, so code is never classified.
            self._awaits_code, self._code_of = True, record
            self._quiet = 0
            return True, None
        tb = self.open
        if tb is None:
            return False, None
        if _CARETS.match(msg):
            return True, None
        stripped = msg.strip()
        exc = _EXCEPTION.match(stripped)
        if exc:
            tb.exception, tb.exception_line = excerpt(stripped, 0), lineno
            self.open = None
            return False, Ended(tb, exc.group(1), self._headed, msg)  # the exception line is classified too
        if self._awaits_code and msg[:1].isspace():
            # The source line of the last frame. Web log viewers interleave noise before it
            # (timestamps, host tags), which is never indented.
            self._code_of.code = excerpt(stripped, 0)
            self._awaits_code = False
            self._quiet = 0
            return True, None
        self.idle()
        return False, None

    def _start(self, lineno: int, headed: bool) -> None:
        self._headed = headed
        self.open = TracebackRecord(lineno)
        self._quiet = 0
        self._awaits_code = False
        if len(self.kept) < MAX_TRACEBACKS:
            self.kept.append(self.open)

    def idle(self) -> None:
        """A line that is no part of the traceback: one cut by the paste never prints its exception."""
        self._quiet += 1
        if self._quiet > _PATIENCE:
            self.open = None


# torch.distributed.elastic's ChildFailedError table: the rows under `Root Cause` name the
# failure that started it all (`exitcode  : -9 (pid: N)`, `Signal 9 (SIGKILL) received by PID`);
# newer tables list the other failures first, older ones after `Other Failures:`.
_ELASTIC_EXITCODE = re.compile(r"^\s*exitcode\s*:\s*(-?\d{1,4}) \(pid: \d+\)")
_ELASTIC_SIGNAL = re.compile(r"Signal (\d{1,3}) \((\w+)\) received by PID")
_ELASTIC_ROWS = 12  # a root-cause block is a few rows; farther lines belong to something else


class ElasticTable:
    """The rows of a ChildFailedError table: its root cause's exit code and signal."""

    def __init__(self) -> None:
        self.root_cause_until = 0  # the last line that may still be a root-cause row

    def row(self, msg: str, lineno: int) -> tuple[dict[str, Any], bool] | None:
        """(what the row says, whether it is the root cause's), or None for a row that says nothing."""
        stripped = msg.strip()
        if stripped.startswith("Root Cause"):
            self.root_cause_until = lineno + _ELASTIC_ROWS
            return None
        if stripped in ("Failures:", "Other Failures:") or stripped.startswith("====="):
            self.root_cause_until = 0
            return None
        detail: dict[str, Any] = {}
        code = _ELASTIC_EXITCODE.match(msg)
        if code:
            exit_code = int(code.group(1))
            detail = {"exit_code": exit_code, **(signal_detail(-exit_code) if exit_code < 0 else {})}
        else:
            sig = _ELASTIC_SIGNAL.search(msg)
            if sig:
                detail = signal_detail(int(sig.group(1))) or {"signal": sig.group(2)}
        return (detail, self.root_cause_until >= lineno) if detail else None
