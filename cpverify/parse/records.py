"""What a parse returns: the records of one log and ParsedLog, whose to_json() is the object
`cpverify parse --json` prints (the contract in ARCHITECTURE.md: steps, perf, timers, iterations,
errors, nccl, layout, plus extra keys). Non-finite metric values stay float nan/inf here and
become null in the JSON.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cpverify.parse.signatures import coarse_class

UNKNOWN_ROLLOUT = -1  # perf salvaged from a headerless fragment: the rollout id was not printed
MAX_CONFLICTS = 50  # of one kind, kept: a few say that a log contradicts itself; a million would only cost memory


_Record = TypeVar("_Record", bound=type)


def _pickled_as_fields(cls: _Record) -> _Record:
    """A record pickles as (its class, its fields in order): a log parsed in a child process comes
    back pickled (cpverify.given_logs.bundle_logs), and the __getstate__ dataclasses give a class
    with slots reads fields() for every record (three times as long, 100,000 records a log)."""
    names: tuple[str, ...] = cls.__dict__["__slots__"]
    assert len(names) > 1, cls  # attrgetter of one name gives the value, not a tuple
    fields_of = operator.attrgetter(*names)

    def reduce(self: object) -> tuple[type, tuple[object, ...]]:
        return cls, fields_of(self)

    setattr(cls, "__reduce__", reduce)  # noqa: B010 (a method assigned to the class: mypy forbids the plain spelling)
    return cls


@_pickled_as_fields
@dataclass(slots=True)
class StepRecord:
    step: int
    line: int
    metrics: dict[str, float]
    kind: str = "step"  # "step" or "critic-step"
    salvaged: bool = False  # metrics recovered by regex: the dict did not parse


@_pickled_as_fields
@dataclass(slots=True)
class PerfRecord:
    rollout: int  # UNKNOWN_ROLLOUT (-1) for headerless fragments
    side: str  # "train" or "rollout"
    line: int
    metrics: dict[str, float]
    salvaged: bool = False


@_pickled_as_fields
@dataclass(slots=True)
class TimerRecord:
    name: str
    elapsed_s: float
    line: int


@_pickled_as_fields
@dataclass(slots=True)
class IterationRecord:
    iteration: int
    line: int
    elapsed_ms: float | None
    metrics: dict[str, float]
    total: int | None = None  # the M of `iteration N/ M`


@_pickled_as_fields
@dataclass(slots=True)
class ErrorRecord:
    cls: str  # serialised as "class"
    line: int
    text: str
    coarse: str = ""  # the contract's vocabulary; equals cls when cls is coarse already
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.coarse:
            self.coarse = coarse_class(self.cls)


@_pickled_as_fields
@dataclass(slots=True)
class CheckRecord:
    name: str
    status: str  # "pass" | "fail" | "warn" (as printed, lower-cased)
    line: int
    value: float | None = None
    bound: float | None = None
    detail: str = ""


@_pickled_as_fields
@dataclass(slots=True)
class BandwidthRecord:
    op: str
    line: int
    bytes: int | None = None
    busbw_gbps: float | None = None
    algbw_gbps: float | None = None
    extra: dict[str, str] = field(default_factory=dict)


@_pickled_as_fields
@dataclass(slots=True)
class MemoryRecord:
    label: str  # e.g. "before update_weights"
    line: int
    rank: int | None
    metrics: dict[str, float]


@_pickled_as_fields
@dataclass(slots=True)
class FrameRecord:
    file: str
    lineno: int
    func: str
    code: str = ""


@_pickled_as_fields
@dataclass(slots=True)
class TracebackRecord:
    line: int  # the header line, or the first frame when no header was printed
    frames: list[FrameRecord] = field(default_factory=list)
    exception: str | None = None
    exception_line: int | None = None


@dataclass
class NcclFacts:
    version: str | None = None  # "2.27.5" (packaging.version-comparable)
    transports: list[str] = field(default_factory=list)
    network: str | None = None
    cuda: str | None = None  # "12.9" of "2.27.5+cuda12.9"
    versions: list[str] = field(default_factory=list)  # every distinct version printed
    ib_link: str | None = None  # "RoCE" or "IB", from `NET/IB : Using [0]mlx5_0:1/RoCE`

    @property
    def tcp_fallback(self) -> bool:
        """True when some channel between GPUs went over TCP sockets (`via NET/Socket`)."""
        return any(t.startswith("NET/Socket") for t in self.transports)


@dataclass
class Layout:
    cp: int
    dp: int
    tp: int
    pp: int
    world: int | None = None
    ranks: list[int] = field(default_factory=list)  # ranks that reported this layout
    # Where the log states it: "cpverify-layout" (the hook's line, every rank) or
    # "megatron-arguments" (Megatron-LM's argument dump, rank 0, when no hook line was printed).
    source: str = "cpverify-layout"


@_pickled_as_fields
@dataclass(slots=True)
class ConflictRecord:
    """A fact the log states twice, with two different values, where the parse keeps one: the
    layout (the hook's line against Megatron's argument dump) or an argument (a second dump). The
    value kept is `first`; a log that contradicts itself says neither for sure."""

    what: str  # "layout", or "argument <name>"
    first: str  # the value kept, as stated
    then: str  # the other value, as stated
    first_line: int | None  # where `first` was printed (None: not known)
    line: int  # where `then` was printed


@dataclass
class ParsedLog:
    steps: list[StepRecord] = field(default_factory=list)
    perf: list[PerfRecord] = field(default_factory=list)
    timers: list[TimerRecord] = field(default_factory=list)
    iterations: list[IterationRecord] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    nccl: NcclFacts = field(default_factory=NcclFacts)
    layout: Layout | None = None
    lines: int = 0
    checks: list[CheckRecord] = field(default_factory=list)
    bandwidth: list[BandwidthRecord] = field(default_factory=list)
    memory: list[MemoryRecord] = field(default_factory=list)
    tracebacks: list[TracebackRecord] = field(default_factory=list)
    timers_open: list[tuple[str, int]] = field(default_factory=list)  # (name, line): never ended
    arguments: dict[str, str] = field(default_factory=dict)  # Megatron-LM's argument dump, name -> value as printed
    # How the bytes were stored: {"compression": "gzip"|None, "encoding": "utf-8"|"utf-16", "cut": why|None}
    source: dict[str, Any] = field(default_factory=dict)
    conflicts: list[ConflictRecord] = field(default_factory=list)  # facts stated twice, differently

    # -- questions the verdict asks -------------------------------------------------
    @property
    def tcp_fallback(self) -> bool:
        return self.nccl.tcp_fallback

    def nccl_transport_warning(self) -> str | None:
        """A sentence for the verdict when inter-GPU traffic took a slow path, else None."""
        transports = self.nccl.transports
        if self.nccl.tcp_fallback:
            return (
                "NCCL sent traffic between GPUs over TCP sockets (`via NET/Socket`), so "
                "communication-bound timings are not representative: check NCCL_P2P_DISABLE, "
                "NCCL_SHM_DISABLE, the container's /dev/shm size and its InfiniBand devices."
            )
        if transports and all(t == "SHM" for t in transports):
            return (
                "NCCL used shared memory (`via SHM`) and no P2P path between GPUs: peer-to-peer "
                "is off (NCCL_P2P_DISABLE or the topology), far below NVLink bandwidth."
            )
        return None

    def error_classes(self) -> set[str]:
        return {e.cls for e in self.errors}

    def first_error(self, cls: str) -> ErrorRecord | None:
        return next((e for e in self.errors if e.cls == cls), None)

    def perf_for(self, side: str) -> list[PerfRecord]:
        return [p for p in self.perf if p.side == side]

    def to_json(self) -> dict[str, Any]:
        """The object `cpverify parse --json` prints (the contract in ARCHITECTURE.md, plus extra keys)."""
        lay = self.layout
        return {
            "steps": [
                {"step": s.step, "line": s.line, "metrics": _finite(s.metrics), "kind": s.kind, "salvaged": s.salvaged}
                for s in self.steps
            ],
            "perf": [
                {
                    "rollout": p.rollout,
                    "side": p.side,
                    "line": p.line,
                    "metrics": _finite(p.metrics),
                    "salvaged": p.salvaged,
                }
                for p in self.perf
            ],
            "timers": [{"name": t.name, "elapsed_s": _finite_value(t.elapsed_s), "line": t.line} for t in self.timers],
            "iterations": [
                {
                    "iteration": i.iteration,
                    "line": i.line,
                    "elapsed_ms": _finite_value(i.elapsed_ms),
                    "metrics": _finite(i.metrics),
                    "total": i.total,
                }
                for i in self.iterations
            ],
            "errors": [
                {"class": e.cls, "line": e.line, "text": e.text, "coarse": e.coarse, "detail": e.detail}
                for e in self.errors
            ],
            "nccl": {
                "version": self.nccl.version,
                "transports": list(self.nccl.transports),
                "network": self.nccl.network,
                "cuda": self.nccl.cuda,
                "versions": list(self.nccl.versions),
                "ib_link": self.nccl.ib_link,
                "tcp_fallback": self.nccl.tcp_fallback,
            },
            "layout": None
            if lay is None
            else {"cp": lay.cp, "dp": lay.dp, "tp": lay.tp, "pp": lay.pp, "world": lay.world, "ranks": list(lay.ranks),
                  "source": lay.source},
            "lines": self.lines,
            "checks": [
                {
                    "name": c.name,
                    "status": c.status,
                    "line": c.line,
                    "value": _finite_value(c.value),
                    "bound": _finite_value(c.bound),
                    "detail": c.detail,
                }
                for c in self.checks
            ],
            "bandwidth": [
                {
                    "op": b.op,
                    "line": b.line,
                    "bytes": b.bytes,
                    "busbw_gbps": _finite_value(b.busbw_gbps),
                    "algbw_gbps": _finite_value(b.algbw_gbps),
                    "extra": dict(b.extra),
                }
                for b in self.bandwidth
            ],
            "memory": [
                {"label": m.label, "line": m.line, "rank": m.rank, "metrics": _finite(m.metrics)} for m in self.memory
            ],
            "tracebacks": [
                {
                    "line": t.line,
                    "exception": t.exception,
                    "exception_line": t.exception_line,
                    "frames": [{"file": f.file, "lineno": f.lineno, "func": f.func, "code": f.code} for f in t.frames],
                }
                for t in self.tracebacks
            ],
            "timers_open": [{"name": n, "line": ln} for n, ln in self.timers_open],
            "arguments": dict(self.arguments),
            "source": dict(self.source),
            "conflicts": [{"what": c.what, "first": c.first, "then": c.then, "first_line": c.first_line,
                           "line": c.line} for c in self.conflicts],
        }


def _finite_value(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def _finite(metrics: dict[str, float]) -> dict[str, float | None]:
    # JSON has no NaN/Infinity; null keeps the key and says "not a finite number".
    try:  # not contextlib.suppress: its context manager was half the time of a record's call
        if all(map(math.isfinite, metrics.values())):  # nearly always: copied at C speed
            return dict(metrics)
    except TypeError:  # a None among them: the general way below keeps it
        pass
    return {k: _finite_value(v) for k, v in metrics.items()}
