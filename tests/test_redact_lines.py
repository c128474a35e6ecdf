"""cpverify.redact.lines: a block of lines redacted at once is, line for line, what the per-line
redactor (Redactor.lines) makes of them, on any input: the gate only chooses which lines the rules
read, never what they make of them. Both engines, any cut of the lines into blocks."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cpverify.redact import BlockRedactor, Pseudonyms, Redactor, environment
from cpverify.redact.lines import ENGINES

# Pieces of what the rules look for, whole and cut, in any case: credentials of several shapes,
# a PEM block across lines, hosts and addresses of each form identity_of knows, odd Unicode
# (KELVIN SIGN lowers to "k", DOTTED CAPITAL I to "i"), control sequences.
PIECES = [
    "HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "--wandb-key",
    " a1b2c3d4e5f6a7b8c9d0a1b2c3d4e5f6a7b8c9d0", "  wandb_key ........ ", "api_key: 's3cr3tv4lue!'", "Authorization: Bearer ",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlXzEyMzQ", "sk-proj-AbCdEfGhIjKlMnOpQrSt", "AKIAIOSFODNN7EXAMPLE",
    "-----BEGIN RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM", "-----END RSA PRIVATE KEY-----",
    "https://alice:hunter22@db.corp.internal:5432/x", "postgres://u:p4ssw0rd@10.1.2.3/db", "curl -u bob:Pa55word ",
    "gpu-node-17.corp.example.com", "gpu-node-17", "node-b7", "e54db9740f9d:32167:32500 [0] NCCL INFO",
    "[h100-node-017]:29500", "host      : yotta-B200-232", "MASTER_ADDR=train-head-3", "--master-addr worker-9",
    "10.0.12.7", "172.17.0.3<0>", "fe80::1ff:fe23:4567:890a", "2001:db8::1", "ip-172-31-5-10", "ec2-54-1-2-3",
    "/home/alice/run", "/Users/bob/x", "C:\\Users\\carol\\y", "cuDNN 9.10.2.21", "PRIVATE_TOKEN", "SeSsIoN=abc123xyz",
    "\u212aEY=ZxCvBnMaSdFgHjKl", "\u0130P-10-0-0-1", "\x1b[32mHF_TOKEN\x1b[0m=hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa987654",
    "\x1b]8;;https://u:pw12345678@h.lan/\x07link\x1b]8;;\x07", "tqdm \u2588\u2588\u2588 50%", "\ufffd\udcff",
    "Timer actor_train end (elapsed: 2.9s)", "perf/tokens_per_gpu_per_sec': 245.8", "step 3: {'train/loss': 0.1}",
    "SECRET_THING=literal-s3cret-value", "literal-s3cret-value", "gpu-box-7", "GPU-BOX-7.corp.lan", "alice",
    "/home/alice/ckpt", "ALICE", "GITHUB_PAT=Zq8xV3mN1pL7wR2t", "apiKeyFoo", "--model-path /x", "token.", "keys", "_pat",
]
_WORD = st.one_of(st.sampled_from(PIECES), st.sampled_from(PIECES).map(str.upper),
                  st.sampled_from(PIECES).flatmap(lambda p: st.integers(0, len(p)).map(lambda i: p[:i])),
                  st.text(alphabet=st.characters(codec="utf-8"), max_size=12))
LINE = st.lists(_WORD, max_size=6).flatmap(lambda words: st.sampled_from([" ", "", "=", ":", ", "]).map(
    lambda sep: sep.join(words)))
LINES = st.lists(LINE.map(lambda text: text.replace("\n", " ") + "\n"), max_size=24).flatmap(
    lambda lines: st.booleans().map(lambda cut: [*lines[:-1], lines[-1].rstrip("\n")] if cut and lines else lines))
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as one whose names the rules replace: its host, its user, its home."""
    monkeypatch.setattr(environment, "machine_identity", lambda: (("Gpu-Box-7.corp.lan", "Gpu-Box-7"), "alice", "/home/alice"))


def _redactor(identity: bool = True) -> Redactor:
    return Redactor(["literal-s3cret-value"], identity=identity, pseudonyms=Pseudonyms())


def _per_line(lines: list[bytes], identity: bool = True) -> list[bytes]:
    line = _redactor(identity).lines()
    return [line(raw.decode("utf-8", "replace")).encode() for raw in lines]


@pytest.mark.parametrize("identity", [True, False])
@pytest.mark.parametrize("engine", ENGINES)
@SETTINGS
@given(lines=LINES, cuts=st.lists(st.integers(0, 24), max_size=4))
@example(lines=["saved by alice\n", "on gpu-box-7\n", "literal-s3cret-value\n"], cuts=[])
def test_blocks_are_redacted_as_line_by_line(engine: str, identity: bool, lines: list[str], cuts: list[int]) -> None:
    raw = [text.encode("utf-8", "surrogateescape") for text in lines]
    blocks = BlockRedactor(_redactor(identity), engine)
    bounds = sorted({0, len(raw), *(min(cut, len(raw)) for cut in cuts)})
    out = [line for a, b in itertools.pairwise(bounds) for line in blocks(raw[a:b])]
    assert out == _per_line(raw, identity)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_host_learned_in_a_block_is_replaced_in_its_later_lines(engine: str) -> None:
    lines = [b"plain\n", b"connect to [gpu-node-17]:29500\n", b"retry gpu-node-17 now\n", b"done\n"]
    out = BlockRedactor(_redactor(), engine)(lines)
    assert out == _per_line(lines)
    assert b"gpu-node-17" not in b"".join(out)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_private_key_open_across_blocks_is_removed_whole(engine: str) -> None:
    lines = [b"-----BEGIN RSA PRIVATE KEY-----\n", b"MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM\n",
             b"c2VjcmV0a2V5bWF0ZXJpYWxoZXJl\n", b"-----END RSA PRIVATE KEY-----\n", b"after\n"]
    blocks = BlockRedactor(_redactor(), engine)
    out = [line for block in (lines[:2], lines[2:3], lines[3:]) for line in blocks(block)]
    assert out == _per_line(lines)
    assert not any(b"MIIE" in line or b"c2Vj" in line for line in out)
