"""RayRunner against a REAL local Ray head (started once per session, CPU only).

Only slime itself is a stand-in: tests/fake_slime/train.py prints slime's real log
formats and injects the faults users meet; tests/images/workload.sh starts a background
grandchild, so "nothing left running" is checked by pid. Every job runs on this machine
(the head is local), so the pids printed in a job's log can be checked from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from cpverify.errors import EnvironmentBlocked, InputError
from cpverify.model import Limits, Outcome
from cpverify.parse import parse_file
from cpverify.runners.ray import RayRunner, entrypoint, normalize_address, submission_id
from helpers.runner_util import TESTS, WORKLOAD, arm, pid_alive, pids_in_log, wait_for

FAKE_SLIME = TESTS / "fake_slime"
LIMITS = Limits(deadline_s=60, hang_s=30, stall_s=30)


def _free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture(scope="session")
def ray_head():
    """A local Ray head (`ray start --head --block`), stopped by its own pid at the end.

    `--block` keeps `ray start` in the foreground; SIGTERM to it drains and stops exactly
    the processes it started. (`ray stop --force` would kill every Ray on this machine.)
    """
    port, dashboard, client, agent = _free_ports(4)
    temp = tempfile.mkdtemp(prefix="cpvray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    with open(Path(temp) / "head.out", "wb") as out:
        head = subprocess.Popen(
            ["ray", "start", "--head", "--block", "--num-cpus", "2", "--disable-usage-stats", "--include-dashboard",
             "true", "--dashboard-host", "127.0.0.1", "--port", str(port), "--dashboard-port", str(dashboard),
             "--ray-client-server-port", str(client), "--dashboard-agent-listen-port", str(agent), "--temp-dir", temp],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
        )
    address = f"http://127.0.0.1:{dashboard}"
    try:
        from ray.util.state import list_nodes

        def ready():
            if head.poll() is not None:
                raise RuntimeError(f"ray start exited {head.returncode}: {Path(temp, 'head.out').read_text()[-2000:]}")
            with contextlib.suppress(Exception):
                return bool(list_nodes(address=address, timeout=5))
            return False

        if not wait_for(ready, 120, interval=0.5):
            raise RuntimeError(f"the Ray head did not come up: {Path(temp, 'head.out').read_text()[-2000:]}")
        yield address
    finally:
        if head.poll() is None:
            head.send_signal(signal.SIGTERM)
            try:
                head.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(head.pid, signal.SIGKILL)
                head.wait(10)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def ray_run_id() -> str:
    return f"pytest-{uuid.uuid4().hex[:10]}"


def fake_slime(name: str, *args: str, **env: str):
    return arm(name, "python3", "train.py", "--actor-num-gpus-per-node", "2", *args, workdir=FAKE_SLIME,
               env={"FAKE_SLIME_STEP_S": "0.05", **env})


def workload(name: str, *args: str):
    return arm(name, "sh", str(WORKLOAD), *args, workdir="/tmp")


def run(address, run_id, tmp_path, the_arm, limits=LIMITS, **options):
    runner = RayRunner(address=address, run_id=run_id, stop_wait_s=30, **options)
    log_path = tmp_path / f"{the_arm.name}.log"
    return runner.run_arm(the_arm, log_path=log_path, limits=limits), log_path


def job_status(address, job_id):
    from ray.job_submission import JobSubmissionClient

    return str(JobSubmissionClient(address).get_job_status(job_id).value)


def assert_all_gone(log_path):
    pids = pids_in_log(log_path)
    assert "workload" in pids, "the workload did not print its pid"
    for role, pid in pids.items():
        assert wait_for(lambda pid=pid: not pid_alive(pid), 5), f"{role} pid {pid} survived"


# -- without a head -----------------------------------------------------------------------------


def test_unreachable_address_is_blocked_with_the_fix(tmp_path):
    port = _free_ports(1)[0]  # nothing listens there
    runner = RayRunner(address=f"127.0.0.1:{port}", run_id="r1", connect_timeout_s=3)
    t0 = time.monotonic()
    result = runner.run_arm(fake_slime("cp1", "--num-rollout", "2"), log_path=tmp_path / "cp1.log", limits=LIMITS)
    assert time.monotonic() - t0 < 10
    assert result.outcome == Outcome.BLOCKED and result.exit_code is None
    assert f"http://127.0.0.1:{port}" in result.reason  # the address it tried
    assert "ray start --head" in result.fix and "--ray-address" in result.fix
    assert not (tmp_path / "cp1.log").exists()
    with pytest.raises(EnvironmentBlocked):
        runner.preflight()


def test_addresses_and_ids():
    assert normalize_address("head:8265") == "http://head:8265"
    assert normalize_address("https://head:8265/") == "https://head:8265"
    with pytest.raises(InputError, match="Ray Client"):
        normalize_address("ray://head:10001")
    with pytest.raises(InputError, match="--ray-address"):
        normalize_address("")
    assert submission_id("20260821-1-ab", "cp1") == "cpverify-20260821-1-ab-cp1"
    assert submission_id("r.1", "base cp2", 3) == "cpverify-r-1-base-cp2-3"


def test_entrypoint_enters_the_workdir_and_keeps_secret_values_out_of_the_command():
    command, hidden = entrypoint(arm("cp2", "python3", "train.py", "--wandb-key", "abc123secret",
                                     "--api-key=k-987", "--input-key", "prompt",
                                     "--wandb-host=https://me:pw-2c8e4d@wandb.example.internal", workdir="/root/slime"))
    assert command.startswith("cd /root/slime 2>/dev/null || {")
    assert "exec python3 train.py" in command and "--input-key prompt" in command  # a dataset column, not a secret
    assert "abc123secret" not in command and "k-987" not in command and "pw-2c8e4d" not in command
    assert "--wandb-host=\"$CPVERIFY_SECRET_ARG_" in command  # a secret by its value, whatever the flag
    assert sorted(hidden.values()) == ["abc123secret", "https://me:pw-2c8e4d@wandb.example.internal", "k-987"]
    assert all(f"${name}" in command for name in hidden)
    with pytest.raises(InputError, match="absolute"):
        entrypoint(arm("x", "true", workdir="relative/dir"))
    assert entrypoint(arm("probe", "python", "-m", "cpverify.probe.workload", workdir="."))[0] == \
        "exec python -m cpverify.probe.workload"


def test_slime_arms_leave_gpus_to_placement_groups_the_probe_reserves_them():
    slime = RayRunner(address="h:1", run_id="r", gpus=2).job_spec(fake_slime("cp1"))
    probe = RayRunner(address="h:1", run_id="r", gpus=2, reserve_gpus=True).job_spec(
        arm("cp2-s16k", "python", "-m", "torch.distributed.run", "-m", "cpverify.probe.workload", workdir="."))
    assert "entrypoint_num_gpus" not in slime and "py_modules" not in slime["runtime_env"]
    assert probe["entrypoint_num_gpus"] == 2
    assert probe["runtime_env"]["py_modules"][0].endswith("cpverify")  # the same cpverify on the node
    assert slime["metadata"]["cpverify.arm"] == "cp1" and slime["metadata"]["cpverify.run"] == "r"


# -- against the real head ----------------------------------------------------------------------


@pytest.mark.ray
def test_success_streams_live_and_ends_succeeded(ray_head, ray_run_id, tmp_path, monkeypatch):
    """Lines reach the log file while the job runs; the arm ends OK with slime's parsed records."""
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz")  # this machine's secret: must not travel
    the_arm = fake_slime("cp2", "--num-rollout", "12", "--context-parallel-size", "2", FAKE_SLIME_STEP_S="0.4",
                         WANDB_API_KEY="wandb-secret-value", FAKE_SLIME_CP_FACTOR="1.1")
    log_path = tmp_path / "cp2.log"
    box = {}
    runner = RayRunner(address=ray_head, run_id=ray_run_id)
    thread = threading.Thread(target=lambda: box.update(result=runner.run_arm(the_arm, log_path=log_path,
                                                                                limits=LIMITS)))
    thread.start()
    job_id = submission_id(ray_run_id, "cp2")
    two_steps = wait_for(lambda: log_path.exists() and log_path.read_text().count(" - step ") >= 2, 40)
    status_mid_read = job_status(ray_head, job_id)
    thread.join(90)
    assert two_steps and status_mid_read == "RUNNING", "lines must reach the file while the job still runs"
    result = box["result"]
    assert result.outcome == Outcome.OK and result.exit_code == 0, result.reason
    assert job_status(ray_head, job_id) == "SUCCEEDED"
    parsed = parse_file(log_path)
    assert [s.step for s in parsed.steps] == list(range(12))
    assert parsed.layout.cp == 2
    text = log_path.read_text()
    assert f"Running entrypoint for job {job_id}" in text  # Ray's own header, then the workload
    assert result.lines == text.count("\n")
    from ray.job_submission import JobSubmissionClient

    env_vars = JobSubmissionClient(ray_head).get_job_info(job_id).runtime_env["env_vars"]
    assert env_vars["FAKE_SLIME_CP_FACTOR"] == "1.1"
    assert env_vars["WANDB_API_KEY"] == "wandb-secret-value"  # the plan's: the user set it for the workload
    assert "HF_TOKEN" not in env_vars  # this machine's: never


