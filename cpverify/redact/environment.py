"""What the redaction reads from this process and this machine, and nothing else does: the values of
secret-named environment variables (removed wherever they appear), and this machine's host names,
user name and home directory (replaced in what is shared). Each is read when a Redactor or a
LineScrubber is built; the machine's identity once per process.
"""

from __future__ import annotations

import functools
import getpass
import os
import socket
from pathlib import Path

from cpverify.redact.identity import GENERIC_USERS, LOCAL_NAMES
from cpverify.redact.names import literal_secret


def environment_secrets() -> list[str]:
    """Values of this process's environment variables whose names look secret (HF_TOKEN, ...)."""
    return [value for name, value in os.environ.items() if literal_secret(name, value)]


@functools.lru_cache(maxsize=1)
def machine_identity() -> tuple[tuple[str, ...], str | None, str | None]:
    """(host names, user name, home dir) of this machine, looked up once."""
    hosts: set[str] = set()
    try:
        full = socket.gethostname()
    except OSError:
        full = ""
    for name in (full, full.split(".")[0]):
        if len(name) >= 3 and name.lower() not in LOCAL_NAMES:
            hosts.add(name)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        user = None
    if not user or len(user) < 3 or user.lower() in GENERIC_USERS:
        user = None
    try:
        home: str | None = str(Path.home())
    except (KeyError, RuntimeError):  # no HOME and no passwd entry
        home = None
    if home in ("/", "/root"):  # /root paths appear in every slime image and identify nobody
        home = None
    return tuple(sorted(hosts, key=len, reverse=True)), user, home
