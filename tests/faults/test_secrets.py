"""Secrets and containment, with planted secrets, through `cpverify run` under both runners.

  * This machine's credentials (HF_TOKEN, PGPASSWORD, DATABASE_URL, ...) reach the fetch step and
    no workload; a secret the user gives the workload on purpose (`--set env=`, `--config`, a
    train argument) reaches it. Neither reaches the logs, env.json, verdict.md, verdict.json,
    commands.sh, state.json, anything else under the run directory, nor the terminal.
  * The planted-secret corpus (tests/helpers/secrets_corpus.py), planted in every way a secret
    can arrive, goes through `cpverify run` and `cpverify verdict` without a trace, while every
    ordinary line of the workload's output reaches the log unchanged.
  * Everything meant for sharing is redacted (tokens, home paths, user and host names, IPs),
    unless --no-redact; tokens never, whatever the flag.
  * Containers run unprivileged, on Docker's own network, with model, data and slime
    read-only and no Docker socket inside.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading

import pytest

from cpverify.model import round_name
from cpverify.profiles import QWEN_REVISION, SMOKE_TRAIN_ARGS
from cpverify.prompts import packaged_dataset_path
from faults.harness import ROOT, Workspace
from faults.test_run_faults import LINES_BEFORE_THE_HANG, PARKED
from helpers.secrets_corpus import CORPUS, by_via, secret_values

# Planted in cpverify's own environment: shaped like real credentials, random enough to be unique.
SECRET_ENV = {
    "HF_TOKEN": "hf_" + "Qx7bT2mN9pL4vR8sK1wZ3yC6dF0gH5jE2a",
    "GITHUB_TOKEN": "ghp_" + "4fG7hJ2kL9mN3bV6cX8zQ1wE5rT0yU2iO7pA",
    "WANDB_API_KEY": "wandb-planted-4c8e1f5a9b2d7e3f6a0b",
    "MY_SERVICE_PASSWORD": "planted-password-91ac37e2",
    "AWS_SECRET_ACCESS_KEY": "plantedAwsSecret/7Yq2+Zk9Lm4Np8Rt1Vx6",
}
DEFAULT_PROMPTS = packaged_dataset_path("cp_smoke.jsonl")
# Passed on purpose to the workload as a train argument (it needs it); Megatron prints its arguments.
WANDB_FLAG_VALUE = "wandb-flag-value-5e9d2c7a1b"


def _every_file_text(run_dir) -> dict[str, bytes]:
    """Every file cpverify wrote for the run (not the stand-in's ledger: the test's own instrument)."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in run_dir.rglob("*")
            if p.is_file() and "ledger" not in p.parts}


