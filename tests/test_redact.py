"""cpverify.redact: nothing secret or identifying reaches an artifact; useful facts survive.

The planted-secret corpus (tests/helpers/secrets_corpus.py) is the yardstick: every entry must go
from every redactor (artifacts, the streaming scrubber, the terminal), in its context and, for the
kinds recognised by shape, alone; and the SURVIVORS must come through untouched.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpverify
from cpverify import redact, report
from cpverify import verdict as v
from cpverify.artifacts import RunDir
from cpverify.model import ArmResult
from cpverify.parse import ErrorRecord
from cpverify.redact import (
    SECRET,
    LineScrubber,
    Pseudonyms,
    Redactor,
    contains_secret,
    environment,
    is_secret_name,
    print_json,
    redact_json,
    redact_text,
    redacted_terminal,
    scrub_credentials,
    secret_fragments,
)
from cpverify.redact.credentials import GATE, Credentials
from cpverify.redact.values import TOKEN, VALUE_KINDS
from helpers.secrets_corpus import CORPUS, SURVIVORS, secret_values
from helpers.slime_log import synthetic_arm

ROOT = Path(__file__).resolve().parent.parent
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


@pytest.fixture
def this_machine(monkeypatch):
    """Pretend to be a named host with a named user and secrets in the environment."""
    monkeypatch.setattr(environment.socket, "gethostname", lambda: HOST)
    monkeypatch.setattr(environment.getpass, "getuser", lambda: USER)
    monkeypatch.setenv("HOME", "/home/alice")
    monkeypatch.setenv("HF_TOKEN", ENV_ONLY)
    environment.machine_identity.cache_clear()
    yield
    environment.machine_identity.cache_clear()


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
    for survivor in ("NCCL version 2.28.9+cuda12.9", "--input-key messages", "Timeout(ms)=600000", "127.0.0.1",
                     "/root/models/Qwen2.5-0.5B-Instruct", "cudnn==9.10.2.21", "--lr 1e-6"):
        assert survivor in out, survivor
    for placeholder in ("<redacted:token>", "<redacted:secret>", "host-1", "ip-1", "ip-2", "~/slime/train.py", "<user>"):
        assert placeholder in out


# -- the corpus ----------------------------------------------------------------------------------


@pytest.mark.parametrize("planted", CORPUS, ids=lambda p: f"{p.kind}-{p.via}")
@pytest.mark.parametrize("identity", [True, False], ids=["redacted", "--no-redact"])
def test_every_planted_secret_goes_from_artifacts_in_its_context(planted, identity):
    glue = "\n" if planted.ends_line else " "
    out = redact_text(f"before {planted.text}{glue}after\n", identity=identity)
    leaked = [value for value in secret_values() if value in planted.text and value in out]
    assert not leaked, out
    assert out.startswith("before ") and out.endswith(f"{glue}after\n")


@pytest.mark.parametrize("planted", CORPUS, ids=lambda p: f"{p.kind}-{p.via}")
def test_every_planted_secret_goes_from_the_log_stream_line_by_line(planted):
    """The scrubber sees one line at a time (a PEM block: one call per line of it)."""
    scrub = LineScrubber()
    lines = f"(MegatronTrainRayActor pid=7) start\n{planted.text}\nstep 3: done\n".encode().splitlines(keepends=True)
    out = b"".join(scrub(line) for line in lines).decode()
    assert not [value for value in secret_values() if value in planted.text and value in out], out
    assert out.startswith("(MegatronTrainRayActor pid=7) start\n") and out.endswith("step 3: done\n")
    assert out.count("\n") == len(lines)  # no line lost or added: line numbers stay true


@pytest.mark.parametrize("planted", [p for p in CORPUS if p.bare], ids=lambda p: p.kind)
def test_secrets_shaped_like_one_are_recognised_without_a_name(planted):
    assert contains_secret(f"got {planted.value} here")
    assert planted.value not in scrub_credentials(f"got {planted.value} here")


def test_the_corpus_is_broad():
    assert len(CORPUS) >= 40
    assert {p.via for p in CORPUS} == {"env", "set", "config", "arg", "prompt", "output"}
    assert {kind.name for kind in VALUE_KINDS} - {p.kind for p in CORPUS} == set(), "a rule without an example"


@pytest.mark.parametrize("survivor", SURVIVORS)
@pytest.mark.parametrize("identity", [True, False], ids=["redacted", "--no-redact"])
def test_what_makes_a_report_useful_survives(survivor, identity):
    assert redact_text(survivor, identity=identity) == survivor
    assert LineScrubber()(survivor.encode()) == survivor.encode()


def test_every_rule_is_behind_the_gate():
    """A line the gate skips never reaches the rules: every secret's context must pass it."""
    for planted in CORPUS:
        for line in planted.text.splitlines():
            if redact_text(line, identity=False) != line:
                assert GATE.search(line.lower()), line
    for name in ("PGPASSWORD", "DB_PASS", "GITHUB_PAT", "MY_SERVICE_CREDS", "SENTRY_DSN", "DATABASE_URL",
                 "RAY_JOB_HEADERS", "COOKIE", "SESSION", "X-Amz-Signature", "sig", "JWT", "SLACK_WEBHOOK",
                 "connection_string", "apiKey", "Authorization", "BEARER", "DB_PWD", "HF_TOKEN", "hfToken", "--wandb-key",
                 "--router-control-plane-api-keys", "API_KEY_V2", "accessKeyValue", "hf_token_", "github.pat",
                 "MY_TOKEN_2", "TOKEN1", "HF_TOKEN_VALUE", "WANDB_API_KEY_PROD", "my_key_2", "privatekey", "GH_PAT_OLD"):
        assert is_secret_name(name) and GATE.search(f"{name}=v4lue-8d2".lower()), name


