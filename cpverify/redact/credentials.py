"""What a credential is, defined once, applied a line at a time: the rules cpverify.redact applies to
everything cpverify writes or prints, and the runners to what a workload receives.

A credential is recognised by its **name** (cpverify.redact.names), as the value of such a name in
`NAME=value`, `NAME: value`, `"name": "value"`, `--name value` and an argument dump's `name ........
value`; by the **shape of its value**, whatever its name (cpverify.redact.values), PEM private-key
blocks across lines included; or **literally** (the values of secret-named variables of this
process and the plan, given to `Credentials`). Colour codes and control characters around a name or
a value hide neither.

Deliberately *not* secrets, because a report without them is useless and a redactor that eats them
is wrong too: numbers (`Timeout(ms)=600000`), versions, paths, model names, hex digests, slime's
data-field and tokenizer flags (`--input-key messages`, `--fim-pad-token`), and prose: a flag named
in a sentence is followed by a plain lowercase word (`so --wandb-key keeps its default`), which no
generated credential is.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence

from cpverify.redact.names import NAME_STEMS, QUALIFIERS, is_secret_name, literal_worthy, names
from cpverify.redact.values import (
    EMPTY,
    NO_VALUE,
    PLACEHOLDER_PREFIX,
    PRIVATE_KEY,
    SECRET,
    VALUE_KINDS,
    reads_as_value,
)
from cpverify.terminal import CONTROL as _TERMINAL_CONTROL  # what inert() escapes, one definition
from cpverify.terminal import as_shown

# PEM private keys span lines: BEGIN opens a block that the next lines continue until END.
_PEM_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_PEM_ONE_LINE = re.compile(_PEM_BEGIN.pattern + r".*?" + _PEM_END.pattern)  # "\n"-escaped in JSON, or one line
# Inside a block: whatever prefix a log adds to every line (Ray's "(Actor pid=1) ", a timestamp, ANSI
# colour), then key material (base64) or a header (Proc-Type: 4,ENCRYPTED); or a blank line.
_PEM_BODY = re.compile(r"(?P<prefix>(?:[^\n]*[\s)])?)(?P<body>[A-Za-z0-9+/]+={0,2}|[A-Za-z-]+: [^\n]*)\s*")
_PEM_BLANK = re.compile(r"\s*(?:\([^()\n]*\))?\s*")  # escape sequences are spaces by then (Credentials.line)

# NAME=value pairs. Names are found first and only secret-looking ones consume their value, so a
# harmless name can never swallow the secret pair that follows it ("export A=1 HF_TOKEN=...").
# Where a name can stand: cpverify.redact.names.
# The separator: `=` or `:`; the dots of an argument dump (Megatron's `_print_args`, as slime prints
# it: `  wandb_key ....... VALUE`, as many dots as the name is short), whose value is the rest of
# the line; or, for a --flag only, a space or a comma between quoted words (an argv list's repr).
# A quoted value may lack its closing quote where the line ends: an excerpt or a table cell cut it.
_VALUE = re.compile(r"""(?P<sep>[ \t]*[=:][ \t]*|(?P<dots>[ \t]+\.+[ \t]+)|[ \t]+|,[ \t]*(?=["']))"""
                    r"""(?P<value>\\"(?:[^"\\\n]|\\[^"])*(?:\\"|$)|"(?:[^"\\\n]|\\.)*(?:"|$)|'(?:[^'\\\n]|\\.)*(?:'|$)"""
                    r"""|[^\s,;'"}\])]+)""", re.MULTILINE)
_SCHEMES = {"bearer", "basic", "token", "digest", "negotiate", "ntlm", "apikey", "key"}

# The gate: a line that holds none of these words (lower-cased) and no match of GATE_PATTERNS can hold
# no value-shaped secret and no secret pair, so the rules never see it -- most lines of a training log
# (NCCL INFO, access logs, progress bars, metric dicts). benchmarks/scrub_throughput.md measures what it
# costs. test_redact.py checks that every rule's trigger passes it.
_ENDING_STEMS = ("token", "pat", "key")  # see GATE_PATTERNS
GATE_WORDS = ("://", "-----begin", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "akia",
              "asia", "sk-", "k_live_", "k_test_", "xox", "xapp-", "aiza", "pypi-", "npm_", "sg.", "eyj", "nvapi-", "ya29.", "gsk_",
              "dapi", "local-", "wandb_v1_", "bearer", "basic", *(s for s in NAME_STEMS if s not in _ENDING_STEMS),
              # the commands of _COMMAND_PASSWORDS (sshpass: "pass"; every registry tool and wandb: "login")
              "curl", "mysql", "mariadb", "redis-cli", "smbclient", "openssl", "sqlcmd", "mongo", "ldap", "login")
# The stems a name is secret by only where its last word ends in them (HF_TOKEN, GITHUB_PAT, WANDB_KEY,
# --api-keys: is_secret_name) or, for a key, after api, access or private (API_KEY_V2): in a line, such
# a stem is followed by nothing but the separators of a name's words before the name ends (a character
# no name holds, or a dot that none follows, as cpverify.redact.names reads a name). A metric's
# `tokens_per_gpu_per_sec`, a `--model-path`, a `keyboard` are none, and the lines of a training log
# that name them pass by. Patterns over the line in lower case, without lookaround (Hyperscan has none).
_NAME_END = r"(?:\.?[_-])*(?:\.?(?:[^A-Za-z0-9_.-]|$)|\.\.)"
# The qualifiers a name may carry after its noun (HF_TOKEN_2, TOKEN1, API_KEY_PROD: names.QUALIFIERS).
_QUALIFIED = r"\d*(?:[_.-]+(?:\d+|v\d+|" + "|".join(QUALIFIERS) + r"))*"
GATE_PATTERNS = (rf"(?:token|pat|keys?){_QUALIFIED}{_NAME_END}", r"(?:api|access|private)[_.-]*key")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _trie(words: Iterable[str]) -> str:
    """One regex for a set of words, shared prefixes factored out (`s(?:ecret|ig|k\\-)`): sre then
    tries a handful of first characters at each position instead of every word (3x faster here)."""
    root: dict = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict) -> str:
        if "" in node:
            return ""  # a word ends here: for a gate, the longer ones add nothing
        branches = [re.escape(char) + build(child) for char, child in sorted(node.items())]
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return build(root)


# One regex for every word and pattern: a single call (its fixed cost beats 40 `in` tests), over a line or a block.
GATE = re.compile("|".join((_trie(GATE_WORDS), *GATE_PATTERNS)))  # search the text in lower case
_GATE_LINE: dict[type, re.Pattern] = {str: GATE, bytes: re.compile(GATE.pattern.encode())}
_NEEDS = re.compile(_trie(word for kind in VALUE_KINDS for word in kind.needs))  # found: some value rule may match


def _gated(lines: list, literals: re.Pattern | None) -> list[int]:
    """Indices of the lines (str or bytes, one type) that the gate lets through or that hold a literal
    secret (`literals`: one pattern of them all, of the lines' type)."""
    if len(lines) == 1:  # the common streaming case: no join, no offsets
        line = lines[0]
        return [0] if _gate_passes(line) or (literals and literals.search(line)) else []
    block = lines[0][:0].join(lines)
    starts, offset = [], 0
    for line in lines:
        starts.append(offset)
        offset += len(line)
    hot: set[int] = set()

    def hits(pattern: re.Pattern, text) -> None:  # each line once: after a hit, go on at the next line
        found = pattern.search(text)
        while found:
            index = bisect.bisect_right(starts, found.start()) - 1
            hot.add(index)
            found = pattern.search(text, starts[index + 1]) if index + 1 < len(starts) else None

    # One scan of the gate (cheaper than a find per word once there are 50 words), over the
    # block in lower case, ASCII only: str.lower() may lengthen a text ('İ'): the offsets are the block's.
    ascii_block = block.isascii()
    hits(_GATE_LINE[type(block)], block.lower() if isinstance(block, bytes) or ascii_block else block.translate(_ASCII_LOWER))
    if not ascii_block:  # a line the ASCII lower case left a letter of: as the rules read it
        hot.update(i for i, line in enumerate(lines) if i not in hot and not line.isascii() and _gate_passes(line))
    if literals:
        hits(literals, block)
    return sorted(hot)


def _gate_passes(line: str | bytes) -> bool:
    """Does the gate let one line through? Read in lower case as the rules read a name: str.lower(),
    which makes the Kelvin sign a k as is_secret_name's lower() and the (?i) of a name's stems do
    (bytes.lower() leaves it)."""
    if line.isascii():
        return _GATE_LINE[type(line)].search(line.lower()) is not None
    text = line if isinstance(line, str) else line.decode("utf-8", "surrogateescape")
    return GATE.search(text.lower()) is not None


def _redact_pairs(text: str) -> str:
    out: list[str] = []
    pos = 0
    for match in names(text):
        if match.start() < pos or not is_secret_name(match.group("name")):
            continue
        found = _VALUE.match(text, match.end())
        if not found:
            continue
        sep, value, end = found.group("sep"), found.group("value"), found.end()
        spaced = not sep.strip()
        if found.group("dots"):  # a dump's row: the name indented, its value all the rest of the line
            before, end = text[:match.start()], len(text.rstrip())
            value = text[found.start("value"):end]
            # Megatron indents its rows by two spaces; unindented (a log cut or trimmed), a row's value
            # must not read as a sentence going on, as in the ellipsis "waiting for the token ... done".
            indented = before.endswith(("  ", "\t"))
            if match.group("name").startswith("--") or not (
                    indented or (not before.strip() and reads_as_value(found.group("value")))):
                continue
        # A bare-space separator only counts for CLI flags (--hf-token VALUE), not prose ("token was"),
        # and a plain lowercase word after one is a sentence going on (`so --wandb-key keeps its default`).
        elif (spaced or sep.strip() == ",") and (not match.group("name").startswith("--") or not reads_as_value(
                value.strip("'\"") if sep.strip() else value)):
            continue
        bare = value.strip("\"'\\")
        if (value.startswith("--") or bare.startswith(("$", PLACEHOLDER_PREFIX)) or bare.lower() in _SCHEMES
                or bare.lower() in NO_VALUE or (bare and not any(c.isalnum() for c in bare))):
            continue  # no value here (a table's rule), a $REFERENCE, already hidden, a scheme whose credential is hidden
        quote = value[:2] if value.startswith('\\"') else value[:1] if value[:1] in ("'", '"') else ""
        out.append(text[pos:found.start("value")])
        out.append(f"{quote}{SECRET}{quote}")
        pos = end
    out.append(text[pos:])
    return "".join(out)


_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


class Credentials:
    """The credential rules, bound to the literal values known to be secret, applied line by line.

    `line()` carries one piece of state between lines: whether a PEM private-key block is open.
    """

    def __init__(self, literals: Iterable[str]) -> None:
        # Longest first, so a secret that contains another is removed whole.
        self.literals = sorted({s for s in literals if s}, key=len, reverse=True)
        found = "|".join(map(re.escape, self.literals))  # one search for them all, as the gate's
        self._found: dict[type, re.Pattern | None] = {str: re.compile(found) if found else None, bytes: re.compile(
            found.encode("utf-8", "surrogateescape")) if found else None}
        self.in_pem = False

    def line(self, line: str) -> str:
        """One line through every rule (no gate). Control characters and escape sequences read as
        spaces: a name or a value in colour (`\\x1b[32mHF_TOKEN\\x1b[0m=...`) is still one; a line
        they held a secret in comes back without them, the others as they were."""
        if _TERMINAL_CONTROL.search(line):
            plain = as_shown(line)  # as the rules read it
            out = self._rules(plain)
            return line if out == plain else out
        return self._rules(line)

    def _rules(self, line: str) -> str:
        for secret in self.literals:
            if secret in line:
                line = line.replace(secret, SECRET)
        if self.in_pem:
            line = self._pem_continued(line)
            if self.in_pem:
                return line
        if "-----BEGIN" in line:
            line = _PEM_ONE_LINE.sub(PRIVATE_KEY, line)
            opened = _PEM_BEGIN.search(line)
            if opened:  # the block goes on in the next lines
                end = len(line.rstrip("\r\n"))
                line = line[: opened.start()] + PRIVATE_KEY + line[end:]
                self.in_pem = True
        low = line.lower() if line.isascii() else None  # a pattern runs only where it may match: most never do
        for kind in VALUE_KINDS if low is None or _NEEDS.search(low) else ():
            if kind.may_match(low) and (done := kind.pattern.sub(kind.replace, line)) != line:
                line, low = done, done.lower() if done.isascii() else None
        return _redact_pairs(line)

    def lines(self, lines: list, decode: bool = False) -> list:
        """Consecutive lines (str, or bytes with `decode`): those the gate lets through, and every
        line while a PEM block is open, go through `line`; the others come back as they are."""
        out = list(lines)
        if not lines:
            return out
        hot = _gated(lines, self._found[bytes if decode else str])
        n, i, h = len(lines), 0, 0
        while i < n:
            if not self.in_pem:
                while h < len(hot) and hot[h] < i:
                    h += 1
                if h == len(hot):
                    break
                i = hot[h]
            if decode:  # surrogateescape: bytes that are not UTF-8 reach the file unchanged
                out[i] = self.line(lines[i].decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
            else:
                out[i] = self.line(lines[i])
            i += 1
        return out

    def _pem_continued(self, line: str) -> str:
        closed = _PEM_END.search(line)
        if closed:
            self.in_pem = False
            prefix = line[: closed.start()]
            return (prefix if _PEM_BLANK.fullmatch(prefix) else "") + PRIVATE_KEY + line[closed.end():]
        if _PEM_BLANK.fullmatch(line):
            return line
        body = _PEM_BODY.fullmatch(line)
        if body is None:  # not key material: the block was cut short; this line is ordinary output
            self.in_pem = False
            return line
        return line[: body.start("body")] + PRIVATE_KEY + line[body.end("body"):]

    def text(self, text: str) -> str:
        """All lines of a text, a PEM block spanning them included (state starts fresh). Lines end at
        "\\n" only, as the log stream's do: a carriage return or a form feed inside one is no line end
        that a name and its value could be separated by."""
        self.in_pem = False
        return "".join(self.lines(_LINE.findall(text)))


def secret_fragments(text: str) -> list[str]:
    """The secret parts of `text` by the value rules (a URL's password, a token), for literal removal
    elsewhere: a workload that was given `https://u:PW@host` may print PW alone."""
    found: list[str] = []
    for kind in VALUE_KINDS:
        for match in kind.pattern.finditer(text):
            if kind.replace(match) == match.group(0):
                continue  # a query parameter that is not secret, a command without a password
            for fragment in kind.fragments(match):
                found += [fragment, fragment.partition(":")[2]]  # user:password, and the password alone
    return [f for f in found if literal_worthy(f)]


def contains_secret(value: str) -> bool:
    """Does `value` hold a credential by its shape (a token, URL userinfo, a signed URL, a key block)?"""
    return Credentials(()).text(value) != value


def secret_arguments(argv: Iterable[str]) -> dict[int, str]:
    """The words of a command line that carry a secret: index -> the secret, which is the word
    after a secret flag (`--wandb-key V`), the value of `--flag=V` whose flag or value is secret,
    or a word that is a credential by its shape."""
    words = [str(word) for word in argv]
    found: dict[int, str] = {}
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if word.startswith("--") and eq and (is_secret_name(flag) or contains_secret(value)):
            found[i] = value
        elif follows_secret_flag(words, i) or contains_secret(word):
            found[i] = word
    return found


def follows_secret_flag(words: Sequence, i: int) -> bool:
    """In an argv list, is words[i] the value of a secret flag (`--wandb-key`, `VALUE`)?"""
    flag, value = (words[i - 1] if i else None), words[i]
    return (isinstance(flag, str) and isinstance(value, str) and flag.startswith("--") and "=" not in flag
            and is_secret_name(flag) and not value.startswith("--") and value not in EMPTY)