@pytest.mark.ray
def test_environment_and_secret_arguments(ray_head, ray_run_id, tmp_path):
    script = ('import os, sys; print("cmc=%s wandb=%s arglen=%d" % (os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS"), '
              'os.environ.get("WANDB_API_KEY", "unset"), len(sys.argv[-1])))')
    the_arm = arm("env", "python3", "-c", script, "--wandb-key", "s3cr3t-value-123", workdir="/tmp",
                  env={"CUDA_DEVICE_MAX_CONNECTIONS": "1", "WANDB_API_KEY": "wandb-secret-value"})
    result, log_path = run(ray_head, ray_run_id, tmp_path, the_arm)
    assert result.outcome == Outcome.OK, result.reason
    text = log_path.read_text()
    assert "cmc=1 wandb=<redacted:secret> arglen=16" in text  # the plan's variable and the argument arrived whole...
    assert "s3cr3t-value-123" not in text and "wandb-secret-value" not in text  # ...but neither the log...
    entrypoint_seen = _client(ray_head).get_job_info(submission_id(ray_run_id, "env")).entrypoint
    assert "s3cr3t-value-123" not in entrypoint_seen and "$CPVERIFY_SECRET_ARG_" in entrypoint_seen  # ...nor `ray job list`


@pytest.mark.ray
@pytest.mark.parametrize("fault, extra, code", [("none", (), 1), ("exit137", ("--num-rollout", "4"), 137)])
def test_failure_exit_is_failed_with_the_exit_code(ray_head, ray_run_id, tmp_path, fault, extra, code):
    """No --num-rollout: slime's own AssertionError, exit 1; exit137: the driver killed by SIGKILL."""
    result, log_path = run(ray_head, ray_run_id, tmp_path, fake_slime("cp1", *extra, FAKE_SLIME_FAULT=fault))
    assert result.outcome == Outcome.FAILED and result.exit_code == code, result.reason
    assert submission_id(ray_run_id, "cp1") in result.reason  # the job to look up
    assert job_status(ray_head, submission_id(ray_run_id, "cp1")) == "FAILED"
    if fault == "none":
        assert "num_rollout is not set" in log_path.read_text()


