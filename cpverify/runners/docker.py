"""Run one arm in a Docker container through the Docker SDK for Python (docker-py).

One container per arm, created with the flags slime documents (`--gpus`, `--ipc=host`,
`--shm-size=16g`, `--ulimit memlock=-1`, `--ulimit stack=67108864`) and the SAME GPU ids
for every arm, so the arms differ only in what the plan says. The container's output is
streamed into the shared LogWatcher; the container is killed on any limit and removed in
every case (done, failed, killed, Ctrl-C). Every container carries labels so that a
crash of cpverify itself (kill -9, power loss) leaves something `sweep_leftovers` finds.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from cpverify import config
from cpverify.artifacts import check_run_id
from cpverify.doctor.probes import docker_engine_problem
from cpverify.errors import EnvironmentBlocked, InputError
from cpverify.model import Arm, ArmResult, Limits, Mount, Outcome
from cpverify.runners.base import BaseRunner, RunSetup
from cpverify.runners.watch import ProgressCallback
from cpverify.runners.workload_env import workload_env

log = logging.getLogger(__name__)

LABEL_MANAGED = "cpverify.managed"
LABEL_RUN = "cpverify.run"
LABEL_ARM = "cpverify.arm"
LABEL_OWNER = "cpverify.owner"  # "<hostname>:<pid>" of the cpverify process that made it
LABEL_OWNER_CONTAINER = "cpverify.owner_container"  # its container's id, when it runs in one
LABEL_GPUS = "cpverify.gpus"

# slime's documented `docker run` flags (docs and CI): RDMA needs locked memory, Megatron's
# deep recursion a large stack.
SLIME_ULIMITS: Mapping[str, int] = {"memlock": -1, "stack": 67108864}
SLIME_SHM_SIZE = "16g"

NVIDIA_FIX = (
    "install nvidia-container-toolkit and restart dockerd: "
    "`nvidia-ctk runtime configure --runtime=docker && systemctl restart docker`; "
    "check with `docker run --rm --gpus all ubuntu nvidia-smi`"
)
DOCKER_SOCKETS = {"/var/run/docker.sock", "/run/docker.sock"}

# While the log stream is open, the container's state is inspected only this often: the
# stream itself ends when the container stops. The inspection is the safety net for a
# follow-stream that stays open after the container exited
# (https://github.com/docker/docker-py/issues/3084).
_INSPECT_EVERY_S = 2.0
_REATTACH_ATTEMPTS = 5


def connect(client=None, *, timeout: float = 60):
    """A docker-py client that answers, or EnvironmentBlocked saying how to get one.

    `docker.from_env()` already talks to the daemon (API version negotiation), so both
    the construction and the ping are covered.
    """
    import docker.errors

    import docker

    try:
        if client is None:
            client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except docker.errors.DockerException as exc:
        raise _blocked_engine(exc) from exc
    except OSError as exc:  # raised bare by some transports
        raise _blocked_engine(exc) from exc


def _blocked_engine(exc: BaseException) -> EnvironmentBlocked:
    """The doctor's reading of an engine that does not answer (cpverify.doctor.probes), as this runner's error."""
    _cause, problem, fix = docker_engine_problem(f"{type(exc).__name__}: {exc}", host=config.docker_host())
    return EnvironmentBlocked(problem, fix=fix)


def sweep_leftovers(client, *, run_id: str | None = None) -> list[str]:
    """Remove cpverify containers left by earlier runs (crashes, kill -9); return their names.

    A container is a leftover only when its owner (the cpverify process that made it)
    is provably gone; another run's live arm, on other GPUs, is never touched:
      * owner in a container (cpverify under Compose): that container no longer runs;
      * owner on this host: its pid no longer runs;
      * owner elsewhere (cannot be checked): only when the container itself has stopped.
        A running one is kept, and named in a warning with the command that removes it.
    """
    import docker.errors

    labels = [f"{LABEL_MANAGED}=1"] + ([f"{LABEL_RUN}={run_id}"] if run_id else [])
    removed = []
    for container in client.containers.list(all=True, filters={"label": labels}):
        alive = _owner_alive(client, container.labels)
        if alive or (alive is None and container.status == "running"):
            level = logging.INFO if alive else logging.WARNING
            log.log(level, "keeping %s: its owner %s may still be running; if not: docker rm -f %s",
                    container.name, container.labels.get(LABEL_OWNER, "(unknown)"), container.name)
            continue
        try:
            container.remove(force=True, v=True)
        except docker.errors.NotFound:
            continue  # removed meanwhile
        removed.append(container.name)
    return removed


def _owner_alive(client, labels: Mapping[str, str]) -> bool | None:
    """Is the cpverify process that made a container still running? None: cannot tell."""
    import docker.errors

    owner_container = labels.get(LABEL_OWNER_CONTAINER)
    if owner_container:
        try:
            return client.containers.get(owner_container).status == "running"
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError:
            return None
    host, _, pid = labels.get(LABEL_OWNER, "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    if int(pid) == os.getpid():
        return False  # we are sweeping, so we run no arm right now
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, belongs to another user
    return True


_CONTAINER_MOUNT = re.compile(r"/containers/([0-9a-f]{64})/(?:hostname|hosts|resolv\.conf) ")


@functools.lru_cache(maxsize=1)
def _own_container() -> str | None:
    return own_container_id()


def own_container_id(mountinfo: str | None = None) -> str | None:
    """The id of the Docker container this process runs in, or None on a plain host.

    Docker bind-mounts /etc/hostname, /etc/hosts and /etc/resolv.conf from
    /var/lib/docker/containers/<id>/ into every container; /proc/self/mountinfo shows it.
    """
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    match = _CONTAINER_MOUNT.search(mountinfo)
    return match.group(1) if match else None


class DockerRunner(BaseRunner):
    name = "docker"
    isolated = True
    starting = "starting the container"

    def __init__(
        self,
        *,
        image: str,
        run_id: str,
        gpus: Sequence[int | str] | None = (0, 1),
        mounts: Iterable[Mount] = (),
        client=None,
        host_network: bool = False,
        shm_size: str = SLIME_SHM_SIZE,
        ulimits: Mapping[str, int] = SLIME_ULIMITS,
        drain_s: float = 5.0,
        poll_s: float = 0.1,
        kill_wait_s: float = 30.0,
        on_progress: ProgressCallback | None = None,
    ) -> None:
        """`gpus=None` runs without a GPU request (tests, CPU-only probes).

        `host_network` only for multi-node plans (NCCL and Ray need the hosts' interfaces);
        single-node arms keep Docker's default network.
        """
        super().__init__(drain_s=drain_s, poll_s=poll_s, on_progress=on_progress)
        check_run_id(run_id)  # a container label (docker) or a Ray submission id (ray)
        self.image = image
        self.run_id = run_id
        self.gpus = None if gpus is None else tuple(str(g) for g in gpus)
        self.mounts = tuple(_checked_mount(m) for m in mounts)
        self.host_network = host_network
        self.shm_size = shm_size
        self.ulimits = dict(ulimits)
        self.kill_wait_s = kill_wait_s
        self._client = client
        self._checked = False

    @classmethod
    def for_run(cls, setup: RunSetup) -> DockerRunner:
        if not setup.image:
            raise InputError("no image recorded for this run",
                             "run the image step first (`nox -s image`) or pass --image TAG")
        return cls(image=setup.image, run_id=setup.run_id, gpus=setup.gpus, mounts=setup.mounts,
                   on_progress=setup.on_progress, ulimits=SLIME_ULIMITS if setup.ulimits else {})

    def tool_runner(self) -> DockerRunner:
        """A sibling for GPU-less tools (compileall, the deep lint): the same image, mounts and engine;
        no GPU, no raised ulimits, a small /dev/shm."""
        return DockerRunner(image=self.image, run_id=self.run_id, gpus=None, mounts=self.mounts, client=self._client,
                            ulimits={}, shm_size="1g")

    def run_tool(self, tool: Arm, *, log_path: Path, timeout_s: float) -> tuple[int, str]:
        """In a throwaway container of the image, with the arms' mounts (see BaseRunner.run_tool)."""
        result = self.tool_runner().run_arm(tool, log_path=log_path,
                                            limits=Limits(deadline_s=timeout_s, hang_s=timeout_s, stall_s=10**9))
        if result.outcome == Outcome.BLOCKED:
            raise EnvironmentBlocked(result.reason, result.fix)
        code = result.exit_code if result.exit_code is not None else -1
        return code, (log_path.read_text(errors="replace") if log_path.exists() else result.reason)

    @property
    def client(self):
        self.preflight()
        return self._client

    def preflight(self) -> None:
        """Check the engine answers (once); raise EnvironmentBlocked with the fix if not."""
        if not self._checked:
            self._client = connect(self._client)
            self._checked = True

    def sweep_leftovers(self) -> list[str]:
        return [f"removed leftover container {name}" for name in sweep_leftovers(self.client)]

    def start(self, arm: Arm, log_path: Path) -> _ContainerState:
        import docker.errors

        client = self.client
        kwargs = self.create_kwargs(arm)
        container = None
        try:
            try:
                container = client.containers.create(**kwargs)
            except docker.errors.ImageNotFound:
                raise EnvironmentBlocked(f"image {self.image} is not on this Docker engine",
                                         f"build it (`nox -s image`) or pull it (`docker pull {self.image}`)") from None
            except docker.errors.APIError as exc:
                raise EnvironmentBlocked(f"Docker refused to create the container: {_explain(exc)}",
                                         "fix the setting Docker names above, then run again") from None
            try:
                container.start()
            except docker.errors.APIError as exc:
                # A failed start leaves the container in state `created` (docker-py does not
                # remove it): remove it now, or every failed attempt leaves one behind.
                _remove(container)
                raise EnvironmentBlocked(*self._start_failure(arm, exc)) from None
        except KeyboardInterrupt:
            # The daemon may have created the container although the call never returned:
            # remove it by name.
            if container is None:
                self._remove_named(client, kwargs["name"])
            else:
                _remove(container, interrupted=True)
            raise
        return _ContainerState(container, self.kill_wait_s)

    def _remove_named(self, client, name: str) -> None:
        import docker.errors

        try:
            _remove(client.containers.get(name))
        except docker.errors.NotFound:
            pass

    def create_kwargs(self, arm) -> dict:
        """The `containers.create` arguments for one arm (public so plans and tests can show them)."""
        from docker.types import DeviceRequest, LogConfig, Mount, Ulimit

        env, _ = workload_env(arm.env)  # the plan's env only: this machine's environment stays out
        kwargs = dict(
            image=self.image,
            command=[str(a) for a in arm.argv],
            environment=env,
            working_dir=str(arm.workdir) if arm.workdir else None,
            name=f"cpverify-{self.run_id}-{_slug(arm.name)}-{uuid.uuid4().hex[:6]}",
            labels={
                LABEL_MANAGED: "1",
                LABEL_RUN: self.run_id,
                LABEL_ARM: arm.name,
                LABEL_OWNER: f"{socket.gethostname()}:{os.getpid()}",
                LABEL_GPUS: ",".join(self.gpus) if self.gpus is not None else "none",
                **({LABEL_OWNER_CONTAINER: own} if (own := _own_container()) else {}),
            },
            shm_size=self.shm_size,
            ipc_mode="host",
            ulimits=[Ulimit(name=k, soft=v, hard=v) for k, v in self.ulimits.items()],
            mounts=[
                Mount(target=m.target, source=str(m.source), type="bind", read_only=m.read_only)
                for m in self.mounts
            ],
            # json-file whatever the daemon's default: the stream below needs a driver
            # Docker can read back (`none`, `syslog`, ... cannot be followed).
            log_config=LogConfig(type="json-file"),
            privileged=False,
        )
        if self.gpus is not None:
            kwargs["device_requests"] = [DeviceRequest(device_ids=list(self.gpus), capabilities=[["gpu"]])]
        if self.host_network:
            kwargs["network_mode"] = "host"
        return kwargs

    def _start_failure(self, arm, exc) -> tuple[str, str]:
        text = _explain(exc)
        if "could not select device driver" in text:
            return f"Docker has no GPU runtime: {text}", NVIDIA_FIX
        if "rlimit" in text and "operation not permitted" in text:
            return (
                f"the Docker daemon may not set the container's ulimits {self.ulimits}: {text}",
                "let dockerd raise them (systemd: `LimitMEMLOCK=infinity` in docker.service, then "
                "`systemctl restart docker`; rootless Docker cannot), or pass `cpverify run --no-ulimits` "
                "(single-node NVLink runs do not need them; NCCL over RDMA needs memlock unlimited)",
            )
        if "executable file not found" in text or "no such file or directory" in text:
            return (
                f"the image {self.image} cannot run {arm.argv[0]!r}: {text}",
                "check the image tag and the plan's command (is slime installed in this image?)",
            )
        return f"the container did not start: {text}", "fix what Docker names above, then run again"


def _remove(container, *, interrupted: bool = False) -> None:
    import docker.errors

    try:
        container.remove(force=True, v=True)
    except KeyboardInterrupt:
        # A second Ctrl-C while cleaning up: finish the removal, then honour it -- unless the
        # arm is already ending on an interrupt, whose result must still reach the verdict.
        _remove(container)
        if not interrupted:
            raise
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: a removal is already in progress
            log.warning(
                "could not remove container %s (%s); remove it with `docker rm -f %s`",
                container.name, _explain(exc), container.name,
            )


class _ContainerState:
    """The running container as the watcher sees it: a log stream, an exit code, a kill (the
    Workload of base.py)."""

    def __init__(self, container, kill_wait_s: float) -> None:
        self.container = container
        self.kill_wait_s = kill_wait_s
        self._stream_ended = False
        self._inspected_at = time.monotonic()

    def stream(self) -> Iterator[bytes]:
        """The container's output from its first byte, exactly once, until it stops.

        follow=True keeps the request open until the container stops, and the endpoint
        replays everything printed since start(), so attaching after start() loses
        nothing. docker-py switches the socket's read timeout off for such streams
        (https://github.com/docker/docker-py/issues/931), but a stream can still break
        (an older docker-py, a proxy in front of the engine, a daemon hiccup). Then we
        attach again: the replay starts at byte 0 of the same stored log, so skipping
        the bytes already delivered continues exactly where the break happened.
        """
        import docker.errors
        import requests.exceptions
        import urllib3.exceptions

        # docker-py reads the multiplexed stream from the raw urllib3 response, so a
        # break surfaces as urllib3's error, not requests'.
        broken = (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError,
                  docker.errors.APIError)
        delivered = 0
        failures = 0  # consecutive breaks with nothing new in between
        while True:
            skip, source = delivered, None
            try:
                source = self.container.logs(stream=True, follow=True, stdout=True, stderr=True)
                for chunk in source:
                    if skip:
                        if len(chunk) <= skip:
                            skip -= len(chunk)
                            continue
                        chunk, skip = chunk[skip:], 0
                    delivered += len(chunk)
                    failures = 0
                    yield chunk
                break  # the container stopped: the stream ended as it should
            except docker.errors.NotFound:
                break  # removed under us: nothing more to read
            except broken as exc:
                failures += 1
                if failures > _REATTACH_ATTEMPTS:
                    self._stream_ended = True
                    raise
                log.warning("log stream of %s broke (%s); attaching again", self.container.name, exc)
            finally:
                close = getattr(source, "close", None)
                if close is not None:
                    close()
        self._stream_ended = True

    def exit_code(self) -> int | None:
        import docker.errors

        now = time.monotonic()
        if not self._stream_ended and now - self._inspected_at < _INSPECT_EVERY_S:
            return None
        self._inspected_at = now
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return 137  # removed under us (docker rm -f by hand): treat as killed
        state = self.container.attrs.get("State", {})
        if state.get("Status") in ("exited", "dead"):
            return int(state.get("ExitCode", -1))
        return None

    def explain(self, result: ArmResult) -> ArmResult:
        return result

    def close(self, *, interrupted: bool) -> None:
        """Remove the container, whatever happened (a finished one too: it holds its log)."""
        _remove(self.container, interrupted=interrupted)

    def stop(self) -> None:
        """SIGKILL and wait until Docker reports the container stopped.

        `container.wait(timeout=...)` is only an HTTP read timeout, not a deadline for the
        workload (https://github.com/docker/docker-py/issues/1966, #2964): our own limits
        are enforced by the watcher; here it just bounds the wait after the kill.
        """
        import docker.errors
        import requests.exceptions

        try:
            self.container.kill()
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: not running any more, which is what we want
                raise
        try:
            self.container.wait(timeout=self.kill_wait_s)
        except (requests.exceptions.RequestException, docker.errors.NotFound):
            pass
        self._stream_ended = True  # from now on, inspect on every poll


def _checked_mount(mount: Mount) -> Mount:
    if not isinstance(mount, Mount):
        mount = Mount(*mount)
    source = Path(mount.source).expanduser()
    if not source.is_absolute():
        source = source.resolve()
    resolved = source.resolve()
    # The socket itself, or a directory holding it (/, /run, /var/run): either hands the
    # workload the engine, and with it root on the host.
    if any(Path(sock) == resolved or Path(sock).resolve().is_relative_to(resolved) for sock in DOCKER_SOCKETS):
        raise InputError(
            f"refusing to mount {source} into a workload: it is or contains the Docker socket",
            fix="mount only the directories the workload needs (model, data, artifacts)",
        )
    if not source.exists():
        raise InputError(
            f"mount source {source} does not exist",
            fix="create it, or fetch what belongs there first (`cpverify fetch`), then run again",
        )
    if not mount.target.startswith("/"):
        raise InputError(f"mount target {mount.target!r} is not an absolute path", fix="use an absolute path")
    return Mount(source, mount.target, mount.read_only)


def _explain(exc) -> str:
    explanation = getattr(exc, "explanation", None)
    return str(explanation or exc)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "arm"
