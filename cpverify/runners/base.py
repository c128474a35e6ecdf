"""What every runner (docker, local, ray) shares.

CONTRACT: a runner turns one planned arm into one log file on disk plus an ArmResult.
  runner.run_arm(arm, log_path=..., limits=...) -> ArmResult
Lines are written to log_path as they arrive (flushed per line), fed to the streaming
parser, and watched for hangs and fatal signatures; the runner kills its workload on
deadline, hang, stall, fatal signature or Ctrl-C, and leaves nothing running behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# ArmResult.outcome vocabulary
OK = "ok"  # workload exited 0
FAILED = "failed"  # workload exited non-zero on its own
FATAL = "fatal"  # stopped early on a fatal log signature (nccl_timeout, cuda_oom, ...)
HANG = "hang"  # no new log line for limits.hang_s
STALLED = "stalled"  # lines flowing but no training step for limits.stall_s
DEADLINE = "deadline"  # ran past limits.deadline_s
BLOCKED = "blocked"  # could not start: environment problem (no GPU runtime, daemon down)
INTERRUPTED = "interrupted"  # Ctrl-C


@dataclass(frozen=True)
class Limits:
    deadline_s: float = 3600.0
    hang_s: float = 600.0
    stall_s: float = 1200.0
    stop_on_fatal: bool = True


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


class Runner(Protocol):
    name: str

    def run_arm(self, arm, *, log_path: Path, limits: Limits) -> ArmResult: ...
