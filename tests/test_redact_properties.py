"""cpverify.redact for all inputs: every generated credential, of every shape a real one has, goes
from every sink whatever surrounds it (colour codes, a log prefix, an argument dump's padding,
quotes, a table that wraps it); ordinary log text and prose go through unchanged.

"Goes" means no piece of it is left: no run of 8 of its characters that the text around it did
not already hold (tests/test_redact.py checks whole values against the planted corpus).
"""

from __future__ import annotations

import glob
import gzip
import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cpverify.cli import main
from cpverify.lint import Finding, format_findings, lint_argv
from cpverify.redact import (
    BlockRedactor,
    LineScrubber,
    Redactor,
    credentials,
    redact_text,
    scrub_credentials,
)
from cpverify.redact.values import VALUE_KINDS

TESTS = Path(__file__).resolve().parent
FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PIECE = 8


def _leaked(secret: str, out: str, around: str) -> list[str]:
    """The pieces of `secret` in `out` that the surrounding text does not explain."""
    explained = around + "<redacted:secret><redacted:token>"
    return [secret[i:i + PIECE] for i in range(len(secret) - PIECE + 1)
            if secret[i:i + PIECE] in out and secret[i:i + PIECE] not in explained]


def _sinks(text: str) -> dict[str, str]:
    """What every sink makes of `text`: the shareable files (with and without --no-redact), the
    raw log as it streams (line by line, and in one block), the terminal's line redactor."""
    lines = re.findall(r"[^\n]*\n|[^\n]+$", text)  # as the watcher and the terminal cut them: at "\n"
    raw = [line.encode() for line in lines]
    terminal = Redactor().lines()
    return {
        "redacted": redact_text(text),
        "--no-redact": redact_text(text, identity=False),
        "stream": b"".join(LineScrubber()(line) for line in raw).decode(),
        "stream block": b"".join(LineScrubber().lines(raw)).decode(),
        "terminal": "".join(terminal(line) for line in lines),
    }


def _a(pattern: str) -> st.SearchStrategy[str]:
    return st.from_regex(pattern, fullmatch=True)


_ALNUM = "[A-Za-z0-9]"
# Real formats (provider documentation, gitleaks' and kingfisher's rules): prefix, alphabet, length.
SHAPES = {
    "huggingface": _a(rf"hf_{_ALNUM}{{34}}"),
    "github": _a(rf"gh[pousr]_{_ALNUM}{{36}}"),
    "github-fine-grained": _a(rf"github_pat_{_ALNUM}{{22}}_{_ALNUM}{{59}}"),
    "gitlab": _a(r"glpat-[A-Za-z0-9_-]{20}"),
    "aws-access-key-id": _a(r"(AKIA|ASIA)[A-Z0-9]{16}"),
    "openai": _a(r"sk-proj-[A-Za-z0-9_-]{48}"),
    "anthropic": _a(r"sk-ant-api03-[A-Za-z0-9_-]{93}AA"),
    "nvidia": _a(r"nvapi-[A-Za-z0-9_-]{64}"),
    "google-oauth": _a(r"ya29\.[A-Za-z0-9_-]{60,160}"),
    "groq": _a(rf"gsk_{_ALNUM}{{52}}"),
    "databricks": _a(r"dapi[0-9a-h]{32}(-[0-9])?"),
    "wandb-server": _a(rf"local-{_ALNUM}{{40}}"),
    "wandb-v1": _a(rf"wandb_v1_{_ALNUM}{{27}}_{_ALNUM}{{49}}"),
    "slack": _a(r"xoxb-[0-9]{10,13}-[0-9]{10,13}-[A-Za-z0-9]{24}"),
    "jwt": _a(r"eyJ[A-Za-z0-9_-]{16,40}\.eyJ[A-Za-z0-9_-]{16,60}\.[A-Za-z0-9_-]{20,43}"),
}
# Around a shaped secret: a log prefix, colour, quotes, a name, a dump's padding.
SHAPE_CONTEXTS = ["{s}", "token {s} ok", "'{s}'", '"{s}"', "key={s}", "\x1b[1m{s}\x1b[0m", "(Actor pid=1) {s}",
                  "Authorization: Bearer {s}", "  api_key ......................................... {s}",
                  "\x1b[36m(MegatronTrainRayActor pid=7)\x1b[0m got {s}, retrying", "[{s}]", "x={s};y=1"]