@pytest.mark.ray
def test_deadline_stops_the_job_and_leaves_nothing_running(ray_head, ray_run_id, tmp_path):
    t0 = time.monotonic()
    result, log_path = run(ray_head, ray_run_id, tmp_path, workload("deadline", "forever", "0.2"),
                           Limits(deadline_s=8, hang_s=30, stall_s=30))
    assert 8 <= time.monotonic() - t0 < 40
    assert result.outcome == Outcome.DEADLINE and "deadline" in result.reason
    assert job_status(ray_head, submission_id(ray_run_id, "deadline")) == "STOPPED"
    assert log_path.read_text().count(" - step ") >= 3
    assert_all_gone(log_path)


@pytest.mark.ray
def test_fatal_signature_and_hang_stop_the_job(ray_head, ray_run_id, tmp_path):
    fatal, _ = run(ray_head, ray_run_id, tmp_path, fake_slime("fatal", "--num-rollout", "6",
                                                              FAKE_SLIME_FAULT="nccl_timeout"))
    assert fatal.outcome == Outcome.FATAL and fatal.error_class == "nccl_timeout"
    assert job_status(ray_head, submission_id(ray_run_id, "fatal")) == "STOPPED"
    hang, _ = run(ray_head, ray_run_id, tmp_path, fake_slime("hang", "--num-rollout", "6",
                                                             FAKE_SLIME_FAULT="silent_hang"),
                  Limits(deadline_s=60, hang_s=4, stall_s=60))
    assert hang.outcome == Outcome.HANG and len(parse_file(hang.log_path).steps) == 2
    assert job_status(ray_head, submission_id(ray_run_id, "hang")) == "STOPPED"


