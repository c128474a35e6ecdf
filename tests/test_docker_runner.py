"""DockerRunner against the REAL Docker engine, with the busybox test image.

Workloads are tests/images/workload.sh (slime/NCCL log lines) inside the container.
This engine has no NVIDIA runtime, so GPU containers are tested for the way they fail
("blocked" with the fix); everything else runs with `gpus=None`.

The default ulimits (memlock unlimited) need a daemon allowed to raise them; CI VMs often
are not, so most tests pass `ulimits=UNPRIVILEGED` and one test checks the default.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from cpverify.doctor.probes import DOCKER_FIXES
from cpverify.errors import EnvironmentBlocked, InputError
from cpverify.model import Limits, Mount, Outcome
from cpverify.parse import parse_file
from cpverify.runners.docker import (
    LABEL_ARM,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_OWNER_CONTAINER,
    LABEL_RUN,
    NVIDIA_FIX,
    SLIME_ULIMITS,
    DockerRunner,
    connect,
    own_container_id,
    sweep_leftovers,
)
from helpers.docker_env import run_once
from helpers.nobody import as_nobody
from helpers.pyimage import removed_after
from helpers.runner_util import TESTS, arm, wait_for

UNPRIVILEGED = {"stack": 67108864}
LIMITS = Limits(deadline_s=20, hang_s=5, stall_s=10)


def workload(name: str, *args: str, **kw):
    return arm(name, "sh", "/workload.sh", *args, workdir="/work", **kw)


def runner_for(docker_client, test_image, run_id, **options):
    options.setdefault("gpus", None)
    options.setdefault("ulimits", UNPRIVILEGED)
    return DockerRunner(image=test_image, run_id=run_id, client=docker_client, **options)


def containers_of(client, run_id):
    return client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})


@pytest.mark.docker
def test_output_streams_live_and_the_container_is_configured_as_slime_needs(
    docker_client, test_image, run_id, tmp_path
):
    log_path = tmp_path / "live.log"
    box = {}
    runner = runner_for(docker_client, test_image, run_id)
    thread = threading.Thread(target=lambda: box.update(result=runner.run_arm(
        workload("live", "train", "8", "0.3"), log_path=log_path, limits=LIMITS)))
    thread.start()
    try:
        two_steps = wait_for(lambda: log_path.exists() and log_path.read_text().count(" - step ") >= 2, 15)
        running = [c for c in containers_of(docker_client, run_id) if c.status == "running"]
        assert two_steps and len(running) == 1, "lines must reach the file while the container runs"
        attrs = running[0].attrs
    finally:
        thread.join(30)
    host = attrs["HostConfig"]
    assert running[0].labels[LABEL_MANAGED] == "1" and running[0].labels[LABEL_ARM] == "live"
    assert host["IpcMode"] == "host" and host["Privileged"] is False
    assert host["NetworkMode"] != "host"
    assert host["ShmSize"] == 16 * 1024**3
    assert {u["Name"]: u["Hard"] for u in host["Ulimits"]} == {"stack": 67108864}
    assert not any("docker.sock" in (m.get("Source") or "") for m in attrs["Mounts"])
    assert attrs["Config"]["WorkingDir"] == "/work"

    result = box["result"]
    assert result.outcome == Outcome.OK and result.exit_code == 0
    assert [s.step for s in parse_file(result.log_path).steps] == list(range(8))
    assert containers_of(docker_client, run_id) == []


@pytest.mark.docker
def test_exit_code_is_returned(docker_client, test_image, run_id, tmp_path):
    runner = runner_for(docker_client, test_image, run_id)
    result = runner.run_arm(workload("fails", "train", "2", "0", "3"), log_path=tmp_path / "f.log", limits=LIMITS)
    assert result.outcome == Outcome.FAILED and result.exit_code == 3
    assert containers_of(docker_client, run_id) == []


@pytest.mark.docker
def test_a_silent_container_is_killed_at_the_hang_deadline(docker_client, test_image, run_id, tmp_path):
    runner = runner_for(docker_client, test_image, run_id)
    t0 = time.monotonic()
    result = runner.run_arm(workload("hang", "hang", "2"), log_path=tmp_path / "h.log",
                            limits=Limits(deadline_s=30, hang_s=1.5, stall_s=30))
    assert 1.5 <= time.monotonic() - t0 < 10
    assert result.outcome == Outcome.HANG and result.exit_code == 137
    assert containers_of(docker_client, run_id) == []


@pytest.mark.docker
def test_nccl_watchdog_timeout_is_fatal_and_stops_the_container_early(docker_client, test_image, run_id, tmp_path):
    runner = runner_for(docker_client, test_image, run_id)
    t0 = time.monotonic()
    result = runner.run_arm(workload("nccl", "nccl_timeout"), log_path=tmp_path / "n.log", limits=LIMITS)
    assert time.monotonic() - t0 < 8, "a fatal signature must not wait for hang or deadline"
    assert result.outcome == Outcome.FATAL and result.error_class == "nccl_timeout"
    assert "Watchdog caught collective operation timeout" in (tmp_path / "n.log").read_text()
    assert containers_of(docker_client, run_id) == []


@pytest.mark.docker
def test_our_own_deadline_is_enforced(docker_client, test_image, run_id, tmp_path):
    runner = runner_for(docker_client, test_image, run_id)
    result = runner.run_arm(workload("deadline", "forever", "0.1"), log_path=tmp_path / "d.log",
                            limits=Limits(deadline_s=1.5, hang_s=10, stall_s=10))
    assert result.outcome == Outcome.DEADLINE and result.exit_code == 137
    assert containers_of(docker_client, run_id) == []


@pytest.mark.docker
def test_silence_longer_than_the_http_timeout_does_not_break_the_stream(test_image, run_id, tmp_path):
    """docker-py disables the socket timeout on log streams (docker/docker-py#931); keep it so."""
    import docker

    client = docker.from_env(timeout=1)
    runner = runner_for(client, test_image, run_id)
    result = runner.run_arm(arm("quiet", "sh", "-c", "echo before; sleep 2; echo after", workdir="/work"),
                            log_path=tmp_path / "q.log", limits=LIMITS)
    assert result.outcome == Outcome.OK
    assert (tmp_path / "q.log").read_text() == "before\nafter\n"
    assert containers_of(client, run_id) == []


@pytest.mark.docker
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_leaves_no_container_and_keeps_the_partial_log(docker_client, test_image, run_id, tmp_path, sig):
    log_path = tmp_path / "child.log"
    child = subprocess.Popen(
        [sys.executable, str(TESTS / "helpers" / "runner_util.py"), "docker", str(log_path),
         "--image", test_image, "--run-id", run_id, "--", "sh", "/workload.sh", "forever", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(TESTS.parent)},
    )
    try:
        assert wait_for(lambda: log_path.exists() and log_path.read_text().count(" - step ") >= 3, 20)
        assert len(containers_of(docker_client, run_id)) == 1
        child.send_signal(sig)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    assert json.loads(out.split("INTERRUPTED ", 1)[1])["outcome"] == Outcome.INTERRUPTED
    assert containers_of(docker_client, run_id) == []
    assert log_path.read_text().count(" - step ") >= 3


@pytest.mark.docker
def test_gpu_request_without_nvidia_runtime_is_blocked_and_leaves_nothing(docker_client, test_image, run_id, tmp_path):
    """This engine has no NVIDIA runtime: the real failure, mapped to the fix."""
    runner = runner_for(docker_client, test_image, run_id, gpus=(0, 1))
    result = runner.run_arm(workload("gpu", "train", "1", "0"), log_path=tmp_path / "g.log", limits=LIMITS)
    assert result.outcome == Outcome.BLOCKED and result.exit_code is None
    assert 'could not select device driver "" with capabilities: [[gpu]]' in result.reason
    assert result.fix == NVIDIA_FIX and "nvidia-ctk runtime configure --runtime=docker" in result.fix
    assert containers_of(docker_client, run_id) == []  # not even one in state `created`


def daemon_sets(client, image, ulimits) -> bool:
    """Does this daemon start a container with these ulimits? Asked of docker-py directly, not the runner."""
    import docker.errors
    from docker.types import Ulimit

    try:
        run_once(client, image, ["true"], ulimits=[Ulimit(name=k, soft=v, hard=v) for k, v in ulimits.items()])
    except docker.errors.APIError as exc:
        assert "rlimit" in str(exc), exc  # anything else is not the question asked
        return False
    return True


@pytest.mark.docker
def test_asking_the_daemon_about_ulimits_leaves_no_container(docker_client, test_image):
    """nofile above the kernel's nr_open is refused on every daemon: the refused container goes too."""
    def ours():
        return {c.id for c in docker_client.containers.list(all=True, filters={"ancestor": test_image})
                if c.attrs["Config"]["Cmd"] == ["true"]}

    before = ours()
    assert daemon_sets(docker_client, test_image, {"nofile": int(open("/proc/sys/fs/nr_open").read()) + 1}) is False
    assert ours() - before == set()


@pytest.mark.docker
def test_an_image_a_test_builds_goes_with_its_layers_and_containers(docker_client, test_image, run_id):
    """What the cpverify image fixture does when the session ends: a legacy build leaves one untagged
    image per step below the tagged one (a rebuilt tag left them all behind, 307 MB each)."""
    label = f"cpverify.test-cleanup={run_id}"
    dockerfile = f"FROM {test_image}\nLABEL cpverify.test-cleanup={run_id}\nRUN echo layer > /tmp/a\nRUN echo two > /tmp/b\n"
    with removed_after(docker_client, f"cpverify-cleanup-test:{run_id}") as tag:
        docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, network_mode="none")
        run_once(docker_client, tag, ["true"])
        docker_client.containers.create(tag, ["true"], network_mode="none")  # one a test forgot
        assert len(docker_client.images.list(all=True, filters={"label": label})) >= 3  # the steps' images
    assert docker_client.images.list(all=True, filters={"label": label}) == []
    assert docker_client.containers.list(all=True, filters={"ancestor": tag}) == []


