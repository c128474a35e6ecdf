"""The runner protocol (`preflight`, `sweep_leftovers`, `run_arm`) and `BaseRunner`, the one base
every runner is built on: its `run_arm` is the skeleton all three share, so that none repeats it
(ARCHITECTURE.md, "Runners", and there "Adding a runner")."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from cpverify.artifacts import atomic_write_text
from cpverify.errors import EnvironmentBlocked, InputError
from cpverify.model import Arm, ArmInterrupted, ArmResult, Limits, Mount, Outcome
from cpverify.runners.watch import Chunk, LogWatcher, ProgressCallback, terminate_as_interrupt
from cpverify.runners.workload_env import secret_values, workload_env


class Runner(Protocol):
    """What the pipeline asks of a runner (BaseRunner implements it)."""

    name: ClassVar[str]

    def preflight(self) -> None: ...

    def sweep_leftovers(self) -> list[str]: ...

    def run_arm(self, arm: Arm, *, log_path: Path, limits: Limits) -> ArmResult: ...


class Workload(Protocol):
    """One started workload as the watcher sees it (the shape of a container, a process group, a
    Ray job): used once, by one BaseRunner.run_arm."""

    def stream(self) -> Iterable[Chunk]:
        """Its output from the first byte, exactly once, until it ends (read in the watcher's thread)."""

    def exit_code(self) -> int | None:
        """None while it runs; its exit code (128 + N when killed by signal N) once it has ended."""

    def stop(self) -> None:
        """End it now and return once it has ended (a second Ctrl-C meanwhile: at once)."""

    def close(self, *, interrupted: bool) -> None:
        """Leave nothing of it running or stored, whatever happened (called exactly once)."""

    def explain(self, result: ArmResult) -> ArmResult:
        """The runner's own view of how it ended, where the exit code alone does not say it."""


@dataclass(frozen=True)
class RunSetup:
    """What one run tells whichever runner runs its arms (cpverify.pipeline fills it in; each runner
    takes what it needs in `for_run`)."""

    run_id: str = ""
    gpus: tuple[int, ...] | None = None  # the plan's GPUs; None: no GPU request at all (--gpus none, pipeline tests)
    pin_gpus: bool = False  # --gpus was given: a runner that shares this machine shows the workload only those
    reserve_gpus: bool = False  # the workload uses the GPUs itself (the probe's torchrun), not through Ray
    mounts: tuple[Mount, ...] = ()  # what an isolated workload sees where (the run's cache, checkouts, work dir)
    image: str | None = None  # the image an isolated workload runs in
    ulimits: bool = True  # raise memlock and stack as slime documents (off: --no-ulimits)
    ray_address: str | None = None
    on_progress: ProgressCallback | None = None


def _bytes(part: bytes | str | None) -> bytes:
    return part.encode("utf-8", "replace") if isinstance(part, str) else part or b""


def blocked_result(arm: str, log_path: Path, started: float, reason: str, fix: str) -> ArmResult:
    """The result of an arm that could not start: BLOCKED, no exit code, the reason and the fix."""
    return ArmResult(arm=arm, outcome=Outcome.BLOCKED, exit_code=None, log_path=log_path,
                     duration_s=time.monotonic() - started, reason=reason, fix=fix)


class BaseRunner:
    """The shared skeleton of run_arm. A subclass names itself, says where its workloads run (the
    class attributes the pipeline reads instead of the runner's name), builds itself from a run
    (`for_run`) and implements `start`; `preflight` and `sweep_leftovers` when it has something to
    check or clean."""

    name: ClassVar[str]
    # The workload runs in the image, in a container of its own: it sees the run's directories
    # where `RunSetup.mounts` puts them, and GPU-less tools run in a throwaway container too.
    isolated: ClassVar[bool] = False
    # The workload runs on other machines (a cluster): paths, checkouts and the Python are theirs,
    # this machine's GPUs are not the workload's.
    remote: ClassVar[bool] = False
    # What Ctrl-C during start() interrupted, for the result's reason ("starting the container").
    starting: ClassVar[str] = "starting the workload"

    def __init__(self, *, drain_s: float = 5.0, poll_s: float = 0.1,
                 on_progress: ProgressCallback | None = None) -> None:
        self.drain_s = drain_s
        self.poll_s = poll_s
        self.on_progress = on_progress

    @classmethod
    def for_run(cls, setup: RunSetup) -> BaseRunner:
        """This runner, built for the run `setup` describes (the factory, cpverify.runners, calls it)."""
        raise NotImplementedError

    @classmethod
    def check(cls, setup: RunSetup) -> None:
        """Raise InputError for a setup this runner would refuse later (checked before any step runs)."""

    def preflight(self) -> None:
        """Raise EnvironmentBlocked (with the fix) when this runner cannot work here at all."""

    def sweep_leftovers(self) -> list[str]:
        """Remove what runs killed outright left running (their containers, processes); one line
        each ("removed leftover container X"). Never touches a live run's workload."""
        return []

    def start(self, arm: Arm, log_path: Path) -> Workload:
        """Get the arm's workload going. Raises EnvironmentBlocked when it cannot start; on KeyboardInterrupt,
        undoes what it began, then re-raises."""
        raise NotImplementedError

    def run_tool(self, tool: Arm, *, log_path: Path, timeout_s: float) -> tuple[int, str]:
        """Run a GPU-less command (compileall, the deep lint, writing rollouts) where the arms run, in
        `tool.workdir`, with no GPU visible: (exit code, output), the output also kept at `log_path`.
        Raises EnvironmentBlocked when it cannot start at all. Here: a subprocess on this machine (for a
        remote runner, the checkout as the user points at it), its environment as an arm's."""
        if not Path(tool.workdir).is_dir():  # Ray: the checkout as the cluster's nodes see it
            raise EnvironmentBlocked(f"{tool.name}: the slime checkout {tool.workdir} is not on this machine",
                                     "run cpverify on a machine that sees the checkout at the same path (the Ray "
                                     "head, on a shared filesystem)")
        env, _dropped = workload_env(tool.env, base=os.environ)  # tokens are for fetch only
        env["CUDA_VISIBLE_DEVICES"] = ""  # nothing here may hold a GPU
        argv = list(tool.argv)
        try:
            proc = subprocess.run(argv, cwd=tool.workdir, capture_output=True, text=True, env=env, check=False,
                                  timeout=timeout_s)
            code, output = proc.returncode, proc.stdout + proc.stderr
        except FileNotFoundError:
            raise EnvironmentBlocked(f"{argv[0]!r} was not found on PATH",
                                     f"activate the environment that runs slime so that `command -v {argv[0]}` "
                                     "finds it") from None
        except subprocess.TimeoutExpired as exc:
            # TimeoutExpired carries bytes even with text=True
            printed = b"".join(_bytes(part) for part in (exc.stdout, exc.stderr)).decode("utf-8", "replace")
            code, output = -1, f"{printed}\n{tool.name}: no result after {timeout_s:.0f}s"
        atomic_write_text(log_path, output)  # never through a link planted at the log's name
        return code, output

    def run_arm(self, arm: Arm, *, log_path: Path | str, limits: Limits) -> ArmResult:
        log_path = Path(log_path)
        started = time.monotonic()
        # SIGTERM and SIGHUP are an interrupt for the whole arm: the workload must not outlive us.
        with terminate_as_interrupt():
            try:
                self.preflight()
                workload = self.start(arm, log_path)
            except (EnvironmentBlocked, InputError) as exc:
                return blocked_result(arm.name, log_path, started, exc.problem, exc.fix)
            except KeyboardInterrupt as exc:
                raise self._interrupted(arm, log_path, started, f"interrupted while {self.starting}", exc) from None
            interrupted = False
            try:
                watcher = LogWatcher(log_path, limits, arm_name=arm.name, on_progress=self.on_progress,
                                     drain_s=self.drain_s, poll_s=self.poll_s,
                                     secrets=secret_values(arm.env, arm.argv, os.environ))
                result = watcher.watch(workload.stream(), stop=workload.stop, poll_exit=workload.exit_code)
                return workload.explain(result)
            except KeyboardInterrupt as exc:  # the watcher's own ArmInterrupted, or one outside its watch
                interrupted = True
                raise self._interrupted(arm, log_path, started, "interrupted (Ctrl-C)", exc) from None
            finally:
                workload.close(interrupted=interrupted)

    @staticmethod
    def _interrupted(arm: Arm, log_path: Path, started: float, reason: str, exc: KeyboardInterrupt) -> ArmInterrupted:
        if isinstance(exc, ArmInterrupted):
            return exc
        return ArmInterrupted(ArmResult(arm=arm.name, outcome=Outcome.INTERRUPTED, exit_code=None, log_path=log_path,
                                        duration_s=time.monotonic() - started, reason=reason, fix="re-run when ready"))