# Ordinary words of a log around it (no run of 8 characters a generated secret is likely to share).
AROUND = st.lists(st.sampled_from(["step 3:", "NCCL INFO", "(pid=1)", "rollout", "perf", "-", "|", "{", "}", ",",
                                   "[2026-08-21 10:00:28]", "loss=0.5", "\x1b[0m", "\x1b[32m", "  "]), max_size=4)


@FAST
@given(st.sampled_from(sorted(SHAPES)).flatmap(lambda kind: SHAPES[kind]), st.sampled_from(SHAPE_CONTEXTS),
       AROUND, AROUND)
def test_a_credential_of_every_known_shape_goes_from_every_sink(secret, context, before, after):
    around = " ".join([*before, context.replace("{s}", ""), *after])
    text = " ".join([*before, context.replace("{s}", secret), *after]) + "\n"
    for sink, out in _sinks(text).items():
        assert not _leaked(secret, out, around), (sink, out)


@FAST
@given(st.text(st.sampled_from("İıẞßΣσ日本x \t"), max_size=60), st.integers(0, 200), st.integers(1, 3), st.data())
def test_text_in_any_alphabet_before_a_credential_hides_it_from_no_sink(text, dotted, lines_after, data):
    """The gate finds its words in a block of lines by their offsets: text whose lower case is
    longer ('İ' is two characters in lower case) must not shift a secret's line out of view."""
    secret = data.draw(st.sampled_from(sorted(SHAPES)).flatmap(lambda kind: SHAPES[kind]))
    before = "İ" * dotted + text
    text = f"{before}\nexport HF_TOKEN={secret}\n" + "step 3: done, loss=0.5\n" * lines_after
    for sink, out in _sinks(text).items():
        assert not _leaked(secret, out, before), (sink, out)


# -- by name ---------------------------------------------------------------------------------------

SECRET_NAMES = ["HF_TOKEN", "WANDB_API_KEY", "wandb_key", "sglang_api_key", "DB_PASSWORD", "PGPASSWORD", "GITHUB_PAT",
                "MY_SERVICE_CREDS", "NGC_API_KEY", "client_secret", "hf-token", "wandb-key", "router_oracle_password"]
# Not a plain word (that is prose's), nor a $REFERENCE: what generated credentials look like.
VALUES = _a(r"[A-Za-z0-9][A-Za-z0-9_.+/=%@:-]{7,40}").filter(lambda v: not v.isalpha() or not v.islower())
ESC = st.sampled_from(["", "\x1b[32m", "\x1b[1;31m", "\x1b[0m", "\x1b[38;5;208m", "\r", "\b", "\x1b]8;;\x07"])


def _name_contexts(name: str, dots: int, colour: tuple[str, str, str]) -> list[str]:
    on, off, on_value = colour
    flag = "--" + name.lower().replace("_", "-")
    contexts = [f"{on}{name}{off}={on_value}@@{off}", f"export {on}{name}{off}='@@'", f"{name}: @@",
                f'{{"{name}": "@@"}}', f"{on}{flag}{off} {on_value}@@{off} --lr 1e-6", f"{flag}=@@",
                f"  {on}{name}{off} {'.' * dots} {on_value}@@{off}",
                f"{on}(MegatronTrainRayActor pid=7){off}   {name} {'.' * dots} @@",
                # an argv list as Python and JSON print it (subprocess's CalledProcessError, a launcher's log)
                f"CalledProcessError: Command '['python3', 'train.py', '{flag}', '@@', '--lr', '1e-6']' returned 1",
                f'"entrypoint_argv": ["train.py", "{flag}", "@@"]']
    return [c.replace("@@", "{s}") for c in contexts]


