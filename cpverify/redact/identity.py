"""What identifies a person or a machine in a text, and its replacement in what is meant to be
shared: this user (`<user>`), a home directory (`~`), other hosts and IPs (stable placeholders,
`host-1`, `ip-1`: one run's `Pseudonyms` give a host the same one in every file). The raw logs keep
them: they are the evidence of which node failed.

`IdentityRules` is a function of the text, this machine's identity (cpverify.redact.environment
reads it) and the run's `Pseudonyms`; a `Pseudonyms` with a path reads and writes that file.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import re
import threading
from pathlib import Path

from cpverify.artifacts import atomic_write_json
from cpverify.redact.values import keep_group

USER = "<user>"

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
# Where a rule can match at all (see IdentityRules.of).
_NCCL_TAIL = re.compile(r":\d+:\d+ \[\d+\]")
_TLD = re.compile(rf"(?i)\.(?:{'|'.join(_INTERNAL_SUFFIXES + _PUBLIC_TLDS)})(?![\w-])")
_IPV4_HINT = re.compile(r"\d\.\d{1,3}\.\d{1,3}\.\d")
_IPV6_HINT = re.compile(r"[0-9A-Fa-f]:[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:")
# What those tests look for, in a gate over many lines (cpverify.redact.lines; with IdentityRules.gate_terms).
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
LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
# Generic account names: not identifying, and redacting them would mangle `ray job submit` or `ubuntu:24.04`.
GENERIC_USERS = {"root", "ubuntu", "user", "admin", "runner", "ray", "docker", "nvidia", "slime", "test",
                  "dev", "work", "app", "jovyan", "builder", "ci", "nobody"}


@functools.lru_cache(maxsize=4096)  # the same few hosts on every line
def _is_public(host: str) -> bool:
    host = host.lower().rstrip(".")
    return host in LOCAL_NAMES or any(host == d or host.endswith("." + d) for d in _PUBLIC_DOMAINS)


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


class IdentityRules:
    """The identity rules, bound to this machine's host names, user and home directory (each None
    or empty where there is none to hide) and to one run's `pseudonyms`."""

    def __init__(self, pseudonyms: Pseudonyms, hosts: tuple[str, ...], user: str | None, home: str | None) -> None:
        self.pseudonyms = pseudonyms
        self._machine_hosts = [(h.lower(), re.compile(rf"(?<![\w-]){re.escape(h)}(?![\w-])", re.IGNORECASE))
                               for h in hosts]
        self._home_path, self._user_name = home, user
        self._home = re.compile(rf"{re.escape(home)}(?![\w.-])") if home else None
        self._user = re.compile(rf"(?<![\w-]){re.escape(user)}(?![\w-])") if user else None

    def gate_terms(self) -> tuple[list[str], list[str], tuple[re.Pattern[str], ...]]:
        """What of()'s cheap tests look for now: (words in any case, words in this case, patterns)."""
        return ([*_IDENTITY_WORDS, *(name for name, _ in self._machine_hosts), *self.pseudonyms.known_hosts()[0]],
                [word for word in (self._home_path, self._user_name) if word], _IDENTITY_HINTS)

    def of(self, text: str, *, keep_versions: bool = False) -> str:
        """`text` with this user, home paths, other hosts and IPs replaced. `keep_versions` skips IPv4
        matching, for fields known to hold a version (cuDNN 9.10.2.21 is shaped like an address)."""
        # Each rule runs only where a cheap test says it can match: most log lines hold no
        # address, URL or host name, and the full patterns cost tens of microseconds a line.
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
