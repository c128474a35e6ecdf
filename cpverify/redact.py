"""What a secret is, defined once, and how it is kept out of everything cpverify writes or prints.

verdict.md, verdict.json, env.json, commands.sh and the plots are pasted into public GitHub
issues; logs are written before anyone decides whether to share them. Two strengths of one
definition cover both:

* **credentials** go always, from everything: the raw logs as they stream to disk
  (LineScrubber), state.json, the terminal and every shareable file, whatever --no-redact says;
* **identity** (host names, IPs, the user name, home paths) is replaced in what is meant to be
  shared (Redactor with identity=True): other hosts become stable placeholders (`host-1`,
  `ip-1`; one run's Pseudonyms give a host the same one in every file), the user `<user>`, a
  home directory `~`. The raw logs keep them: they are the evidence of which node failed.

What a credential is lives in cpverify.credentials (names, value shapes, literals); this module
adds identity and applies both wherever cpverify writes or prints: Redactor for the shareable
files and the terminal, LineScrubber for the raw logs, redacted_terminal for sys.stdout/stderr.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import ipaddress
import json
import os
import re
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from cpverify.artifacts import atomic_write_json
from cpverify.credentials import (
    _EMPTY,
    GATE_WORDS,
    PRIVATE_KEY,
    SECRET,
    TOKEN,
    VALUE_KINDS,
    Credentials,
    ValueKind,
    contains_secret,
    environment_secrets,
    follows_secret_flag,
    is_secret_name,
    keep_group,
    literal_secret,
    literal_worthy,
    secret_arguments,
    secret_fragments,
)
from cpverify.terminal import inert

# The definition of a credential is cpverify.credentials'; these names are read from here too.
__all__ = ["GATE_WORDS", "PRIVATE_KEY", "SECRET", "TOKEN", "USER", "VALUE_KINDS", "ValueKind", "LineScrubber", "Pseudonyms",
           "Redactor", "contains_secret", "follows_secret_flag", "is_secret_name", "literal_secret", "redact_json",
           "redact_text", "redacted_terminal", "scrub_credentials", "secret_arguments", "secret_fragments"]

USER = "<user>"


def scrub_credentials(text: str, *, extra_secrets: Iterable[str] = ()) -> str:
    """`text` without credentials (identity kept): for files that stay on this machine, like state.json."""
    return Redactor(extra_secrets, identity=False)(text)


class LineScrubber:
    """Credentials out of raw log lines as they stream to disk (bytes in, bytes out, one line a call).

    The same rules as Redactor's credentials, holding a PEM block open across lines and so across
    the writes a workload splits it into; identity stays (the log is the evidence). Cheap enough for
    every line a workload prints: lines without a gate word skip straight through.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._rules = Credentials(s for s in (*secrets, *environment_secrets()) if literal_worthy(s))

    def __call__(self, raw: bytes) -> bytes:
        return self._rules.lines([raw], decode=True)[0]

    def lines(self, lines: list[bytes]) -> list[bytes]:
        """Consecutive lines at once: the gate is cheapest over a whole block (a pipe read of many lines)."""
        return self._rules.lines(lines, decode=True)


# -- identity ---------------------------------------------------------------------------------------

# A home directory, wherever a cluster mounts them (/home/U, /home2/U, /mnt/home/U, /data/home/U,
# /lustre/home/U, /users/U), macOS's /Users/U and Windows' C:\\Users\\U: the segment after it is a
# user's name. /root is no one's. Not inside a URL (`https://host/home/page`): that path is the site's.
_HOME = re.compile(r"(?<![\w.~-])(?<!:/)(?:[A-Za-z]:)?(?:(?:/[\w.-]+)*?/(?:home\d*|homes|Users)|/users)/[^/\s'\"()\[\]{},;:]+"
                   r"|(?<![\w.-])[A-Za-z]:\\Users\\[^\\\s'\"()\[\]{},;:]+")
