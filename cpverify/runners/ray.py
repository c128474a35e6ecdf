"""Run one arm as a Ray job through the Ray Jobs SDK (JobSubmissionClient), onto a cluster
the user already has: `cpverify run --runner ray --ray-address http://HEAD:8265`.

One job per arm, submitted as slime's own docs do it (`ray job submit -- python3 train.py ...`):

  * entrypoint: `cd <workdir> && exec <argv>`; the workdir is a path on the cluster (slime's
    checkout there), so nothing is uploaded. Only a workload that runs cpverify's own modules
    (the probe: `-m cpverify.probe.workload`) gets this cpverify uploaded as a `py_module`,
    so the orchestrator and the workload are the same version.
  * runtime_env env_vars: the plan's environment (workload_env.py), nothing of this machine's.
    Secret argv values (`--wandb-key X`, `--wandb-host=https://u:PW@h`) travel as env vars
    too and are referenced as "$VAR" in the entrypoint, because Ray echoes the entrypoint
    into the job's log.
  * GPUs: slime's train.py reserves its GPUs itself, through placement groups. A driver
    that also reserved them (`entrypoint_num_gpus`) would hold the very GPUs its placement
    groups wait for, and the job would hang on a node with exactly that many. So slime
    arms reserve none; `reserve_gpus=True` is for workloads that use the GPUs in the
    driver process itself (torchrun in the probe), where Ray must place the driver on a
    GPU node and set CUDA_VISIBLE_DEVICES. Either way the cluster is checked first: the
    largest alive node must hold the plan's GPUs (single-node plans).
  * submission id `cpverify-<run-id>-<arm>` (`-2`, `-3`, ... when re-run), metadata naming
    run, arm and owner, so `ray job list` says what each job is.

Logs are followed with `tail_job_logs` (a websocket that sends only new text) from the
watcher's reader thread, on an event loop of its own. Polling `get_job_logs` would be
simpler but re-downloads the whole log every poll: a slime arm with NCCL_DEBUG=INFO writes
tens of MB, which at one poll per second is gigabytes per arm and seconds of lag. The
websocket's weak spots are covered: a broken stream is re-attached (the server replays
from the first byte, and the text already delivered is skipped, as the Docker runner
does), and when the stream cannot be had, or ends before the job does, the runner falls
back to `get_job_logs` and emits only the missing suffix, until the job is terminal. So
the log on disk is complete whatever the network does.

The job's status is polled to a terminal state (SUCCEEDED / FAILED / STOPPED); on
deadline, hang, stall, fatal signature or Ctrl-C the runner calls `stop_job` and waits
until Ray reports the job terminal (Ray SIGTERMs the entrypoint's process tree, then
SIGKILLs it after RAY_JOB_STOP_WAIT_TIME_S). `import ray` happens only in here, lazily.
"""

from __future__ import annotations

import asyncio
import logging
import os
import posixpath
import re
import shlex
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from cpverify.artifacts import check_run_id
from cpverify.errors import EnvironmentBlocked, InputError
from cpverify.model import Arm, ArmResult, Outcome
from cpverify.redact import secret_arguments
from cpverify.runners.base import BaseRunner, RunSetup
from cpverify.runners.watch import ProgressCallback
from cpverify.runners.workload_env import workload_env

log = logging.getLogger(__name__)

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
# Ray's job error types that mean "the environment could not run the command at all".
_SETUP_FAILURES = (
    "RUNTIME_ENV_SETUP_FAILURE", "JOB_SUPERVISOR_ACTOR_START_TIMEOUT", "JOB_SUPERVISOR_ACTOR_START_FAILURE",
    "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE", "JOB_ENTRYPOINT_COMMAND_START_ERROR",
)
# The entrypoint prints this (and exits 2) when the arm's workdir is missing on the node.
_NO_WORKDIR = "cpverify-ray: no working directory"
_EXIT_STOPPED = 143  # a stopped job has no exit code; shell convention for SIGTERM
_REATTACH_ATTEMPTS = 3  # then poll instead: as complete, only less efficient
_MAX_ATTEMPT_IDS = 100

RAY_FIX = (
    "start a head (`ray start --head --dashboard-host 0.0.0.0`) or pass the dashboard address of a "
    "running one, e.g. --ray-address http://HEAD:8265 (check with `ray job list --address http://HEAD:8265`)"
)


