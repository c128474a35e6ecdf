"""Typed errors. Every error names the problem *and* the fix, and carries its exit code.

Exit codes (documented in the README, stable):
  0 PASS / success          1 FAIL (verdict) or lint errors
  2 bad input or usage      3 INCONCLUSIVE
  4 BLOCKED (environment)   130 interrupted (Ctrl-C)
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_INCONCLUSIVE = 3
EXIT_BLOCKED = 4
EXIT_INTERRUPTED = 130

# What an exit code says when no verdict says more (exit 1 without a verdict: lint errors).
EXIT_NAMES = {EXIT_OK: "PASS", EXIT_FAIL: "FAIL", EXIT_USAGE: "bad input", EXIT_INCONCLUSIVE: "INCONCLUSIVE",
              EXIT_BLOCKED: "BLOCKED", EXIT_INTERRUPTED: "interrupted"}


class CpverifyError(Exception):
    """Base error: `problem` says what went wrong, `fix` says what to do next."""

    exit_code = EXIT_USAGE

    def __init__(self, problem: str, fix: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.problem}\n  fix: {self.fix}" if self.fix else self.problem


class InputError(CpverifyError):
    """Bad input from the user: a file, an argument, a dataset line."""


class DatasetError(InputError):
    """A prompt dataset that slime would choke on."""


class ModelError(InputError):
    """A model directory that is missing, partial, or not the profile's model."""


class EnvironmentBlocked(CpverifyError):
    """The host cannot run the verification (no GPU runtime, daemon down, too few GPUs)."""

    exit_code = EXIT_BLOCKED


class LockHeld(EnvironmentBlocked):
    """Another cpverify run holds the same GPUs."""


class ArtifactWriteError(CpverifyError):
    """Artifacts could not be written (read-only directory, disk full)."""

    exit_code = EXIT_BLOCKED
