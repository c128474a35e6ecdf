"""cpverify.redact: nothing secret or identifying reaches an artifact; useful facts survive."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpverify import redact, report
from cpverify import verdict as v
from cpverify.artifacts import RunDir
from cpverify.logs import ErrorRecord
from cpverify.redact import is_secret_name, redact_json, redact_text
from cpverify.runners.base import ArmResult
from helpers.slime_log import synthetic_arm

HF = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3f"
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GH_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
WANDB = "0123456789abcdef0123456789abcdef01234567"
BEARER = "eyJhbGciOiJIUzI1NiJ9xyz"
PASSWORD = "hunter2-correct-horse"
URL_PASS = "s3cr3tpass"
ENV_ONLY = "plain-secret-from-env-42"  # no recognisable shape: caught only because HF_TOKEN holds it
HOST = "gpu-node-17.example.internal"
USER = "alice"
IPV4 = "10.164.227.153"
IPV6 = "2001:db8::8a2e:370:7334"

SECRETS = [HF, GHP, GH_PAT, AWS_ID, AWS_SECRET, WANDB, BEARER, PASSWORD, URL_PASS, ENV_ONLY, HOST, "gpu-node-17",
           "/home/alice", "/Users/bob", IPV4, IPV6]
# Near-misses: shaped a little like secrets or addresses, but they are what makes a report useful.
SURVIVORS = ["NCCL version 2.28.9+cuda12.9", "CUDA 12.9", "--lr 1e-6", "Timeout(ms)=600000", "2026-08-21 10:00:28",
             "12:58:32.712922209", "--input-key messages", "--label-key label", "--max-tokens-per-gpu 2048",
             "127.0.0.1", "/root/models/Qwen2.5-0.5B-Instruct", "cudnn==9.10.2.21", "std::string", "c10::Error",
             "perf/tokens_per_gpu_per_sec", "--rollout-batch-size 2", "torch 2.11.0+cu129"]


@pytest.fixture
def this_machine(monkeypatch):
    """Pretend to be a named host with a named user and secrets in the environment."""
    monkeypatch.setattr(redact.socket, "gethostname", lambda: HOST)
    monkeypatch.setattr(redact.getpass, "getuser", lambda: USER)
    monkeypatch.setenv("HOME", "/home/alice")
    monkeypatch.setenv("HF_TOKEN", ENV_ONLY)
    redact._machine_identity.cache_clear()
    yield
    redact._machine_identity.cache_clear()


PLANTED_TEXT = (
    f"export HF_TOKEN={HF} GITHUB_TOKEN={GHP} WANDB_API_KEY={WANDB}\n"
    f"git clone https://x:{GH_PAT}@github.com/THUDM/slime && aws_access_key_id={AWS_ID} "
    f"aws_secret_access_key = {AWS_SECRET}\n"
    f"curl -H 'Authorization: Bearer {BEARER}' https://me:{URL_PASS}@hub.example.com/x password={PASSWORD}\n"
    f"python3 /home/alice/slime/train.py --wandb-key {WANDB} --input-key messages --label-key label "
    f"--max-tokens-per-gpu 2048 --rollout-batch-size 2 --lr 1e-6 --hf-checkpoint /root/models/Qwen2.5-0.5B-Instruct\n"
    f"(SGLangEngine pid=1, ip={IPV4}) {HOST}:228141:228141 [0] NCCL INFO NCCL version 2.28.9+cuda12.9 CUDA 12.9\n"
    f"gpu-node-17:1:2 [0] NCCL INFO Bootstrap: Using eth0:{IPV4}<0> via {IPV6} user {USER} at /Users/bob/x "
    f"leaked {ENV_ONLY}\n"
    "[E0821 12:58:32.712922209 ProcessGroupNCCL.cpp:616] Timeout(ms)=600000 at 2026-08-21 10:00:28 "
    "cudnn==9.10.2.21 std::string c10::Error perf/tokens_per_gpu_per_sec torch 2.11.0+cu129 127.0.0.1\n"
)


def test_redact_text_removes_every_planted_secret(this_machine):
    out = redact_text(PLANTED_TEXT)
    for secret in SECRETS:
        assert secret not in out, secret
    assert USER not in out.split()
    for survivor in SURVIVORS:
        assert survivor in out, survivor
    for placeholder in ("<redacted:token>", "<redacted:secret>", "<host>", "<ip>", "~/slime/train.py", "<user>"):
        assert placeholder in out


@pytest.mark.parametrize(("text", "expected"), [
    (f"HF_TOKEN={HF}", "HF_TOKEN=<redacted:token>"),
    ("export A=1 HF_TOKEN=abcdef123456", "export A=1 HF_TOKEN=<redacted:secret>"),  # A=1 must not swallow it
    ('{"token": "abc123xyz", "n": 1}', '{"token": "<redacted:secret>", "n": 1}'),
    ("--hf-token abcdef123456 --lr 1e-6", "--hf-token <redacted:secret> --lr 1e-6"),
    ("--wandb-key=abcdef123456", "--wandb-key=<redacted:secret>"),
    ("--wandb-key --next-flag", "--wandb-key --next-flag"),
    ("Authorization: Bearer abcdefgh12345", "Authorization: Bearer <redacted:token>"),
    ("https://bob:pw1234@host/x", "https://<redacted:secret>@host/x"),
    ("the token was rejected", "the token was rejected"),
    ("--input-key prompt --tool-key tools", "--input-key prompt --tool-key tools"),
    ("--max-tokens-per-gpu 2048", "--max-tokens-per-gpu 2048"),
    ("http://10.0.0.5:8265 and 192.168.1.4", "http://<ip>:8265 and <ip>"),
    ("ray start --node-ip-address 127.0.0.1", "ray start --node-ip-address 127.0.0.1"),
    ("fe80::1ff:fe23:4567:890a %s ::1", "<ip> %s ::1"),
    ("a 256.1.1.1 b", "a 256.1.1.1 b"),
    ("MAC aa:bb:cc:dd:ee:ff PCI 0000:1b:00.0", "MAC aa:bb:cc:dd:ee:ff PCI 0000:1b:00.0"),
    ("/home/someone/else and /Users/x/y and /root/.cache", "~/else and ~/y and /root/.cache"),
])
def test_redact_text_cases(text, expected):
    assert redact_text(text) == expected


def test_extra_secrets_are_removed_literally():
    assert redact_text("run id s3kr1t-run appears", extra_secrets=["s3kr1t-run"]) == "run id <redacted:secret> appears"


@pytest.mark.parametrize(("name", "secret"), [
    ("HF_TOKEN", True), ("hf_token", True), ("--hf-token", True), ("WANDB_API_KEY", True), ("apiKey", True),
    ("AWS_SECRET_ACCESS_KEY", True), ("password", True), ("DB_PASSWD", True), ("--wandb-key", True),
    ("key", True), ("GOOGLE_APPLICATION_CREDENTIALS", True), ("accessToken", True),
    ("--input-key", False), ("--label-key", False), ("--metadata-key", False), ("max_tokens", False),
    ("perf/tokens_per_gpu_per_sec", False), ("keyboard", False), ("NCCL_IB_HCA", False), ("KeyError", False),
])
def test_secret_names(name, secret):
    assert is_secret_name(name) is secret


def test_redact_json_hides_secret_fields_and_keeps_versions(this_machine):
    data = {"env": {"HF_TOKEN": "anything-at-all", "WANDB_API_KEY": 12345678, "NCCL_DEBUG": "INFO",
                    "empty_token": ""},
            "versions": {"cudnn_version": "9.10.2.21", "nccl": "2.28.9"},
            "hosts": [HOST, f"ip {IPV4}"], "nested": [{"password": ["a", "b"]}]}
    out = redact_json(data)
    assert out["env"] == {"HF_TOKEN": "<redacted:secret>", "WANDB_API_KEY": "<redacted:secret>",
                          "NCCL_DEBUG": "INFO", "empty_token": ""}
    assert out["versions"] == {"cudnn_version": "9.10.2.21", "nccl": "2.28.9"}
    assert out["hosts"] == ["<host>", "ip <ip>"]
    assert out["nested"] == [{"password": ["<redacted:secret>", "<redacted:secret>"]}]
    assert data["env"]["HF_TOKEN"] == "anything-at-all"  # a copy: the input is untouched


def test_every_artifact_is_redacted(tmp_path, this_machine):
    cp1 = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()
    cp2 = synthetic_arm(cp=2, actor_train_time=1.0, seed=2).expected()
    cp2.errors.append(ErrorRecord("nccl_timeout", 99, PLANTED_TEXT.replace("\n", " ")))
    result = ArmResult("cp2", "fatal", None, Path("cp2.log"), 5.0, reason=f"stopped on {HOST} with {HF}")
    verdict = v.decide([v.ArmEvidence("cp1", 1, cp1), v.ArmEvidence("cp2", 2, cp2, result)],
                       comparisons=[("cp1", "cp2")])
    env = {"hostname": HOST, "user": USER, "home": "/home/alice", "HF_TOKEN": HF, "ip": IPV4,
           "nccl_version": "2.28.9+cuda12.9", "cuda": "12.9", "cudnn_version": "9.10.2.21",
           "argv": PLANTED_TEXT.splitlines()}
    paths = report.write_report(RunDir.create(tmp_path / "run"), verdict, env=env, commands_sh=PLANTED_TEXT)
    for name, path in paths.items():
        raw = path.read_bytes()  # plot.png included: its labels come from the verdict too
        for secret in SECRETS:
            assert secret.encode() not in raw, f"{secret!r} leaked into {name}"
        text = raw.decode("utf-8", errors="replace")
        if name in ("commands.sh", "verdict.md"):
            for survivor in SURVIVORS:
                assert survivor in text, f"{survivor!r} lost from {name}"
    assert '"cudnn_version": "9.10.2.21"' in paths["verdict.md"].read_text()  # same as env.json, not "<ip>"
    env_out = json.loads(paths["env.json"].read_text())
    assert env_out["nccl_version"] == "2.28.9+cuda12.9" and env_out["cudnn_version"] == "9.10.2.21"
    assert env_out["HF_TOKEN"] == "<redacted:secret>" and env_out["user"] == "<user>"
    data = json.loads(paths["verdict.json"].read_text())
    assert data["status"] == "FAIL" and "<redacted:token>" in data["errors"][0]["text"]


def test_write_report_can_keep_everything_when_asked(tmp_path, this_machine):
    verdict = v.decide([v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()),
                        v.ArmEvidence("cp2", 2, synthetic_arm(cp=2, actor_train_time=1.0, seed=2).expected())],
                       comparisons=[("cp1", "cp2")])
    paths = report.write_report(tmp_path, verdict, env={"hostname": HOST}, commands_sh=f"ssh {IPV4}\n", redact=False)
    assert HOST in paths["env.json"].read_text() and IPV4 in paths["commands.sh"].read_text()


def test_cli_copies_logs_redacted(tmp_path, this_machine, monkeypatch):
    from cpverify.cli import main

    cp1 = synthetic_arm(cp=1, actor_train_time=1.0, seed=1)
    cp1.raw(f"(MegatronTrainRayActor pid=1) wandb login {WANDB} --relogin; HF_TOKEN={HF}")
    cp2 = synthetic_arm(cp=2, actor_train_time=1.0, seed=2)
    base, cand = cp1.write(tmp_path / "a.log"), cp2.write(tmp_path / "b.log")
    monkeypatch.chdir(tmp_path)
    code = main(["verdict", "--baseline", str(base), "--candidate", str(cand), "--out", "bundle"])
    assert code == 0
    copied = (tmp_path / "bundle" / "logs" / "cp1.log").read_text()
    assert HF not in copied and "172.17.0.3" not in copied and "e54db9740f9d" not in copied
    assert copied.count("\n") == len(cp1.lines)  # line numbers in the verdict still point at the same lines
    assert "NCCL version 2.28.9+cuda12.9" in copied


def test_shell_working_directories_are_not_secrets():
    """PWD holds a path, not a password: logs must keep `PWD=/work/main` readable."""
    from cpverify.redact import is_secret_name, redact_text

    assert not is_secret_name("PWD") and not is_secret_name("OLDPWD")
    assert is_secret_name("DB_PWD") and is_secret_name("MYSQL_PWD")
    assert redact_text("PWD=/opt/slime") == "PWD=/opt/slime"