def test_a_stem_inside_a_longer_word_does_not_open_the_gate():
    """`tokens_per_gpu_per_sec`, `--model-path`, `keyboard`: not names a credential is held by."""
    for line in ("perf 3: {'perf/tokens_per_gpu_per_sec': 245.8, 'perf/longest_sample_tokens_per_sec': 11.0}",
                 "--load /ckpt --model-path /models/qwen", "keyboard interrupt", "--max-tokens-per-gpu 9216"):
        assert not GATE.search(line.lower()), line
        assert not is_secret_name(line.split()[0])


def test_the_log_stream_reads_a_name_in_lower_case_as_the_rules_do():
    """str.lower() makes the Kelvin sign a k, as is_secret_name does: one line or many, the stream too."""
    line = "MY_TO\u212aEN=Zq8xV3mN1pL7wR2t\n".encode()
    assert b"Zq8xV3mN1pL7wR2t" not in LineScrubber()(line)
    assert b"Zq8xV3mN1pL7wR2t" not in b"".join(LineScrubber().lines([b"step 1\n", line, "tqdm \u2588 5%\n".encode()]))


# -- properties: for all inputs -----------------------------------------------------------------

_BENIGN = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers().map(str),
    st.from_regex(r"\A/(?:root|opt|usr|tmp|workspace)(?:/[a-z0-9_.-]{1,12}){1,4}\Z"),
    st.from_regex(r"\A[0-9a-f]{40}\Z|\A[0-9a-f]{64}\Z"),  # git commits, sha256 digests
    st.sampled_from(["Qwen/Qwen2.5-0.5B-Instruct", "--input-key", "--label-key", "--max-tokens-per-gpu",
                     "'perf/actor_train_time':", "'perf/tokens_per_gpu_per_sec':", "step", "rollout", "NCCL INFO",
                     "pass_ratio=1.3", "--fim-pad-token", "torch 2.11.0+cu129", "(MegatronTrainRayActor pid=7)", "{",
                     "}", ",", ":", "=", "[2026-08-21 10:00:28]", "Bearer tokens", "the key is", "token_ids"]),
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_BENIGN, min_size=1, max_size=12))
def test_ordinary_log_text_is_never_changed(words):
    """Numbers, paths, digests, model names and slime's flags pass through the credential rules untouched."""
    text = " ".join(words)
    assert scrub_credentials(text) == text
    assert LineScrubber()(text.encode()) == text.encode()


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CORPUS), st.lists(_BENIGN, max_size=5), st.lists(_BENIGN, max_size=5),
       st.sampled_from([" ", "\t", " ; ", ", "]))
def test_a_planted_secret_never_survives_whatever_surrounds_it(planted, before, after, glue):
    text = glue.join([*before, planted.text, *after])
    scrub = LineScrubber()
    for out in (redact_text(text), redact_text(text, identity=False),
                b"".join(scrub(line) for line in text.encode().splitlines(keepends=True)).decode()):
        assert not [value for value in secret_values() if value in planted.text and value in out]


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(CORPUS), min_size=1, max_size=6), st.lists(st.integers(1, 6), min_size=1))
def test_the_stream_and_the_artifacts_apply_one_definition(picked, block_sizes):
    """However the lines arrive (one by one or in blocks of any size, a PEM block cut anywhere), the
    streaming scrubber writes exactly what the artifact redactor (credentials only) makes of the text."""
    text = "".join(f"(Actor pid=1) line {i}\n{p.text}\n" for i, p in enumerate(picked))
    lines = text.encode().splitlines(keepends=True)
    scrub, out, i, sizes = LineScrubber(), [], 0, iter(block_sizes * len(lines))
    while i < len(lines):
        size = next(sizes)
        out += scrub.lines(lines[i: i + size])
        i += size
    assert b"".join(out).decode() == scrub_credentials(text)


