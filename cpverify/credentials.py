"""What a credential is, defined once: the rules cpverify.redact applies to everything cpverify
writes or prints, and the runners to what a workload receives.

A credential is recognised by its **name** (`is_secret_name`: HF_TOKEN, PGPASSWORD, DB_PASS,
GITHUB_PAT, SENTRY_DSN, DATABASE_URL, --wandb-key ...), as the value of such a name in `NAME=value`,
`NAME: value`, `"name": "value"`, `--name value` and an argument dump's `name ........ value`; by
the **shape of its value**, whatever its name (VALUE_KINDS, one rule per kind as Yelp's
detect-secrets keeps one plugin per kind: provider prefixes, JWTs, webhooks, URL userinfo, signed
URLs, Authorization headers, command lines' passwords such as `curl -u user:PW`, PEM private-key
blocks across lines); or **literally** (values of secret-named variables of this process and the
plan). Colour codes and control characters around a name or a value hide neither.

Deliberately *not* secrets, because a report without them is useless and a redactor that eats
them is wrong too: numbers (`Timeout(ms)=600000`), versions, paths, model names, hex digests (git
commits, sha256: a W&B API key has the same 40-hex shape and is caught by its name or literally),
slime's data-field and tokenizer flags (`--input-key messages`, `--fim-pad-token`), and prose: a
flag named in a sentence is followed by a plain lowercase word (`so --wandb-key keeps its
default`), which no generated credential is. There is no entropy rule: on a training log it would
eat hashes, ids and base64 tensors.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cpverify.pair_names import NAME_STEMS as _NAME_STEMS
from cpverify.pair_names import names
from cpverify.terminal import CONTROL as _TERMINAL_CONTROL  # what inert() escapes, one definition
from cpverify.terminal import as_shown

TOKEN = "<redacted:token>"
SECRET = "<redacted:secret>"
PRIVATE_KEY = "<redacted:private-key>"
_PLACEHOLDER_PREFIX = "<redacted"

# -- names ------------------------------------------------------------------------------------------

# A name is judged by its words (HF_TOKEN, hfToken, --hf-token: hf + token); mostly by its last
# word, the noun that says what the value is: `token_dispatcher_type` holds a type, `DB_PASS` a pass.
_NOUNS = {"token", "secret", "secrets", "password", "passwd", "pwd", "passphrase", "pass", "pat", "credential",
          "credentials", "cred", "creds", "apikey", "dsn", "cookie", "cookies", "signature", "sig", "jwt", "bearer",
          "headers", "session", "sessionid", "auth", "authorization", "webhook"}
# Words that make a name secret wherever they stand (PGPASSWORD, TORCH_SECRET_THING, AUTH_HEADER).
_ANYWHERE_PARTS = ("password", "passwd", "passphrase", "secret", "credential")
_ANYWHERE_WORDS = {"auth", "authorization", "apikey"}
# Two-word nouns (DATABASE_URL holds its password, SLACK_WEBHOOK_URL is the credential itself).
_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("session", "key"),
          ("database", "url"), ("db", "url"), ("webhook", "url"), ("connection", "string")}
# A name ending in one of these describes a secret without holding it: PASSWORD_FILE holds a path,
# AUTH_TYPE a type, SSH_AUTH_SOCK a socket, private_key_id an id.
_META = {"file", "files", "path", "paths", "dir", "directory", "name", "names", "type", "types", "mode", "len", "length",
         "size", "timeout", "ttl", "count", "num", "version", "id", "ids", "enabled", "sock", "socket", "host", "port",
         "endpoint", "url", "uri", "format", "policy", "kind", "expiry", "expires", "location", "stdin"}
# A noun after one of these words is not a credential: tokenizer vocabulary (--fim-pad-token,
# --rl-skip-bos-token), counts (--...-experts-per-token), slime's data-field flags that hold column
# names (--input-key), header *names* (--router-request-id-headers), a mode (--...-streaming-session).
_TOKEN_VOCAB = {"pad", "eos", "bos", "eod", "unk", "sep", "cls", "mask", "middle", "prefix", "suffix", "special", "start",
                "end", "stop", "image", "video", "audio", "vision", "placeholder", "think", "tool", "im", "system",
                "dummy", "next", "first", "last", "new", "per", "max", "min", "num", "total"}
_BENIGN_KEY_PREFIXES = {"input", "label", "metadata", "tool", "tools", "multimodal", "reward", "prompt", "response",
                        "image", "sort", "group", "dict", "primary", "partition", "cache", "hash", "memory", "public",
                        "query", "foreign", "routing", "shard"}
_QUALIFIED_ONLY = {"pass", "pat"}
_BENIGN_BEFORE = {"headers": {"id", "forwarded", "allowed", "exposed"},
                  # nox's NOX_CURRENT_SESSION=verdict and a desktop's DESKTOP_SESSION=ubuntu name a session
                  "session": {"streaming", "sticky", "current", "desktop"}}
# Nouns that only sometimes hold a credential: BW_SESSION holds a session key, a SESSION=cp1 names a session;
# AUTH=kerberos names a method. Their values are removed wherever they appear (the literal rule) only when they
# do not read as a plain word: removing "verdict" or "ubuntu" from every text would mangle a verdict.
_SOMETIMES_SECRET = {"session", "auth", "authorization", "headers"}
_PLAIN_WORD = re.compile(r"[a-z]+(?:[_.-][a-z]+)*")
# The shell's working directories: "pwd" is a password word (DB_PWD), but these two are paths.
_SHELL_DIRS = {"pwd", "oldpwd"}


def _name_words(name: str) -> list[str]:
    name = name.strip("\"'-")
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)  # apiKey -> api_Key
    return [w.lower() for w in re.split(r"[_.\-/]+", name) if w]


@functools.lru_cache(maxsize=4096)  # names repeat on every line of a log
def is_secret_name(name: str) -> bool:
    """Does a variable, flag, header, query parameter or field name say that its value is a credential?"""
    if name.strip("\"'-").lower() in _SHELL_DIRS:
        return False
    words = _name_words(name)
    if not words:
        return False
    last, previous = words[-1], (words[-2] if len(words) > 1 else "")
    if (previous, last) in _PAIRS:
        return True
    if last in _META:
        return False
    if last.endswith("token"):  # GITHUB_TOKEN, accessToken, GHTOKEN; not --fim-pad-token
        return previous not in _TOKEN_VOCAB
    if last in ("key", "keys"):  # WANDB_KEY, --wandb-key: a credential; --input-key: a dataset column
        return previous not in _BENIGN_KEY_PREFIXES
    if last in _NOUNS:
        if len(words) == 1 and last in _QUALIFIED_ONLY:
            return False  # "PASS: no errors", "pat: ...": words of their own, secret only qualified (DB_PASS)
        return previous not in _BENIGN_BEFORE.get(last, ())
    if any(part in word for word in words for part in _ANYWHERE_PARTS) or _ANYWHERE_WORDS.intersection(words):
        return True
    return any(pair in _PAIRS for pair in itertools.pairwise(words))


_NOT_LITERAL = {"true", "false", "yes", "no", "on", "off", "none", "null", "unset", "enabled", "disabled"}


def literal_worthy(value: str) -> bool:
    """Is a value of a secret-named variable worth removing wherever it appears? Not when it is so
    short or plain that removing it would mangle ordinary text (`SESSION_TIMEOUT=600000` would eat
    NCCL's `Timeout(ms)=600000`)."""
    value = value.strip()
    if len(value) < 6 or value.lower() in _NOT_LITERAL:
        return False
    try:
        float(value)
    except ValueError:
        return True
    return False  # a number


# -- values -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValueKind:
    """One kind of secret recognised by its value: `pattern` finds it, `replace` keeps what is not secret."""

    name: str
    pattern: re.Pattern[str]
    replace: Callable[[re.Match[str]], str]
    needs: tuple[str, ...]  # in lower case, the words one of which each match holds (see may_match)
    # the secret parts of a match (secret_fragments); by default its `secret` or `value` group, or all
    parts: Callable[[re.Match[str]], list[str]] | None = None

    def may_match(self, low: str | None) -> bool:  # low: the line in lower case; None: not ASCII ((?i) reads ſ as s)
        return low is None or any(word in low for word in self.needs)

    def fragments(self, match: re.Match[str]) -> list[str]:
        groups = match.groupdict()
        return self.parts(match) if self.parts else [groups.get("secret") or groups.get("value") or match.group(0)]


def _whole(placeholder: str) -> Callable[[re.Match[str]], str]:
    return lambda _match: placeholder


def keep_group(group: str, placeholder: str) -> Callable[[re.Match[str]], str]:
    """Replace only the named group: the scheme, header or host around it stays readable."""
    def replace(match: re.Match[str]) -> str:
        (start, end), offset, whole = match.span(group), match.start(), match.group(0)
        return whole[: start - offset] + placeholder + whole[end - offset:]
    return replace


def _secret_query_value(match: re.Match[str]) -> str:
    if not is_secret_name(match.group("name")) or match.group("value").startswith(_PLACEHOLDER_PREFIX):
        return match.group(0)
    return f"{match.group('name')}={SECRET}"


# -- passwords on command lines --------------------------------------------------------------------
# A password given as an option of a command that takes one: `curl -u user:PW`, `sshpass -p PW`,
# `docker login -p PW`, `mysql -pPW`, `redis-cli -a PW`, `ldapsearch -w PW`, `smbclient -U user%PW`,
# `openssl ... -passin pass:PW`, `sqlcmd -P PW`, `wandb login KEY`. The same option means something
# else elsewhere (`docker run -p 8080:80` is a port, `ssh -p 22` too), so the command decides.
# How an option carries the password: "value" (the next word, or the rest of `-pPW`), "attached"
# (only `-pPW`: mysql reads `-p db` as "prompt, then database db"), "user:" (after the first ':'),
# "user%" (after the first '%'), "pass:" (openssl's pass:PW; env:VAR and file:PATH hold none).
_REGISTRY_LOGIN = {"-p": "value", "--password": "value"}  # `<tool> login`, only after the word login
_COMMAND_PASSWORDS: dict[str, dict[str, str]] = {
    "curl": {"-u": "user:", "--user": "user:", "-U": "user:", "--proxy-user": "user:"},
    "sshpass": {"-p": "value"},
    "redis-cli": {"-a": "value", "--pass": "value"},
    "smbclient": {"-U": "user%", "--user": "user%"},
    "openssl": {"-passin": "pass:", "-passout": "pass:", "-pass": "pass:"},
    "sqlcmd": {"-P": "value"},
    **dict.fromkeys(("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlsh", "mariadb", "mariadb-dump"),
                    {"-p": "attached"}),
    **dict.fromkeys(("mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport"), {"-p": "value"}),
    **dict.fromkeys(("ldapsearch", "ldapadd", "ldapmodify", "ldapdelete", "ldapwhoami", "ldappasswd"), {"-w": "value"}),
    **dict.fromkeys(("docker", "podman", "nerdctl", "buildah", "skopeo", "helm", "oras", "crane"), _REGISTRY_LOGIN),
    "wandb": {},  # `wandb login [--relogin] [--host URL] KEY`: the key is the word that is no option
}
_AFTER_LOGIN = {name for name, options in _COMMAND_PASSWORDS.items() if options is _REGISTRY_LOGIN} | {"wandb"}
# A shell word (quotes kept whole); a command's words end at an unquoted ; | & < > ( ) or the line's end.
_SHELL_WORD = re.compile(r"""(?:'[^'\n]*'|"(?:[^"\\\n]|\\.)*"|\\.|[^\s'"\\;|&<>()]|['"])+""")  # a lone quote: a cut line
_COMMAND_LINE = re.compile(r"(?<![\w.-])(?P<command>" + "|".join(map(re.escape, sorted(_COMMAND_PASSWORDS, key=len, reverse=True)))
                           + r")(?![\w.-])(?:[ \t]+" + _SHELL_WORD.pattern + r")*")
# After a space, what is no value: a word of a sentence going on (`-p is insecure`: no generated
# secret is a plain lowercase word) or the next option (`--password -p`).
_NOT_A_VALUE = re.compile(r"[a-z]+(?:[-_][a-z]+)*|--?[A-Za-z].*")
_NO_VALUE = {"none", "null", "nil", "true", "false"}  # what a dump or a repr prints for an unset credential
_EMPTY = (None, "", True, False)  # an argv word or a JSON value that holds no credential


def _reads_as_value(word: str) -> bool:
    """Can `word`, after a space, be a credential: not prose, not the next option, not unset, not punctuation?"""
    word = word.strip("`")  # a sentence that quotes code
    return any(c.isalnum() for c in word) and not _NOT_A_VALUE.fullmatch(word) and word.lower() not in _NO_VALUE


def _password_span(word: re.Match[str], form: str, start: int = 0, spaced: bool = True) -> list[tuple[int, int]]:
    """Where the password is in `word` (from `start`, past an attached option), as spans of the line."""
    text = word.group(0)[start:]
    offset = word.start() + start
    if spaced and not _reads_as_value(text):
        return []
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":  # 'quoted': the quotes stay
        text, offset = text[1:-1], offset + 1
    if form == "user:" or form == "user%":
        cut = text.find(form[-1])
        text, offset = (text[cut + 1:], offset + cut + 1) if cut != -1 else ("", offset)
    elif form == "pass:":
        text, offset = (text[5:], offset + 5) if text.startswith("pass:") else ("", offset)
    if not any(c.isalnum() for c in text) or text.startswith(("$", _PLACEHOLDER_PREFIX)) or text.lower() in _NO_VALUE:
        return []  # nothing, a $REFERENCE, already hidden, unset
    return [(offset, offset + len(text))]


def _command_password_spans(match: re.Match[str]) -> list[tuple[int, int]]:
    command = match.group("command")
    options = _COMMAND_PASSWORDS[command]
    active = command not in _AFTER_LOGIN
    spans: list[tuple[int, int]] = []
    pending: str | None = None  # the form of the next word, after an option that takes it
    for word in _SHELL_WORD.finditer(match.string, match.end("command"), match.end()):
        text = word.group(0)
        if pending is not None:
            spans += _password_span(word, pending) if pending != "skip" else []
            pending = None
        elif not active:
            active = text == "login"
        elif command == "wandb":  # the key is the word that is no option nor an option's value
            if text in ("--host", "--base-url"):
                pending = "skip"
            else:
                spans += _password_span(word, "value")
        else:
            for option, form in options.items():
                short = len(option) == 2
                if text == option or (short and form != "attached" and re.fullmatch(rf"-[A-Za-z]*{option[1]}", text)):
                    pending = None if form == "attached" else form  # -p PW, or a cluster ending in it (-sSu)
                elif text.startswith(option + "=") and not short:
                    spans += _password_span(word, form, len(option) + 1, spaced=False)
                elif short and text.startswith(option) and len(text) > 2:
                    spans += _password_span(word, form, 2, spaced=False)  # -pPW
                else:
                    continue
                break
    return spans


def _command_passwords(match: re.Match[str]) -> str:
    text, out, pos = match.string, [], match.start()
    for start, end in _command_password_spans(match):
        out += [text[pos:start], SECRET]
        pos = end
    return "".join(out) + text[pos:match.end()]


VALUE_KINDS: tuple[ValueKind, ...] = (
    # provider prefixes
    ValueKind("huggingface", re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), _whole(TOKEN), ("hf_",)),
    ValueKind("github", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), _whole(TOKEN), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    ValueKind("github-fine-grained", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), _whole(TOKEN), ("github_pat_",)),
    ValueKind("gitlab", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), _whole(TOKEN), ("glpat-",)),
    ValueKind("aws-access-key-id", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), _whole(TOKEN), ("akia", "asia")),
    ValueKind("openai-anthropic", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"), _whole(TOKEN), ("sk-",)),
    ValueKind("stripe", re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"), _whole(TOKEN), ("k_live_", "k_test_")),
    ValueKind("slack-token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}"), _whole(TOKEN), ("xox", "xapp-")),
    ValueKind("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), _whole(TOKEN), ("aiza",)),
    ValueKind("pypi", re.compile(r"\bpypi-AgE[A-Za-z0-9_-]{20,}"), _whole(TOKEN), ("pypi-age",)),
    ValueKind("npm", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), _whole(TOKEN), ("npm_",)),
    ValueKind("sendgrid", re.compile(r"\bSG\.[\w-]{16,}\.[\w-]{16,}"), _whole(TOKEN), ("sg.",)),
    ValueKind("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"), _whole(TOKEN), ("eyj",)),
    # NVIDIA (NGC, build.nvidia.com): nvapi- and 64 characters; NGC's older keys have no prefix (by name only)
    ValueKind("nvidia", re.compile(r"\bnvapi-[A-Za-z0-9_-]{40,}"), _whole(TOKEN), ("nvapi-",)),
    ValueKind("google-oauth", re.compile(r"\bya29\.[A-Za-z0-9_.-]{20,}"), _whole(TOKEN), ("ya29.",)),  # access tokens
    ValueKind("groq", re.compile(r"\bgsk_[A-Za-z0-9]{40,}\b"), _whole(TOKEN), ("gsk_",)),  # gsk_ and 52 characters
    ValueKind("databricks", re.compile(r"\bdapi[0-9a-h]{32}(?:-\d+)?\b"), _whole(TOKEN), ("dapi",)),
    # W&B: a server's keys (local-, or another prefix, and the 40 characters of a cloud key) and the newer
    # wandb_v1_ keys; a plain cloud key is 40 hex digits, a git commit's shape: by name or literally
    ValueKind("wandb", re.compile(r"\blocal-[A-Za-z0-9]{40}\b|\bwandb_v1_[A-Za-z0-9_]{40,}"), _whole(TOKEN), ("local-", "wandb_v1_")),
    # webhook URLs are the credential themselves: keep the service, drop the path
    ValueKind("slack-webhook", re.compile(r"(?i)(https://hooks\.slack\.com/)(?P<secret>(?:services|workflows|triggers)/[\w/-]+)"),
              keep_group("secret", TOKEN), ("hooks.slack.com/",)),
    ValueKind("discord-webhook", re.compile(r"(?i)(https://(?:\w+\.)?discord(?:app)?\.com/api/webhooks/)(?P<secret>[\w/-]+)"),
              keep_group("secret", TOKEN), ("discord",)),
    # scheme://user:password@host (a password may hold an @ itself: up to the last one before the
    # host), scheme://TOKEN@host (a long user with a digit: not `git@`)
    ValueKind("url-userinfo", re.compile(r"(?i)\b[a-z][a-z0-9+.-]{0,31}://(?P<secret>[^\s/?#@:'\"<>]{0,2048}:[^\s/'\"<>]{0,2048}|"
                                          r"(?=[A-Za-z_-]*\d)[A-Za-z0-9_-]{16,})@"), keep_group("secret", SECRET), ("://",)),
    # ?token=, &sig=, X-Amz-Signature=, X-Amz-Credential=, X-Goog-Signature=, access_token= ... (presigned URLs)
    ValueKind("url-query", re.compile(r"(?<=[?&])(?P<name>[A-Za-z][\w.-]*)=(?P<value>[^&#\s\"'<>]+)"), _secret_query_value, ("?", "&")),
    # Authorization: Bearer|Basic|Token|... <credential>, as a header, a JSON field or an escaped one
    ValueKind("authorization-header", re.compile(
        r"(?i)\b(?:proxy-)?authorization\\?[\"']?\s*[:=]\s*\\?[\"']?"
        r"(?:(?:bearer|basic|token|digest|negotiate|ntlm|apikey|key)\s+)?(?P<secret>[^\s\"',;\\]+)"),
        keep_group("secret", TOKEN), ("authorization",)),
    # a bare `Bearer X` / `Basic X` (curl -H, requests' repr): X must look random, so prose survives
    ValueKind("bearer", re.compile(r"\b(?:[Bb]earer|BEARER|[Bb]asic|BASIC)\s+(?P<secret>(?=[\w.~+/-]*(?:\d|[+/=]|[a-z][A-Z]))"
                                   r"[A-Za-z0-9._~+/=-]{8,})"), keep_group("secret", TOKEN), ("bearer", "basic")),
    ValueKind("command-password", _COMMAND_LINE, _command_passwords, tuple(_COMMAND_PASSWORDS),
              lambda match: [match.string[start:end] for start, end in _command_password_spans(match)]),
)

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
# Where a name can stand: cpverify.pair_names.
# The separator: `=` or `:`; the dots of an argument dump (Megatron's `_print_args`, as slime prints
# it: `  wandb_key ....... VALUE`, as many dots as the name is short), whose value is the rest of
# the line; or, for a --flag only, a space or a comma between quoted words (an argv list's repr).
# A quoted value may lack its closing quote where the line ends: an excerpt or a table cell cut it.
_VALUE = re.compile(r"""(?P<sep>[ \t]*[=:][ \t]*|(?P<dots>[ \t]+\.+[ \t]+)|[ \t]+|,[ \t]*(?=["']))"""
                    r"""(?P<value>\\"(?:[^"\\\n]|\\[^"])*(?:\\"|$)|"(?:[^"\\\n]|\\.)*(?:"|$)|'(?:[^'\\\n]|\\.)*(?:'|$)"""
                    r"""|[^\s,;'"}\])]+)""", re.MULTILINE)
