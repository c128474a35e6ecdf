"""Run one arm as a local subprocess (no container): the runner for a host that already
has slime installed, and the one the lifecycle tests exercise without Docker.

The workload runs in its own session and process group, so that
  * Ctrl-C in the terminal reaches cpverify only (the terminal signals the foreground
    group), and cpverify decides how the workload ends: SIGTERM to the whole group,
    SIGKILL after a grace period;
  * everything the workload started (Ray workers, SGLang servers, `sleep &`) is in one
    group that can be signalled and checked as a unit, so nothing is left behind.
A grandchild that calls setsid() itself escapes the group; that is a limit of process
groups (only cgroups see everything) and is why the Docker runner is the default.

If cpverify itself dies without cleaning up (kill -9, OOM killer), its workload runs on,
holding the GPUs. Like the Docker runner's container labels, every workload process carries
its owner in the environment (CPVERIFY_WORKLOAD_OWNER=<pid>:<start time>, inherited by
everything it starts, whatever its process group); `sweep_leftovers()` kills the processes
whose owner is gone, and `cpverify run` calls it before it takes the GPUs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

from cpverify import config
from cpverify.config import PYTHON_ENV, WORKLOAD_OWNER_ENV
from cpverify.errors import InputError
from cpverify.model import Arm, ArmResult
from cpverify.runners.base import BaseRunner, Blocked, RunSetup
from cpverify.runners.watch import ProgressCallback
from cpverify.runners.workload_env import workload_env

IMPORT_TIMEOUT_S = 90.0  # importing torch cold from a network filesystem can take a minute


# -- which Python runs the workload ---------------------------------------------------------------

# The extra that installs torch, all the probe profile needs besides cpverify (pyproject.toml).
PROBE_EXTRA = "pip install 'cpverify[probe]'"


@dataclass(frozen=True)
class WorkloadPython:
    """The interpreter a local workload runs with (its `python3`), why it was chosen, and which of
    the modules the workload needs it cannot import (module -> error; empty when it has them all)."""

    path: str
    chosen_by: str
    needs: tuple[str, ...]
    missing: dict[str, str] = field(default_factory=dict)
    tried: tuple[str, ...] = ()  # every interpreter looked at, when none was given

    @property
    def ok(self) -> bool:
        return not self.missing

    def problem(self) -> str:
        first = next(iter(self.missing.values()), "")
        return f"the workload's Python {self.path} ({self.chosen_by}) cannot import {', '.join(self.missing)}: {first}"

    def fix(self) -> str:
        hints = []
        if "slime" in self.missing:
            hints.append("point --slime-dir at a slime checkout (its slime/ package beside train.py)")
        if any(m.startswith("cpverify") for m in self.missing):
            hints.append(f"run from the cpverify checkout, or `{self.path} -m pip install -e <cpverify checkout>`")
        hints.append(f"pass --python (or export {PYTHON_ENV}) with the interpreter of the environment that has "
                     f"{', '.join(m for m in self.needs if not m.startswith('cpverify'))}, "
                     "e.g. --python /opt/conda/bin/python3; or run in the image: cpverify run --runner docker")
        if self.tried and "torch" in self.missing and "slime" not in self.needs:  # the probe: torch is all it lacks
            hints.append(f"install torch into cpverify's own environment: {PROBE_EXTRA} (with nox: "
                         "CPVERIFY_TOOL_EXTRAS=ray,plot,probe)")
        looked = f"none of {', '.join(self.tried)} imports {' and '.join(self.needs)}: " if len(self.tried) > 1 else ""
        return looked + "; or ".join(hints)

    def to_json(self) -> dict:
        return {"path": self.path, "chosen_by": self.chosen_by, "needs": list(self.needs), "missing": self.missing,
                "tried": list(self.tried)}

    @classmethod
    def from_json(cls, data: dict) -> WorkloadPython:
        return cls(data["path"], data["chosen_by"], tuple(data["needs"]), dict(data["missing"]), tuple(data["tried"]))


_IMPORTS = """\
import importlib, json, sys
missing = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as exc:
        missing[name] = f"{type(exc).__name__}: {exc}"