# -- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "secret"), [
    ("HF_TOKEN", True), ("hf_token", True), ("--hf-token", True), ("WANDB_API_KEY", True), ("apiKey", True),
    ("AWS_SECRET_ACCESS_KEY", True), ("password", True), ("DB_PASSWD", True), ("--wandb-key", True),
    ("key", True), ("GOOGLE_APPLICATION_CREDENTIALS", True), ("accessToken", True), ("PGPASSWORD", True),
    ("DB_PASS", True), ("GITHUB_PAT", True), ("MY_SERVICE_CREDS", True), ("SENTRY_DSN", True), ("DATABASE_URL", True),
    ("RAY_JOB_HEADERS", True), ("SLACK_WEBHOOK_URL", True), ("X-Amz-Signature", True), ("X-Amz-Credential", True),
    ("X-Amz-Security-Token", True), ("sig", True), ("Cookie", True), ("HF_HUB_AUTH_HEADER", True), ("GHTOKEN", True),
    ("--input-key", False), ("--label-key", False), ("--metadata-key", False), ("max_tokens", False),
    ("perf/tokens_per_gpu_per_sec", False), ("keyboard", False), ("NCCL_IB_HCA", False), ("KeyError", False),
    ("--fim-pad-token", False), ("--calculate-per-token-loss", False), ("--moe-token-dispatcher-type", False),
    ("--rl-skip-bos-token", False), ("--memory-keys", False), ("pass_ratio", False), ("HF_ENDPOINT", False),
    ("PASSWORD_FILE", False), ("SSH_AUTH_SOCK", False), ("aws_access_key_id", False), ("X-Amz-Date", False),
    ("--rm-url", False), ("signature_version", False), ("PATH", False), ("PASS", False), ("pat", False),
    # qualifiers after the noun say which credential, not what the value is
    ("MY_TOKEN_2", True), ("TOKEN1", True), ("HF_TOKEN_VALUE", True), ("refresh_token_v2", True),
    ("WANDB_API_KEY_PROD", True), ("hub_token_new", True), ("my_key_2", True), ("privatekey", True),
    ("GH_PAT_OLD", True), ("PASSWORD_FILE_2", False), ("max_tokens_2", False), ("--input-key-2", False),
    ("token_ids", False), ("num_tokens_new", False),
])
def test_secret_names(name, secret):
    assert is_secret_name(name) is secret


def test_of_slimes_known_flags_exactly_the_credentials_are_secret():
    """A flag wrongly taken for a secret is masked in commands.sh and the logs: a broken reproduction.
    (--router-request-id-headers holds header names, --...-experts-per-token a count.)"""
    flags = Path(cpverify.__file__).with_name("data").joinpath("known_flags.txt").read_text().split()
    assert [flag for flag in flags if is_secret_name(flag)] == [
        "--router-api-key", "--router-control-plane-api-keys", "--router-oracle-password", "--router-postgres-db-url",
        "--sglang-admin-api-key", "--sglang-api-key", "--sglang-ssl-keyfile-password", "--wandb-key"]


def test_shell_working_directories_are_not_secrets():
    """PWD holds a path, not a password: logs must keep `PWD=/work/main` readable."""
    assert not is_secret_name("PWD") and not is_secret_name("OLDPWD")
    assert is_secret_name("DB_PWD") and is_secret_name("MYSQL_PWD")
    assert redact_text("PWD=/opt/slime") == "PWD=/opt/slime"


