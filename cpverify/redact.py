"""Scrub secrets and identifying details from anything that leaves the machine.

verdict.md, verdict.json, env.json, commands.sh and copied logs are pasted into public
GitHub issues, so every one of them passes through here. The rules err towards
redacting: a redacted IP in a pasted log costs little, a leaked token costs a lot.
What must survive is what makes the bundle useful: version strings (NCCL 2.28.9,
CUDA 12.9), timestamps, numbers such as `--lr 1e-6` or `Timeout(ms)=600000`, and
slime's data-field flags (`--input-key messages`).
"""

from __future__ import annotations

import functools
import getpass
import ipaddress
import os
import re
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TOKEN = "<redacted:token>"
SECRET = "<redacted:secret>"
HOST = "<host>"
IP = "<ip>"
USER = "<user>"

# Well-known credential shapes, recognised wherever they appear.
_TOKEN_PATTERNS = [
    re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"),  # Hugging Face
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),  # GitHub classic / OAuth / app tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),  # GitHub fine-grained
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),  # AWS access key id
    re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}\b"),  # OpenAI-style API keys
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),  # Slack
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b"),  # JWT
]
_TOKENS = re.compile("|".join(f"(?:{p.pattern})" for p in _TOKEN_PATTERNS))  # one pass over the text
_BEARER = re.compile(r"(?i)\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}")
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@")

# NAME=value, NAME: value, "name": "value", --name value, --name=value where NAME looks secret.
# Names are found first and only secret-looking ones consume their value, so a harmless
# name can never swallow the secret pair that follows it ("export HF_TOKEN=...").
# A name right after `$` or `${` is a shell reference (commands.sh's ": "${HF_TOKEN:?...}""), not a pair.
_NAME = re.compile(r"""(?<![\w$-])(?<!\$\{)(?P<quote>["']?)(?P<name>(?:--)?[A-Za-z_][\w.-]*)(?P=quote)""")
_VALUE = re.compile(r"""(?P<sep>[ \t]*[=:][ \t]*|[ \t]+)(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s,;'"}\])]+)""")
_SECRET_WORDS = {"token", "secret", "password", "passwd", "pwd", "passphrase", "credential", "credentials",
                 "apikey", "auth", "authorization", "cookie", "signature"}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("session", "key")}
# slime's data-field flags end in -key but hold column names, not secrets; commands.sh must keep them.
_BENIGN_KEY_PREFIXES = {"input", "label", "metadata", "tool", "tools", "multimodal", "reward", "prompt",
                        "response", "image", "sort", "group", "dict", "primary", "partition", "cache", "hash"}

_HOME = re.compile(r"(?<![\w.-])/(?:home|Users)/[^/\s'\"]+")
_IPV4 = re.compile(r"(?<![\w.+-])(?<!==)(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])")
# NCCL prefixes its lines with "<hostname>:<pid>:<tid> [<dev>]"; any host, not only ours.
_NCCL_HOST = re.compile(r"(?<![\w-])[A-Za-z0-9][A-Za-z0-9._-]*(?=:\d+:\d+ \[\d+\])")
# Generic account names: not identifying, and redacting them would mangle `ray job submit` or `ubuntu:24.04`.
_GENERIC_USERS = {"root", "ubuntu", "user", "admin", "runner", "ray", "docker", "nvidia", "slime", "test",
                  "dev", "work", "app", "jovyan", "builder", "ci", "nobody"}


# The shell's working directories: "pwd" is a password word (DB_PWD), but these two are paths.
_SHELL_DIRS = {"pwd", "oldpwd"}


def _name_words(name: str) -> list[str]:
    name = name.strip("\"'-")
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)  # apiKey -> api_Key
    return [w.lower() for w in re.split(r"[_.\-/]+", name) if w]


@functools.lru_cache(maxsize=4096)  # names repeat on every line of a log
def is_secret_name(name: str) -> bool:
    """Does a variable/flag/field name look like it holds a credential?"""
    if name.strip("\"'-").lower() in _SHELL_DIRS:
        return False
    words = _name_words(name)
    if not words:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    if any(pair in _SECRET_PAIRS for pair in zip(words, words[1:], strict=False)):
        return True
    if words[-1] in ("key", "keys"):
        # WANDB_KEY, --wandb-key: a credential; --input-key, --label-key: a dataset column name.
        return len(words) == 1 or words[-2] not in _BENIGN_KEY_PREFIXES
    return False


@functools.lru_cache(maxsize=1)
def _machine_identity() -> tuple[tuple[str, ...], str | None, str | None]:
    """(host names, user name, home dir) of this machine, looked up once."""
    hosts: set[str] = set()
    try:
        full = socket.gethostname()
    except OSError:
        full = ""
    for name in (full, full.split(".")[0]):
        if len(name) >= 3 and name.lower() not in ("localhost", "localhost.localdomain"):
            hosts.add(name)
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = None
    if not user or len(user) < 3 or user.lower() in _GENERIC_USERS:
        user = None
    try:
        home: str | None = str(Path.home())
    except (KeyError, RuntimeError):  # no HOME and no passwd entry
        home = None
    if home in ("/", "/root"):  # /root paths appear in every slime image and identify nobody
        home = None
    return tuple(sorted(hosts, key=len, reverse=True)), user, home


def _environment_secrets() -> list[str]:
    """Values of this process's environment variables whose names look secret (HF_TOKEN, ...)."""
    return [value for name, value in os.environ.items() if is_secret_name(name) and len(value) >= 6]