def normalize_address(address: str | None) -> str:
    """The dashboard URL the Jobs API needs: `HEAD:8265` -> `http://HEAD:8265`.

    Without a scheme the SDK takes the address for a GCS address and waits 40 s for a GCS
    that is not there; `ray://` is Ray Client, which has no Jobs API.
    """
    address = (address or "").strip().rstrip("/")
    if not address:
        raise InputError("no Ray address given", "pass --ray-address http://HEAD:8265 (or set RAY_ADDRESS)")
    if address.startswith("ray://"):
        raise InputError(
            f"{address} is a Ray Client address; the Ray runner submits jobs through the dashboard",
            f"use the dashboard address instead, e.g. --ray-address http://{address[6:].split(':')[0]}:8265",
        )
    if "://" not in address:
        address = "http://" + address
    return address


def connect(address: str, *, timeout: float = 10.0):
    """A JobSubmissionClient for `address`, or EnvironmentBlocked saying how to get one.

    The dashboard is asked for its version with a timeout first: the SDK's own check has
    none, and a firewalled host would hang for the OS's connect timeout (minutes).
    """
    import requests

    address = normalize_address(address)
    try:
        response = requests.get(f"{address}/api/version", timeout=timeout)
        response.raise_for_status()
        response.json()["ray_version"]
    except (requests.RequestException, ValueError, KeyError) as exc:
        raise EnvironmentBlocked(f"no Ray dashboard answers at {address}: {_short(exc)}", RAY_FIX) from exc
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as exc:
        raise EnvironmentBlocked(
            f"the Ray Jobs SDK is not importable: {exc}", "pip install 'ray[default]' (or 'cpverify[ray]')"
        ) from exc
    try:
        return JobSubmissionClient(address)
    except (ConnectionError, RuntimeError) as exc:  # version mismatch, auth, dashboard half up
        raise EnvironmentBlocked(f"the Ray Jobs API at {address} refused: {_short(exc)}", RAY_FIX) from exc


def node_gpus(address: str, *, timeout: float = 30.0) -> list[float]:
    """GPUs of every alive node, from the dashboard's state API (no driver is connected)."""
    from ray.util.state import list_nodes

    try:
        nodes = list_nodes(address=normalize_address(address), filters=[("state", "=", "ALIVE")], timeout=int(timeout),
                           detail=True, raise_on_missing_output=False)
    except Exception as exc:  # RayStateApiException, ConnectionError, ...: we cannot tell, so we do not start
        raise EnvironmentBlocked(
            f"could not list the nodes of the Ray cluster at {address}: {_short(exc)}",
            "check `ray status` on the head; the dashboard's state API must answer",
        ) from exc
    return [float((getattr(n, "resources_total", None) or {}).get("GPU", 0)) for n in nodes]


def check_gpus(address: str, needed: int, *, timeout: float = 30.0) -> None:
    """EnvironmentBlocked unless one alive node has `needed` GPUs (the plans are single-node)."""
    if needed <= 0:
        return
    per_node = node_gpus(address, timeout=timeout)
    largest = max(per_node, default=0.0)
    if largest >= needed:
        return
    raise EnvironmentBlocked(
        f"the Ray cluster at {address} has too few GPUs: its largest node has {largest:g} "
        f"(cluster total {sum(per_node):g} on {len(per_node)} node(s)); this plan needs {needed} on one node",
        f"join a node with {needed} GPUs (`ray start --address HEAD:6379 --num-gpus {needed}` on a GPU host), or "
        f"plan for fewer GPUs (--set gpus=N --gpus N); `ray status --address {address}` shows the resources",
    )


def submission_id(run_id: str, arm_name: str, attempt: int = 1) -> str:
    """`cpverify-<run-id>-<arm>`, and `-<attempt>` from the second submission of the same arm on."""
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", f"cpverify-{run_id}-{arm_name}").strip("-")
    return base if attempt == 1 else f"{base}-{attempt}"