@pytest.mark.parametrize(("text", "expected"), [
    (f"HF_TOKEN={HF}", "HF_TOKEN=<redacted:token>"),
    ("export A=1 HF_TOKEN=abcdef123456", "export A=1 HF_TOKEN=<redacted:secret>"),  # A=1 must not swallow it
    ('{"token": "abc123xyz", "n": 1}', '{"token": "<redacted:secret>", "n": 1}'),
    ("--hf-token abcdef123456 --lr 1e-6", "--hf-token <redacted:secret> --lr 1e-6"),
    ("--wandb-key=abcdef123456", "--wandb-key=<redacted:secret>"),
    ("--wandb-key --next-flag", "--wandb-key --next-flag"),
    ("PASS: no errors, pass=3 FAIL: 1", "PASS: no errors, pass=3 FAIL: 1"),  # a status is not a password
    ("| cp1 | error | --wandb-key      | none of this slime's parsers consumed it |",  # a lint table's cell
     "| cp1 | error | --wandb-key      | none of this slime's parsers consumed it |"),
    ("Authorization: Bearer abcdefgh12345", "Authorization: Bearer <redacted:token>"),
    ("Authorization: Token abcdefgh", "Authorization: Token <redacted:token>"),
    ("https://bob:pw1234@host/x", "https://<redacted:secret>@host-1/x"),
    ("https://s3.example.internal/b?X-Amz-Date=1&X-Amz-Signature=abc123&n=2",
     "https://host-1/b?X-Amz-Date=1&X-Amz-Signature=<redacted:secret>&n=2"),
    ("the token was rejected", "the token was rejected"),
    ("--input-key prompt --tool-key tools", "--input-key prompt --tool-key tools"),
    ("--max-tokens-per-gpu 2048", "--max-tokens-per-gpu 2048"),
    ("http://10.0.0.5:8265 and 192.168.1.4 and 10.0.0.5", "http://ip-1:8265 and ip-2 and ip-1"),
    ("ray start --node-ip-address 127.0.0.1", "ray start --node-ip-address 127.0.0.1"),
    ("fe80::1ff:fe23:4567:890a %s ::1", "ip-1 %s ::1"),
    ("a 256.1.1.1 b", "a 256.1.1.1 b"),
    ("MAC aa:bb:cc:dd:ee:ff PCI 0000:1b:00.0", "MAC aa:bb:cc:dd:ee:ff PCI 0000:1b:00.0"),
    ("/home/someone/else and /Users/x/y and /root/.cache", "~/else and ~/y and /root/.cache"),
    ("gpu-node-17.corp.example.com failed; gpu-node-17 again, ip-172-31-5-10.us-west-2.compute.internal too",
     "host-1 failed; host-1 again, host-2 too"),
    ("ssh ip-172-31-5-10 then http://ray-head:8265/api", "ssh host-2 then http://host-1:8265/api"),
    ("https://huggingface.co/Qwen/x --ray-address http://HEAD:8265 http://localhost:8265",
     "https://huggingface.co/Qwen/x --ray-address http://HEAD:8265 http://localhost:8265"),
])
def test_redact_text_cases(text, expected):
    assert redact_text(text) == expected


def test_extra_secrets_are_removed_literally():
    assert redact_text("run id s3kr1t-run appears", extra_secrets=["s3kr1t-run"]) == "run id <redacted:secret> appears"


def test_values_too_plain_to_remove_everywhere_are_only_removed_by_name(monkeypatch):
    """SESSION_TIMEOUT=600000 must not eat NCCL's `Timeout(ms)=600000`, nor AUTH_ENABLED=true every `true`."""
    monkeypatch.setenv("MY_SESSION", "600000")
    monkeypatch.setenv("ENABLE_AUTH", "true")
    assert redact_text("Timeout(ms)=600000 true") == "Timeout(ms)=600000 true"
    assert LineScrubber()(b"Timeout(ms)=600000 true\n") == b"Timeout(ms)=600000 true\n"


# nox runs each step with NOX_CURRENT_SESSION=<the step>; desktops set DESKTOP_SESSION=ubuntu. Both
# names end in "session", and their values once went from every file: `nox -s verify_cp`'s verdict
# step wrote "## cpverify <redacted:secret>: PASS" and the doctor step's state.json lost its key.
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(word=st.from_regex(r"[a-z]{6,12}(_[a-z]{2,6})?", fullmatch=True))
def test_a_session_variable_holding_a_plain_word_removes_nothing_elsewhere(monkeypatch, word):
    for name in ("NOX_CURRENT_SESSION", "DESKTOP_SESSION", "MY_SESSION", "SSO_AUTH"):
        monkeypatch.setenv(name, word)
    text = f"## cpverify {word}: PASS on {word}\n"
    assert redact_text(text) == text
    assert LineScrubber()(text.encode()) == text.encode()


def test_a_session_variable_holding_a_session_key_is_still_removed_everywhere(monkeypatch):
    monkeypatch.setenv("BW_SESSION", "x7Gq9w8ZkP2LmN4vQ0cR==")
    assert "x7Gq9w8ZkP2LmN4vQ0cR" not in redact_text("unlock with x7Gq9w8ZkP2LmN4vQ0cR== now")
    assert redact.literal_secret("BW_SESSION", "x7Gq9w8ZkP2LmN4vQ0cR==")
    assert not redact.literal_secret("NOX_CURRENT_SESSION", "verdict")


