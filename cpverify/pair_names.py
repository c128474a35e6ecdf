"""Where the name of a NAME=value pair can stand in a line (cpverify.credentials reads the value).

A name right after `$` or `${` is a shell reference (commands.sh's ": "${HF_TOKEN:?...}""), not a pair.
The lookahead keeps the scan cheap: only names holding a secret-ish word are considered at all; a name starts
at a dotted run's head (`args.wandb_key`) and looks 128 characters ahead: time linear in a long dotted run.
A name's dots join words (spring.datasource.password), never end it: `wandb_key .....` is a name and padding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

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