@FAST
@given(st.sampled_from(SECRET_NAMES), VALUES, st.integers(1, 48), st.tuples(ESC, ESC, ESC), AROUND, st.data())
def test_a_secret_named_value_goes_whatever_its_padding_colour_or_quotes(name, secret, dots, colour, before, data):
    context = data.draw(st.sampled_from(_name_contexts(name, dots, colour)))
    around = " ".join([*before, context.replace("{s}", "")])
    text = " ".join([*before, context.replace("{s}", secret)]) + "\n"
    for sink, out in _sinks(text).items():
        assert not _leaked(secret, out, around), (sink, out)


# -- on command lines --------------------------------------------------------------------------------

# (One that begins with a dash, after a space, reads as the next option: `-p -x` gives -p no value.)
PASSWORDS = _a(r"[A-Za-z0-9!#%^*_+=.,@][A-Za-z0-9!#%^*_+=.,@-]{5,23}").filter(
    lambda v: any(c.isdigit() or c.isupper() for c in v))
COMMANDS = [
    "curl -fsSL -u ci-bot:{s} https://artifacts/x", "curl --user=me:{s} -o out https://x", "curl -sSu me:{s} https://x",
    "docker login nvcr.io -u '$oauthtoken' -p {s}", "docker login --username me --password {s} reg",
    "podman login -p{s} quay.io", "helm registry login reg -u me --password={s}", "sshpass -p '{s}' ssh -p 22 me@node",
    "sshpass -p {s} scp a b", "mysql -h db -uroot -p{s} runs", "mariadb-dump -p{s} runs", "redis-cli -h cache -a {s} ping",
    "ldapsearch -x -D cn=admin -w {s} -b dc=x", "smbclient //srv/share -U me%{s}", "sqlcmd -S db -U sa -P {s}",
    "openssl rsa -in k.pem -passin pass:{s} -out p.pem", "mongosh --host db -u me -p {s}", "/usr/bin/curl -u me:{s} x",
    "git clone https://ci:{s}@git.corp.internal/x.git", "pip install -i https://me:{s}@pypi.corp/simple x",
]


@FAST
@given(st.sampled_from(COMMANDS), PASSWORDS, st.sampled_from(["", "$ ", "+ ", "RUN ", "\x1b[32m", "(pid=1) "]),
       st.sampled_from(["", " && echo done", " | tee log", "; ls"]))
def test_a_password_on_a_command_line_goes(command, password, prompt, rest):
    text = prompt + command.replace("{s}", password) + rest + "\n"
    around = prompt + command.replace("{s}", "") + rest
    for sink, out in _sinks(text).items():
        assert not _leaked(password, out, around), (sink, out)


@FAST
@given(_a(r"[0-9a-f]{40}|local-[A-Za-z0-9]{40}"), st.sampled_from(["", "--relogin ", "--host https://w.corp "]))
def test_a_wandb_login_key_goes(key, options):
    text = f"wandb login {options}{key}\n"
    for sink, out in _sinks(text).items():
        assert not _leaked(key, out, f"wandb login {options}"), (sink, out)


# -- what must not change ------------------------------------------------------------------------

PROSE = st.lists(st.sampled_from([
    "so", "the", "its", "keeps", "default", "is", "set", "missing", "use", "to", "pass", "and", "not", "first",
    "prompts", "insecure", "with", "then", "done", "token", "key", "password", "secret", "session", "auth", "login",
    "curl", "sshpass", "docker", "mysql", "redis-cli", "wandb", "openssl", "-p", "-u", "-a", "-w", "--password",
    "--wandb-key", "--hf-token", "--sglang-api-key", "wandb_key", "api_key", "...", "(", ")", ",",
    ".", "`--wandb-key`", "None", "local", "dapi", "gsk", "nvapi",
]), min_size=1, max_size=14)


@FAST
@given(PROSE)
def test_prose_about_secrets_is_never_changed(words):
    """A sentence that names a flag, a variable or a command (lint's `so --wandb-key keeps its
    default`, `sshpass -p is insecure`) holds no credential: every sink leaves it as it is."""
    text = " ".join(words) + "\n"
    assert set(_sinks(text).values()) == {text}


