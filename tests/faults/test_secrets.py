"""Secrets and containment, with planted secrets, through `cpverify run` under both runners.

  * Tokens (HF_TOKEN and anything token/secret/password/key-like) reach the fetch step and no
    workload: not the logs, env.json, verdict.md, verdict.json, commands.sh, state.json, nor
    anything else under the run directory.
  * Everything meant for sharing is redacted (tokens, home paths, user and host names, IPs),
    unless --no-redact; tokens never, whatever the flag.
  * Containers run unprivileged, on Docker's own network, with model, data and slime
    read-only and no Docker socket inside.
"""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest

from cpverify.profiles import SMOKE_TRAIN_ARGS
from faults.harness import ROOT, Workspace
from faults.test_run_faults import LINES_BEFORE_THE_HANG, PARKED

# Planted in cpverify's own environment: shaped like real credentials, random enough to be unique.
SECRET_ENV = {
    "HF_TOKEN": "hf_" + "Qx7bT2mN9pL4vR8sK1wZ3yC6dF0gH5jE2a",
    "GITHUB_TOKEN": "ghp_" + "4fG7hJ2kL9mN3bV6cX8zQ1wE5rT0yU2iO7pA",
    "WANDB_API_KEY": "wandb-planted-4c8e1f5a9b2d7e3f6a0b",
    "MY_SERVICE_PASSWORD": "planted-password-91ac37e2",
    "AWS_SECRET_ACCESS_KEY": "plantedAwsSecret/7Yq2+Zk9Lm4Np8Rt1Vx6",
}
# Passed on purpose to the workload as a train argument (it needs it); Megatron prints its arguments.
WANDB_FLAG_VALUE = "wandb-flag-value-5e9d2c7a1b"


