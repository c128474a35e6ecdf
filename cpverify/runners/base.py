"""What every runner (docker, local, ray) shares.

CONTRACT: a runner turns one planned arm into one log file on disk plus an ArmResult.
  runner.run_arm(arm, log_path=..., limits=...) -> ArmResult
Lines are written to log_path as they arrive (flushed per line), fed to the streaming
parser, and watched for hangs and fatal signatures; the runner kills its workload on
deadline, hang, stall, fatal signature or Ctrl-C, and leaves nothing running behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from cpverify.model import Arm, ArmResult, Limits


class Runner(Protocol):
    name: str

    def run_arm(self, arm: Arm, *, log_path: Path, limits: Limits) -> ArmResult: ...