def entrypoint(arm) -> tuple[str, dict[str, str]]:
    """(the shell command Ray runs, env vars that carry the secret-looking argv values)."""
    argv = [str(a) for a in arm.argv]
    if not argv:
        raise InputError(f"arm {arm.name} has an empty command", "fix the plan: argv is empty")
    hidden: dict[str, str] = {}
    words = []
    secrets = secret_arguments(argv)
    for i, word in enumerate(argv):
        if i not in secrets:
            words.append(shlex.quote(word))
            continue
        name = f"CPVERIFY_SECRET_ARG_{i}"
        hidden[name] = secrets[i]
        flag = word[: len(word) - len(secrets[i]) - 1] if word != secrets[i] else ""
        words.append(f'{shlex.quote(flag)}="${name}"' if flag else f'"${name}"')
    command = "exec " + " ".join(words)
    workdir = str(arm.workdir or ".")
    if workdir != ".":
        if not posixpath.isabs(workdir):
            raise InputError(
                f"arm {arm.name}: workdir {workdir!r} is relative; a Ray job needs a path that exists on the nodes",
                "pass an absolute path, e.g. --slime-dir /root/slime (the checkout on the cluster)",
            )
        quoted = shlex.quote(workdir)
        command = f"cd {quoted} 2>/dev/null || {{ echo {shlex.quote(f'{_NO_WORKDIR} {workdir}')}; exit 2; }}; {command}"
    return command, hidden


def _runs_cpverify(argv) -> bool:
    words = [str(a) for a in argv]
    return any(prev == "-m" and (word == "cpverify" or word.startswith("cpverify.")) for prev, word in pairwise(words))


class RayRunner(BaseRunner):
    name = "ray"
    remote = True
    starting = "submitting the Ray job"

    def __init__(
        self,
        *,
        address: str,
        run_id: str,
        gpus: int = 0,
        reserve_gpus: bool = False,
        client=None,
        connect_timeout_s: float = 10.0,
        status_every_s: float = 1.0,
        stop_wait_s: float = 60.0,
        drain_s: float = 5.0,
        poll_s: float = 0.1,
        on_progress: ProgressCallback | None = None,
    ) -> None:
        """`gpus`: GPUs the plan needs on one node (0: no check, CPU-only tests).
        `reserve_gpus`: reserve them for the entrypoint (the probe) instead of letting the
        workload's placement groups take them (slime); see the module docstring."""
        super().__init__(drain_s=drain_s, poll_s=poll_s, on_progress=on_progress)
        check_run_id(run_id)  # part of the Ray submission id
        if gpus < 0:
            raise InputError(f"gpus={gpus} must be >= 0", "pass the plan's GPU count")
        self.address = normalize_address(address)
        self.run_id = run_id
        self.gpus = int(gpus)
        self.reserve_gpus = reserve_gpus
        self.connect_timeout_s = connect_timeout_s
        self.status_every_s = status_every_s
        self.stop_wait_s = stop_wait_s
        self._client = client
        self._checked = False

    @classmethod
    def check(cls, setup: RunSetup) -> None:
        if not setup.ray_address:
            raise InputError("--runner ray needs --ray-address",
                             "pass the dashboard address, e.g. --ray-address http://HEAD:8265")

    @classmethod
    def for_run(cls, setup: RunSetup) -> RayRunner:
        cls.check(setup)
        # slime's train.py reserves its GPUs through placement groups; a workload that uses them in
        # its driver (the probe's torchrun) reserves them itself (see the module docstring)
        return cls(address=str(setup.ray_address), run_id=setup.run_id, gpus=len(setup.gpus or ()),
                   reserve_gpus=setup.reserve_gpus, on_progress=setup.on_progress)

    def preflight(self) -> None:
        """Dashboard reachable and enough GPUs on one node (once); else EnvironmentBlocked."""
        if not self._checked:
            if self._client is None:
                self._client = connect(self.address, timeout=self.connect_timeout_s)
            check_gpus(self.address, self.gpus)
            self._checked = True

    def job_spec(self, arm) -> dict:
        """The `submit_job` keyword arguments for one arm (public so plans and tests can show them)."""
        command, hidden = entrypoint(arm)
        env, _ = workload_env(arm.env)  # the plan's env only: this machine's environment is not the cluster's
        runtime_env: dict = {"env_vars": {**env, **hidden}}
        if _runs_cpverify(arm.argv):
            import cpverify

            runtime_env["py_modules"] = [str(Path(cpverify.__file__).resolve().parent)]
        spec: dict[str, Any] = {
            "entrypoint": command,
            "runtime_env": runtime_env,
            "metadata": {"cpverify.run": self.run_id, "cpverify.arm": arm.name,
                         "cpverify.owner": f"{socket.gethostname()}:{os.getpid()}"},
        }
        if self.reserve_gpus and self.gpus:
            spec["entrypoint_num_gpus"] = self.gpus
        return spec

    def start(self, arm: Arm, log_path: Path) -> _RayJob:
        client = self._client
        spec = self.job_spec(arm)
        log_path.parent.mkdir(parents=True, exist_ok=True)  # fail before a GPU job exists, not after
        trying = None
        try:
            for attempt in range(1, _MAX_ATTEMPT_IDS + 1):
                trying = submission_id(self.run_id, arm.name, attempt)
                try:
                    client.submit_job(submission_id=trying, **spec)
                    break
                except OSError as exc:  # requests' errors are OSErrors: the dashboard went away since preflight
                    raise EnvironmentBlocked(f"the Ray dashboard at {self.address} stopped answering: {_short(exc)}",
                                             RAY_FIX) from None
                except RuntimeError as exc:
                    if "already exists" not in str(exc):
                        raise EnvironmentBlocked(f"Ray refused the job: {_short(exc)}",
                                                 "fix what Ray names above (see `ray job list`), then run again") from None
                    status = _status(client, trying)
                    if status not in TERMINAL:
                        raise EnvironmentBlocked(f"Ray job {trying} of this arm is still {status or 'there'} (an earlier "
                                                 "cpverify run that did not finish)",
                                                 f"wait for it, or stop it: `ray job stop {trying} --address {self.address}`"
                                                 ) from None
            else:
                raise EnvironmentBlocked(f"{_MAX_ATTEMPT_IDS} jobs of this arm exist already",
                                         "use a new run id (--run-id), or delete old jobs with `ray job delete`")
        except KeyboardInterrupt:
            # Ctrl-C while submitting: the job may exist although the call never returned.
            if trying is not None:
                _stop_quietly(client, trying, self.stop_wait_s)
            raise
        return _RayJob(client, trying, status_every_s=self.status_every_s, stop_wait_s=self.stop_wait_s,
                       stream_grace_s=self.drain_s)