def _real_logs() -> list[Path]:
    return sorted(Path(p) for p in glob.glob(str(TESTS / "data" / "**" / "*.log*"), recursive=True))


def _read(path: Path) -> str:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode("utf-16") if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else raw.decode("utf-8", "replace")


@pytest.mark.parametrize("path", _real_logs(), ids=lambda p: p.name)
def test_the_credential_rules_change_no_line_of_a_real_log(path):
    """Real logs (slime, Megatron's argument dumps, NCCL, Ray, SGLang, torchrun) hold no credential:
    the rules that remove them, applied to every line, must not touch one."""
    text = _read(path)
    assert scrub_credentials(text) == text
    assert b"".join(LineScrubber().lines(text.encode().splitlines(keepends=True))) == text.encode()


# -- a table that wraps what it shows ------------------------------------------------------------------


@FAST
@given(st.sampled_from(sorted(SHAPES)).flatmap(lambda kind: SHAPES[kind]) | VALUES, st.sampled_from(SECRET_NAMES),
       st.integers(40, 220))
def test_a_lint_table_never_shows_a_credential_it_wraps(secret, name, columns):
    """At any terminal width a flag and its value may be cut over two lines (a grid's fix column, a
    narrow terminal's block), where no rule sees a name beside its value: each text is redacted
    before it is wrapped."""
    flag = "--" + name.lower().replace("_", "-")
    finding = Finding("error", flag, f"slime knows only {flag}: {flag} {secret} is ignored", f"{flag} {secret}")
    redactor = Redactor()  # no literal: the rules find it in the cell, whole, before it is wrapped
    table = format_findings([finding], columns, redact=redactor)
    assert not _leaked(secret, table, "")
    # and the terminal's redaction, line by line, leaves the table as it is: nothing of lint's prose goes
    assert "".join(redactor.lines()(line) for line in table.splitlines(keepends=True)) == table


@pytest.mark.parametrize("flag", ["--wandb_key", "—wandb-key", "-wandb-key", "--wandb-keys", "--wandb-key"])
def test_cpverify_lint_shows_no_key_of_the_command_it_lints_and_all_of_its_prose(flag, capsys):
    """As a table (whose fix column wraps `--wandb-key KEY`) and as JSON: the key goes from every
    finding, and nothing else does (`so --wandb-key keeps its default` keeps its words)."""
    key = "0123abcd" + "4567ef890123abcd4567ef89deadbeef"  # a W&B cloud key: 40 hex digits, no shape
    main(["lint", "--", flag, key])
    table = capsys.readouterr().out
    assert not _leaked(key, table, "")
    main(["lint", "--json", "--", flag, key])
    shown = json.loads(capsys.readouterr().out)
    expected = [{k: v.replace(key, "<redacted:secret>") for k, v in asdict(f).items()} for f in lint_argv([flag, key])]
    assert shown == expected


# -- identity ----------------------------------------------------------------------------------------

USERS = _a(r"[a-z][a-z0-9_.-]{2,15}").filter(lambda u: u not in ("home", "users", "root") and "." not in u[-1:])
HOMES = ["/home/{u}", "/home2/{u}", "/mnt/home/{u}", "/data/home/{u}", "/lustre/home/{u}", "/gpfs/fs1/home/{u}",
         "/users/{u}", "/Users/{u}", "/nfs/homes/{u}", "C:\\Users\\{u}", "C:/Users/{u}"]


@FAST
@given(USERS, st.sampled_from(HOMES), st.sampled_from(["", "/slime/train.py", "/.cache/huggingface", "\\x"]),
       st.sampled_from(['File "{p}", line 3', "cd {p} &&", "--save {p}:", "PYTHONPATH={p}:/opt/x", "({p})"]))
def test_a_users_name_in_a_home_directory_goes_wherever_it_is_mounted(user, home, rest, context):
    assume(user not in context + rest)
    path = home.replace("{u}", user) + rest
    out = Redactor()(context.replace("{p}", path))
    assert user not in out and "~" in out