_SCHEMES = {"bearer", "basic", "token", "digest", "negotiate", "ntlm", "apikey", "key"}

# The gate: a line that holds none of these words (lower-cased) can hold no value-shaped secret and no
# secret pair, so the rules never see it -- most lines of a training log (NCCL INFO, access logs,
# progress bars). benchmarks/scrub_throughput.md measures what it costs.
# test_redact.py checks that every rule's trigger contains one of them.
GATE_WORDS = ("://", "-----begin", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "akia", "asia", "sk-", "k_live_",
              "k_test_", "xox", "xapp-", "aiza", "pypi-", "npm_", "sg.", "eyj", "nvapi-", "ya29.", "gsk_", "dapi",
              "local-", "wandb_v1_", "bearer", "basic", *_NAME_STEMS,
              # the commands of _COMMAND_PASSWORDS (sshpass: "pass"; every registry tool and wandb: "login")
              "curl", "mysql", "mariadb", "redis-cli", "smbclient", "openssl", "sqlcmd", "mongo", "ldap", "login")
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


# One line: a single regex call (its fixed cost beats 40 `in` tests); a block: 40 finds over it.
_GATE_LINE: dict[type, re.Pattern] = {str: re.compile(_trie(GATE_WORDS)), bytes: re.compile(_trie(GATE_WORDS).encode())}
_NEEDS = re.compile(_trie(word for kind in VALUE_KINDS for word in kind.needs))  # found: some value rule may match