class _RayJob:
    """One submitted job as the watcher sees it: a log stream, an exit code, a stop (the Workload
    of base.py)."""

    def __init__(self, client, job_id: str, *, status_every_s: float, stop_wait_s: float,
                 stream_grace_s: float) -> None:
        self.client = client
        self.job_id = job_id
        self.status_every_s = status_every_s
        self.stop_wait_s = stop_wait_s
        self.stream_grace_s = stream_grace_s
        self.info = None  # the last JobInfo read
        self.started = False  # seen RUNNING (or past it): Ray found the resources and ran the entrypoint
        self.stopped_by_us = False
        self.missing_workdir = ""
        self._checked_at = float("-inf")
        self._terminal_at: float | None = None
        self._stream_done = threading.Event()
        self._abandon = threading.Event()

    # -- status -------------------------------------------------------------------------------

    def _refresh(self):
        if _status_text(self.info) in TERMINAL:
            return self.info  # terminal is final: no more requests
        try:
            self.info = self.client.get_job_info(self.job_id)
        except Exception as exc:  # a dashboard hiccup: keep the last answer, the limits still run
            log.warning("could not read the status of Ray job %s: %s", self.job_id, _short(exc))
        if self.info is not None and (_status_text(self.info) in ("RUNNING", "SUCCEEDED", "FAILED")
                                      or getattr(self.info, "driver_node_id", None)):
            self.started = True
        return self.info

    @property
    def status(self) -> str | None:
        return _status_text(self.info)

    def exit_code(self) -> int | None:
        """None while the job runs; its exit code once terminal and its log has been read."""
        now = time.monotonic()
        if self._terminal_at is None:
            if not self._stream_done.is_set() and now - self._checked_at < self.status_every_s:
                return None
            self._checked_at = now
            if _status_text(self._refresh()) not in TERMINAL:
                return None
            self._terminal_at = now
        # Terminal: give the stream a moment to deliver the last lines before reporting the end.
        if not self._stream_done.is_set() and now - self._terminal_at < self.stream_grace_s:
            return None
        return _exit_code(self.info)

    def stop(self) -> None:
        """stop_job, then wait until Ray reports the job terminal (bounded by stop_wait_s).

        A job still PENDING cannot be stopped at once: Ray delivers the stop to the job's
        supervisor actor, which is not scheduled yet (it then stops the job as soon as it
        starts, or Ray fails the job after RAY_JOB_START_TIMEOUT_SECONDS, 900 s by default).
        Such a job holds no resources, so waiting the full stop_wait_s would buy nothing.
        """
        self.stopped_by_us = True
        self._refresh()
        wait = self.stop_wait_s if self.started else min(self.stop_wait_s, 5.0)
        _stop_quietly(self.client, self.job_id, wait, quiet=not self.started)
        self._refresh()

    def close(self, *, interrupted: bool = False) -> None:
        """Whatever happened, leave no job running, and let the reader thread go."""
        try:
            if _status_text(self._refresh()) not in TERMINAL and not self.stopped_by_us:
                self.stop()
        finally:
            self._abandon.set()

    def explain(self, result: ArmResult) -> ArmResult:
        """Ray's view of an ending the watcher could only see as an exit code."""
        info, status = self.info, self.status
        error_type = str(getattr(getattr(info, "error_type", None), "value", getattr(info, "error_type", "")) or "")
        if self.missing_workdir:
            return replace(result, outcome=Outcome.BLOCKED, reason=f"{self.missing_workdir} (Ray job {self.job_id})",
                           fix="point --slime-dir at the checkout as the Ray nodes see it (an absolute path that "
                               "exists on the node that runs the job)")
        if result.outcome in (Outcome.HANG, Outcome.STALLED, Outcome.DEADLINE) and not self.started:
            pending = status not in TERMINAL
            return replace(result, reason=f"{result.reason}; Ray job {self.job_id} never started: it stayed PENDING, "
                                          "waiting for resources" + (
                                              " (it holds none; Ray stops it once it is scheduled, or fails it after "
                                              "RAY_JOB_START_TIMEOUT_SECONDS)" if pending else ""),
                           fix="free the cluster (`ray status`, `ray job list`: another job may hold the GPUs or "
                               f"CPUs), or ask for fewer resources; `ray job stop {self.job_id}` if it is still listed")
        if result.outcome != Outcome.FAILED:
            return result
        if error_type in _SETUP_FAILURES:
            message = " ".join(str(getattr(info, "message", "") or "").split())[:600]
            return replace(result, outcome=Outcome.BLOCKED, exit_code=None,
                           reason=f"Ray could not start job {self.job_id} ({error_type}): {message}",
                           fix="fix the cluster side Ray names above (runtime env, resources), then run again")
        if result.exit_code == 127:
            return replace(result, outcome=Outcome.BLOCKED,
                           reason=f"the command was not found on the Ray node (exit 127, Ray job {self.job_id})",
                           fix="install the workload on the Ray nodes (slime's image), or check the plan's command")
        if status == "STOPPED" and not self.stopped_by_us:
            return replace(result, reason=f"Ray job {self.job_id} was stopped from outside cpverify "
                                          "(`ray job stop` or the dashboard)",
                           fix="re-run when the cluster is free")
        return replace(result, reason=f"{result.reason} (Ray job {self.job_id})" if result.reason else result.reason)

    # -- the log ------------------------------------------------------------------------------

    def stream(self) -> Iterator[str]:
        """The job's log from its first character, exactly once, until the job is terminal.

        Runs in the watcher's reader thread, with an event loop of its own for the SDK's
        async `tail_job_logs`.
        """
        loop = asyncio.new_event_loop()
        delivered = 0
        try:
            failures = 0
            while not self._abandon.is_set():
                skip = delivered
                try:
                    for chunk in self._tail(loop):
                        if skip:
                            if len(chunk) <= skip:
                                skip -= len(chunk)
                                continue
                            chunk, skip = chunk[skip:], 0
                        delivered += len(chunk)
                        failures = 0
                        self._look_for_markers(chunk, delivered)
                        yield chunk
                    break  # the server closed the stream: the job is terminal and its log read
                except Exception as exc:  # websocket closed abnormally, dashboard restarting, ...
                    failures += 1
                    if failures > _REATTACH_ATTEMPTS:
                        log.warning("following Ray job %s broke %d times (%s); polling its log instead",
                                    self.job_id, failures, _short(exc))
                        break
                    log.warning("following Ray job %s broke (%s); attaching again", self.job_id, _short(exc))
                    time.sleep(0.5 * failures)
            # Whatever ended the stream, the file on disk must hold the whole log.
            yield from self._poll_rest(delivered)
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                self._stream_done.set()

    def _tail(self, loop: asyncio.AbstractEventLoop) -> Iterator[str]:
        """Chunks of `tail_job_logs`, driven on `loop`, abandoned promptly when asked to."""
        agen = self.client.tail_job_logs(self.job_id)

        async def next_chunk():
            try:
                return True, await agen.__anext__()
            except StopAsyncIteration:
                return False, None

        pending = None
        try:
            while True:
                if pending is None:
                    pending = loop.create_task(next_chunk())
                # Wait in slices, not for ever: the runner may give up on this stream (close()).
                loop.run_until_complete(asyncio.wait({pending}, timeout=0.5))
                if not pending.done():
                    if self._abandon.is_set():
                        return
                    continue
                more, chunk = pending.result()
                pending = None
                if not more:
                    return
                if chunk:
                    yield chunk
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
                loop.run_until_complete(asyncio.wait({pending}))
            try:
                loop.run_until_complete(agen.aclose())
            except Exception:  # closing a broken websocket may raise again; it is closed either way
                pass

    def _poll_rest(self, delivered: int) -> Iterator[str]:
        """Poll `get_job_logs` and yield only text beyond `delivered`, until the job is terminal."""
        failures = 0
        while True:
            terminal = _status_text(self._refresh()) in TERMINAL
            try:
                text = self.client.get_job_logs(self.job_id)
                failures = 0
            except Exception as exc:
                failures += 1
                if failures > _REATTACH_ATTEMPTS or self._abandon.is_set():
                    raise
                log.warning("could not read the log of Ray job %s: %s", self.job_id, _short(exc))
                time.sleep(self.status_every_s)
                continue
            if len(text) > delivered:
                chunk = text[delivered:]
                delivered = len(text)
                self._look_for_markers(chunk, delivered)
                yield chunk
            if terminal or self._abandon.is_set():
                return
            time.sleep(self.status_every_s)

    def _look_for_markers(self, chunk: str, delivered: int) -> None:
        # The marker is printed before the workload starts: only the first text can hold it.
        # Ray echoes the entrypoint (which contains the text) first: only a line that starts with it counts.
        if self.missing_workdir or delivered - len(chunk) >= 65536 or _NO_WORKDIR not in chunk:
            return
        for line in chunk.splitlines():
            if line.startswith(_NO_WORKDIR):
                self.missing_workdir = line.strip().replace(_NO_WORKDIR, "no working directory", 1) + " on the Ray node"
                return


