"""Every environment variable cpverify reads, its default, and nothing else (README, "Environment
variables", documents each one; ARCHITECTURE.md says where configuration comes from).

Like huggingface_hub's `constants`, one module names them all; unlike it, the values are read
when asked for, not at import: a test, a compose service or nox sets them per process or per
session, and a value frozen at import would be the wrong one. Only the CLI (argparse defaults)
and the edges (fetch, locks, the local runner, the noxfile) call these functions; the stages
get what they need as arguments.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from cpverify.errors import InputError

RUN_ID_ENV = "CPVERIFY_RUN_ID"  # name (or resume) a run; the nox steps of one invocation share it
RUNNER_ENV = "CPVERIFY_RUNNER"  # default of `run --runner`
ARTIFACTS_ENV = "CPVERIFY_ARTIFACTS"  # default of `run --out`
CACHE_ENV = "CPVERIFY_CACHE"  # model and data cache, `run --cache` and `fetch --cache`
SLIME_DIR_ENV = "CPVERIFY_SLIME_DIR"  # default of `run --slime-dir`
PYTHON_ENV = "CPVERIFY_PYTHON"  # the local runner's workload Python, default of `--python`
LOCK_DIR_ENV = "CPVERIFY_LOCK_DIR"  # where the per-GPU locks live
TOOL_VENV_ENV = "CPVERIFY_TOOL_VENV"  # noxfile: the environment its steps run in
TOOL_EXTRAS_ENV = "CPVERIFY_TOOL_EXTRAS"  # noxfile: the extras installed there
PROGRESS_S_ENV = "CPVERIFY_PROGRESS_S"  # off a terminal: seconds between an arm's progress lines
RAY_ADDRESS_ENV = "RAY_ADDRESS"  # Ray's own variable: default of `run --ray-address`
HF_OFFLINE_ENV = "HF_HUB_OFFLINE"  # huggingface_hub's own variable: the fetch step uses the cache only
DOCKER_HOST_ENV = "DOCKER_HOST"  # Docker's own variable: the engine docker-py talks to, named when none answers
# Set by cpverify itself, on every process of a local workload (<pid>:<start time> of its
# cpverify), so that a later run can find the workload of one that was killed outright.
WORKLOAD_OWNER_ENV = "CPVERIFY_WORKLOAD_OWNER"

RUNNERS = ("docker", "local", "ray")
DEFAULT_RUNNER = "docker"
DEFAULT_ARTIFACTS = "artifacts"
DEFAULT_CACHE = "~/.cache/cpverify"
DEFAULT_LOCK_DIR = "/tmp"  # not $TMPDIR: two users with different TMPDIRs share the same GPUs
DEFAULT_TOOL_EXTRAS = "ray,plot"
DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"  # where docker-py looks without DOCKER_HOST
DEFAULT_PROGRESS_S = 30.0

# What huggingface_hub takes for "on" in its boolean variables (constants._is_true).
_TRUE = {"1", "ON", "YES", "TRUE"}


def _get(name: str) -> str | None:
    """The variable's value; unset and empty are the same (compose passes `${X:-}` as empty)."""
    return os.environ.get(name) or None


def run_id() -> str | None:
    return _get(RUN_ID_ENV)


def runner() -> str:
    """Not checked here: `cpverify run` refuses a value that is not one of RUNNERS (exit 2)."""
    return _get(RUNNER_ENV) or DEFAULT_RUNNER


def artifacts() -> str:
    return _get(ARTIFACTS_ENV) or DEFAULT_ARTIFACTS


def cache() -> str:
    """The cache root as given (`~` unexpanded, as --help shows it)."""
    return _get(CACHE_ENV) or DEFAULT_CACHE


def slime_dir() -> str | None:
    return _get(SLIME_DIR_ENV)


def python() -> str | None:
    return _get(PYTHON_ENV)


def lock_dir() -> Path:
    return Path(_get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)


def progress_s() -> float:
    """Raises InputError (exit 2) unless the value is a positive number of seconds."""
    text = _get(PROGRESS_S_ENV)
    if text is None:
        return DEFAULT_PROGRESS_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise InputError(f"{PROGRESS_S_ENV}={text!r} is not a positive number of seconds",
                         f"set it to e.g. 10 (off a terminal, a line per arm every 10 s), or unset it "
                         f"(every {DEFAULT_PROGRESS_S:g} s)")
    return value


def ray_address() -> str | None:
    return _get(RAY_ADDRESS_ENV)


def docker_host() -> str:
    return _get(DOCKER_HOST_ENV) or DEFAULT_DOCKER_HOST


def hf_offline() -> bool:
    return (_get(HF_OFFLINE_ENV) or "").upper() in _TRUE


def tool_venv(root: Path) -> Path:
    return Path(_get(TOOL_VENV_ENV) or root / ".nox" / "_cpverify")


def tool_extras() -> str:
    """Empty when set to empty: neither extra (os.environ.get, not _get, keeps that meaning)."""
    return os.environ.get(TOOL_EXTRAS_ENV, DEFAULT_TOOL_EXTRAS)