def _every_file_text(run_dir) -> dict[str, bytes]:
    """Every file cpverify wrote for the run (not the stand-in's ledger: the test's own instrument)."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in run_dir.rglob("*")
            if p.is_file() and "ledger" not in p.parts}


def test_tokens_reach_no_workload_log_or_artifact(ws, rid):
    train_args = [*SMOKE_TRAIN_ARGS, "--wandb-key", WANDB_FLAG_VALUE]
    # The profile's own environment may name a secret too: it is dropped for the workload as well.
    outcome = ws.run(rid, only="fetch,compileall,lint,cp1,cp2,verdict", env=SECRET_ENV, train_args=train_args,
                     fake_env={"FAKE_SLIME_PRINT_ENV": "1", "WANDB_KEY": "profile-env-secret-3b7f"})
    assert outcome.code == 0, outcome.stderr[-3000:]
    assert outcome.verdict()["status"] == "PASS"
    planted = [*SECRET_ENV.values(), WANDB_FLAG_VALUE, "profile-env-secret-3b7f"]
    files = _every_file_text(outcome.run_dir)
    assert {"verdict.md", "verdict.json", "env.json", "commands.sh", "state.json", "logs/cp1.log"} <= set(files)
    for name, data in files.items():
        for secret in planted:
            assert secret.encode() not in data, f"{name} holds a planted secret"
    for arm in ("cp1", "cp2"):
        log = (outcome.run_dir / "logs" / f"{arm}.log").read_text()
        env_dump = next(line for line in log.splitlines() if "runtime_env env_vars:" in line)
        for name in (*SECRET_ENV, "WANDB_KEY"):  # the workload never had them
            assert f"'{name}'" not in env_dump, f"{name} reached the {arm} workload"
        assert "'CUDA_DEVICE_MAX_CONNECTIONS': '1'" in env_dump  # the rest of the environment did
        arguments = next(line for line in log.splitlines() if " arguments: " in line)
        assert "--wandb-key <redacted:secret>" in arguments  # it reached the workload, not the disk
    commands = files["commands.sh"].decode()
    assert '--wandb-key "${WANDB_KEY}"' in commands and ': "${WANDB_KEY:?export WANDB_KEY first' in commands
    ws.assert_nothing_left(rid)


def test_the_fetch_step_does_use_the_token(local_ws, rid):
    """The other half: fetch is where the token belongs. A local stand-in hub (HF_ENDPOINT) records
    the Authorization header huggingface_hub sends; the token still reaches no file."""
    seen: list[str | None] = []

    class Hub(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # http.server's naming
            seen.append(self.headers.get("authorization"))
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
            self.end_headers()

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    hub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    try:
        (local_ws.cache / "hf").rename(local_ws.root / "moved-away")  # not cached: fetch must ask the hub
        env = {**local_ws.env(SECRET_ENV), "HF_ENDPOINT": f"http://127.0.0.1:{hub.server_port}"}
        env.pop("HF_HUB_OFFLINE")
        proc = subprocess.run(local_ws.argv(rid, only="fetch,cp1"), capture_output=True, text=True, env=env,
                              cwd=ROOT, timeout=120, check=False)
    finally:
        hub.shutdown()
    assert proc.returncode == 2 and "does not exist on the hub" in proc.stderr, proc.stderr[-2000:]
    assert f"Bearer {SECRET_ENV['HF_TOKEN']}" in seen
    for name, data in _every_file_text(local_ws.out / rid).items():
        assert SECRET_ENV["HF_TOKEN"].encode() not in data, name
    assert SECRET_ENV["HF_TOKEN"] not in proc.stderr + proc.stdout


@pytest.mark.parametrize("redact", [True, False], ids=["redacted", "--no-redact"])
def test_what_is_shared_is_redacted(ws, rid, redact):
    """An NCCL network failure names this host, a peer's IP and a home path; a token sits in the
    same error output. verdict.md/.json, env.json and commands.sh show none of them (with
    --no-redact: all but the token); the log keeps the identity (it is the evidence), never the token."""
    token = SECRET_ENV["HF_TOKEN"]
    extra = () if redact else ("--no-redact",)
    outcome = ws.run(rid, *extra, env={"HF_TOKEN": token},
                     fake_env={"FAKE_SLIME_FAULT": "nccl_network", "FAKE_SLIME_PRINT_ENV": "1",
                               "PLANTED_PATH": f"/home/alice/tokens/{token}"})
    assert outcome.code == 1, outcome.stderr[-3000:]
    verdict = outcome.verdict()
    assert verdict["status"] == "FAIL"
    assert any(e["class"] == "nccl_remote_error" for e in verdict["errors"])
    identity = ["10.23.4.56", "/home/alice"]
    if ws.runner == "local":  # in a container NCCL prints the container's host name
        identity.append(socket.gethostname())
    shared = {name: outcome.run_dir.joinpath(name).read_text() for name in
              ("verdict.md", "verdict.json", "env.json", "commands.sh")}
    for name, text in shared.items():
        assert token not in text, name
        if redact:
            for item in identity:
                assert item not in text, f"{name} shows {item}"
    if redact:
        assert "<ip>" in shared["verdict.md"] and "<host>:" in shared["verdict.md"] and "~/src/pytorch" in shared["verdict.md"]
    else:
        assert all(item in shared["verdict.md"] for item in identity)
    log = (outcome.run_dir / "logs" / "cp1.log").read_text()
    assert token not in log and "10.23.4.56" in log and "/home/alice/src/pytorch" in log
    ws.assert_nothing_left(rid)


@pytest.mark.docker
def test_containers_are_unprivileged_and_see_model_and_data_read_only(tmp_path, rid, cpverify_image, docker_client):
    ws = Workspace(tmp_path, "docker", image=cpverify_image[0], docker_client=docker_client)
    proc = ws.start(rid, env=SECRET_ENV, **PARKED)
    try:
        ws.wait_for_emitted(rid, LINES_BEFORE_THE_HANG)
        (container,) = docker_client.containers.list(filters={"label": f"cpverify.run={rid}"})
        host = container.attrs["HostConfig"]
        assert host["Privileged"] is False and not host.get("CapAdd")
        assert host["NetworkMode"] != "host"
        mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
        assert mounts["/cache"]["RW"] is False and mounts["/slime-under-test"]["RW"] is False
        assert mounts["/artifacts"]["RW"] is True  # the run's work directory, nothing else
        assert set(mounts) == {"/cache", "/slime-under-test", "/artifacts"}
        assert not any("docker.sock" in m["Source"] or m["Source"] in ("/", "/run", "/var/run") for m in mounts.values())
        env_names = {item.split("=", 1)[0] for item in container.attrs["Config"]["Env"]}
        assert not env_names & set(SECRET_ENV)
        # Really read-only, from inside: the model cache and the slime checkout cannot be changed.
        for path in ("/cache/hf", "/slime-under-test/train.py"):
            code, output = container.exec_run(["sh", "-c", f"touch {path} && echo writable"])
            assert code != 0 and b"Read-only file system" in output, (path, output)
        code, output = container.exec_run(["sh", "-c", "ls /var/run/docker.sock /run/docker.sock"])
        assert code != 0, output
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        outcome = ws.finish(proc, rid)
    assert outcome.code == 130, outcome.stderr[-3000:]
    ws.assert_nothing_left(rid)


def test_the_workload_cannot_reach_the_docker_engine_through_the_plan(tmp_path):
    """A mount of the Docker socket (or a directory holding it) is refused before anything runs."""
    code = ("from cpverify.runners.docker import BindMount, DockerRunner\n"
            "DockerRunner(image='x', run_id='r', mounts=[BindMount('/var/run', '/host-run')])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode != 0 and "it is or contains the Docker socket" in proc.stderr