def test_a_nox_step_writes_its_verdict_unredacted(tmp_path, monkeypatch):
    from cpverify.cli import main

    monkeypatch.setenv("NOX_CURRENT_SESSION", "verdict")  # what `nox -s verdict` sets
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "a.log")
    # CP=2 at 0.6x: one log per arm decides it (PASS), so exit 0 says the whole bundle was written
    cand = synthetic_arm(cp=2, actor_train_time=0.6, seed=2).write(tmp_path / "b.log")
    monkeypatch.chdir(tmp_path)
    assert main(["verdict", "--baseline", str(base), "--candidate", str(cand), "--out", "bundle"]) == 0
    md = (tmp_path / "bundle" / "verdict.md").read_text()
    assert "cpverify verdict" in md and "<redacted" not in md


def test_secret_fragments_give_the_parts_a_workload_may_print_alone():
    fragments = secret_fragments("https://mirror-user:pw-5be1c0x@mirror/?token=tok-83bd27 " + HF)
    assert {"pw-5be1c0x", "tok-83bd27", HF} <= set(fragments)
    # a command line's password alone, not the command; an option that is no password gives nothing
    assert secret_fragments("curl -fsSL -u ci:Curl-pw-8e1d https://x && sshpass -p Ssh-pw-7c2a ssh h") == [
        "Curl-pw-8e1d", "Ssh-pw-7c2a"]
    assert secret_fragments("docker run -p 8080:80 -u 1000:1000 img") == []


# -- a private key across lines and writes ---------------------------------------------------------


def test_a_private_key_split_anywhere_across_writes_is_scrubbed_whole():
    key = next(p.value for p in CORPUS if p.kind == "private-key")
    text = f"(Actor pid=1) loading\n{key}\n(Actor pid=1) step 1: done\n".encode()
    for cut in range(1, len(text), 7):  # the watcher gets the text in two writes, cut here
        scrub, pending, out = LineScrubber(), b"", []
        for chunk in (text[:cut], text[cut:]):
            pending += chunk
            *complete, pending = pending.split(b"\n")
            out += scrub.lines([line + b"\n" for line in complete])
        written = b"".join(out).decode()
        assert not [line for line in key.splitlines() if line in written and len(line) > 8], cut
        assert written.startswith("(Actor pid=1) loading\n") and written.endswith("(Actor pid=1) step 1: done\n")


def test_a_key_block_cut_short_ends_at_the_first_line_that_is_not_key_material():
    scrub = LineScrubber()
    lines = [b"-----BEGIN " + b"PRIVATE KEY-----\n", b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n",
             b"(MegatronTrainRayActor pid=1) step 3: {'train/loss': 0.5}\n"]
    out = scrub.lines(lines)
    assert b"MIIE" not in b"".join(out)
    assert out[2] == lines[2]  # ordinary output again: the block was cut, nothing more is eaten


# -- identity ------------------------------------------------------------------------------------


def test_placeholders_are_stable_across_files_and_processes(tmp_path):
    """One run, many writers (nox steps are separate processes): a host keeps its placeholder."""
    table = tmp_path / "logs" / "placeholders.json"
    first = Redactor(pseudonyms=Pseudonyms(table))
    assert first("peer 10.0.0.9 on gpu-node-17.corp.example.com") == "peer ip-1 on host-1"
    later = Redactor(pseudonyms=Pseudonyms(table))  # a later step reads the table back
    assert later("gpu-node-3.corp.example.com, then gpu-node-17 and 10.0.0.9") == "host-2, then host-1 and ip-1"
    saved = json.loads(table.read_text())
    assert saved["host"] == {"gpu-node-17": "host-1", "gpu-node-3": "host-2"} and saved["ip"] == {"10.0.0.9": "ip-1"}


def test_no_redact_keeps_identity_and_never_credentials(this_machine):
    out = redact_text(PLANTED_TEXT, identity=False)
    assert HOST in out and IPV4 in out and "/home/alice" in out
    for secret in (HF, GHP, GH_PAT, AWS_ID, AWS_SECRET, WANDB, BEARER, PASSWORD, URL_PASS, ENV_ONLY):
        assert secret not in out