_IPV4 = re.compile(r"(?<![\w.+-])(?<!==)(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])")
# NCCL prefixes its lines with "<hostname>:<pid>:<tid> [<dev>]"; any host, not only ours.
_NCCL_HOST = re.compile(r"(?<![\w-])[A-Za-z0-9][A-Za-z0-9._-]{0,252}(?=:\d+:\d+ \[\d+\])")
# The host of a URL (after any userinfo): a cluster head, a mirror, a database.
_URL_HOST = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{0,31}://(?:[^\s/@]{0,4096}@)?(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*)")
# Fully qualified names: any depth under internal suffixes, three labels or more under public ones
# (two-label names are too often files: socket.cc, model.pt). Python's dotted names end in no TLD.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_INTERNAL_SUFFIXES = ("internal", "local", "lan", "corp", "intranet", "localdomain", "arpa")
_PUBLIC_TLDS = ("com", "net", "org", "io", "ai", "edu", "gov", "cloud", "cn", "uk", "de", "jp", "kr", "fr", "ca", "au",
                "sg", "ch", "nl", "tw", "hk", "eu", "us")
_FQDN = re.compile(rf"(?i)(?<![\w./-])(?:(?:{_LABEL}\.)+(?:{'|'.join(_INTERNAL_SUFFIXES[:-1])}|home\.arpa)"
                   rf"|(?:{_LABEL}\.){{2,}}(?:{'|'.join(_PUBLIC_TLDS)}))(?![\w-]|\.\w)")
# A peer as torch's c10d, TCPStore and Gloo name it: `connect to [h100-node-017]:29500`.
_BRACKET_HOST = re.compile(r"\[(?P<host>[A-Za-z][A-Za-z0-9._-]*)\]:\d+")
# Fields that hold a host name: torchrun's failure table (`host      : yotta-B200-232`), the
# rendezvous' `master_addr=NAME`, a launcher's `MASTER_ADDR=NAME`, `--master-addr NAME`, `rdzv_endpoint: NAME:29500`.
# A cluster's host names hold a digit or a dash; a traceback's code (`host: str`, `host=args.host`) does not.
_HOST_FIELD = re.compile(r"(?i)(?<![\w-])(?:(?:host(?:_?name)?|master_addr(?:ess)?|rdzv_endpoint)[\"']?[ \t]*[:=]"
                         r"|--(?:master|rdzv)[_-](?:addr|endpoint)[ \t=])[ \t]*[\"']?"
                         r"(?P<host>(?=[\w.-]*[\d-])[A-Za-z](?:[A-Za-z0-9_-]|\.(?=[A-Za-z0-9]))*)")
_NOT_A_HOST = {"none", "null", "nil", "unknown", "unset", "true", "false", "auto", "any", "localhost"}
# Where a rule can match at all (see Redactor.identity_of).
_NCCL_TAIL = re.compile(r":\d+:\d+ \[\d+\]")
_TLD = re.compile(rf"(?i)\.(?:{'|'.join(_INTERNAL_SUFFIXES + _PUBLIC_TLDS)})(?![\w-])")
_IPV4_HINT = re.compile(r"\d\.\d{1,3}\.\d{1,3}\.\d")
_IPV6_HINT = re.compile(r"[0-9A-Fa-f]:[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:")
# What those tests look for, in a gate over many lines (cpverify.redact_lines; with Redactor.gate_terms).
_IDENTITY_WORDS = ("home", "users", "://", "]:", "::", "host", "master", "rdzv", "ip-", "ec2-",
                   *(f".{suffix}" for suffix in _INTERNAL_SUFFIXES + _PUBLIC_TLDS))