def _gated(lines: list, literals: re.Pattern | None) -> list[int]:
    """Indices of the lines (str or bytes, one type) that hold a gate word or a literal secret
    (`literals`: one pattern of them all, of the lines' type)."""
    gate = _GATE_LINE[type(lines[0])]
    if len(lines) == 1:  # the common streaming case: no join, no offsets
        line = lines[0]
        return [0] if gate.search(line.lower()) or (literals and literals.search(line)) else []
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

    # One scan of the gate's trie (cheaper than a find per word once there are 50 words), over the
    # block in lower case, ASCII only: str.lower() may lengthen a text ('İ'): the offsets are the block's.
    hits(gate, block.lower() if isinstance(block, bytes) or block.isascii() else block.translate(_ASCII_LOWER))
    if literals:
        hits(literals, block)
    return sorted(hot)


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
                    indented or (not before.strip() and _reads_as_value(found.group("value")))):
                continue
        # A bare-space separator only counts for CLI flags (--hf-token VALUE), not prose ("token was"),
        # and a plain lowercase word after one is a sentence going on (`so --wandb-key keeps its default`).
        elif (spaced or sep.strip() == ",") and (not match.group("name").startswith("--") or not _reads_as_value(
                value.strip("'\"") if sep.strip() else value)):
            continue
        bare = value.strip("\"'\\")
        if (value.startswith("--") or bare.startswith(("$", _PLACEHOLDER_PREFIX)) or bare.lower() in _SCHEMES
                or bare.lower() in _NO_VALUE or (bare and not any(c.isalnum() for c in bare))):
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


def literal_secret(name: str, value: str) -> bool:
    """Is `value`, held by a variable or flag called `name`, a secret to remove wherever it appears?"""
    if not (is_secret_name(name) and literal_worthy(value)):
        return False
    words = _name_words(name)
    return not (words and words[-1] in _SOMETIMES_SECRET and _PLAIN_WORD.fullmatch(value.strip()))


def environment_secrets() -> list[str]:
    """Values of this process's environment variables whose names look secret (HF_TOKEN, ...)."""
    return [value for name, value in os.environ.items() if literal_secret(name, value)]


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
            and is_secret_name(flag) and not value.startswith("--") and value not in _EMPTY)