def test_tokens_reach_no_workload_log_or_artifact(ws, rid):
    train_args = [*SMOKE_TRAIN_ARGS, "--wandb-key", WANDB_FLAG_VALUE]
    # The profile's own environment may name a secret too: the workload gets it, the disk does not.
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
        for name in SECRET_ENV:  # the workload never had this machine's
            assert f"'{name}'" not in env_dump, f"{name} reached the {arm} workload"
        assert "'WANDB_KEY': '<redacted:secret>'" in env_dump  # the plan's it had, the log does not show
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
    identity = ["10.23.4.56", "/home/alice", "gpu-node-17", "ip-172-31-5-10", "corp.example.com"]
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
        # a placeholder per host and address, the same in verdict.md and verdict.json
        assert "~/src/pytorch" in shared["verdict.md"]
        for pattern in (r"(host-\d+):\d+:\d+ \[0\] misc/socket.cc", r"Its node (host-\d+) \(host-\d+\)",
                        r"Its node host-\d+ \((host-\d+)\)", r"Connect to (ip-\d+)<45931>"):
            # verdict.md shows log text escaped where markdown would read it (\<, \[): read it back
            texts = [re.sub(r"\\([\\`*_{}\[\]<>()#+.!|-])", r"\1", shared[name]) for name in ("verdict.md", "verdict.json")]
            placeholders = {m.group(1) for text in texts for m in re.finditer(pattern, text)}
            assert len(placeholders) == 1, (pattern, placeholders)
        for item in identity:
            assert item not in outcome.stdout + outcome.stderr, f"the terminal shows {item}"
    else:
        kept = shared["verdict.md"] + shared["verdict.json"]  # verdict.md quotes a part of what the json keeps
        assert all(item in kept for item in identity), [item for item in identity if item not in kept]
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
    code = ("from cpverify.model import Mount\nfrom cpverify.runners.docker import DockerRunner\n"
            "DockerRunner(image='x', run_id='r', mounts=[Mount('/var/run', '/host-run')])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode != 0 and "it is or contains the Docker socket" in proc.stderr


def _assignments(via: str) -> dict[str, str]:
    """NAME -> value of the corpus entries planted as variables (`NAME=value` lines, or a bare value)."""
    out = {}
    for planted in by_via(via):
        name, eq, value = planted.text.partition("=")
        out[planted.name] = value if eq and name == planted.name else planted.text
    return out


def test_the_planted_corpus_leaves_no_trace_in_anything_a_run_or_a_verdict_writes_or_prints(local_ws, rid, tmp_path):
    """Every secret of the corpus, planted as it arrives in real life -- cpverify's environment,
    `--set env=`, `--config`, train arguments, URLs, dataset prompts, the workload's own output (a
    PEM block split across writes) -- through `cpverify run` (local runner, fake slime) and then
    `cpverify verdict` on a log that still holds them: no planted value in any file of either, nor
    on their stdout or stderr; and the workload's ordinary lines reach the log byte for byte."""
    ws = local_ws
    data = tmp_path / "planted-prompts.jsonl"
    data.write_text("".join(json.dumps({"messages": [{"role": "user", "content": p.text}]}) + "\n"
                            for p in by_via("prompt")) + DEFAULT_PROMPTS.read_text(encoding="utf-8"))
    output = tmp_path / "planted-output.txt"
    output.write_text("\n".join(p.text for p in by_via("output")) + "\n")
    train_args = [*SMOKE_TRAIN_ARGS, *(word for p in by_via("arg") for word in shlex.split(p.text))]
    fake_env = {"FAKE_SLIME_PRINT_ENV": "1", "FAKE_SLIME_ECHO_PROMPTS": "8", "FAKE_SLIME_PRINT_FILE": str(output),
                **_assignments("config")}
    outcome = ws.run(rid, only="doctor,fetch,compileall,lint,cp1,cp2,verdict", env=_assignments("env"),
                     fake_env=fake_env, set_env=_assignments("set"), train_args=train_args, dataset=str(data))
    assert outcome.code == 0, outcome.stderr[-3000:]
    assert outcome.verdict()["status"] == "PASS"

    # the same logs (every round, in round order), handed to `cpverify verdict` the way a user pastes
    # theirs: with the secrets in round 1 of the baseline
    planted_log = tmp_path / "cp1-with-secrets.log"
    planted_log.write_text((outcome.run_dir / "logs" / "cp1.log").read_text() + output.read_text())
    per_arm = outcome.verdict()["rounds"]["per_arm"]
    given = [word for arm, option in (("cp1", "--baseline"), ("cp2", "--candidate")) for k in range(1, per_arm[arm] + 1)
             for word in (option, str(planted_log) if (arm, k) == ("cp1", 1) else
                          str(outcome.run_dir / "logs" / f"{round_name(arm, k)}.log"))]
    bundle = tmp_path / "bundle"
    verdicts = [subprocess.run([sys.executable, "-m", "cpverify", "verdict", *given, "--out", str(bundle), *json_],
                               capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
                for json_ in ((), ("--json",))]
    assert [v.returncode for v in verdicts] == [0, 0], verdicts[0].stderr[-2000:]

    written = {**{f"run/{k}": v for k, v in _every_file_text(outcome.run_dir).items()},
               **{f"bundle/{k}": v for k, v in _every_file_text(bundle).items()}}
    assert {"run/state.json", "run/env.json", "run/commands.sh", "run/verdict.md", "run/logs/cp1.log",
            "bundle/logs/cp1.log", "bundle/verdict.json"} <= set(written)
    printed = {"run stdout": outcome.stdout, "run stderr": outcome.stderr,
               **{f"verdict {i} {stream}": getattr(v, stream) for i, v in enumerate(verdicts) for stream in ("stdout", "stderr")}}
    secrets = secret_values()
    for name, content in [*written.items(), *((k, v.encode()) for k, v in printed.items())]:
        leaked = [secret for secret in secrets if secret.encode() in content]
        assert not leaked, f"{name} holds planted secrets: {leaked}"

    # What was planted for the workload reached it; this machine's credentials did not.
    log = (outcome.run_dir / "logs" / "cp1.log").read_text()
    env_dump = next(line for line in log.splitlines() if "runtime_env env_vars:" in line)
    for name in {**_assignments("set"), **_assignments("config")}:
        assert re.search(rf"'{name}': '[^']*<redacted", env_dump), f"{name} did not reach the workload"
    for name in _assignments("env"):
        assert f"'{name}'" not in env_dump, f"{name} of cpverify's environment reached the workload"
    arguments = next(line for line in log.splitlines() if " arguments: " in line)
    assert "--wandb-key <redacted:secret>" in arguments and "--sglang-api-key=<redacted:secret>" in arguments
    assert "--wandb-host=<redacted:secret>" in arguments  # a secret by its value: the whole value is known secret
    assert '--wandb-host="${WANDB_HOST}"' in written["run/commands.sh"].decode()  # a secret by value, masked

    # Nothing else was touched: every line the workload printed that holds no planted text is in the
    # log byte for byte (a redactor that eats numbers, paths or model names fails here), line for line.
    emitted = ws.emitted(rid, cp=1)
    logged = log.splitlines()
    assert len(logged) == len(emitted)
    planted_text = {line.strip() for p in CORPUS for line in p.text.replace("\\n", "\n").splitlines() if line.strip()}
    ordinary = [(e, g) for e, g in zip(emitted, logged, strict=True)
                if not any(s in e for s in secrets) and not any(t in e for t in planted_text)]
    assert [(e, g) for e, g in ordinary if e != g] == []
    assert len(ordinary) >= 40 and sum("'perf/actor_train_time'" in e for e, _ in ordinary) >= 3
    # ...and a 40-hex commit, a sha256, the model's name survive in what is shared
    env_json = json.loads(written["run/env.json"])
    assert env_json["profile"]["model_revision"] == QWEN_REVISION and "Qwen/Qwen2.5-0.5B-Instruct" in json.dumps(env_json)
    bundle_env = json.loads(written["bundle/env.json"])
    assert re.fullmatch(r"[0-9a-f]{64}", bundle_env["inputs"]["baseline"]["sha256"])
    # the hosts the secrets came with are placeholders in what is shared, not in the raw log
    for name in ("run/verdict.md", "run/verdict.json", "run/env.json", "run/commands.sh", "bundle/logs/cp1.log",
                 "bundle/verdict.md"):
        assert b"corp.example.com" not in written[name] and b"cache.internal" not in written[name], name
    assert "redis://<redacted:secret>@cache.internal:6379" in log
