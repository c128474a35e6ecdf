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

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, cast

from cpverify.config import WORKLOAD_OWNER_ENV
from cpverify.errors import EnvironmentBlocked
from cpverify.model import Arm, ArmResult
from cpverify.runners.base import BaseRunner, RunSetup
from cpverify.runners.watch import ProgressCallback
from cpverify.runners.workload_env import workload_env


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
            raise EnvironmentBlocked(f"cannot start {argv[0]!r}: {exc.strerror or exc}",
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
        self._await_gone()

    def kill_leftovers(self) -> None:
        """Whatever happened, leave no process of this group running."""
        if self.proc.poll() is None or group_members(self.pgid):
            self._signal(signal.SIGKILL)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # unkillable (D state): nothing more to do from here
            pass
        self._await_gone()

    def _await_gone(self, timeout_s: float = 5.0) -> None:
        """Return once the group's processes are gone: a SIGKILL is delivered, not yet acted on, when
        kill() returns, and on a loaded host the members outlive it by a scheduling slice or more."""
        give_up = time.monotonic() + timeout_s
        while group_members(self.pgid) and time.monotonic() < give_up:  # unkillable (D state): give up
            time.sleep(0.01)

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
    """EnvironmentBlocked, naming the fix, when the command cannot start here: no command, no working
    directory, a program that is not an executable or not on the workload's PATH."""
    if not argv:
        raise EnvironmentBlocked("the arm has an empty command", "fix the plan: argv is empty")
    workdir = Path(workdir) if workdir else Path.cwd()
    if not workdir.is_dir():
        raise EnvironmentBlocked(f"working directory {workdir} does not exist",
                                 f"create {workdir} or point the plan's workdir at your slime checkout")
    program = argv[0]
    if os.sep in program:
        path = Path(program) if Path(program).is_absolute() else workdir / program
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise EnvironmentBlocked(f"{program} is not an executable file (looked in {workdir})",
                                     f"check the path, or make it executable: chmod +x {path}")
    elif shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise EnvironmentBlocked(f"{program!r} was not found on PATH",
                                 f"install {program} (or activate the environment that has it) so that "
                                 f"`command -v {program}` finds it, then run again")