_IDENTITY_HINTS = (_NCCL_TAIL, _IPV4_HINT, _IPV6_HINT)
# Cloud host names that spell an address: ip-172-31-5-10, ec2-54-1-2-3.
_ADDRESS_HOST = re.compile(r"(?i)\b(?:ip|ec2)-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}\b")
# Public services identify nobody, and a verdict pointing at them must stay readable.
_VERSION_BEFORE = re.compile(r"(?i)(?:version|cudnn|driver)[\"']?\s*[:=]?\s*[\"']?v?\Z")
_PUBLIC_DOMAINS = ("huggingface.co", "hf.co", "github.com", "githubusercontent.com", "pytorch.org", "python.org",
                   "pypi.org", "nvidia.com", "docker.io", "docker.com", "ray.io", "wandb.ai", "googleapis.com",
                   "slack.com", "discord.com", "readthedocs.io")
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
# Generic account names: not identifying, and redacting them would mangle `ray job submit` or `ubuntu:24.04`.
_GENERIC_USERS = {"root", "ubuntu", "user", "admin", "runner", "ray", "docker", "nvidia", "slime", "test",
                  "dev", "work", "app", "jovyan", "builder", "ci", "nobody"}


@functools.lru_cache(maxsize=4096)  # the same few hosts on every line
def _is_public(host: str) -> bool:
    host = host.lower().rstrip(".")
    return host in _LOCAL_NAMES or any(host == d or host.endswith("." + d) for d in _PUBLIC_DOMAINS)