def _redact_pairs(text: str) -> str:
    out: list[str] = []
    pos = 0
    for match in _NAME.finditer(text):
        if match.start() < pos or not is_secret_name(match.group("name")):
            continue
        found = _VALUE.match(text, match.end())
        if not found:
            continue
        sep, value = found.group("sep"), found.group("value")
        # A bare-space separator only counts for CLI flags (--hf-token VALUE), not prose ("token was").
        if not sep.strip() and not match.group("name").startswith("--"):
            continue
        if value.startswith(("--", "<redacted")) or value in ("Bearer", "Basic") or value.strip("\"'").startswith("$"):
            continue  # no value here, already hidden, a scheme whose credential _BEARER hid, or a $REFERENCE
        quote = value[0] if value[:1] in ("'", '"') else ""
        out.append(text[pos:found.start("value")])
        out.append(f"{quote}{SECRET}{quote}")
        pos = found.end()
    out.append(text[pos:])
    return "".join(out)


def _redact_ipv6(match: re.Match[str]) -> str:
    text = match.group(0)
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        return text
    return text if address.is_loopback or address.is_unspecified else IP


def _redact_ipv4(match: re.Match[str]) -> str:
    text = match.group(0)
    try:
        address = ipaddress.IPv4Address(text)
    except ValueError:
        return text
    # Loopback and 0.0.0.0 identify nobody and appear in the reproduction commands.
    return text if address.is_loopback or address.is_unspecified else IP


class Redactor:
    """Redaction rules bound to this machine and process, built once and applied to many texts.

    The machine's identity and the environment's secret values are looked up at construction,
    so copying a million-line log costs one lookup, not one per line. `identity=False` (the
    user's --no-redact) keeps host and user names, home paths and IPs; credentials go always.
    """

    def __init__(self, extra_secrets: Iterable[str] = (), *, identity: bool = True) -> None:
        literals = {s for s in (*extra_secrets, *_environment_secrets()) if s and len(s) >= 4}
        # Longest first, so a secret that contains another is removed whole.
        self._literals = sorted(literals, key=len, reverse=True)
        hosts, user, home = _machine_identity()
        self._identity: list[tuple[re.Pattern[str], str]] = []
        self._addresses = identity
        if not identity:
            return
        if home:
            self._identity.append((re.compile(rf"{re.escape(home)}(?![\w.-])"), "~"))
        self._identity.append((_HOME, "~"))
        self._identity.append((_NCCL_HOST, HOST))
        for host in hosts:
            self._identity.append((re.compile(rf"(?<![\w-]){re.escape(host)}(?![\w-])", re.IGNORECASE), HOST))
        if user:
            self._identity.append((re.compile(rf"(?<![\w-]){re.escape(user)}(?![\w-])"), USER))

    def __call__(self, text: str, *, keep_versions: bool = False) -> str:
        for secret in self._literals:
            text = text.replace(secret, SECRET)
        text = _TOKENS.sub(TOKEN, text)
        text = _BEARER.sub(lambda m: f"{m.group(1)} {TOKEN}", text)
        text = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{SECRET}@", text)
        text = _redact_pairs(text)
        for pattern, placeholder in self._identity:
            text = pattern.sub(placeholder, text)
        if not self._addresses:
            return text
        if not keep_versions:
            text = _IPV4.sub(_redact_ipv4, text)
        return _IPV6.sub(_redact_ipv6, text)


class LineScrubber:
    """Credentials out of raw log lines as they stream to disk: known secret values and token shapes.

    Cheap enough for every line a workload prints (a literal search per known secret plus one
    regex pass), and deliberately narrower than Redactor: host names, IPs and paths stay in the
    log, which is the evidence (which node failed?), while a token must never reach the disk at
    all -- a log is written before anyone decides whether to share it.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = {s for s in (*secrets, *_environment_secrets()) if s and len(s) >= 6}
        # Longest first, so a secret that contains another is removed whole.
        self._literals = sorted((s.encode() for s in values), key=len, reverse=True)

    def __call__(self, raw: bytes) -> bytes:
        for secret in self._literals:
            if secret in raw:
                raw = raw.replace(secret, _SECRET_BYTES)
        return _TOKENS_BYTES.sub(_TOKEN_BYTES, raw)


_TOKENS_BYTES = re.compile(_TOKENS.pattern.encode())
_TOKEN_BYTES, _SECRET_BYTES = TOKEN.encode(), SECRET.encode()


def redact_text(text: str, *, extra_secrets: Iterable[str] = (), keep_versions: bool = False,
                identity: bool = True) -> str:
    """Return `text` with credentials, home paths, user/host names and IP addresses replaced.

    `extra_secrets` are literal strings to remove wherever they occur (values the caller knows
    are secret). `keep_versions` skips IPv4 matching, for fields known to hold a version
    (cuDNN 9.10.2.21 is shaped like an address). For many texts, build one Redactor instead.
    """
    return Redactor(extra_secrets, identity=identity)(text, keep_versions=keep_versions)


def redact_json(obj: Any, *, extra_secrets: Iterable[str] = (), identity: bool = True) -> Any:
    """A redacted deep copy of a JSON-like value: secret-named fields lose their value entirely."""
    scrub = Redactor(extra_secrets, identity=identity)

    def walk(value: Any, key: str | None) -> Any:
        if isinstance(value, dict):
            return {scrub(str(k)): walk(v, str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v, key) for v in value]
        if key is not None and is_secret_name(key) and value not in (None, "", True, False):
            return SECRET
        if isinstance(value, str):
            return scrub(value, keep_versions=key is not None and "version" in key.lower())
        return value

    return walk(obj, None)
