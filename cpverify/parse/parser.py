"""LogParser: one physical line at a time, what a slime / Megatron / SGLang / NCCL / Ray log says.

What a line may look like, and what the parser does about it
  * Ray actor prefixes `(MegatronTrainRayActor pid=N, ip=...)`, ANSI colour codes and their
    broken remnants (`[36m` without ESC), `[repeated Nx across cluster]` suffixes: stripped.
  * tqdm bars share physical lines through `\\r`: a line is split on `\\r`, every piece keeps
    the physical line number. Of a line longer than MAX_LINE_BYTES only the head is read.
  * slime metric dicts (`step N: {...}`, `critic-step N: {...}`, `perf N: {...}`) are Python
    reprs, read as cpverify.parse.dicts says. Headerless fragments that hold
    `'perf/...': number` pairs become perf records with rollout -1 (unknown), split by side.
  * `perf N:` side: "train" when any key is a train-side timer (perf/train_time,
    perf/actor_train_time, perf/step_time, perf/total_train_time, *_tflops, ...), else
    "rollout" when any key is rollout-side (perf/rollout_time, rollout/*, *tokens_per_gpu*),
    else by actor prefix (RolloutManager/SGLang -> rollout, Megatron/Train -> train), else
    "rollout": nothing passes as a train step without evidence.
    `perf/total_train_time` is slime's old name of `perf/step_time` (PR #629): both are kept.

NCCL (nccl.*): version from `NCCL INFO NCCL version 2.27.5+cuda12.9` or the bare
`NCCL version 2.19.3+cuda12.3` -> version "2.27.5", cuda "12.9". Transports from per-channel
`... via X` lines, normalised (first seen first, no repeats):
  P2P/CUMEM[/read]    -> "P2P/CUMEM"     P2P/IPC[/read]  -> "P2P/IPC"
  P2P/direct pointer  -> "P2P/direct"    SHM/<anything>  -> "SHM"
  NET/<net>/<dev>     -> "NET/<net>"     NET/<net>/<dev>/GDRDMA -> "NET/<net>/GDRDMA"
  (NET/Socket/0 -> "NET/Socket", NET/IB/3/GDRDMA -> "NET/IB/GDRDMA"); anything else verbatim.
  nccl.network comes from `Using network Socket|IB`. "Using network Socket" alone is NOT a TCP
  fallback (healthy single-node NVLink runs print it); only `via NET/Socket` channels are:
  see ParsedLog.tcp_fallback and ParsedLog.nccl_transport_warning().

Error classes: each finding has a fine class and a coarse class (coarse_class()); the contract's
vocabulary is the coarse one (nccl_timeout, nccl_error, cuda_oom, cuda_illegal_memory_access,
collective_shape_mismatch, ray_actor_died, ray_job_failed, sglang_startup_failure,
argparse_error, assertion_error, hang). When a fine class differs from its coarse class BOTH
are emitted, on the same line, so a reader of either vocabulary finds its class. E.g.
  nccl_cuda_failure, nccl_unhandled_system_error, torch_distributed_error -> nccl_error
  nccl_heartbeat_stuck -> hang        (kept apart from nccl_timeout: both can occur)
  sglang_server_startup_failure -> sglang_startup_failure; sglang_http_500 -> sglang_error
  argparse_unrecognized_arguments, argparse_ambiguous_option -> argparse_error
  megatron_cuda_device_max_connections, slime_num_rollouts_lt_global_batch -> assertion_error
  ray_host_oom -> ray_actor_died; nccl_warn stays nccl_warn (many NCCL warnings are benign);
  ray_actor_unavailable stays itself (Ray may retry the call)
The full table is COARSE_CLASS and SIGNATURES in cpverify/parse/signatures.py. Only the first
occurrence of each class is recorded, and a physical line is never reported twice for one
class. The parser's own classes: cp_correctness (a failing cpverify-check), layout_mismatch
(ranks report different layouts), run_restarted (step numbers go backwards: two runs in one
log), python_traceback (a traceback header; the frames are in `tracebacks`). A traceback whose
frames are SGLang startup code (initialize_model_parallel, _wait_and_warmup, ...) also gives
sglang_server_startup_failure on its exception line.

Extra JSON keys (beyond the contract's): lines (physical lines read), checks, bandwidth (below),
memory (slime's `[Rank r] Memory-Usage <label>: {dict}`), tracebacks (header line, frames with
their source line, the exception line when printed), timers_open (`Timer X start` never
ended, e.g. a phase that hung), nccl.cuda/versions/ib_link/tcp_fallback, per-error coarse and
detail (numbers such as OpType/SeqNum/Timeout(ms) of a watchdog timeout, or the allocation of
an OOM), per-record salvaged, per-iteration total.

cpverify's own lines (print them anywhere in a line; a Ray prefix or logger header is fine):
  cpverify-layout rank=0 world=2 tp=1 pp=1 cp=2 dp=1
      -> `layout` {cp, dp, tp, pp, world, ranks, source: "cpverify-layout"}; the first layout
         wins, a rank that reports a different (cp, dp, tp, pp) adds error class layout_mismatch.
  Without a cpverify-layout line, `layout` comes from Megatron-LM's argument dump, which rank 0
  prints at start-up (`_print_args`: `  context_parallel_size ........................... 2`,
  dots to column 50; data_parallel_size, tensor_model_parallel_size, pipeline_model_parallel_size,
  world_size alike), with source "megatron-arguments" and ranks [0]; the first dump counts.
  Where the log states a fact twice, differently, and one value is kept, `conflicts` says so
  (ConflictRecord): a later dump printing another value for an argument, or a hook line whose
  layout is not the dump's. The hook's layout is still the one reported; the verdict trusts neither.
  cpverify-check name=<name> status=pass|fail|warn value=<float> bound=<float> detail="<text>"
      -> `checks`; status=fail also adds error class cp_correctness. value/bound may be nan,
         inf or absent; detail is double-quoted, with backslash escapes.
  cpverify-busbw op=all_reduce bytes=<int> busbw_gbps=<float> algbw_gbps=<float> [k=v ...]
      -> `bandwidth`; other k=v pairs are kept as strings under "extra".
"""