class Pseudonyms:
    """Stable stand-ins for hosts and IPs: `host-1`, `ip-1`, in order of first appearance.

    With a `path`, the table is loaded from and saved to that file, so every step of one run
    (separate processes under nox) gives a host the same placeholder in every file. The file
    names the real hosts: it belongs with the raw logs, not with what is shared.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._table: dict[str, dict[str, str]] = {"host": {}, "ip": {}}
        self._lock = threading.Lock()
        self._known_names: list[str] = []
        self._known: re.Pattern[str] | None = None
        if self.path is not None and self.path.is_file():
            with contextlib.suppress(ValueError, OSError):
                loaded = json.loads(self.path.read_text(encoding="utf-8"))
                for kind in self._table:
                    self._table[kind].update({str(k): str(v) for k, v in (loaded.get(kind) or {}).items()})
            for name in self._table["host"]:
                self._remember(name)

    def host(self, name: str) -> str:
        # one machine, one placeholder: gpu-node-17 and gpu-node-17.corp.example.com
        return self._get("host", name.lower().rstrip(".").split(".")[0])

    def ip(self, address: str) -> str:
        return self._get("ip", address.lower())

    def known_hosts(self) -> tuple[list[str], re.Pattern[str] | None]:
        """The short names of the hosts seen so far (gpu-node-17 after gpu-node-17.corp.example.com)
        that are distinctive enough to replace as words (with a digit or a dash, or long), and a
        pattern that finds them."""
        return self._known_names, self._known

    def _remember(self, name: str) -> None:
        if re.search(r"[\d-]", name) or len(name) >= 8:
            self._known_names = sorted({*self._known_names, name}, key=len, reverse=True)
            self._known = re.compile(r"(?i)(?<![\w.-])(?:" + "|".join(map(re.escape, self._known_names))
                                     + r")(?![\w-]|\.\w)")

    def _get(self, kind: str, key: str) -> str:
        with self._lock:
            table = self._table[kind]
            if key not in table:
                table[key] = f"{kind}-{len(table) + 1}"
                if kind == "host":
                    self._remember(key)
                self._save()
            return table[key]

    def _save(self) -> None:
        if self.path is None:
            return
        atomic_write_json(self.path, {"about": "which placeholder in the shareable files stands for which host "
                                               "or address; keep it with the raw logs, do not share it",
                                      **self._table}, mode=0o600)


@functools.lru_cache(maxsize=1)
def _machine_identity() -> tuple[tuple[str, ...], str | None, str | None]:
    """(host names, user name, home dir) of this machine, looked up once."""
    hosts: set[str] = set()
    try:
        full = socket.gethostname()
    except OSError:
        full = ""
    for name in (full, full.split(".")[0]):
        if len(name) >= 3 and name.lower() not in _LOCAL_NAMES:
            hosts.add(name)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
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


class Redactor:
    """Redaction rules bound to this machine, this process and one run, applied to many texts.

    Credentials go always. `identity=True` also replaces this machine's user and home paths,
    other hosts and IPs (through `pseudonyms`, the run's table, so that the same host reads
    `host-2` in every file); `identity=False` (the user's --no-redact) keeps them. The machine's
    identity and the environment's secret values are looked up once, at construction.
    """

    def __init__(self, extra_secrets: Iterable[str] = (), *, identity: bool = True,
                 pseudonyms: Pseudonyms | None = None) -> None:
        self.literals = [s for s in (*extra_secrets, *environment_secrets()) if literal_worthy(s)]
        self.identity = identity
        self.pseudonyms = pseudonyms if pseudonyms is not None else Pseudonyms()
        hosts, user, home = _machine_identity()
        self._machine_hosts = [(h.lower(), re.compile(rf"(?<![\w-]){re.escape(h)}(?![\w-])", re.IGNORECASE))
                               for h in hosts]
        self._home_path, self._user_name = home, user
        self._home = re.compile(rf"{re.escape(home)}(?![\w.-])") if home else None
        self._user = re.compile(rf"(?<![\w-]){re.escape(user)}(?![\w-])") if user else None
        self._vouched: dict[str, tuple[int, frozenset[str]]] = {}  # digest -> learned() when it began

    def learned(self) -> tuple[int, frozenset[str]]:  # how many secrets, which hosts: as a text begins (vouch)
        return len(self.literals), frozenset(self.pseudonyms.known_hosts()[0])

    def vouch(self, digest: str, begun: tuple[int, frozenset[str]]) -> None:
        """The text of sha256 `digest` was written redacted by this redactor, which knew `begun` at its start."""
        self._vouched[digest] = begun

    def vouched(self, digest: str) -> frozenset[str] | None:
        """The hosts learned since the text of sha256 `digest` began (None: not this redactor's, or a secret learned since)."""
        return None if (then := self._vouched.get(digest)) is None or then[0] != len(self.literals) else self.learned()[1] - then[1]

    def add_secrets(self, values: Iterable[str]) -> None:
        """More literal values to remove (the plan's, once it is known)."""
        self.literals += [value for value in values if literal_worthy(value) and value not in self.literals]

    def __call__(self, text: str, *, keep_versions: bool = False) -> str:
        """`text` redacted. `keep_versions` skips IPv4 matching, for fields known to hold a version
        (cuDNN 9.10.2.21 is shaped like an address)."""
        return self.identity_of(Credentials(self.literals).text(text), keep_versions=keep_versions)

    def lines(self) -> Callable[[str], str]:
        """A stateful per-line redactor (a PEM block may span the lines it is fed)."""
        return functools.partial(self.line_of, Credentials(self.literals))

    def line_of(self, rules: Credentials, line: str) -> str:
        """One line of many: `rules` hold whether a PEM block is open (cpverify.redact_lines feeds a block)."""
        return self.identity_of(rules.lines([line])[0])

    def gate_terms(self) -> tuple[list[str], list[str], tuple[re.Pattern[str], ...]]:
        """What identity_of's cheap tests look for now: (words in any case, words in this case, patterns)."""
        if not self.identity:
            return [], [], ()
        return ([*_IDENTITY_WORDS, *(name for name, _ in self._machine_hosts), *self.pseudonyms.known_hosts()[0]],
                [word for word in (self._home_path, self._user_name) if word], _IDENTITY_HINTS)

    def identity_of(self, text: str, *, keep_versions: bool = False) -> str:
        # Each rule runs only where a cheap test says it can match: most log lines hold no
        # address, URL or host name, and the full patterns cost tens of microseconds a line.
        if not self.identity:
            return text
        low = text.lower()
        if self._home is not None and self._home_path and self._home_path in text:
            text = self._home.sub("~", text)
        if "home" in low or "users" in low:
            text = _HOME.sub("~", text)
        host = self.pseudonyms.host
        if "://" in text:
            text = _URL_HOST.sub(lambda m: keep_group("host", host(m.group("host")))(m)
                                 if self._is_other_host(m.group("host")) else m.group(0), text)
        if _NCCL_TAIL.search(text):
            text = _NCCL_HOST.sub(lambda m: host(m.group(0)) if self._is_other_host(m.group(0)) else m.group(0), text)
        if "]:" in text:
            text = _BRACKET_HOST.sub(self._host_in, text)
        if "host" in low or "master" in low or "rdzv" in low:
            text = _HOST_FIELD.sub(self._host_in, text)
        if _TLD.search(text):
            text = _FQDN.sub(lambda m: m.group(0) if _is_public(m.group(0)) else host(m.group(0)), text)
        if "ip-" in low or "ec2-" in low:
            text = _ADDRESS_HOST.sub(lambda m: host(m.group(0)), text)
        for name, pattern in self._machine_hosts:
            if name in low:
                text = pattern.sub(lambda m: host(m.group(0)), text)
        names, known = self.pseudonyms.known_hosts()
        if known is not None and any(name in low for name in names):
            text = known.sub(lambda m: host(m.group(0)), text)
        if self._user is not None and self._user_name and self._user_name in text:
            text = self._user.sub(USER, text)
        if not keep_versions and _IPV4_HINT.search(text):
            text = _IPV4.sub(self._ipv4, text)
        if "::" in text or _IPV6_HINT.search(text):
            text = _IPV6.sub(self._ipv6, text)
        return text

    def _host_in(self, match: re.Match[str]) -> str:
        """The match with its `host` group pseudonymised, when that names another machine."""
        name = match.group("host")
        if name.lower() in _NOT_A_HOST or not self._is_other_host(name):
            return match.group(0)
        return keep_group("host", self.pseudonyms.host(name))(match)

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def _is_other_host(name: str) -> bool:
        if _is_public(name) or re.fullmatch(r"[\d.]+|host-\d+|ip-\d+", name):  # addresses: the IP rules decide
            return False
        return not (name.isupper() and "." not in name)  # HEAD in `http://HEAD:8265` is a placeholder already

    def _ipv4(self, match: re.Match[str]) -> str:
        text = match.group(0)
        try:
            address = ipaddress.IPv4Address(text)
        except ValueError:
            return text
        if _VERSION_BEFORE.search(match.string, max(0, match.start() - 40), match.start()):
            return text  # cuDNN 9.10.2.21, "cudnn_version": "9.10.2.21": a version shaped like an address
        # Loopback and 0.0.0.0 identify nobody and appear in the reproduction commands.
        return text if address.is_loopback or address.is_unspecified else self.pseudonyms.ip(text)

    def _ipv6(self, match: re.Match[str]) -> str:
        text = match.group(0)
        try:
            address = ipaddress.IPv6Address(text)
        except ValueError:
            return text
        return text if address.is_loopback or address.is_unspecified else self.pseudonyms.ip(str(address))

    def json(self, obj: Any, *, share: bool = False) -> Any:
        """A redacted deep copy of a JSON-like value: secret-named fields (and the value of a
        [name, value] pair with a secret name, as the profile's env is kept) lose their value.
        With `share`, a dict of numbers under plain keys is the value's own, not a copy (for a
        value that is only printed: a big log's parse holds hundreds of thousands).

        Every string is redacted knowing every host the value names: one first named deep inside
        it is replaced where it was named before, too."""
        known = self.pseudonyms.known_hosts()[0]
        copy = _JsonCopy(self, share).value(obj, None)
        if self.pseudonyms.known_hosts()[0] != known:  # hosts learned on the way: once more, knowing them
            copy = _JsonCopy(self, share).value(obj, None)
        return copy


_SCALARS = frozenset((int, float, bool, type(None)))


class _JsonCopy:
    """One walk of Redactor.json. A parse of a big log holds each metric name hundreds of thousands
    of times: each distinct string is redacted once, each distinct set of keys judged once, and under
    plain keys a number is taken as it is (benchmarks/parse_throughput.md)."""

    def __init__(self, redactor: Redactor, share: bool) -> None:
        self._share = share
        self._texts = _Memo(redactor)
        self._versions = _Memo(functools.partial(redactor, keep_versions=True))
        # keys -> (their names, redacted; their names; whether none is secret, a version's or changed)
        self._keys: dict[tuple, tuple[list[str], list[str], bool]] = {}

    def value(self, value: Any, key: str | None) -> Any:
        if isinstance(value, dict):
            return self._dict(value)
        if isinstance(value, (list, tuple)):
            return self._list(value, key)
        if key is not None and is_secret_name(key) and value not in _EMPTY and not _metric(key, value):
            return SECRET
        if isinstance(value, str):
            return self._versions[value] if key is not None and "version" in key.lower() else self._texts[value]
        return value

    def _dict(self, value: dict) -> dict:
        keys = tuple(value)
        plan = self._keys.get(keys)
        if plan is None:  # the first dict of these keys: each key before its value, as placeholders number them
            copy = {self._texts[str(k)]: self.value(v, str(k)) for k, v in value.items()}
            names = [str(k) for k in keys]
            redacted = [self._texts[name] for name in names]
            plain = redacted == list(keys) and not any(is_secret_name(n) or "version" in n.lower() for n in names)
            self._keys[keys] = (redacted, names, plain)
            return copy
        redacted, names, plain = plan
        if plain:  # what value() makes of a number or a string under a key neither secret nor a version's
            if self._share and _SCALARS.issuperset(map(type, value.values())):
                return value
            texts, walk = self._texts, self.value
            return {k: v if type(v) in _SCALARS else texts[v] if type(v) is str else walk(v, k)
                    for k, v in value.items()}
        return {new: self.value(v, name) for new, name, v in zip(redacted, names, value.values(), strict=True)}

    def _list(self, value: list | tuple, key: str | None) -> list:
        if len(value) == 2 and isinstance(value[0], str) and is_secret_name(value[0]) and value[1] not in _EMPTY:
            return [self._texts[value[0]], SECRET]  # an env pair, ("HF_TOKEN", "hf_...")
        if not any(issubclass(t, str) for t in set(map(type, value))):  # no word is a flag: records, numbers
            return [self.value(v, key) for v in value]
        return [SECRET if follows_secret_flag(value, i) else self.value(v, key) for i, v in enumerate(value)]


def _metric(key: str, value: Any) -> bool:
    """A logger's metric (`eval/aime_pass`: 0.53, `train/auth_score`): a number under a namespaced
    name is a measurement, as the text rules read it in the log line that printed it, not a credential."""
    return "/" in key and type(value) in (int, float)


class _Memo(dict):
    """text -> redact(text), each text redacted once."""

    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self._redact = redact

    def __missing__(self, text: str) -> str:
        done = self[text] = self._redact(text)
        return done

def redact_text(text: str, *, extra_secrets: Iterable[str] = (), keep_versions: bool = False,
                identity: bool = True) -> str:
    """Return `text` with credentials, home paths, user/host names and IP addresses replaced.

    `extra_secrets` are literal strings to remove wherever they occur (values the caller knows
    are secret). For many texts, or placeholders shared between files, build one Redactor.
    """
    return Redactor(extra_secrets, identity=identity)(text, keep_versions=keep_versions)


def redact_json(obj: Any, *, extra_secrets: Iterable[str] = (), identity: bool = True) -> Any:
    """A redacted deep copy of a JSON-like value (see Redactor.json)."""
    return Redactor(extra_secrets, identity=identity).json(obj)


# -- the terminal -----------------------------------------------------------------------------------


def _inert_but_redraw(text: str) -> str:
    """inert(), but one carriage return that opens the text stays: it is how a progress bar (tqdm,
    huggingface_hub's downloads) redraws its own line; anywhere else it would hide what came before."""
    return "\r" + inert(text[1:]) if text.startswith("\r") else inert(text)


class _RedactingStream:
    """A text stream that passes whole lines through a redactor before the real stream sees them,
    then makes them inert (cpverify.terminal.inert: no control character a log holds acts on the
    terminal); `with_controls()` is the same without that, for a display that draws with them.
    Redaction comes first: it reads a line as the terminal will show it (cpverify.credentials), and
    inert() would turn a backspace between a name and its value into text that parts them."""

    def __init__(self, stream, redactor: Redactor, *, controls: bool = False) -> None:
        self._stream = stream
        self._clean = (lambda text: text) if controls else _inert_but_redraw
        self.use(redactor)

    def with_controls(self) -> _RedactingStream:
        """This stream's terminal and redactor, its control sequences kept: for rich's live display,
        whose own text is made inert where it is built (cpverify.progress)."""
        return _RedactingStream(self._stream, self.redactor, controls=True)

    def use(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._line = redactor.lines()
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            *complete, self._pending = self._pending.split("\n")
            self._emit("".join(self._clean(self._line(line + "\n")) for line in complete))
        return len(text)

    def _emit(self, text: str) -> None:
        """Write to the real stream. A reader that went away (`cpverify verdict ... | head`) ends what
        is shown, not the command: it goes on and exits with its own code (a FAIL must not become the
        0 of a closed pipe); later output goes to /dev/null, so the interpreter's last flush is quiet."""
        try:
            self._stream.write(text)
        except BrokenPipeError:
            _discard(self._stream)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:  # a progress line redrawn with \r, or a prompt: it is shown now
            self._emit(self._clean(self._line(self._pending)))
            self._pending = ""
        try:
            self._stream.flush()
        except BrokenPipeError:
            _discard(self._stream)

    def __getattr__(self, name: str):  # isatty, encoding, fileno ...: the real stream's
        return getattr(self._stream, name)


def _discard(stream) -> None:
    """Point a stream whose reader has gone at /dev/null (Python's advice for SIGPIPE:
    https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def print_json(obj: Any) -> None:
    """`print(json.dumps(obj))`, the same text, redacted field by field (Redactor.json) by the
    terminal's redactor (a fresh Redactor outside one) and written in pieces, never held whole.

    The terminal's text rules would see the document as one line: megabytes through every rule
    (seconds, for `cpverify parse --json` of a big log), a pair rule that leaves
    `"name": <redacted:secret>` (no longer JSON), a literal secret missed where JSON escapes it.
    Inert already (cpverify.terminal): json.dumps escapes every control character."""
    stream = sys.stdout
    write: Callable[[str], object]
    if isinstance(stream, _RedactingStream):
        stream.flush()  # what was printed before comes first
        redactor, write = stream.redactor, stream._emit  # past the text rules; a reader gone, handled
    else:
        redactor, write = Redactor(), stream.write
    for piece in _json_pieces(redactor.json(obj, share=True)):
        write(piece)
    write("\n")
    stream.flush()


_JSON_BATCH = 1024  # list items a piece: enough to stay in json's C encoder, little to hold


def _json_pieces(value: Any) -> Iterator[str]:
    """json.dumps(value) in pieces: a dict's items one by one, a long list a batch at a time."""
    if type(value) is dict and all(type(key) is str for key in value):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield (", " if i else "") + json.dumps(key) + ": "
            yield from _json_pieces(item)
        yield "}"
    elif type(value) is list and len(value) > _JSON_BATCH:
        yield "["
        for start in range(0, len(value), _JSON_BATCH):
            yield (", " if start else "") + json.dumps(value[start : start + _JSON_BATCH])[1:-1]
        yield "]"
    else:
        yield json.dumps(value)


@contextlib.contextmanager
def redacted_terminal(redactor: Redactor) -> Iterator[None]:
    """While active, everything written to sys.stdout and sys.stderr is redacted by `redactor`.
    Nested use swaps the redactor (a run's own placeholders) and restores the outer one after."""
    streams = ("stdout", "stderr")
    outer = {name: getattr(sys, name) for name in streams}
    previous = {}
    for name, stream in outer.items():
        if isinstance(stream, _RedactingStream):
            stream.flush()
            previous[name] = stream.redactor
            stream.use(redactor)
        else:
            setattr(sys, name, _RedactingStream(stream, redactor))
    try:
        yield
    finally:
        for name, stream in outer.items():
            current = getattr(sys, name)
            if isinstance(current, _RedactingStream):
                with contextlib.suppress(OSError, ValueError):  # a closed or broken stream
                    current.flush()
            if name in previous:
                stream.use(previous[name])
            else:
                setattr(sys, name, stream)
