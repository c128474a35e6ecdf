"""slime's metric records as the parser finds them: `step N: {...}`, `critic-step N: {...}`,
`perf N: {...}` (Python reprs, read by cpverify.parse.dicts; `rollout N:` and `eval N:` dicts are
recognised, not kept), Memory-Usage lines, and fragments of a perf dict copied by hand."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from cpverify.parse.dicts import _SALVAGE_PAIR
from cpverify.parse.records import UNKNOWN_ROLLOUT, PerfRecord

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
