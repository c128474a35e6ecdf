"""Names that hold a credential: `is_secret_name` judges a variable's, a flag's or a field's name
by its words (HF_TOKEN, hfToken and --hf-token are hf + token); `names` finds where the name of a
NAME=value pair can stand in a line; `literal_secret` says which values of secret-named variables
are worth removing wherever they appear.

Where `names` finds one: a name right after `$` or `${` is a shell reference (commands.sh's ": "${HF_TOKEN:?...}""), not a pair.
The lookahead keeps the scan cheap: only names holding a secret-ish word are considered at all; a name starts
at a dotted run's head (`args.wandb_key`) and looks 128 characters ahead: time linear in a long dotted run.
A name's dots join words (spring.datasource.password), never end it: `wandb_key .....` is a name and padding.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator

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


# Words after the noun that say WHICH credential it is, not what the value is: HF_TOKEN_2, TOKEN1,
# WANDB_API_KEY_PROD, GH_TOKEN_OLD, API_KEY_V2. The name is judged as if they were not there.
QUALIFIERS = ("new", "old", "prod", "production", "dev", "staging", "test", "value", "val", "b64", "base64", "raw",
              "backup", "alt", "tmp", "temp", "orig")
_QUALIFIER = re.compile(r"\d+|v\d+|" + "|".join(QUALIFIERS))
_GLUED_DIGITS = re.compile(r"(?<=[a-z])\d+$")
_GLUED_KEY_OWNERS = {first for first, second in (("api", "key"), ("access", "key"), ("private", "key"),
                                                 ("secret", "key"), ("session", "key"))}


def _name_words(name: str) -> list[str]:
    name = name.strip("\"'-")
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)  # apiKey -> api_Key
    return [w.lower() for w in re.split(r"[_.\-/]+", name) if w]


def _judged_words(name: str) -> list[str]:
    """A name's words as is_secret_name judges them: the qualifiers after its noun left off."""
    words = _name_words(name)
    while len(words) > 1 and _QUALIFIER.fullmatch(words[-1]) and (words[-2], words[-1]) not in _PAIRS:
        words.pop()
    if words and (bare := _GLUED_DIGITS.sub("", words[-1])):
        words[-1] = bare
    return words


@functools.lru_cache(maxsize=4096)  # names repeat on every line of a log
def is_secret_name(name: str) -> bool:
    """Does a variable, flag, header, query parameter or field name say that its value is a credential?"""
    if name.strip("\"'-").lower() in _SHELL_DIRS:
        return False
    words = _judged_words(name)
    if not words:
        return False
    last, previous = words[-1], (words[-2] if len(words) > 1 else "")
    if (previous, last) in _PAIRS:
        return True
    if last.endswith("key") and last[:-3] in _GLUED_KEY_OWNERS:  # privatekey, ACCESSKEY
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


def literal_secret(name: str, value: str) -> bool:
    """Is `value`, held by a variable or flag called `name`, a secret to remove wherever it appears?"""
    if not (is_secret_name(name) and literal_worthy(value)):
        return False
    words = _judged_words(name)
    return not (words and words[-1] in _SOMETIMES_SECRET and _PLAIN_WORD.fullmatch(value.strip()))


# -- where a name stands ---------------------------------------------------------------------------

NAME_STEMS = ("token", "secret", "pass", "pwd", "pat", "cred", "key", "dsn", "auth", "cookie", "sig", "jwt", "bearer",
              "header", "session", "url", "string", "webhook")
NAME = re.compile(r"""(?<![\w$-])(?<!\w\.)(?<!\$\{)(?P<quote>\\?["']?)(?P<name>(?:--)?(?=[\w.-]{0,128}?(?i:"""
                  + "|".join(NAME_STEMS) + r"""))[A-Za-z_](?:[\w-]|\.(?=[\w-]))*)(?P=quote)""")
_RUN = re.compile(r"[\w.-]*")  # the characters a name is made of, from where a match starts


def names(text: str) -> Iterator[re.Match[str]]:
    """NAME.finditer(text), found sooner. A match's name holds a stem at most 132 characters after the
    match starts (two quotes, `--`, the lookahead's 128), in the run of name characters that holds the
    stem. In an ASCII text (where (?i) reads no more than lower() shows) the stems are found with
    str.find and NAME searched for only around them, up to their run's end and a closing quote: run
    over the whole line, its lookahead would try every stem at every character."""
    if not text.isascii():
        yield from NAME.finditer(text)
        return
    low, back, at = text.lower(), text[::-1], 0
    for stem in sorted({i for word in NAME_STEMS for i in _finds(low, word)}):
        before, end = _run(back, len(text) - stem), stem + _run(text, stem) + 2  # the run around it
        while (match := NAME.search(text, max(at, stem - before - 2, stem - 132), end)) is not None:
            yield match  # a match ends where the next may start, as finditer's do
            at = match.end()


def _run(text: str, at: int) -> int:
    """How many name characters `text` holds from `at` on."""
    match = _RUN.match(text, at)
    return match.end() - at if match else 0


def _finds(text: str, word: str) -> Iterator[int]:
    at = text.find(word)
    while at != -1:
        yield at
        at = text.find(word, at + 1)