print("CPVERIFY-IMPORTS " + json.dumps(missing))
"""


def missing_imports(python: str, needs: tuple[str, ...], *, cwd: str | os.PathLike[str] | None = None,
                    env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Which of `needs` `python` cannot import, asked the way the workload will run: in a
    subprocess, from the workload's directory, with its environment (an import that crashes
    or hangs must not take cpverify with it)."""
    try:
        proc = subprocess.run([python, "-c", _IMPORTS, *needs], cwd=cwd, env=None if env is None else dict(env),
                              capture_output=True, text=True, errors="replace", timeout=IMPORT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {needs[0]: f"importing took longer than {IMPORT_TIMEOUT_S:.0f}s"}
    except OSError as exc:
        return {needs[0]: f"cannot start {python}: {exc.strerror or exc}"}
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("CPVERIFY-IMPORTS ")), None)
    if line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        return {needs[0]: f"{python} exited {proc.returncode}" + (f": {tail[-1]}" if tail else "")}
    return json.loads(line.split(" ", 1)[1])


def _pythons_on_path(path: str) -> list[str]:
    """python3 then python, in PATH order. Directories are resolved (/bin is /usr/bin on merged-usr
    systems), the interpreters are not: a venv's python links to its base Python but is another
    environment."""
    found = [os.path.join(os.path.realpath(d), name) for name in ("python3", "python") for d in path.split(os.pathsep)
             if d and os.path.isfile(os.path.join(d, name)) and os.access(os.path.join(d, name), os.X_OK)]
    return list(dict.fromkeys(found))


def requested_python(flag: str | None) -> tuple[str | None, str]:
    """(the interpreter asked for, by whom): --python, else CPVERIFY_PYTHON; (None, ...) when neither
    names one and workload_python() looks for it."""
    return (flag, "--python") if flag else (config.python(), PYTHON_ENV)