def test_redact_json_hides_secret_fields_and_keeps_versions(this_machine):
    data = {"env": {"HF_TOKEN": "anything-at-all", "WANDB_API_KEY": 12345678, "NCCL_DEBUG": "INFO",
                    "empty_token": ""},
            "versions": {"cudnn_version": "9.10.2.21", "nccl": "2.28.9"},
            "hosts": [HOST, f"ip {IPV4}"], "nested": [{"password": ["a", "b"]}],
            "profile": {"env": [["GITHUB_PAT", "0f9e8d7c6b5a"], ["NCCL_DEBUG", "INFO"]],
                        "train_args": ["--lr", "1e-6", "--wandb-key", "plain-value", "--input-key", "messages"],
                        "model_revision": "7ae557604adf67be50417f59c2c2f167def9a775"}}
    out = redact_json(data)
    assert out["env"] == {"HF_TOKEN": "<redacted:secret>", "WANDB_API_KEY": "<redacted:secret>",
                          "NCCL_DEBUG": "INFO", "empty_token": ""}
    assert out["versions"] == {"cudnn_version": "9.10.2.21", "nccl": "2.28.9"}
    assert out["hosts"] == ["host-1", "ip ip-1"]
    assert out["nested"] == [{"password": ["<redacted:secret>", "<redacted:secret>"]}]
    assert out["profile"] == {"env": [["GITHUB_PAT", "<redacted:secret>"], ["NCCL_DEBUG", "INFO"]],
                              "train_args": ["--lr", "1e-6", "--wandb-key", "<redacted:secret>", "--input-key",
                                             "messages"],
                              "model_revision": "7ae557604adf67be50417f59c2c2f167def9a775"}
    assert data["env"]["HF_TOKEN"] == "anything-at-all"  # a copy: the input is untouched


def _reference_json(redactor: Redactor, obj):
    """What Redactor.json means, one string at a time in document order (its walk redacts each
    distinct string once: it must come to this)."""
    def walk(value, key):
        if isinstance(value, dict):
            return {redactor(str(k)): walk(v, str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            if len(value) == 2 and isinstance(value[0], str) and is_secret_name(value[0]) and value[1] not in EMPTY:
                return [redactor(value[0]), "<redacted:secret>"]
            return ["<redacted:secret>" if redact.follows_secret_flag(value, i) else walk(v, key)
                    for i, v in enumerate(value)]
        if key is not None and is_secret_name(key) and value not in EMPTY:
            return "<redacted:secret>"
        if isinstance(value, str):
            return redactor(value, keep_versions=key is not None and "version" in key.lower())
        return value

    return walk(obj, None)


EMPTY = (None, "", True, False)
_WORDS = st.sampled_from([HF, "plain words", f"peer {HOST}", "gpu-node-17 is slow", "gpu-node-17:1:2 [0] NCCL INFO x",
                          f"ip {IPV4}", "9.10.2.21", "--wandb-key", "--lr", WANDB, "messages", "", "/home/alice/x",
                          "http://head-node-3:8265/x", "head-node-3 again", f"{ENV_ONLY} leaked"])
_KEYS = st.sampled_from(["train/loss", "kind", "HF_TOKEN", "cudnn_version", "password", "text", HOST, "gpu-node-17",
                         "--hf-token", "metrics"])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.floats(allow_nan=False) | _WORDS,
    lambda inner: st.lists(inner, max_size=5) | st.tuples(_WORDS, inner) | st.dictionaries(_KEYS, inner, max_size=5),
    max_leaves=30)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(JSON_VALUES)
def test_redact_json_redacts_each_string_knowing_every_host_the_value_names(this_machine, value):
    learner = Redactor()
    _reference_json(learner, value)  # meets every host the value names, numbering them in order
    copy = Redactor().json(value)
    assert copy == _reference_json(learner, value)
    assert not _containers(copy) & _containers(value)  # a deep copy: changing it changes nothing in value


def _containers(value) -> set[int]:
    if isinstance(value, dict):
        return {id(value)}.union(*map(_containers, value.values()))
    if isinstance(value, (list, tuple)):
        return {id(value)}.union(*map(_containers, value))
    return set()


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(JSON_VALUES)
def test_print_json_prints_json_dumps_of_the_redacted_value(this_machine, value):
    out = io.StringIO()
    with mock.patch.object(redact.terminal, "_JSON_BATCH", 2), contextlib.redirect_stdout(out):  # lists go in pieces
        print_json(value)
    assert out.getvalue() == json.dumps(Redactor().json(value)) + "\n"


QUOTED_SECRET = 'pa"ss-w\u00f6rd-42'  # JSON escapes both its quote and its umlaut


def test_json_in_the_redacted_terminal_is_redacted_field_by_field_after_what_came_before(monkeypatch):
    monkeypatch.setenv("DB_PASSWORD", QUOTED_SECRET)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    cut_key = "b'-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7'"
    doc = {"errors": [{"text": f"ValueError: Could not deserialize key data: {cut_key}"}],
           "exception": f'ValueError: bad value "{QUOTED_SECRET}"', "lines": 3, "train/loss": 0.5}
    with redacted_terminal(Redactor()):
        print("parsed:", end=" ")
        print_json(doc)
    head, _, body = out.getvalue().partition(" ")
    assert head == "parsed:"
    printed = json.loads(body)  # still JSON: the text rules cut the line after a key block that does not end
    assert printed["errors"] == [{"text": "ValueError: Could not deserialize key data: b'<redacted:private-key>"}]
    assert printed["exception"] == 'ValueError: bad value "<redacted:secret>"'
    assert (printed["lines"], printed["train/loss"]) == (3, 0.5)


def test_parse_json_stays_json_and_hides_what_the_text_rules_missed(tmp_path):
    log = tmp_path / "arm.log"
    log.write_text(
        "Traceback (most recent call last):\n  File \"/opt/app/load.py\", line 3, in <module>\n"
        "ValueError: Could not deserialize key data: b'-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQ'\n"
        "[2026-08-21 10:00:28] model.py:918 - step 1: {'train/loss': 0.5, 'train/step': 1}\n"
        "Traceback (most recent call last):\n  File \"C:\\Users\\ghost\\app\\db.py\", line 9, in connect\n"
        f'ValueError: login refused for "{QUOTED_SECRET}"\n', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "cpverify", "parse", str(log), "--json"], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "DB_PASSWORD": QUOTED_SECRET}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [s["step"] for s in doc["steps"]] == [1] and doc["lines"] == 7
    assert [t["exception"] for t in doc["tracebacks"]] == [
        "ValueError: Could not deserialize key data: b'<redacted:private-key>",
        'ValueError: login refused for "<redacted:secret>"']
    assert doc["tracebacks"][1]["frames"][0]["file"] == "~\\app\\db.py"  # JSON escapes its backslashes: text rules missed it