from __future__ import annotations

import functools
import math
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from cpverify.credentials import is_secret_name
from cpverify.parse.bars import Bar, last_bar
from cpverify.parse.dicts import _SALVAGE_PAIR, parse_dict
from cpverify.parse.records import (
    MAX_CONFLICTS,
    UNKNOWN_ROLLOUT,
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
    _finite_value,
)
from cpverify.parse.signatures import (
    SIGNATURES,
    TB_HEADER,
    Signature,
    coarse_class,
    gated,
    integer,
    number,
    signal_detail,
)

# A logical line is never kept longer than this: a 10 MB tqdm line or binary junk
# must not make memory grow with the line.
MAX_LINE_BYTES = 64 * 1024
EXCERPT_CHARS = 300
_MAX_TRACEBACKS = 50
_MAX_FRAMES = 40
_TRACEBACK_PATIENCE = 8  # lines without a frame before a cut traceback is given up
_MAX_SLOW_BARS = 64  # slow bars not finished yet, remembered at once
_VIA_CACHE_WORDS = 64  # transport words a block scan skips; a rarer word is read each time it is printed

# ---------------------------------------------------------------------------- patterns

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    """Text without terminal colour codes (Ray colours its actor prefixes on a TTY)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


# Ray's prefix, possibly wrapped in (broken) colour codes: "[36m(Actor pid=1, ip=..)[0m ".
_PREFIX = re.compile(
    r"^(?:\x1b?\[[0-9;]{0,8}m)*\((?P<actor>[A-Za-z_][\w.:-]*)?(?: ?pid=\d+)?(?:, ?ip=[\w.:-]+)?"
    r"(?: \+[\w.]+)?\)(?:\x1b?\[[0-9;]{0,8}m)*\s?"
)
_BARE_REMNANT = re.compile(r"^(?:\[[0-9;]{1,8}m)+")
_REPEATED = re.compile(r"\[repeated (\d+)x across cluster\]\s*$")
# slime's logger.info(f"{kind} {n}: {dict}"); rollout/eval dicts are recognised, not kept.
_RECORD = re.compile(r"(?<![\w/.-])(critic-step|step|perf|rollout|eval) (\d+): (\{.*)$")
_RECORD_WORD = len("critic-step ")  # the longest word (and its space) before a record's number
_MEMORY = re.compile(r"(?:\[Rank (\d+)\] )?Memory-Usage (.{0,200}?): (\{.*)$")
_LETTER = re.compile(r"[A-Za-z]")
_TIMER = re.compile(r"\bTimer (\S{1,200}) (start|end)\b(?: \(elapsed: ([-+\d.eE]+|nan|inf)s\))?")
_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")
_NCCL_VERSION = re.compile(r"NCCL version[: ]+\(?(\d+)[.,] ?(\d+)[.,] ?(\d+)\)?(?:\+cuda([\d.]+))?")
_VIA = re.compile(r"\bvia (\S+(?: pointer)?)")
# "via X" without its leading space: a pattern starting with the rare "v" scans faster; a match
# not preceded by a space is no channel line (_nccl_info checks).
_VIA_WORD = re.compile(rb"via (\S{1,200})")
_NET_VIA = re.compile(r"^NET/([^/]+?)/\d+(/GDRDMA)?")
_NETWORK = re.compile(r"Using network (\S+(?: \S+)?)\s*$")
_IB_LINK = re.compile(r"NET/IB : Using \[\d+\]\S+?/(RoCE|IB)\b")
_OWN = re.compile(r"cpverify-(layout|check|busbw)\b(.*)$")
_KV = re.compile(r'(?<!\w)(\w{1,64})=("(?:[^"\\]|\\.)*"|\S+)')
# What _segment recognises before it classifies errors (each holds a gate token too).
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
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s?")
# torch.distributed.elastic's ChildFailedError table: the rows under `Root Cause` name the
# failure that started it all (`exitcode  : -9 (pid: N)`, `Signal 9 (SIGKILL) received by PID`);
# newer tables list the other failures first, older ones after `Other Failures:`.
_ELASTIC_EXITCODE = re.compile(r"^\s*exitcode\s*:\s*(-?\d{1,4}) \(pid: \d+\)")
_ELASTIC_SIGNAL = re.compile(r"Signal (\d{1,3}) \((\w+)\) received by PID")
_ELASTIC_ROWS = 12  # a root-cause block is a few rows; farther lines belong to something else
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (.+?))?\s*$')
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*?(?:Error|Exception|Interrupt|Exit)(?:\([\w.]*\))?)(?::\s*(.*))?$")
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
    }
)
# An exception that says someone stopped waiting: Ctrl-C, a wait that timed out (ray.get's GetTimeoutError).
_GAVE_UP = frozenset({"KeyboardInterrupt", "TimeoutError", "GetTimeoutError"})
_TRAIN_PERF_KEY = re.compile(
    r"^perf/(?:train_wait|train|data_preprocess|ref_log_probs|log_probs|actor_train|critic_train|"
    r"ref_model_update|sleep|wake_up|update_weights|save_model|step|total_train|cp_seq_kl_prep)_time$"
    r"|_tflops$|^perf/actor_train_tok_per_s$|^perf/wait_time_ratio$"
)
_ROLLOUT_PERF_KEY = re.compile(r"^rollout/|^perf/rollout_time$|tokens_per_gpu_per_sec$|_sample_tokens_per_sec$")



# ---------------------------------------------------------------------------- helpers
def _perf_side(metrics: dict[str, float], actor: str | None) -> str:
    side = _side_of_keys(tuple(metrics))
    if side is not None:
        return side
    if actor and ("Train" in actor or "Megatron" in actor):
        return "train"
    return "rollout"


@functools.lru_cache(maxsize=256)
def _side_of_keys(keys: tuple[str, ...]) -> str | None:
    """The side a perf record's keys name, if any: slime prints the same keys every rollout."""
    if any(_TRAIN_PERF_KEY.search(k) for k in keys):
        return "train"
    if any(_ROLLOUT_PERF_KEY.search(k) for k in keys):
        return "rollout"
    return None


