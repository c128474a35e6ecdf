"""The redaction applied: `Redactor` (credentials always, identity unless --no-redact) for the
shareable files and the terminal, one run's placeholders shared across them; `LineScrubber`
(credentials only) for the raw logs as they stream to disk.

Both read this process's secret-named environment variables when built (cpverify.redact.environment),
and the Redactor this machine's identity.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

from cpverify.redact import environment
from cpverify.redact.credentials import Credentials, follows_secret_flag
from cpverify.redact.identity import IdentityRules, Pseudonyms
from cpverify.redact.names import is_secret_name, literal_worthy
from cpverify.redact.values import EMPTY, SECRET


def scrub_credentials(text: str, *, extra_secrets: Iterable[str] = ()) -> str:
    """`text` without credentials (identity kept): for files that stay on this machine, like state.json."""
    return Redactor(extra_secrets, identity=False)(text)


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_dev, stat.st_ino


class LineScrubber:
    """Credentials out of raw log lines as they stream to disk (bytes in, bytes out, one line a call).

    The same rules as Redactor's credentials, holding a PEM block open across lines and so across
    the writes a workload splits it into; identity stays (the log is the evidence). Cheap enough for
    every line a workload prints: the lines the gate skips go straight through.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._rules = Credentials(s for s in (*secrets, *environment.environment_secrets()) if literal_worthy(s))

    def __call__(self, raw: bytes) -> bytes:
        return self._rules.lines([raw], decode=True)[0]

    def lines(self, lines: list[bytes]) -> list[bytes]:
        """Consecutive lines at once: the gate is cheapest over a whole block (a pipe read of many lines)."""
        return self._rules.lines(lines, decode=True)


class Redactor:
    """Redaction rules bound to this machine, this process and one run, applied to many texts.

    Credentials go always. `identity=True` also replaces this machine's user and home paths,
    other hosts and IPs (through `pseudonyms`, the run's table, so that the same host reads
    `host-2` in every file); `identity=False` (the user's --no-redact) keeps them. The machine's
    identity and the environment's secret values are looked up once, at construction.
    """

    def __init__(self, extra_secrets: Iterable[str] = (), *, identity: bool = True,
                 pseudonyms: Pseudonyms | None = None) -> None:
        self.literals = [s for s in (*extra_secrets, *environment.environment_secrets()) if literal_worthy(s)]
        self.identity = identity
        self.pseudonyms = pseudonyms if pseudonyms is not None else Pseudonyms()
        self._identity = IdentityRules(self.pseudonyms, *environment.machine_identity())
        # file (device, inode) -> (sha256 of the text written to it, learned() when it began)
        self._vouched: dict[tuple[int, int], tuple[str, tuple[int, frozenset[str]]]] = {}

    def learned(self) -> tuple[int, frozenset[str]]:  # how many secrets, which hosts: as a text begins (vouch)
        return len(self.literals), frozenset(self.pseudonyms.known_hosts()[0])

    def vouch(self, file: str | os.PathLike[str], digest: str, begun: tuple[int, frozenset[str]]) -> None:
        """The text of sha256 `digest` was written to `file` redacted by this redactor, which knew `begun`
        at its start. The word is on the file, under whatever name it is given later (`cpverify verdict`
        renames its copies): its device and inode."""
        with contextlib.suppress(OSError):  # gone already: no word, its text goes through the rules
            self._vouched[_identity(os.stat(file))] = (digest, begun)

    def vouched(self, file: int | str | os.PathLike[str]) -> tuple[str, frozenset[str]] | None:
        """(the sha256 of the text this redactor wrote to `file` (a path or an open descriptor), the hosts
        learned since it began); None: it wrote none to that file, or a secret was learned since. Whoever
        takes the file's text on this word checks that its bytes are of that sha256."""
        try:
            claim = self._vouched.get(_identity(os.stat(file)))
        except OSError:
            return None
        if claim is None or claim[1][0] != len(self.literals):
            return None
        digest, (_, hosts) = claim
        return digest, self.learned()[1] - hosts

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
        """One line of many: `rules` hold whether a PEM block is open (cpverify.redact.lines feeds a block)."""
        return self.identity_of(rules.lines([line])[0])


    def gate_terms(self) -> tuple[list[str], list[str], tuple[re.Pattern[str], ...]]:
        """What identity_of's cheap tests look for now: (words in any case, words in this case, patterns)."""
        return self._identity.gate_terms() if self.identity else ([], [], ())

    def identity_of(self, text: str, *, keep_versions: bool = False) -> str:
        return self._identity.of(text, keep_versions=keep_versions) if self.identity else text


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
        if key is not None and is_secret_name(key) and value not in EMPTY and not _metric(key, value):
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
        if len(value) == 2 and isinstance(value[0], str) and is_secret_name(value[0]) and value[1] not in EMPTY:
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
