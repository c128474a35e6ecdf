"""Credentials recognised by the shape of their value, whatever their name: one `ValueKind` per kind
(as Yelp's detect-secrets keeps one plugin per kind: provider prefixes, JWTs, webhooks, URL userinfo,
signed URLs, Authorization headers, command lines' passwords such as `curl -u user:PW`), and the
placeholders that stand for what they remove.

There is no entropy rule: on a training log it would eat hashes, ids and base64 tensors; a W&B
API key has a git commit's 40-hex shape and is caught by its name or literally.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from cpverify.redact.names import is_secret_name

TOKEN = "<redacted:token>"
SECRET = "<redacted:secret>"
PRIVATE_KEY = "<redacted:private-key>"
PLACEHOLDER_PREFIX = "<redacted"


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
    if not is_secret_name(match.group("name")) or match.group("value").startswith(PLACEHOLDER_PREFIX):
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
NO_VALUE = {"none", "null", "nil", "true", "false"}  # what a dump or a repr prints for an unset credential
EMPTY = (None, "", True, False)  # an argv word or a JSON value that holds no credential


def reads_as_value(word: str) -> bool:
    """Can `word`, after a space, be a credential: not prose, not the next option, not unset, not punctuation?"""
    word = word.strip("`")  # a sentence that quotes code
    return any(c.isalnum() for c in word) and not _NOT_A_VALUE.fullmatch(word) and word.lower() not in NO_VALUE


def _password_span(word: re.Match[str], form: str, start: int = 0, spaced: bool = True) -> list[tuple[int, int]]:
    """Where the password is in `word` (from `start`, past an attached option), as spans of the line."""
    text = word.group(0)[start:]
    offset = word.start() + start
    if spaced and not reads_as_value(text):
        return []
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":  # 'quoted': the quotes stay
        text, offset = text[1:-1], offset + 1
    if form == "user:" or form == "user%":
        cut = text.find(form[-1])
        text, offset = (text[cut + 1:], offset + cut + 1) if cut != -1 else ("", offset)
    elif form == "pass:":
        text, offset = (text[5:], offset + 5) if text.startswith("pass:") else ("", offset)
    if not any(c.isalnum() for c in text) or text.startswith(("$", PLACEHOLDER_PREFIX)) or text.lower() in NO_VALUE:
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