HOSTS = _a(r"[a-z][a-z0-9]{1,8}-[a-z0-9-]{0,12}[0-9]")
TORCH_HOST_LINES = [
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [{h}]:29500 (errno: 110 - timed out).",
    "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. [{h}]:34567",
    "  host      : {h}",  # torchrun's ChildFailedError table
    "[default] Rendezvous complete for workers. Result: restart_count=0 master_addr={h} master_port=29500",
    "export MASTER_ADDR={h}", "torchrun --nnodes 2 --master-addr {h} --master-port 29500 train.py",
    "rdzv_endpoint : {h}:29400",
]


@FAST
@given(HOSTS, st.sampled_from(TORCH_HOST_LINES), st.sampled_from(["", "\x1b[36m(MegatronTrainRayActor pid=1)\x1b[0m "]))
def test_a_host_torch_names_becomes_a_placeholder_in_every_line_after(host, line, prefix):
    assume(not re.fullmatch(r"(host|ip)-\d+", host) and host not in line + prefix)
    redactor = Redactor()
    first = redactor(prefix + line.replace("{h}", host))
    later = redactor(f"retrying {host} after the error")
    assert "host-1" in first
    assert [text for text in (first, later) if host in re.sub(r"host-\d+", "", text)] == []


@pytest.mark.parametrize("line", ["[c10d] listening on [::]:29500", "connect to [localhost]:29500",
                                  "connect to [127.0.0.1]:29500", "host : None", "--host 0.0.0.0 --port 30000",
                                  "master_addr is only used for static rdzv_backend and when rdzv_endpoint is not specified.",
                                  "    def connect(host: str, port: int) -> None:", "    Server(host=args.host, port=port)"])
def test_what_torch_prints_about_no_particular_host_stays(line):
    assert Redactor()(line) == line


@pytest.mark.parametrize("kind", VALUE_KINDS, ids=lambda kind: kind.name)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_value_rule_is_skipped_only_where_it_cannot_match(kind, data):
    """A rule whose words (ValueKind.needs) an ASCII line lacks is not run on it: it could not match there."""
    text = data.draw(st.from_regex(kind.pattern, alphabet=st.characters(max_codepoint=127)))
    assume(kind.pattern.search(text))
    assert kind.may_match(text.lower())
    assert credentials._NEEDS.search(text.lower())  # the test of all rules' words at once lets it through too
    if kind.pattern.sub(kind.replace, text) != text:
        assert credentials.GATE.search(text.lower())  # and so does the gate, before any rule


# Pieces of names as a line holds them: the stems the gate reads by where they stand (a name's last
# word, or a key after api/access/private), in every case, joined by a name's separators or not.
_STEM_PIECES = st.sampled_from(["token", "TOKEN", "Token", "tokens", "pat", "PAT", "Pat", "path", "key", "KEY", "Key", "keys",
                                "api", "API", "Api", "access", "private", "hf", "db", "id", "Id", "ID", "x", "X", "9", "s",
                                "_", "-", ".", "..", "--", "/", "perf/", "'", '"', "\\", "=", ": ", " ", ",", "é",
                                "\u212a", "$", "Zq8xV3mN1pL7wR2t"])


@settings(max_examples=800, deadline=None)
@given(text=st.lists(_STEM_PIECES, max_size=16).map("".join))
def test_a_line_the_gate_skips_is_one_no_rule_changes(text):
    """The gate reads `token`, `pat` and `key` by where they stand; a line it skips, every rule leaves
    as it is (the rules run here without the gate)."""
    if not credentials.GATE.search(text.lower()):
        assert credentials.Credentials(()).line(text) == text


# slime's metric keys, as its RolloutManager and trainer print them in a `perf N: {...}` line
_METRIC_KEYS = ["rollout/response_len/mean", "perf/rollout_time", "perf/tokens_per_gpu_per_sec",
                "perf/longest_sample_tokens_per_sec", "perf/actor_train_tok_per_s", "perf/step_time",
                "perf/log_probs_tflops", "train/pg_clipfrac", "rollout/raw_reward", "perf/wait_time_ratio"]