CHILD = """
import json, sys
from pathlib import Path
from helpers.runner_util import arm
from cpverify.model import ArmInterrupted, Limits
from cpverify.runners.ray import RayRunner
address, run_id, log_path, workload = sys.argv[1:5]
runner = RayRunner(address=address, run_id=run_id, stop_wait_s=30)
try:
    result = runner.run_arm(arm("child", "sh", workload, "forever", "0.2", workdir="/tmp"),
                            log_path=Path(log_path), limits=Limits(deadline_s=120, hang_s=60, stall_s=60))
except ArmInterrupted as interrupted:
    print("INTERRUPTED " + json.dumps(interrupted.result.to_json()), flush=True)
    sys.exit(130)
print("RESULT " + json.dumps(result.to_json()), flush=True)
"""


@pytest.mark.ray
def test_ctrl_c_stops_the_job_and_keeps_the_partial_log(ray_head, ray_run_id, tmp_path):
    log_path = tmp_path / "child.log"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, ray_head, ray_run_id, str(log_path), str(WORKLOAD)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": f"{TESTS.parent}{os.pathsep}{TESTS}"},
    )
    try:
        assert wait_for(lambda: log_path.exists() and log_path.read_text().count(" - step ") >= 3, 40)
        pids = pids_in_log(log_path)
        assert pid_alive(pids["workload"]) and pid_alive(pids["grandchild"])
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    partial = json.loads(out.split("INTERRUPTED ", 1)[1])
    assert partial["outcome"] == Outcome.INTERRUPTED and partial["reason"] == "interrupted (Ctrl-C)"
    assert job_status(ray_head, submission_id(ray_run_id, "child")) == "STOPPED"
    assert_all_gone(log_path)


@pytest.mark.ray
def test_too_few_gpus_is_blocked_before_anything_is_submitted(ray_head, ray_run_id, tmp_path):
    result, log_path = run(ray_head, ray_run_id, tmp_path, fake_slime("cp1", "--num-rollout", "2"), gpus=2)
    assert result.outcome == Outcome.BLOCKED
    assert "too few GPUs" in result.reason and "largest node has 0" in result.reason and "needs 2" in result.reason
    assert "--num-gpus 2" in result.fix
    from ray.job_submission import JobSubmissionClient

    ours = [j for j in JobSubmissionClient(ray_head).list_jobs() if (j.metadata or {}).get("cpverify.run") == ray_run_id]
    assert ours == [] and not log_path.exists()


@pytest.mark.ray
def test_missing_workdir_on_the_node_is_blocked(ray_head, ray_run_id, tmp_path):
    the_arm = arm("cp1", "python3", "train.py", workdir=tmp_path / "no-slime-here")
    result, _ = run(ray_head, ray_run_id, tmp_path, the_arm)
    assert result.outcome == Outcome.BLOCKED and "no-slime-here" in result.reason and "--slime-dir" in result.fix


@pytest.mark.ray
def test_a_rerun_of_the_same_arm_gets_a_new_submission_id(ray_head, ray_run_id, tmp_path):
    first, log_path = run(ray_head, ray_run_id, tmp_path, arm("cp1", "echo", "one", workdir="/tmp"))
    second, _ = run(ray_head, ray_run_id, tmp_path, arm("cp1", "echo", "two", workdir="/tmp"))
    assert first.outcome == second.outcome == Outcome.OK
    text = log_path.read_text()  # appended, as the other runners do
    assert f"job {submission_id(ray_run_id, 'cp1')}:" in text and f"job {submission_id(ray_run_id, 'cp1', 2)}:" in text
    assert text.index("one\n") < text.index("two\n")