def _normalise_perf(metrics: dict[str, float]) -> dict[str, float]:
    if "perf/total_train_time" in metrics and "perf/step_time" not in metrics:
        metrics["perf/step_time"] = metrics["perf/total_train_time"]
    return metrics


def normalise_transport(via: str) -> str:
    """`P2P/IPC/read` -> `P2P/IPC`, `NET/IB/3/GDRDMA` -> `NET/IB/GDRDMA` (see the module doc)."""
    if via.startswith("SHM"):
        return "SHM"
    if via.startswith("P2P/"):
        return "P2P/" + via.split("/")[1].split(" ")[0]
    net = _NET_VIA.match(via)
    if net:
        return f"NET/{net.group(1)}{net.group(2) or ''}"
    return via


def _excerpt(text: str, pos: int) -> str:
    text = text.strip()
    if len(text) <= EXCERPT_CHARS:
        return text
    # Keep the head of the line (timestamp, rank) unless the match lies too far in.
    start = 0 if pos < EXCERPT_CHARS * 2 // 3 else min(pos - EXCERPT_CHARS // 3, len(text) - EXCERPT_CHARS)
    return ("…" if start else "") + text[start : start + EXCERPT_CHARS - 2] + "…"


def _kv(text: str) -> dict[str, str]:
    out = {}
    for key, value in _KV.findall(text):
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        out[key] = value
    return out