def test_parse_json_to_a_closed_pipe_exits_zero_quietly():
    """`cpverify parse LOG --json | head`: the reader is gone before the first byte; the command
    ends with 0 and no traceback, as a command whose output nobody reads."""
    log = ROOT / "tests" / "data" / "real-logs" / "02_slime-issue1136-cp-step11-train-metrics.log"
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout now fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "cpverify", "parse", str(log), "--json"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (0, "")


# -- artifacts and the terminal --------------------------------------------------------------------


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
    assert '"cudnn_version": "9.10.2.21"' in paths["verdict.md"].read_text()  # same as env.json, not an ip-N
    env_out = json.loads(paths["env.json"].read_text())
    assert env_out["nccl_version"] == "2.28.9+cuda12.9" and env_out["cudnn_version"] == "9.10.2.21"
    assert env_out["HF_TOKEN"] == "<redacted:secret>" and env_out["user"] == "<user>"
    # one host, one placeholder, in every file the report wrote
    assert env_out["hostname"] == "host-1" and "host-1" in paths["verdict.md"].read_text()
    data = json.loads(paths["verdict.json"].read_text())
    assert data["status"] == "FAIL" and "<redacted:token>" in data["errors"][0]["text"]
    assert "host-1" in data["errors"][0]["text"]


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
    cp2 = synthetic_arm(cp=2, actor_train_time=0.6, seed=2)  # one log per arm decides 0.6x: PASS, exit 0
    base, cand = cp1.write(tmp_path / "a.log"), cp2.write(tmp_path / "b.log")
    monkeypatch.chdir(tmp_path)
    code = main(["verdict", "--baseline", str(base), "--candidate", str(cand), "--out", "bundle"])
    assert code == 0
    copied = (tmp_path / "bundle" / "logs" / "cp1.log").read_text()
    assert HF not in copied and "172.17.0.3" not in copied and "e54db9740f9d" not in copied
    assert copied.count("\n") == len(cp1.lines)  # line numbers in the verdict still point at the same lines
    assert "NCCL version 2.28.9+cuda12.9" in copied


REAL_DUMPS = {1: "45_slime-h200x2-cp1-megatron-arguments-dump.log", 2: "44_slime-h200x2-cp2-megatron-arguments-dump.log"}