_PLANTED = st.tuples(st.sampled_from(["HF_TOKEN", "hf_token", "accessToken", "GITHUB_PAT", "github_pat", "wandb_key",
                                      "--wandb-key", "api_key", "apiKey", "API_KEY_V2", "private_key_pem", "router_api_keys",
                                      "db_password", "session_token"]),
                     st.from_regex(r"\A[A-Za-z0-9]{10,24}\Z").filter(lambda v: any(c.isdigit() for c in v)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys=st.lists(st.sampled_from(_METRIC_KEYS), min_size=1, max_size=8), planted=_PLANTED,
       at=st.integers(0, 8), value=st.floats(0, 1e4, allow_nan=False))
def test_a_secret_in_a_metric_line_is_redacted(keys, planted, at, value):
    """A metric line is skipped by the gate, but not one that holds a secret-named pair: the secret
    goes from the shared files (a block at a time and a line at a time) and from the log stream."""
    name, secret = planted
    pairs = [f"'{key}': {value!r}" for key in keys]
    pairs.insert(min(at, len(pairs)), f"'{name}': '{secret}'")
    line = "(RolloutManager pid=31845) [2026-08-21 10:00:03] rollout.py:1193 - perf 7: {" + ", ".join(pairs) + "}\n"
    redactor = Redactor()
    outs = [BlockRedactor(redactor)([line.encode()])[0].decode(), redactor.lines()(line),
            LineScrubber()(line.encode()).decode()]
    assert [out for out in outs if secret in out] == []
    assert all(out.count("<redacted:secret>") == 1 for out in outs)


_NAME_PIECES = st.sampled_from(["HF_TOKEN", "token", "api_key", "--wandb-key", "x" * 130, "y" * 120, "z" * 9, "a.b",
                                ".", "-", "--", "$", "${", "'", '"', '\\"', "\\", "=", ": ", " ", "_", "Secret", "PASS", "sig", "tokenkey",
                                "ſecret", "\u212aey", "9", "é"])


@settings(max_examples=500, deadline=None)
@given(text=st.lists(st.one_of(_NAME_PIECES, st.text(max_size=4)), max_size=24).map("".join))
def test_pair_names_are_found_as_the_pattern_finds_them(text):
    """The names of NAME=value pairs, found only around their stems, are every match of the pattern, in order."""
    from cpverify.redact.names import NAME, names

    assert [m.span() for m in names(text)] == [m.span() for m in NAME.finditer(text)]


_KEY = "3f9a1c0e7b2d4a6f8e0c1b3d5f7a9c2e4b6d8f0a"
_QUOTED_SECRETS = [  # a secret in quotes, as an argv list's repr, a JSON env, a shell word print it
    f"subprocess.CalledProcessError: Command '['python3', 'train.py', '--wandb-key', '{_KEY}', '--x']' returned 1.",
    f'--runtime-env-json={{"env_vars": {{"WANDB_API_KEY": "{_KEY}", "NCCL_DEBUG": "INFO"}}}}',
    f'ray job submit -- python3 train.py --wandb-key "{_KEY}" --use-wandb',
]


@pytest.mark.parametrize("line", _QUOTED_SECRETS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_quoted_secret_cut_by_an_excerpt_or_a_table_cell_shows_none_of_itself(line, data):
    """A table cell or an excerpt cuts a line where its width ends, maybe inside a quoted secret, before
    the terminal's redaction sees it: the cut value, its closing quote gone, is a value all the same."""
    start = line.index(_KEY)
    cut = data.draw(st.integers(start + 4, start + len(_KEY)))
    shown = Redactor(identity=False)(line[:cut])
    assert not any(_KEY[i:i + 4] in shown for i in range(len(_KEY) - 3)), shown


def test_cpverify_parse_shows_no_part_of_a_key_its_error_table_cuts(tmp_path, capsys):
    log = tmp_path / "arm.log"
    log.write_text(_QUOTED_SECRETS[0] + "\n", encoding="utf-8")  # the key lies across the table's 100th column
    assert main(["parse", str(log)]) == 0
    table = capsys.readouterr().out
    assert "subprocess_failed" in table and not any(_KEY[i:i + 4] in table for i in range(len(_KEY) - 3))