def _record_match(msg: str) -> re.Match[str] | None:
    """_RECORD.search(msg), without reading the whole line: the first `: {` after a number
    (isdecimal: the regex's \\d) ends the leftmost match, if any, so the search starts at the word
    before that number; a line without one (Memory-Usage, an error quoting a dict) is not searched."""
    at = msg.find(": {")
    while at != -1 and not msg[at - 1 : at].isdecimal():  # "".isdecimal() is False
        at = msg.find(": {", at + 1)
    if at == -1:
        return None
    digits = at - 1
    while digits > 0 and msg[digits - 1].isdecimal():
        digits -= 1
    return _RECORD.search(msg, max(0, digits - _RECORD_WORD))


def _memory_match(msg: str) -> re.Match[str] | None:
    """_MEMORY.search(msg), from the first `Memory-Usage ` (or the `[Rank ` just before it)."""
    at = msg.find("Memory-Usage ")
    if at == -1:
        return None
    rank = msg.rfind("[Rank ", 0, at)
    return _MEMORY.search(msg, at if rank == -1 else rank)


# Ray prefixes seen, by their text before the `)` (the first in a line that has one): (what
# follows the `)` up to the message -- colour codes and a blank --, the actor). A log has a few
# actors, each on many lines.
_PREFIXES: dict[str, tuple[str, str | None]] = {}
_MAX_PREFIXES = 4096