# -- helpers ----------------------------------------------------------------------------------

def _status_text(info) -> str | None:
    status = getattr(info, "status", None)
    if status is None:
        return None
    return str(getattr(status, "value", status))


def _status(client, job_id: str) -> str | None:
    try:
        return _status_text(client.get_job_info(job_id))
    except Exception:
        return None


def _exit_code(info) -> int:
    code = getattr(info, "driver_exit_code", None)
    status = _status_text(info)
    if code is not None:
        code = int(code)
        return 128 - code if code < 0 else code  # killed by signal N -> 128+N, as the other runners report
    if status == "SUCCEEDED":
        return 0
    return _EXIT_STOPPED if status == "STOPPED" else 1


def _stop_quietly(client, job_id: str, wait_s: float, *, quiet: bool = False) -> bool:
    """stop_job and wait for a terminal status; True when Ray reports one in time."""
    try:
        client.stop_job(job_id)
    except Exception as exc:  # already gone, or not created after all
        log.debug("stop_job(%s): %s", job_id, _short(exc))
    give_up = time.monotonic() + wait_s
    while True:
        status = _status(client, job_id)
        if status in TERMINAL:
            return True
        if time.monotonic() > give_up:
            if not quiet:
                log.warning("Ray job %s is still %s after stop; stop it by hand: `ray job stop %s`",
                            job_id, status, job_id)
            return False
        time.sleep(0.2)


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:400]