def workload_python(explicit: str | None = None, *, chosen_by: str = "--python", needs: tuple[str, ...] = ("torch",),
                    cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> WorkloadPython:
    """The Python for local workloads: `explicit` (--python or CPVERIFY_PYTHON) when given, else the
    first python3/python on PATH that imports everything in `needs`, else this process's Python if it
    does; when none does, the first python3 on PATH, with what it lacks (the caller blocks the run).

    Not simply the `python3` first on PATH: from nox's tool environment or a tool venv that is a
    Python without torch, and every arm would fail on its first import.
    """
    env = dict(os.environ if env is None else env)
    if explicit:
        path = shutil.which(explicit, path=env.get("PATH", os.defpath))
        if path is None:
            raise InputError(f"{chosen_by} {explicit!r}: no such interpreter (not an executable, nor on PATH)",
                             f"pass the path of the Python that imports {', '.join(needs)}, e.g. "
                             f"--python /opt/conda/bin/python3, or unset {PYTHON_ENV} to let cpverify look for one")
        return WorkloadPython(path, chosen_by, needs, missing_imports(path, needs, cwd=cwd, env=env))
    on_path = _pythons_on_path(env.get("PATH", os.defpath))
    candidates = list(dict.fromkeys([*on_path, sys.executable]))
    first_missing: tuple[str, dict[str, str]] | None = None
    for python in candidates:
        missing = missing_imports(python, needs, cwd=cwd, env=env)
        if not missing:
            which = "the first Python on PATH" if python in on_path else "cpverify's own Python"
            return WorkloadPython(python, f"{which} that imports {' and '.join(needs)}", needs, {}, tuple(candidates))
        first_missing = first_missing or (python, missing)
    assert first_missing is not None  # candidates holds sys.executable at least
    python, missing = first_missing
    return WorkloadPython(python, "first on PATH; none imports " + " and ".join(needs), needs, missing,
                          tuple(candidates))


# -- the runner -----------------------------------------------------------------------------------


class LocalRunner(BaseRunner):
    name = "local"
    starting = "starting the workload's process"

    def __init__(
        self,
        *,
        gpus: Sequence[int | str] | None = None,
        term_grace_s: float = 10.0,
        drain_s: float = 5.0,
        poll_s: float = 0.1,
        on_progress: ProgressCallback | None = None,
    ) -> None:
        """`gpus`: the only GPUs the workload sees (its CUDA_VISIBLE_DEVICES, set in its environment,
        never in cpverify's own); None: whatever this machine's environment says."""
        super().__init__(drain_s=drain_s, poll_s=poll_s, on_progress=on_progress)
        self.gpus = None if gpus is None else tuple(str(g) for g in gpus)
        self.term_grace_s = term_grace_s

    @classmethod
    def for_run(cls, setup: RunSetup) -> LocalRunner:
        return cls(gpus=setup.gpus if setup.pin_gpus else None, on_progress=setup.on_progress)

    def sweep_leftovers(self) -> list[str]:
        return [f"killed leftover process {what}" for what in sweep_leftovers()]

    def environment(self, arm: Arm) -> dict[str, str]:
        """What the workload runs with: the allowed part of this machine's environment, the plan's on
        top (cpverify.runners.workload_env), this runner's GPUs under both, and the owner tag."""
        base = dict(os.environ)
        if self.gpus is not None:
            base["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
        env, _dropped = workload_env(arm.env, base=base)
        env[WORKLOAD_OWNER_ENV] = _owner_tag(os.getpid())
        return env

    def start(self, arm: Arm, log_path: Path) -> _ProcessGroup:
        env = self.environment(arm)
        argv = [str(a) for a in arm.argv]
        _check_startable(argv, arm.workdir, env)
        try:
            proc = subprocess.Popen(
                argv,
                cwd=arm.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,  # one stream: the order of lines is the order printed
                start_new_session=True,
                bufsize=0,
            )
        except OSError as exc:  # exec format error, permission denied, ...: not a traceback
            raise Blocked(f"cannot start {argv[0]!r}: {exc.strerror or exc}",
                          f"check that {argv[0]!r} is an executable for this machine") from None
        return _ProcessGroup(proc, self.term_grace_s)


class _ProcessGroup:
    """The workload's process group: stop it politely, then make sure it is gone (the Workload
    of base.py)."""

    def __init__(self, proc: subprocess.Popen, term_grace_s: float) -> None:
        self.proc = proc
        self.pgid = proc.pid  # start_new_session: the leader's pid is the group id
        self.term_grace_s = term_grace_s
        self._reaped_leftovers = False

    def stream(self) -> Iterator[bytes]:
        """What the workload prints, as soon as it prints it (not line-buffered by us)."""
        with cast(IO[bytes], self.proc.stdout) as pipe:  # stdout=PIPE
            while True:
                chunk = pipe.read(65536)  # raw pipe (bufsize=0): returns whatever is there
                if not chunk:
                    return
                yield chunk

    def explain(self, result: ArmResult) -> ArmResult:
        return result

    def close(self, *, interrupted: bool) -> None:
        self.kill_leftovers()

    def exit_code(self) -> int | None:
        code = self.proc.poll()
        if code is None:
            return None
        if not self._reaped_leftovers:
            # The workload is done; what it left running in its group (`cmd &`, a server)
            # would hold the output pipe open and make the watcher wait out its drain.
            self._reaped_leftovers = True
            self._signal(signal.SIGTERM)
        # Shell convention (128 + signal), as Docker reports it, so both runners agree.
        return 128 - code if code < 0 else code

    def stop(self) -> None:
        """SIGTERM the whole group; SIGKILL what is still there after the grace period.

        A Ctrl-C during the grace period means "now": SIGKILL at once, then re-raise.
        """
        self._signal(signal.SIGTERM)
        give_up = time.monotonic() + self.term_grace_s
        try:
            try:
                self.proc.wait(timeout=self.term_grace_s)
            except subprocess.TimeoutExpired:
                pass
            while group_members(self.pgid) and time.monotonic() < give_up:
                time.sleep(0.05)  # the leader is gone, its children may still be flushing
        except KeyboardInterrupt:
            self._signal(signal.SIGKILL)
            raise
        self._signal(signal.SIGKILL)
        self.proc.wait()

    def kill_leftovers(self) -> None:
        """Whatever happened, leave no process of this group running."""
        if self.proc.poll() is None or group_members(self.pgid):
            self._signal(signal.SIGKILL)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # unkillable (D state): nothing more to do from here
            pass

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self.pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass  # the group is already empty (or only zombies we cannot signal)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group `pgid`, from /proc.

    killpg(pgid, 0) would also count zombies, which linger wherever PID 1 does not reap
    orphans (many containers), and would make a dead group look alive.
    """
    proc = Path("/proc")
    if not proc.is_dir():  # not Linux: fall back to the signal probe
        try:
            os.killpg(pgid, 0)
            return [pgid]
        except (ProcessLookupError, PermissionError):
            return []
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # Fields after the command name, which is in parentheses and may contain spaces.
        fields = stat[stat.rfind(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def _start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (clock ticks after boot), None if it is gone or a zombie.

    A pid alone is not an identity: after a kill -9 the number is free for another process.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _pid_namespace(pid: str) -> str | None:
    """`pid:[4026531836]`: the PID namespace of /proc/<pid>, None where it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _owner_tag(pid: int) -> str:
    return f"{pid}:{_start_time(pid) or '?'}"


def sweep_leftovers() -> list[str]:
    """SIGKILL workload processes whose cpverify is gone; return what was killed ("pid N (cmd)").

    Found by the owner tag in /proc/<pid>/environ (readable for our own processes), so a
    child that left the workload's process group is found too. Processes of a cpverify
    that still runs (another run, on other GPUs) are never touched, nor those of another PID
    namespace: a tag's pid is its own namespace's, so the workload of a cpverify running in a
    container (a compose step) would look orphaned from here (and a container's cpverify cannot
    outlive its container's processes, so they are never leftovers).
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    own, namespace = os.getpid(), _pid_namespace("self")
    killed = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        if namespace is not None and _pid_namespace(entry.name) != namespace:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # another user's process, or gone
        prefix = f"{WORKLOAD_OWNER_ENV}=".encode()
        tag = next((v[len(prefix) :].decode() for v in environ.split(b"\0") if v.startswith(prefix)), None)
        if tag is None:
            continue
        owner, _, started = tag.partition(":")
        if owner.isdigit() and _start_time(int(owner)) == started:
            continue  # its cpverify still runs
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            os.kill(int(entry.name), signal.SIGKILL)
        except OSError:  # exited meanwhile
            continue
        killed.append(f"pid {entry.name} ({command[:80]})")
    return killed


def _check_startable(argv: list[str], workdir, env: dict[str, str]) -> None:
    """Blocked, naming the fix, when the command cannot start here: no command, no working
    directory, a program that is not an executable or not on the workload's PATH."""
    if not argv:
        raise Blocked("the arm has an empty command", "fix the plan: argv is empty")
    workdir = Path(workdir) if workdir else Path.cwd()
    if not workdir.is_dir():
        raise Blocked(f"working directory {workdir} does not exist",
                      f"create {workdir} or point the plan's workdir at your slime checkout")
    program = argv[0]
    if os.sep in program:
        path = Path(program) if Path(program).is_absolute() else workdir / program
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise Blocked(f"{program} is not an executable file (looked in {workdir})",
                          f"check the path, or make it executable: chmod +x {path}")
    elif shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise Blocked(f"{program!r} was not found on PATH",
                      f"install {program} (or activate the environment that has it) so that "
                      f"`command -v {program}` finds it, then run again")