def _unprefixed(seg: str) -> tuple[str | None, str] | None:
    """(Ray actor, message) of one piece of a line, colour codes and actor prefix removed; None
    when nothing but colour codes and blanks is left.

    The same as removing every colour code first and then the prefix (a property test checks
    it), but a Ray prefix carries its own codes, which _PREFIX takes along: a line with no other
    codes then needs no _ANSI pass at all. A prefix seen before is not matched again: _PREFIX
    ends in an optional blank, so where a match ended in one, any text that starts with that
    match matches it too (no part of the pattern reads past it).
    """
    m = None
    if seg[:1] in "([\x1b":
        head, _, rest = seg.partition(")")  # str.find would parse its arguments: slower
        known = _PREFIXES.get(head)
        if known is not None and rest[: len(known[0])] == known[0]:
            rest = rest[len(known[0]) :]
            if "\x1b" not in rest:
                return known[1], rest
        m = _PREFIX.match(seg)
    if m is not None:
        rest = seg[m.end() :]
        prefix = m.group()
        if prefix[-1:].isspace() and len(_PREFIXES) < _MAX_PREFIXES:
            head, _, tail = prefix.partition(")")
            _PREFIXES[head] = (tail, m.group("actor"))
        if "\x1b" not in rest:
            return m.group("actor"), rest
    if "\x1b" in seg:
        seg = _ANSI.sub("", seg)
    if not seg.strip():
        return None
    if seg[0] in "([":
        m = _PREFIX.match(seg)
        if m is not None:
            return m.group("actor"), seg[m.end() :]
        if seg[0] == "[":
            seg = _BARE_REMNANT.sub("", seg)
    return None, seg