@pytest.mark.docker
def test_default_ulimits_run_where_the_daemon_allows_them_else_block_with_the_fix(
    docker_client, test_image, run_id, tmp_path
):
    """memlock unlimited (slime's flags) needs a daemon allowed to raise it; a plain container
    tells which this daemon is, and the runner must agree: run with them, or block with the fix."""
    allowed = daemon_sets(docker_client, test_image, SLIME_ULIMITS)
    runner = runner_for(docker_client, test_image, run_id, ulimits=SLIME_ULIMITS)
    result = runner.run_arm(arm("ulimit", "sh", "-c", "ulimit -l; ulimit -s", workdir="/work"),
                            log_path=tmp_path / "u.log", limits=LIMITS)
    if allowed:
        assert result.outcome == Outcome.OK, result.reason
        assert (tmp_path / "u.log").read_text().split() == ["unlimited", str(SLIME_ULIMITS["stack"] // 1024)]
    else:
        assert result.outcome == Outcome.BLOCKED and "LimitMEMLOCK=infinity" in result.fix
    assert containers_of(docker_client, run_id) == []


@pytest.mark.docker
def test_ulimits_no_daemon_may_set_block_the_arm_with_the_fix(docker_client, test_image, run_id, tmp_path):
    """nofile above the kernel's nr_open: setrlimit refuses it even to root, on every daemon."""
    nofile = int(open("/proc/sys/fs/nr_open").read()) + 1
    runner = runner_for(docker_client, test_image, run_id, ulimits={"nofile": nofile})
    result = runner.run_arm(arm("nofile", "true", workdir="/work"), log_path=tmp_path / "n.log", limits=LIMITS)
    assert result.outcome == Outcome.BLOCKED and "may not set the container's ulimits" in result.reason
    assert "LimitMEMLOCK=infinity" in result.fix and "--no-ulimits" in result.fix
    assert containers_of(docker_client, run_id) == []


@pytest.mark.docker
def test_ulimits_reach_the_workload(docker_client, test_image, run_id, tmp_path):
    runner = runner_for(docker_client, test_image, run_id)
    result = runner.run_arm(arm("stack", "sh", "-c", "ulimit -s", workdir="/work"), log_path=tmp_path / "s.log",
                            limits=LIMITS)
    assert result.outcome == Outcome.OK and (tmp_path / "s.log").read_text().split() == [
        str(UNPRIVILEGED["stack"] // 1024)]


@pytest.mark.docker
def test_missing_image_and_missing_command_are_blocked(docker_client, test_image, run_id, tmp_path):
    runner = DockerRunner(image="cpverify-no-such-image:0", run_id=run_id, gpus=None, client=docker_client)
    result = runner.run_arm(workload("noimg", "train", "1", "0"), log_path=tmp_path / "i.log", limits=LIMITS)
    assert result.outcome == Outcome.BLOCKED and "docker pull cpverify-no-such-image:0" in result.fix
    runner = runner_for(docker_client, test_image, run_id)
    result = runner.run_arm(arm("nocmd", "no-such-launcher", workdir="/work"), log_path=tmp_path / "c.log", limits=LIMITS)
    assert result.outcome == Outcome.BLOCKED and "no-such-launcher" in result.reason
    assert containers_of(docker_client, run_id) == []


@pytest.mark.docker
def test_mounts_env_and_secrets(docker_client, test_image, run_id, tmp_path, monkeypatch):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    monkeypatch.setenv("CPVERIFY_TEST_HOST_VAR", "from-host")
    runner = runner_for(docker_client, test_image, run_id, mounts=[
        Mount(model, "/model"), Mount(artifacts, "/artifacts", read_only=False)])
    script = (
        "ls /model; (touch /model/x 2>/dev/null && echo model-writable) || echo model-read-only; "
        "echo out > /artifacts/out.txt; "
        'echo "cmc=$CUDA_DEVICE_MAX_CONNECTIONS host=${CPVERIFY_TEST_HOST_VAR:-unset} hf=${HF_TOKEN:-unset}"'
    )
    the_arm = arm("mounts", "sh", "-c", script, workdir="/work",
                  env={"CUDA_DEVICE_MAX_CONNECTIONS": "1", "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwx"})
    result = runner.run_arm(the_arm, log_path=tmp_path / "m.log", limits=LIMITS)
    assert result.outcome == Outcome.OK, result.reason
    # this machine's variables stay out; the plan's reach the container, a secret's value never the log
    assert (tmp_path / "m.log").read_text().splitlines() == [
        "config.json", "model-read-only", "cmc=1 host=unset hf=<redacted:secret>"]
    assert (artifacts / "out.txt").read_text() == "out\n"


def test_bad_mounts_are_refused_before_anything_runs(tmp_path):
    for dangerous in ("/var/run/docker.sock", "/var/run", "/"):
        with pytest.raises(InputError, match="Docker socket"):
            DockerRunner(image="x", run_id="r", mounts=[Mount(dangerous, "/mnt")])
    with pytest.raises(InputError, match="does not exist") as raised:
        DockerRunner(image="x", run_id="r", mounts=[Mount(tmp_path / "no-model", "/model")])
    assert "cpverify fetch" in raised.value.fix


@pytest.mark.docker
def test_sweep_removes_leftovers_of_dead_runs_only(docker_client, test_image, run_id):
    import socket

    dead = subprocess.Popen(["true"])
    dead.wait()
    alive = subprocess.Popen(["sleep", "30"])

    def leftover(arm_name, owner, owner_container=None, start=True):
        labels = {LABEL_MANAGED: "1", LABEL_RUN: run_id, LABEL_ARM: arm_name, LABEL_OWNER: owner}
        if owner_container:
            labels[LABEL_OWNER_CONTAINER] = owner_container
        container = docker_client.containers.create(test_image, ["sleep", "30"], network_mode="none", labels=labels)
        if start:
            container.start()
        return container

    here = socket.gethostname()
    try:
        crashed = leftover("crashed", f"{here}:{dead.pid}")
        live_here = leftover("live-here", f"{here}:{alive.pid}")
        # cpverify itself ran in a container (Compose): its arm lives as long as that container runs.
        owner_box = docker_client.containers.run(test_image, ["sleep", "30"], network_mode="none", detach=True,
                                                 labels={LABEL_RUN: run_id})
        live_in_box = leftover("live-in-box", f"{owner_box.id[:12]}:1", owner_container=owner_box.id)
        # An owner we cannot check: a running container might be live, a stopped one is not.
        elsewhere_running = leftover("elsewhere-running", "far-away-host:1")
        elsewhere_stopped = leftover("elsewhere-stopped", "far-away-host:1", start=False)

        removed = sweep_leftovers(docker_client, run_id=run_id)
        assert sorted(removed) == sorted([crashed.name, elsewhere_stopped.name])
        kept = {c.name for c in containers_of(docker_client, run_id) if c.labels.get(LABEL_MANAGED)}
        assert kept == {live_here.name, live_in_box.name, elsewhere_running.name}

        alive.kill()
        alive.wait()
        owner_box.remove(force=True)
        removed = sweep_leftovers(docker_client, run_id=run_id)
        assert sorted(removed) == sorted([live_here.name, live_in_box.name])
        assert [c.name for c in containers_of(docker_client, run_id)] == [elsewhere_running.name]
    finally:
        alive.kill()
        alive.wait()
        for container in containers_of(docker_client, run_id):
            container.remove(force=True)


@pytest.mark.docker
def test_own_container_id_is_read_from_a_real_containers_mountinfo(docker_client, test_image):
    container = docker_client.containers.run(test_image, ["cat", "/proc/self/mountinfo"], network_mode="none",
                                             detach=True)
    try:
        container.wait(timeout=30)
        mountinfo = container.logs().decode()
        assert own_container_id(mountinfo) == container.id
    finally:
        container.remove(force=True)
    assert own_container_id("22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n") is None  # a plain host


# -- preflight ---------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["unix:///nonexistent/docker.sock", "tcp://127.0.0.1:9"])
def test_no_engine_is_blocked_with_the_fix(monkeypatch, host):
    monkeypatch.setenv("DOCKER_HOST", host)
    with pytest.raises(EnvironmentBlocked) as raised:
        connect(timeout=5)
    assert raised.value.fix == DOCKER_FIXES["not_running"]


@pytest.mark.docker
def test_permission_denied_on_the_socket_is_blocked_with_the_fix():
    """A real EACCES: a process that dropped to `nobody` connects to the engine's socket."""
    sock = "/var/run/docker.sock"
    if os.geteuid() != 0 or not os.path.exists(sock) or os.stat(sock).st_mode & 0o006:
        pytest.skip("needs root to drop privileges, and a socket that others may not use")
    out = as_nobody("import docker, requests, cpverify.runners.docker as d",
                    "try:\n    d.connect(timeout=5)\nexcept Exception as e:\n    print(type(e).__name__, e.fix)",
                    env={**os.environ, "DOCKER_HOST": f"unix://{sock}"}, timeout=30)
    assert out.stdout.startswith("EnvironmentBlocked"), out.stderr
    assert "usermod -aG docker" in out.stdout


@pytest.mark.docker
def test_a_broken_log_stream_is_reattached_without_losing_or_repeating_a_line(
    docker_client, test_image, run_id, tmp_path, monkeypatch
):
    """A real break: with docker-py's read-timeout fix undone (the docker-py < 3 behaviour,
    docker/docker-py#931), the stream dies during each 1.3 s silence of a 1 s-timeout client."""
    import docker.api.client

    import docker

    monkeypatch.setattr(docker.api.client.APIClient, "_disable_socket_timeout", lambda self, sock: None)
    client = docker.from_env(timeout=1)
    runner = runner_for(client, test_image, run_id)
    script = "i=0; while [ $i -lt 3 ]; do echo line-$i-a; echo line-$i-b; sleep 1.3; i=$((i+1)); done; echo end"
    result = runner.run_arm(arm("breaks", "sh", "-c", script, workdir="/work"),
                            log_path=tmp_path / "b.log", limits=LIMITS)
    expected = [f"line-{i}-{x}" for i in range(3) for x in "ab"] + ["end"]
    assert (tmp_path / "b.log").read_text().splitlines() == expected
    assert result.outcome == Outcome.OK and result.reason == ""
    assert containers_of(client, run_id) == []


@pytest.mark.docker
def test_ctrl_c_while_the_container_is_being_created_leaves_nothing(
    docker_client, test_image, run_id, tmp_path, monkeypatch
):
    """Ctrl-C at the worst moment: the engine created the container, but the create call
    never returned to us (simulated by raising KeyboardInterrupt right after the real call)."""
    from docker.models.containers import ContainerCollection

    from cpverify.model import ArmInterrupted

    real_create = ContainerCollection.create

    def create_then_ctrl_c(self, *args, **kwargs):
        real_create(self, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(ContainerCollection, "create", create_then_ctrl_c)
    runner = runner_for(docker_client, test_image, run_id)
    with pytest.raises(ArmInterrupted) as raised:
        runner.run_arm(workload("early", "forever", "0.1"), log_path=tmp_path / "e.log", limits=LIMITS)
    assert raised.value.result.outcome == Outcome.INTERRUPTED
    assert containers_of(docker_client, run_id) == []
