"""cpverify's entry points.

    nox -s verify_cp                      # the whole verification: doctor -> image -> fetch ->
                                          # compileall -> lint -> cp1 -> cp2 -> verdict
    nox -s verify_cp -- --profile probe --runner local     # options after `--` reach `cpverify run`
    nox -s tests                          # the test suite
    nox -s lint_code                      # ruff and mypy on the package (CI runs it first)
    nox -l                                # every session, one line each

Each step is also a session of its own. The steps chain with `requires=`, so no GPU is
held until the image, the model and data, the compile check and the lint have passed.
All steps of one `nox` invocation share one run id (CPVERIFY_RUN_ID; set it to resume a
run) and therefore one `artifacts/<run-id>/` directory.

Orchestration sessions run in one shared tool environment (.nox/_cpverify), rebuilt only
when pyproject.toml changes, so a step costs no venv rebuild.

nox itself exits 0 or 1 (1 when any session failed, whatever the verdict). So that a script or
a person can tell BLOCKED from FAIL, the very last line nox prints is the status, e.g.
`status: BLOCKED (exit 4 from cpverify run --only doctor)`, and `artifacts/latest` points at
the run, whose verdict.json holds the status.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import sys
import time
from pathlib import Path

import nox
from nox.command import CommandFailed

nox.needs_version = ">=2024.3.2"
nox.options.sessions = ["verify_cp"]

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))  # nox does not put the noxfile's directory on sys.path
from cpverify import config  # noqa: E402, I001  (stdlib only: every CPVERIFY_* variable)
from cpverify.artifacts import LATEST, atomic_write_text, new_run_id  # noqa: E402, I001  (stdlib only: the one run id generator, the one writer)
from cpverify.errors import EXIT_FAIL, EXIT_NAMES  # noqa: E402, I001

# The shared tool environment and its extras (ray for --runner ray, plot for the PNGs).
TOOL_VENV = config.tool_venv(ROOT)
TOOL_EXTRAS = config.tool_extras()

# One run id for every session of this invocation (resumable by exporting it; cpverify checks it).
# Passed to each step explicitly, not exported: the tests session must not inherit it.
RUN_ID = config.run_id() or new_run_id()
STARTED = time.time()

# nox (2025+) looks for uv before every session, venv_backend="none" ones included, and logs
# "uv binary not found." where there is none. No session here uses uv: the steps run in the tool
# environment built with `python -m venv`, and the tests session names its backend (venv).
logging.getLogger("nox").addFilter(lambda record: record.getMessage() != "uv binary not found.")


def _tool_python(session: nox.Session) -> str:
    """The shared environment's interpreter, (re)built only when pyproject.toml changed."""
    python = TOOL_VENV / "bin" / "python"
    stamp = TOOL_VENV / ".pyproject.sha256"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + TOOL_EXTRAS.encode()).hexdigest()
    if not python.exists() or not stamp.exists() or stamp.read_text() != digest:
        # pip -q is silent for the minute it takes: say first what it does and why it is slow
        extras = f" and the extras {TOOL_EXTRAS}" if TOOL_EXTRAS else ""
        if "ray" in TOOL_EXTRAS.split(","):
            extras += " (ray is the big download)"
        session.log(f"building the shared tool environment {TOOL_VENV}: pip downloads and installs cpverify's "
                    f"dependencies{extras}, quietly; about a minute on a first run, then reused until pyproject.toml "
                    "or CPVERIFY_TOOL_EXTRAS changes")
        started = time.monotonic()
        session.run(sys.executable, "-m", "venv", "--clear", str(TOOL_VENV), external=True)
        target = f"{ROOT}[{TOOL_EXTRAS}]" if TOOL_EXTRAS else str(ROOT)
        session.run(str(python), "-m", "pip", "install", "-q", "-e", target, external=True)
        atomic_write_text(stamp, digest)  # never through a link planted at its name
        session.log(f"tool environment ready in {time.monotonic() - started:.0f}s")
    return str(python)


def _step(session: nox.Session, step: str) -> None:
    python = _tool_python(session)
    if {"-h", "--help"} & set(session.posargs):
        # `nox -s verify_cp -- --help`: show the options once, run nothing
        if step == "doctor":
            session.run(python, "-m", "cpverify", "run", "--help", external=True, silent=False)
        session.skip("--help given: nothing was run")
    _last["out"] = _artifacts_root(session.posargs)
    try:
        session.run(python, "-m", "cpverify", "run", "--only", step, "--run-id", RUN_ID, *session.posargs,
                    external=True, env={config.RUN_ID_ENV: RUN_ID})
    except CommandFailed as failed:
        # nox before 2024.10 keeps the code only in its message ("Returned code 4")
        code = getattr(failed, "return_code", None)
        _last.update(step=step, code=code if code is not None else int(str(failed).rsplit(" ", 1)[-1]))
        raise
    _last.update(step=step, code=0)