@pytest.mark.ray
def test_the_probe_runs_this_cpverify_on_the_node(ray_head, ray_run_id, tmp_path):
    """`-m cpverify...` arms get this cpverify as a py_module: the job imports the same code."""
    sample = tmp_path / "sample.log"
    sample.write_text("(MegatronTrainRayActor pid=1) [2026-08-21 10:00:28] model.py:918 - step 3: {'train/loss': 1.0}\n")
    result, log_path = run(ray_head, ray_run_id, tmp_path,
                           arm("probe", "python3", "-m", "cpverify", "parse", str(sample), "--json", workdir="."))
    assert result.outcome == Outcome.OK, log_path.read_text()[-2000:]
    assert '"step": 3' in log_path.read_text()


@pytest.mark.ray
def test_a_job_that_never_gets_its_resources_is_stopped_and_says_so(ray_head, ray_run_id, tmp_path, monkeypatch):
    """64 CPUs for the entrypoint on a 2-CPU head: Ray keeps the job PENDING; the hang limit ends it."""
    runner = RayRunner(address=ray_head, run_id=ray_run_id, stop_wait_s=30)
    plain = runner.job_spec
    monkeypatch.setattr(runner, "job_spec", lambda a: {**plain(a), "entrypoint_num_cpus": 64})
    result = runner.run_arm(arm("pending", "echo", "never", workdir="/tmp"), log_path=tmp_path / "pending.log",
                            limits=Limits(deadline_s=60, hang_s=4, stall_s=60))
    assert result.outcome == Outcome.HANG and "PENDING" in result.reason  # the job's status, as Ray states it
    assert "ray status" in result.fix
    # Ray cannot stop a job whose supervisor is not scheduled yet; such a job holds nothing, and the
    # reason says so rather than the runner waiting out its stop limit
    assert result.duration_s < 30
    if job_status(ray_head, submission_id(ray_run_id, "pending")) == "PENDING":
        assert "RAY_JOB_START_TIMEOUT_SECONDS" in result.reason


@pytest.mark.ray
def test_cpverify_run_with_the_ray_runner(ray_head, tmp_path, monkeypatch):
    """The orchestrator end to end on the Ray runner: fake slime at CP=1 and CP=2, one verdict."""
    from cpverify.cli import main

    monkeypatch.setenv("CPVERIFY_LOCK_DIR", str(tmp_path))
    run_id = f"pytest-{uuid.uuid4().hex[:10]}"
    code = main(["run", "--profile", "smoke", "--runner", "ray", "--ray-address", ray_head, "--gpus", "none",
                 "--slime-dir", str(FAKE_SLIME), "--only", "fetch,lint,cp1,cp2,verdict", "--out", str(tmp_path),
                 "--run-id", run_id, *_fetched_model(tmp_path, monkeypatch)])
    verdict = json.loads((tmp_path / run_id / "verdict.json").read_text())
    assert code == 0 and verdict["status"] == "PASS", verdict["headline"]
    # every round of an arm ran at its CP (a verdict's arms are its rounds)
    assert {(a["arm"], a["cp_effective"]) for a in verdict["arms"]} == {("cp1", 1), ("cp2", 2)}
    for name in ("cp1", "cp2"):
        assert job_status(ray_head, submission_id(run_id, name)) == "SUCCEEDED"
        assert f"Running entrypoint for job {submission_id(run_id, name)}" in (tmp_path / run_id / "logs" /
                                                                                f"{name}.log").read_text()


def _fetched_model(tmp_path, monkeypatch) -> list[str]:
    """A model cache for the fetch step (the lint runs slime's own parser, which reads config.json)."""
    from cpverify.profiles import get_profile
    from helpers.hfcache import make_model_cache

    smoke = get_profile("smoke")
    make_model_cache(tmp_path / "cache" / "hf", smoke.model_repo, smoke.model_revision)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return ["--cache", str(tmp_path / "cache")]


