"""Streaming parser for slime / Megatron / SGLang / NCCL / Ray logs.

CONTRACT (shared with verdict, runners and outside checks -- keep compatible):
  LogParser().feed(line, lineno) consumes one physical line (str or bytes) at a time;
  .result() returns a ParsedLog; parse_file(path) streams a file (never reads it whole).
  ParsedLog.to_json() gives the JSON object of DESIGN.md's `cpverify parse --json`.
  The layout hook (cpverify.slime_hooks.layout) prints lines like
    cpverify-layout rank=0 world=2 tp=1 pp=1 cp=2 dp=1
  which the parser turns into `layout`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StepRecord:
    step: int
    line: int
    metrics: dict[str, float]
    kind: str = "step"  # "step" or "critic-step"


@dataclass
class PerfRecord:
    rollout: int
    side: str  # "train" or "rollout"
    line: int
    metrics: dict[str, float]


@dataclass
class TimerRecord:
    name: str
    elapsed_s: float
    line: int


@dataclass
class IterationRecord:
    iteration: int
    line: int
    elapsed_ms: float | None
    metrics: dict[str, float]


@dataclass
class ErrorRecord:
    cls: str  # serialised as "class"
    line: int
    text: str


@dataclass
class NcclFacts:
    version: str | None = None
    transports: list[str] = field(default_factory=list)
    network: str | None = None


@dataclass
class Layout:
    cp: int
    dp: int
    tp: int
    pp: int


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
