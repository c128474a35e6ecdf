"""slime's metric records as the parser finds them: `step N: {...}`, `critic-step N: {...}`,
`perf N: {...}` (Python reprs, read by cpverify.parse.dicts; `rollout N:` and `eval N:` dicts are
recognised, not kept), Memory-Usage lines, and fragments of a perf dict copied by hand."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from cpverify.parse.dicts import _SALVAGE_PAIR, parse_dict, parse_plain_dict
from cpverify.parse.records import UNKNOWN_ROLLOUT, PerfRecord, StepRecord

# slime's logger.info(f"{kind} {n}: {dict}"); rollout/eval dicts are recognised, not kept.
RECORD = re.compile(r"(?<![\w/.-])(critic-step|step|perf|rollout|eval) (\d+): (\{.*)$")
_RECORD_WORD = len("critic-step ")  # the longest word (and its space) before a record's number
MEMORY = re.compile(r"(?:\[Rank (\d+)\] )?Memory-Usage (.{0,200}?): (\{.*)$")
_LETTER = re.compile(r"[A-Za-z]")
_TRAIN_PERF_KEY = re.compile(
    r"^perf/(?:train_wait|train|data_preprocess|ref_log_probs|log_probs|actor_train|critic_train|"
    r"ref_model_update|sleep|wake_up|update_weights|save_model|step|total_train|cp_seq_kl_prep)_time$"
    r"|_tflops$|^perf/actor_train_tok_per_s$|^perf/wait_time_ratio$"
)
_ROLLOUT_PERF_KEY = re.compile(r"^rollout/|^perf/rollout_time$|tokens_per_gpu_per_sec$|_sample_tokens_per_sec$")


def perf_side(metrics: dict[str, float], actor: str | None) -> str:
    """"train" when a key is a train-side timer (perf/actor_train_time, perf/step_time, *_tflops, ...),
    else "rollout" when a key is rollout-side (perf/rollout_time, rollout/*, *tokens_per_gpu*), else
    by the actor (Megatron/Train -> train), else "rollout": nothing passes as a train step without
    evidence."""
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


def normalise_perf(metrics: dict[str, float]) -> dict[str, float]:
    """perf/total_train_time is slime's old name of perf/step_time (slime PR #629): both are kept."""
    if "perf/total_train_time" in metrics and "perf/step_time" not in metrics:
        metrics["perf/step_time"] = metrics["perf/total_train_time"]
    return metrics


def record_match(msg: str) -> re.Match[str] | None:
    """RECORD.search(msg), without reading the whole line: the first `: {` after a number
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
    return RECORD.search(msg, max(0, digits - _RECORD_WORD))


def record_of(kind: str, index: int, body: str | bytes, actor: str | None, lineno: int) -> StepRecord | PerfRecord:
    """The record of `kind index: body` (a step, critic-step or perf dict's text, or its bytes as
    cpverify.parse.plain takes them) at line `lineno`."""
    metrics, salvaged = parse_dict(body) if type(body) is str else parse_plain_dict(body)  # type: ignore[arg-type]
    if kind == "perf":
        metrics = normalise_perf(metrics)
        return PerfRecord(index, perf_side(metrics, actor), lineno, metrics, salvaged)
    return StepRecord(index, lineno, metrics, kind, salvaged)


def memory_match(msg: str) -> re.Match[str] | None:
    """MEMORY.search(msg), from the first `Memory-Usage ` (or the `[Rank ` just before it)."""
    at = msg.find("Memory-Usage ")
    if at == -1:
        return None
    rank = msg.rfind("[Rank ", 0, at)
    return MEMORY.search(msg, at if rank == -1 else rank)


def fragment_pairs(msg: str) -> list[tuple[str, float]]:
    """The `'perf/...': number` pairs of a line of a hand-copied dict; none for any other line."""
    pairs = [(k, float(v)) for k, v in _SALVAGE_PAIR.findall(msg) if k.startswith(("perf/", "rollout/"))]
    # A fragment is pairs and punctuation only: an error message quoting a metric is not one.
    if not pairs or _LETTER.search(_SALVAGE_PAIR.sub("", msg)):
        return []
    return pairs


# A terminal hard-wraps a line only at its width, and no terminal is this narrow: a shorter line
# that stops inside a dict was cut, not wrapped.
MIN_WRAP_WIDTH = 60


@dataclass(slots=True)
class WrappedRecord:
    """A slime record whose dict did not close on its line: a terminal may have hard-wrapped it.

    A wrap splits a line at the terminal's width without adding a character, so every piece but
    the last is as wide as the first; the pieces follow without a Ray prefix or a record of their
    own. They are joined until the dict closes. A record that never does (the paste or the log
    was cut) keeps the pairs a comma closed: its last number may have been cut inside.
    """

    kind: str
    index: int
    body: str  # the dict's text so far
    actor: str | None
    line: int
    msg: str  # the first line's message
    at: int  # where the record starts in it
    width: int  # the first line's width
    last_width: int = 0  # the width of the last piece joined
    head_len: int = 0  # the length of the first line's part of body

    def __post_init__(self) -> None:
        self.last_width, self.head_len = self.width, len(self.body)

    def join(self, piece: str, width: int, limit: int) -> bool:
        """Join `piece` (the next line, `width` wide, no Ray prefix) when it can be the next piece:
        the last piece was as wide as the first, and it starts no record of its own."""
        if self.last_width < self.width - 1 or record_match(piece) is not None or len(self.body) + len(piece) > limit:
            return False
        self.body += piece
        self.last_width = width
        return True

    def record(self) -> StepRecord | PerfRecord:
        """The record as far as it goes."""
        return record_of(self.kind, self.index, self.unclosed, self.actor, self.line)

    @property
    def closed(self) -> bool:
        return self.body.rstrip().endswith("}")

    @property
    def unclosed(self) -> str:
        """The dict's text as far as it can be trusted: its first line alone when nothing was
        joined to it (as any line is read), else up to its last comma."""
        if len(self.body) == self.head_len:
            return self.body
        return self.body[: self.body.rfind(",") + 1]


@dataclass
class Fragment:
    """Consecutive headerless lines of `'perf/...': number` pairs (a hand-copied dict)."""

    last_line: int
    pairs: list[tuple[str, float, int]] = field(default_factory=list)

    def records(self) -> list[PerfRecord]:
        """Its perf records, one per side its keys name."""
        by_side: dict[str, PerfRecord] = {}
        for key, value, lineno in self.pairs:
            side = perf_side({key: value}, None)
            by_side.setdefault(side, PerfRecord(UNKNOWN_ROLLOUT, side, lineno, {}, True)).metrics[key] = value
        for rec in by_side.values():
            normalise_perf(rec.metrics)
        return list(by_side.values())