@pytest.mark.ray
def test_train_only_with_the_ray_runner(ray_head, tmp_path, monkeypatch):
    """Rollouts written where the jobs read them, the CP=1 job's grad norms checked by the CP=2 job."""
    from cpverify.cli import main

    monkeypatch.setenv("CPVERIFY_LOCK_DIR", str(tmp_path))
    run_id = f"pytest-{uuid.uuid4().hex[:10]}"
    code = main(["run", "--profile", "train-only", "--runner", "ray", "--ray-address", ray_head, "--gpus", "none",
                 "--slime-dir", str(FAKE_SLIME), "--only", "fetch,lint,cp1,cp2,verdict", "--out", str(tmp_path),
                 "--run-id", run_id, *_fetched_model(tmp_path, monkeypatch)])
    verdict = json.loads((tmp_path / run_id / "verdict.json").read_text())
    assert code == 0 and verdict["status"] == "PASS", verdict["headline"]
    gate = next(c for c in verdict["checks"] if c["name"].startswith("numerics:"))
    assert gate["status"] == "pass"
    assert "all 24 steps" in gate["detail"]  # how many steps slime checked: only the row says
    for name in ("cp1-s1k", "cp2-s1k"):
        assert job_status(ray_head, submission_id(run_id, name)) == "SUCCEEDED"


def _client(address):
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(address)


def job_log_as_written(client, job_id: str) -> str:
    """The job's whole log as Ray stores it, scrubbed the way the watcher scrubs each line."""
    from cpverify.redact import LineScrubber

    scrub = LineScrubber()
    raw = client.get_job_logs(job_id).encode()
    return b"".join(scrub(line) for line in raw.splitlines(keepends=True)).decode()


@pytest.mark.ray
def test_a_broken_log_stream_is_reattached_without_losing_or_repeating_a_line(ray_head, ray_run_id, tmp_path):
    """The websocket drops after two chunks (a stand-in for a proxy or dashboard restart; the head is real)."""
    client = _client(ray_head)
    real, attaches = client.tail_job_logs, []

    async def flaky(job_id):
        attaches.append(job_id)
        delivered = 0
        async for chunk in real(job_id):
            yield chunk
            delivered += 1
            if len(attaches) == 1 and delivered == 2:
                raise RuntimeError("WebSocket connection closed unexpectedly with close code 1006")

    client.tail_job_logs = flaky
    runner = RayRunner(address=ray_head, run_id=ray_run_id, client=client)
    log_path = tmp_path / "cp1.log"
    result = runner.run_arm(fake_slime("cp1", "--num-rollout", "10", FAKE_SLIME_STEP_S="0.3"), log_path=log_path,
                            limits=LIMITS)
    assert result.outcome == Outcome.OK and len(attaches) >= 2
    assert log_path.read_text() == job_log_as_written(client, submission_id(ray_run_id, "cp1"))
    assert [s.step for s in parse_file(log_path).steps] == list(range(10))


@pytest.mark.ray
def test_without_websockets_the_log_is_polled_live_and_complete(ray_head, ray_run_id, tmp_path):
    client = _client(ray_head)

    async def refused(job_id):
        raise RuntimeError("WebSocket error: 403 Forbidden (a proxy without websocket support)")
        yield  # an async generator, like the real one

    client.tail_job_logs = refused
    runner = RayRunner(address=ray_head, run_id=ray_run_id, client=client)
    log_path = tmp_path / "cp1.log"
    box = {}
    thread = threading.Thread(target=lambda: box.update(result=runner.run_arm(
        fake_slime("cp1", "--num-rollout", "16", FAKE_SLIME_STEP_S="0.5"), log_path=log_path, limits=LIMITS)))
    thread.start()
    live = wait_for(lambda: log_path.exists() and log_path.read_text().count(" - step ") >= 2, 40)
    status_mid_read = job_status(ray_head, submission_id(ray_run_id, "cp1"))
    thread.join(90)
    assert live and status_mid_read == "RUNNING"
    assert box["result"].outcome == Outcome.OK
    assert log_path.read_text() == job_log_as_written(client, submission_id(ray_run_id, "cp1"))