@pytest.mark.parametrize("prefix", ["", "\x1b[36m(MegatronTrainRayActor pid=8312)\x1b[0m "], ids=["plain", "ray"])
def test_a_key_in_slimes_argument_dump_reaches_no_file_of_the_bundle_nor_the_terminal(tmp_path, monkeypatch, capsys,
                                                                                        prefix):
    """slime prints Megatron's argument dump, `--wandb-key` included (`  wandb_key ..... KEY`): a
    W&B key has no shape of its own (40 hex digits), only its name beside it in the dump."""
    from cpverify.cli import main

    key = "9f8e7d6c" + "5b4a39281706f5e4d3c2b1a0fedcba98"
    logs = []
    for cp, dump in REAL_DUMPS.items():
        arm = synthetic_arm(cp=cp, actor_train_time=1.0, seed=cp)
        for line in (Path(__file__).parent / "data" / "real-logs" / dump).read_text().splitlines():
            arm.raw(prefix + re.sub(r"^(  wandb_key \.+ )None$", rf"\g<1>{key}", line))
        logs.append(arm.write(tmp_path / f"cp{cp}.log"))
    assert all(key in log.read_text() for log in logs)
    monkeypatch.chdir(tmp_path)
    for out, extra in (("bundle", ()), ("bundle-json", ("--json",))):
        main(["verdict", "--baseline", str(logs[0]), "--candidate", str(logs[1]), "--out", out, *extra])
    printed = capsys.readouterr()
    written = {str(p.relative_to(tmp_path)): p.read_text(errors="replace")
               for p in tmp_path.glob("bundle*/**/*") if p.is_file()}
    assert {"bundle/verdict.md", "bundle/verdict.json", "bundle/logs/cp1.log", "bundle/logs/cp2.log"} <= set(written)
    leaked = [where for where, text in [*written.items(), ("stdout", printed.out), ("stderr", printed.err)]
              if key in text]
    assert leaked == []


def test_the_terminal_is_redacted_line_by_line_and_restored(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with redacted_terminal(Redactor()):
        print(f"fetching with {HF} from", end=" ")
        print("https://u:pw-123456@mirror.corp.example.com/x")
        sys.stdout.write("\rprogress 3/8")  # a progress bar redraws its line: that \r stays
        sys.stdout.flush()
        with redacted_terminal(Redactor(identity=False)):  # a run's own rules, --no-redact
            print("peer gpu-node-17.corp.example.com token=abcdef123456")
    assert sys.stdout is out
    assert out.getvalue() == ("fetching with <redacted:token> from https://<redacted:secret>@host-1/x\n\rprogress 3/8"
                              "peer gpu-node-17.corp.example.com token=<redacted:secret>\n")


@pytest.mark.parametrize("line", [
    "DB_PASSWORD\b=Sup3r-s3cret-71",  # a backspace between a name and its value
    "HF_TOKEN=\x1b[1mSup3r-s3cret-71\x1b[0m",  # a value in colour
    "login with hf_Qx7bT2mN9p\x1b[0mL4vR8sK1wZ3yC6dF0gH5jE2a",  # a token cut by a colour code, shown whole
    "\x1b[36m(MegatronTrainRayActor pid=1)\x1b[0m   wandb_key ............................... Sup3r-s3cret-71",
])
def test_the_terminal_shows_no_secret_that_control_characters_wrap(monkeypatch, line):
    """What the terminal shows (cpverify.terminal.inert: colour removed, other control characters
    as escapes) holds no piece of the secret, however control characters stood around it."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with redacted_terminal(Redactor()):
        print(line)
    shown = out.getvalue()
    assert "Sup3r-s3cret" not in shown and "L4vR8sK1wZ3yC6dF0gH5jE2a" not in shown
    assert "\x1b" not in shown and "\b" not in shown


@given(st.sampled_from(["eval/aime_pass", "train/auth_score", "eval/pass", "rollout/secret_rate", "x/api_key"]),
       st.one_of(st.integers(), st.floats(allow_nan=False)))
def test_a_metric_whose_name_reads_as_a_credentials_keeps_its_number(name, number):
    """What a log printed as a metric, the parse JSON and verdict.json print as that metric."""
    assert Redactor().json({"metrics": {name: number, "train/loss": 0.5}}) == {"metrics": {name: number,
                                                                                          "train/loss": 0.5}}


@given(st.sampled_from(["DB_PASS", "wandb_key", "x/api_key", "eval/token"]), st.text(min_size=1).filter(str.strip))
def test_a_credential_named_text_value_is_still_removed(name, text):
    assert Redactor().json({name: text})[name] == SECRET


@pytest.mark.parametrize("header", ["Authorization: Bearer abcdefghijklmnop", "authorization: bearer abcdefghijklmnop",
                                    '"Authorization": "Bearer abcdefghijklmnop"', "Proxy-Authorization: Basic abcdefghijklmnop"])
def test_an_authorization_header_is_a_credential_by_its_shape_alone(header):
    """The header's own rule finds its token, whatever the token looks like: neither the name rule
    (which the value rules do not consult) nor the bare `Bearer X` rule (which wants a token that
    looks generated, so prose survives) is needed for it."""
    assert secret_fragments(header) == ["abcdefghijklmnop"]  # the value rules alone
    if not header.startswith('"'):  # a JSON field's value is then the name rule's too
        assert Credentials(()).text(header) == header.replace("abcdefghijklmnop", TOKEN)
