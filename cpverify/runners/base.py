"""What every runner (docker, local, ray) shares.

CONTRACT: a runner turns one planned arm into one log file on disk plus an ArmResult.
  runner.run_arm(arm, log_path=..., limits=...) -> ArmResult
Lines are written to log_path as they arrive (flushed per line), fed to the streaming
parser, and watched for hangs and fatal signatures; the runner kills its workload on
deadline, hang, stall, fatal signature or Ctrl-C, and leaves nothing running behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

from cpverify.errors import InputError

# ArmResult.outcome vocabulary
OK = "ok"  # workload exited 0
FAILED = "failed"  # workload exited non-zero on its own
FATAL = "fatal"  # stopped early on a fatal log signature (nccl_timeout, cuda_oom, ...)
HANG = "hang"  # no new log line for limits.hang_s
STALLED = "stalled"  # lines flowing but no training step for limits.stall_s
DEADLINE = "deadline"  # ran past limits.deadline_s
BLOCKED = "blocked"  # could not start: environment problem (no GPU runtime, daemon down)
INTERRUPTED = "interrupted"  # Ctrl-C

# Error classes (cpverify.logs vocabulary) after which a run cannot recover: waiting on
# would only burn GPU hours until the deadline (an NCCL watchdog timeout is followed by
# minutes of teardown, a dead Ray actor by a job that never finishes).
DEFAULT_FATAL_CLASSES = frozenset(
    {"nccl_timeout", "nccl_error", "cuda_oom", "cuda_illegal_memory_access", "ray_actor_died"}
)


@dataclass(frozen=True)
class Limits:
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
    arm: str
    outcome: str
    exit_code: int | None
    log_path: Path
    duration_s: float
    reason: str = ""
    fix: str = ""
    lines: int = 0
    error_class: str = ""  # the fatal class that stopped the run, when outcome == FATAL
    # The ParsedLog the watcher built while streaming, so nobody parses the log twice.
    parsed: Any = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        """The result as plain JSON types, without `parsed` (that belongs in its own file)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "parsed"}
        data["log_path"] = str(self.log_path)
        return data


class ArmInterrupted(KeyboardInterrupt):
    """Ctrl-C during an arm: the workload is stopped and cleaned up, the partial log kept.

    Still a KeyboardInterrupt (so `except KeyboardInterrupt` and exit code 130 keep
    working); `.result` carries the interrupted arm's ArmResult for the report.
    """

    def __init__(self, result: ArmResult) -> None:
        super().__init__(f"arm {result.arm!r} interrupted; partial log kept at {result.log_path}")
        self.result = result


class Runner(Protocol):
    name: str

    def run_arm(self, arm, *, log_path: Path, limits: Limits) -> ArmResult: ...