# The last cpverify step of this invocation and its exit code, for the status line.
_last: dict = {}


def _artifacts_root(posargs: list[str]) -> Path:
    """Where cpverify writes: `--out` among the options, else CPVERIFY_ARTIFACTS, else artifacts."""
    for i, arg in enumerate(posargs):
        if arg == "--out" and i + 1 < len(posargs):
            return Path(posargs[i + 1])
        if arg.startswith("--out="):
            return Path(arg.split("=", 1)[1])
    return Path(config.artifacts())


@atexit.register
def _print_status() -> None:
    """After nox's own last words (the failed and aborted sessions, the summary): the run's status,
    from the verdict this invocation wrote, else from the exit code of the step that stopped."""
    if "code" not in _last:
        return  # no step ran: `nox -l`, `nox -s tests`, `-- --help`
    run_dir = _last["out"] / RUN_ID
    status = EXIT_NAMES.get(_last["code"], "error")
    if _last["step"] == "lint" and _last["code"] == EXIT_FAIL:
        status = "lint errors"
    verdict_json = run_dir / "verdict.json"
    if verdict_json.exists() and verdict_json.stat().st_mtime >= STARTED - 1:
        status = json.loads(verdict_json.read_text()).get("status", status)
        print(f"verdict: {run_dir / 'verdict.md'} ({_last['out'] / LATEST} points at it)", file=sys.stderr)
    print(f"status: {status} (exit {_last['code']} from cpverify run --only {_last['step']})",
          file=sys.stderr, flush=True)


@nox.session(venv_backend="none")
def doctor(session: nox.Session) -> None:
    """Check the host: GPUs, driver, CUDA, NCCL, topology, Docker + NVIDIA runtime, /dev/shm, disk."""
    _step(session, "doctor")


@nox.session(venv_backend="none", requires=["doctor"])
def image(session: nox.Session) -> None:
    """Build the pinned CUDA/NCCL/slime image (docker/Dockerfile + docker/versions.lock)."""
    _step(session, "image")


@nox.session(venv_backend="none", requires=["image"])
def fetch(session: nox.Session) -> None:
    """Download the pinned model with huggingface_hub, verify it, stage the prompt data."""
    _step(session, "fetch")


@nox.session(venv_backend="none", requires=["fetch"])
def compileall(session: nox.Session) -> None:
    """`python -m compileall slime/backends/megatron_utils` against the slime under test."""
    _step(session, "compileall")


@nox.session(venv_backend="none", requires=["compileall"])
def lint(session: nox.Session) -> None:
    """Lint every arm's slime arguments and environment before any GPU is held."""
    _step(session, "lint")


@nox.session(venv_backend="none", requires=["lint"])
def cp1(session: nox.Session) -> None:
    """Run the baseline arm(s): context-parallel size 1."""
    _step(session, "cp1")


@nox.session(venv_backend="none", requires=["cp1"])
def cp2(session: nox.Session) -> None:
    """Run the candidate arm(s): context-parallel size 2 (same GPUs, nothing else differs)."""
    _step(session, "cp2")


@nox.session(venv_backend="none", requires=["cp2"])
def verdict(session: nox.Session) -> None:
    """Parse the logs and write artifacts/<run-id>/verdict.md, verdict.json, commands.sh."""
    _step(session, "verdict")


@nox.session(venv_backend="none", requires=["verdict"])
def verify_cp(session: nox.Session) -> None:
    """Everything above, in order; the last line nox prints is the status (PASS, FAIL, BLOCKED, ...)."""


@nox.session(venv_backend="venv")
def lint_code(session: nox.Session) -> None:
    """ruff and mypy on the package, as pyproject.toml configures them (CI runs it before the tests).
    Not `lint`: that is the pipeline's step that lints the arms' slime arguments."""
    session.install("-e", ".", "ruff>=0.6", "mypy>=1.11")
    session.run("ruff", "check", "cpverify", "noxfile.py")
    session.run("mypy")


@nox.session(venv_backend="venv")
def tests(session: nox.Session) -> None:
    """The test suite (a real Docker engine and Ray head where tests need them)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-ra", *session.posargs)
