"""The data every stage and every runner shares, and nothing else (ARCHITECTURE.md, "model").

An `Arm` is what the plan asks a runner to run; `Limits` is how long it may take; an
`ArmResult` is what the runner hands back, with an `Outcome`; the verdict turns results into
`Status`es through checks whose rows carry a `CheckStatus`. Defined here, below every stage and
runner, so that none of them imports another to name these types. Pure data: this module
imports nothing of cpverify but its errors.

The vocabularies are `str` enums: a member *is* its string ("ok", "PASS", "fail"), so it
compares equal to what state.json, verdict.json and older callers hold, and prints, formats,
reprs and serialises as that string -- no file and no message changes because a value became
an enum member.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Literal, get_args

from cpverify.errors import InputError


class _Word(str, Enum):
    """A member that behaves as its string everywhere (enum.StrEnum is Python 3.11+, and even it
    reprs as `<Outcome.OK: 'ok'>`, which would change every `{outcome!r}` in a verdict)."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)

    def __repr__(self) -> str:
        return str.__repr__(self)


class Outcome(_Word):
    """How a runner's workload ended (ArmResult.outcome; state.json and verdict.json carry the value)."""

    OK = "ok"  # the workload exited 0
    FAILED = "failed"  # it exited non-zero on its own
    FATAL = "fatal"  # stopped early on a fatal log signature (nccl_timeout, cuda_oom, ...)
    HANG = "hang"  # no new log line for limits.hang_s
    STALLED = "stalled"  # lines flowing but no training step for limits.stall_s
    DEADLINE = "deadline"  # ran past limits.deadline_s
    BLOCKED = "blocked"  # could not start: an environment problem (no GPU runtime, daemon down)
    INTERRUPTED = "interrupted"  # Ctrl-C, SIGTERM or SIGHUP


class Status(_Word):
    """A verdict's status, worst first: FAIL > BLOCKED > INCONCLUSIVE > PASS."""

    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"
    BLOCKED = "BLOCKED"


class CheckStatus(_Word):
    """One row of a verdict's checks: only a `fail` row forces a Status."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"


# What a profile runs (Profile.kind) and what wrote the logs a verdict judges (its advice names that
# workload's own knobs): slime's trainer, or the torch-only probe.
Workload = Literal["slime", "probe"]
WORKLOADS: tuple[str, ...] = get_args(Workload)

# Error classes (cpverify.parse vocabulary) after which a run cannot recover: waiting on
# would only burn GPU hours until the deadline (an NCCL watchdog timeout is followed by
# minutes of teardown, a dead Ray actor by a job that never finishes).
DEFAULT_FATAL_CLASSES = frozenset(
    {"nccl_timeout", "nccl_error", "cuda_oom", "cuda_illegal_memory_access", "ray_actor_died"}
)

# The two slime revisions of an A/B (cpverify.revisions exports them; the plan names their arms
# base-cpN and cand-cpN).
BASE, CANDIDATE = "base", "cand"


@dataclass(frozen=True)
class Arm:
    """One process to run: argv (no leading env), its environment, its working directory; and what
    it is, as data (never read back from its name): its CP, response length, slime revision, A/B
    role and round."""

    name: str
    cp: int
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    workdir: str
    seq_len: int | None = None
    slime_ref: str | None = None  # label of the slime revision this arm runs, when known
    role: str | None = None  # BASE or CANDIDATE in an A/B of two slime revisions; None otherwise
    round: int = 1  # an arm runs as one or more rounds: the same command, each its own process and log

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def as_round(self, k: int) -> Arm:
        """Round k of this (planned) arm: the same command under its own name, so its own log
        (logs/<name>.log), container and job: round 1 keeps the arm's name, round k is `<name>.r<k>`."""
        if self.round != 1:
            raise ValueError(f"{self.name} is already round {self.round} of an arm")
        if k < 1:
            raise ValueError(f"rounds are counted from 1, not {k}")
        return dataclasses.replace(self, name=round_name(self.name, k), round=k)


def round_name(arm: str, k: int) -> str:
    """The name of round k of arm `arm` (its log is logs/<name>.log): `cp1`, `cp1.r2`, `cp1.r3`..."""
    return arm if k == 1 else f"{arm}.r{k}"


@dataclass(frozen=True)
class Mount:
    """A directory of this machine as an isolated workload (a container) sees it: read-only unless
    it is where the run writes."""

    source: Path | str
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class Limits:
    """When a runner stops a workload that has not ended on its own."""

    deadline_s: float = 3600.0
    hang_s: float = 600.0
    stall_s: float = 1200.0
    stop_on_fatal: bool = True
    fatal_classes: frozenset[str] = DEFAULT_FATAL_CLASSES

    def __post_init__(self) -> None:
        for name in ("deadline_s", "hang_s", "stall_s"):
            if not getattr(self, name) > 0:
                raise InputError(
                    f"limit {name}={getattr(self, name)!r} must be a positive number of seconds",
                    fix=f"pass a positive {name} (defaults: deadline 3600, hang 600, stall 1200)",
                )
        object.__setattr__(self, "fatal_classes", frozenset(self.fatal_classes))


@dataclass
class ArmResult:
    """What a runner returns for one arm: how it ended, and the log it wrote."""

    arm: str
    outcome: Outcome  # given as one or as its string (state.json's): an unknown outcome is a ValueError
    exit_code: int | None
    log_path: Path
    duration_s: float
    reason: str = ""
    fix: str = ""
    lines: int = 0
    error_class: str = ""  # the fatal error that ended the run (the finest class of its line)
    # No parsed log here: the watcher's parse serves the limits while the arm runs; the verdict
    # parses the bytes it hashes, once (the log judged is the log recorded, cpverify.run_state).

    def __post_init__(self) -> None:
        self.outcome = Outcome(self.outcome)

    def to_json(self) -> dict:
        """The result as plain JSON types."""
        data = dataclasses.asdict(self)
        data["log_path"] = str(self.log_path)
        data["outcome"] = str(self.outcome)
        return data


class ArmInterrupted(KeyboardInterrupt):
    """Ctrl-C during an arm: the workload is stopped and cleaned up, the partial log kept.

    Still a KeyboardInterrupt (so `except KeyboardInterrupt` and exit code 130 keep
    working); `.result` carries the interrupted arm's ArmResult for the report.
    """

    def __init__(self, result: ArmResult) -> None:
        super().__init__(f"arm {result.arm!r} interrupted; partial log kept at {result.log_path}")
        self.result = result
