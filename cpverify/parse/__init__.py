"""The parse stage: what a slime / Megatron / SGLang / NCCL / Ray log says (ARCHITECTURE.md).

CONTRACT (shared with the verdict, the runners and outside checks -- keep it compatible):
  LogParser().feed(line, lineno) consumes one physical line (str or bytes) at a time;
  .result() returns a ParsedLog; parse_file(path) streams a file (never reads it whole).
  ParsedLog.to_json() gives the JSON object of `cpverify parse --json` (a dict: steps, perf,
  timers, iterations, errors, nccl, layout -- plus extra keys).

One job per module:
  records     the records and ParsedLog (to_json: the JSON contract)
  signatures  what is an error: signatures, fine and coarse classes, the gate words
  dicts       slime's printed metric dicts (JSON where it reads them as Python would)
  parser      LogParser: one line at a time -- what each line says, handed to the modules below
  line_text   a line's colour codes and Ray actor prefix taken off; an error's excerpt of it
  metrics     slime's metric records (step, perf, memory), which side a perf record is, fragments
  nccl        NCCL's facts: version, transports, network
  tracebacks  Python tracebacks and torch.distributed.elastic's failure tables
  scan        the block scan: which lines of a block the parser must read (Hyperscan or bytes.find)
  stream      files and streams: gzip and UTF-16 read transparently, blocks, parse_file
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
from cpverify.parse.stream import open_text, parse_file, parse_stream

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
]