@dataclass
class _Fragment:
    """Consecutive headerless lines of `'perf/...': number` pairs (a hand-copied dict)."""

    last_line: int
    pairs: list[tuple[str, float, int]] = field(default_factory=list)


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
        self._open_timers: dict[str, int] = {}
        self._fragment: _Fragment | None = None
        self._tb: TracebackRecord | None = None
        self._tb_quiet = 0  # lines since the traceback last grew
        self._tb_headed = False  # whether the open traceback began with its `Traceback (most recent call last)`
        self._frame_awaits_code = False
        self._code_of = FrameRecord("", 0, "")  # the frame whose source line comes next
        self._via_seen: set[bytes] = set()
        self._records: dict[str, list[ErrorRecord]] = {}  # class -> its records (fine and coarse twin)
        self._held: tuple[Signature, str, int, str | None] | None = None  # a message that may go on
        self._root_cause_until = 0  # last line that may still be a root-cause row of a ChildFailedError
        self._megatron_args: dict[str, int] = {}  # cp, dp, tp, pp, world of Megatron's argument dump
        self._slow_bars: dict[str, tuple[Bar, int, str]] = {}  # desc -> a slow bar not finished yet, its line
        self._megatron_lines: dict[str, int] = {}  # where the dump stated each of them
        self._layout_line: int | None = None  # the first cpverify-layout line

    @property
    def wants_every_line(self) -> bool:
        """True while a traceback is open or a wrapped message may go on: those lines hold no gate word."""
        return self._tb is not None or self._held is not None

    def mark_read(self, lineno: int) -> None:
        """Lines up to `lineno` were read (parse_stream skips noise without feeding it)."""
        if lineno > self._log.lines:
            self._log.lines = lineno

    # -- input -----------------------------------------------------------------------
    def feed(self, line: str | bytes, lineno: int) -> None:
        """One physical line (str or bytes, newline optional) and its 1-based number in the file."""
        self.mark_read(lineno)
        if len(line) > MAX_LINE_BYTES:
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
        text = line.decode("utf-8", "replace")  # `in` on str: on bytes it first tries an int
        if "NCCL INFO" in text and self._tb is None and self._held is None and "\r" not in text:
            self._nccl_info(line)
        else:
            self._physical(text, lineno)

    def result(self) -> ParsedLog:
        """A snapshot of everything parsed so far (feeding may go on afterwards)."""
        log = self._log
        nccl = log.nccl
        layout = log.layout
        perf = sorted(log.perf + self._fragment_records(), key=lambda p: p.line)
        errors = [replace(e, detail=dict(e.detail)) for e in log.errors]
        cut = self._tb  # the log ends inside a traceback: the run was stopped, and the paste cut
        hang = self._stopped_waiting("a traceback cut before its exception", cut.line) if cut is not None else None
        if hang is not None:
            _insert_by_line(errors, [ErrorRecord("hang", hang["line"], _excerpt(hang["msg"], 0), "hang", hang["detail"])])
        return ParsedLog(
            steps=list(log.steps),
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
            timers_open=sorted(self._open_timers.items(), key=lambda kv: kv[1]),
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
    def _nccl_info(self, line: bytes) -> None:
        # The fast path for NCCL_DEBUG=INFO chatter: only these facts live in such lines.
        via = _VIA_WORD.search(line, max(line.find(b" via "), 0))
        if via is not None and line[via.start() - 1 : via.start()] != b" ":
            via = None
        if via is not None:
            # Every channel of every communicator prints one: read each distinct transport word once.
            if via.group(1) in self._via_seen:
                return
            if len(self._via_seen) < _VIA_CACHE_WORDS:
                self._via_seen.add(via.group(1))
        if (via is not None or line.find(b"NCCL version") != -1 or line.find(b"Using network") != -1
                or line.find(b"NET/IB : Using") != -1):
            text = line.decode("utf-8", "replace")
            self._nccl_facts(_ANSI.sub("", text) if "\x1b" in text else text)

    def _physical(self, text: str, lineno: int) -> None:
        actor: str | None = None
        text = text.rstrip("\n")
        for piece in text.split("\r") if "\r" in text else (text,):
            unprefixed = _unprefixed(piece)
            if unprefixed is None:
                self._held = None  # a wrapped message does not go on after a blank line
                if self._tb is not None:
                    self._traceback_idle()
                continue
            actor, seg = unprefixed[0] or actor, unprefixed[1]
            repeat = None
            if "[repeated " in seg:  # `in` first: str.find parses its arguments, `in` does not
                at = seg.rfind("[repeated ")
                m = _REPEATED.match(seg, at)
                if m:
                    repeat = integer(m.group(1))
                    seg = seg[:at].rstrip()
            self._segment(seg, actor, lineno, repeat)

    def _segment(self, msg: str, actor: str | None, lineno: int, repeat: int | None) -> None:
        if self._held is not None:
            self._join_held(msg)
        if self._root_cause_until >= lineno or "Root Cause" in msg or "exitcode" in msg or "received by PID" in msg:
            self._elastic_row(msg, lineno)
        if (self._tb is not None or 'File "' in msg or TB_HEADER in msg) and self._traceback(msg, actor, lineno):
            return
        if ": {" in msg and self._record(msg, actor, lineno):
            return
        if "cpverify-" in msg and self._own(msg, lineno):
            return
        if "Timer " in msg and self._timer(msg, lineno):
            return
        if "iteration" in msg and self._iteration(msg, lineno):
            return
        if "NCCL" in msg:
            self._nccl_facts(msg)
            if " NCCL INFO " in msg:
                return
        if ".. " in msg and self._megatron_argument(msg, lineno):
            return
        if "perf/" in msg and self._fragment_line(msg, lineno):
            return
        if "s/it]" in msg:
            self._bar(msg, lineno)
        self._classify(msg, actor, lineno, repeat)

    # -- records -----------------------------------------------------------------------
    def _record(self, msg: str, actor: str | None, lineno: int) -> bool:
        m = _record_match(msg)
        if m is None:
            return "Memory-Usage " in msg and self._memory(msg, actor, lineno)
        kind, index = m.group(1), integer(m.group(2))
        if kind in ("rollout", "eval") or index is None:
            return True  # known dicts, not part of the contract: never mistaken for errors
        metrics, salvaged = parse_dict(m.group(3))
        if kind == "perf":
            metrics = _normalise_perf(metrics)
            self._log.perf.append(PerfRecord(index, _perf_side(metrics, actor), lineno, metrics, salvaged))
            return True
        last = self._last_step.get(kind)
        if last is not None and index < last:
            self._error("run_restarted", lineno, msg, m.start(), {"step": index, "after_step": last, "kind": kind})
        self._last_step[kind] = index
        self._log.steps.append(StepRecord(index, lineno, metrics, kind, salvaged))
        return True

    def _memory(self, msg: str, actor: str | None, lineno: int) -> bool:
        m = _memory_match(msg)
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

    def _timer(self, msg: str, lineno: int) -> bool:
        m = _TIMER.search(msg, msg.find("Timer "))  # a match starts with it
        if m is None:
            return False
        name = sys.intern(m.group(1))
        if m.group(2) == "start":
            self._open_timers[name] = lineno
            return True
        self._open_timers.pop(name, None)
        elapsed = number(m.group(3) or "")
        if elapsed is not None:
            self._log.timers.append(TimerRecord(name, elapsed, lineno))
        return True

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

    def _nccl_facts(self, msg: str) -> None:
        nccl = self._log.nccl
        if " via " in msg:
            m = _VIA.search(msg)
            if m:
                transport = normalise_transport(m.group(1))
                if transport not in nccl.transports:
                    nccl.transports.append(transport)
        elif "NCCL version" in msg:
            m = _NCCL_VERSION.search(msg)
            if m:
                version = ".".join(m.group(1, 2, 3))
                if nccl.version is None:
                    nccl.version, nccl.cuda = version, m.group(4)
                if version not in nccl.versions:
                    nccl.versions.append(version)
        elif "Using network" in msg:
            m = _NETWORK.search(msg)
            if m and nccl.network is None:
                nccl.network = m.group(1)
        elif "NET/IB : Using" in msg:
            m = _IB_LINK.search(msg)
            if m and nccl.ib_link is None:
                nccl.ib_link = m.group(1)

    # -- hand-copied fragments -----------------------------------------------------------
    def _fragment_line(self, msg: str, lineno: int) -> bool:
        pairs = [(k, float(v)) for k, v in _SALVAGE_PAIR.findall(msg) if k.startswith(("perf/", "rollout/"))]
        # A fragment is pairs and punctuation only: an error message quoting a metric is not one.
        if not pairs or _LETTER.search(_SALVAGE_PAIR.sub("", msg)):
            return False
        frag = self._fragment
        if frag is None or lineno > frag.last_line + 1:
            self._log.perf.extend(self._fragment_records())
            frag = self._fragment = _Fragment(lineno)
        frag.last_line = lineno
        frag.pairs.extend((k, v, lineno) for k, v in pairs)
        return True

    def _fragment_records(self) -> list[PerfRecord]:
        if self._fragment is None:
            return []
        by_side: dict[str, PerfRecord] = {}
        for key, value, lineno in self._fragment.pairs:
            side = _perf_side({key: value}, None)
            by_side.setdefault(side, PerfRecord(UNKNOWN_ROLLOUT, side, lineno, {}, True)).metrics[key] = value
        for rec in by_side.values():
            _normalise_perf(rec.metrics)
        return list(by_side.values())

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
        if msg.startswith("[rank"):  # torchrun's per-rank prefix: "[rank0]:   File ..."
            msg = _RANK_PREFIX.sub("", msg, count=1)
        if TB_HEADER in msg:
            self._start_traceback(lineno, headed=True)
            return False  # the header is classified (python_traceback, or what precedes it)
        frame = _FRAME.match(msg)
        if frame:
            if self._tb is None:  # a paste that lost its header, or Ray's remote traceback (it prints none)
                self._start_traceback(lineno, headed=False)
            assert self._tb is not None
            record = FrameRecord(frame.group(1), integer(frame.group(2)) or 0, frame.group(3) or "")
            if len(self._tb.frames) < _MAX_FRAMES:
                self._tb.frames.append(record)
            # Its source line follows; consumed even past the cap, so code is never classified.
            self._frame_awaits_code, self._code_of = True, record
            self._tb_quiet = 0
            return True
        tb = self._tb
        if tb is None:
            return False
        if _CARETS.match(msg):
            return True
        stripped = msg.strip()
        exc = _EXCEPTION.match(stripped)
        if exc:
            tb.exception, tb.exception_line = _excerpt(stripped, 0), lineno
            self._tb = None
            if any("sglang" in f.file and f.func in _SGLANG_STARTUP_FUNCS for f in tb.frames):
                self._error("sglang_server_startup_failure", lineno, msg, 0, {"exception": exc.group(1)})
            self._traceback_ended(tb, exc.group(1), msg, lineno, actor)
            name = exc.group(1).partition("(")[0].rsplit(".", 1)[-1]
            hang = self._stopped_waiting(name, tb.line) if name in _GAVE_UP else None
            if hang is not None:
                self._error("hang", hang["line"], hang["msg"], 0, hang["detail"])
            return False  # the exception line is classified too
        if self._frame_awaits_code and msg[:1].isspace():
            # The source line of the last frame. Web log viewers interleave noise before it
            # (timestamps, host tags), which is never indented.
            self._code_of.code = _excerpt(stripped, 0)
            self._frame_awaits_code = False
            self._tb_quiet = 0
            return True
        self._traceback_idle()
        return False

    def _traceback_ended(self, tb: TracebackRecord, exception: str, msg: str, lineno: int, actor: str | None) -> None:
        """python_traceback names the exception that ended it; a traceback without its header (cut from
        the paste, or Ray's remote one) is one all the same once frames end in an exception line."""
        if not self._tb_headed:
            detail = {"exception": exception, "frames_from": tb.line, **({"actor": actor} if actor else {})}
            self._error("python_traceback", lineno, msg, 0, detail)
        else:
            for record in self._records.get("python_traceback", ()):
                if record.line == tb.line:
                    record.detail.setdefault("exception", exception)

    def _start_traceback(self, lineno: int, headed: bool) -> None:
        self._tb_headed = headed
        self._tb = TracebackRecord(lineno)
        self._tb_quiet = 0
        self._frame_awaits_code = False
        if len(self._log.tracebacks) < _MAX_TRACEBACKS:
            self._log.tracebacks.append(self._tb)

    def _traceback_idle(self) -> None:
        # A traceback cut by the paste never prints its exception: stop following it.
        self._tb_quiet += 1
        if self._tb_quiet > _TRACEBACK_PATIENCE:
            self._tb = None

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

    def _join_held(self, msg: str) -> None:
        """The line after a message cut short: a terminal's hard wrap split it without a character."""
        sig, head, lineno, actor = self._held  # type: ignore[misc]
        self._held = None
        if sig.cls in self._seen or sig.regex is None:
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
        """Rows of a ChildFailedError table: the root cause's exit code and signal."""
        stripped = msg.strip()
        if stripped.startswith("Root Cause"):
            self._root_cause_until = lineno + _ELASTIC_ROWS
            return
        if stripped in ("Failures:", "Other Failures:") or stripped.startswith("====="):
            self._root_cause_until = 0
            return
        detail: dict[str, Any] = {}
        code = _ELASTIC_EXITCODE.match(msg)
        if code:
            exit_code = int(code.group(1))
            detail = {"exit_code": exit_code, **(signal_detail(-exit_code) if exit_code < 0 else {})}
        else:
            sig = _ELASTIC_SIGNAL.search(msg)
            if sig:
                detail = signal_detail(int(sig.group(1))) or {"signal": sig.group(2)}
        if not detail:
            return
        if "launcher_failed" in self._seen:
            # The table's root cause outranks the agent's `failed (exitcode: N)` line, which names
            # whichever rank it saw first; rows of other failures only fill in what is missing.
            self._enrich("launcher_failed", detail, overwrite=self._root_cause_until >= lineno)
        else:
            self._error("launcher_failed", lineno, msg, 0, detail)

    def _enrich(self, cls: str, detail: dict[str, Any], overwrite: bool = False) -> None:
        for record in self._records.get(cls, ()):
            for key, value in detail.items():
                if overwrite or key not in record.detail:
                    record.detail[key] = value

    def _error(self, cls: str, lineno: int, msg: str, pos: int, detail: dict[str, Any]) -> None:
        text = _excerpt(msg, pos)
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
