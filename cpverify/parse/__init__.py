"""The parse stage: what a slime / Megatron / SGLang / NCCL / Ray log says (ARCHITECTURE.md).

CONTRACT (shared with the verdict, the runners and outside checks -- keep it compatible):
  LogParser().feed(line, lineno) consumes one physical line (str or bytes) at a time;
  .result() returns a ParsedLog; parse_file(path) streams a file (never reads it whole).
  ParsedLog.to_json() gives the JSON object of `cpverify parse --json` (a dict: steps, perf,
  timers, iterations, errors, nccl, layout -- plus extra keys).

Its modules, one job each, are listed in ARCHITECTURE.md ("The folders").
"""

from __future__ import annotations

from cpverify.parse.dicts import parse_dict
from cpverify.parse.nccl import normalise_transport
from cpverify.parse.parser import LogParser
from cpverify.parse.records import (
    BandwidthRecord,
    CheckRecord,
    ConflictRecord,
    ErrorRecord,
    FrameRecord,
    IterationRecord,
    Layout,
    MemoryRecord,
    NcclFacts,
    ParsedLog,
    PerfRecord,
    StepRecord,
    TimerRecord,
    TracebackRecord,
)
from cpverify.parse.signatures import COARSE_CLASS, coarse_class
from cpverify.parse.stream import open_text, parse_file, parse_stream, records_kept

__all__ = [
    "COARSE_CLASS",
    "BandwidthRecord",
    "CheckRecord",
    "ConflictRecord",
    "ErrorRecord",
    "FrameRecord",
    "IterationRecord",
    "Layout",
    "LogParser",
    "MemoryRecord",
    "NcclFacts",
    "ParsedLog",
    "PerfRecord",
    "StepRecord",
    "TimerRecord",
    "TracebackRecord",
    "coarse_class",
    "normalise_transport",
    "open_text",
    "parse_dict",
    "parse_file",
    "parse_stream",
    "records_kept",
]
