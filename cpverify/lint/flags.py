"""What slime's parsers take for a flag: the flags they know (slime + Megatron-LM + SGLang), how
many words each takes and whether they must be integers, the one a misspelled flag most likely
meant, and a `--` that a chat app turned into a dash."""

from __future__ import annotations

import difflib
import functools
import math
import re
from dataclasses import dataclass
from importlib import resources

PASS_THROUGH_PREFIXES = ("--sglang-", "--router-")  # SGLang server/router flags, forwarded as-is


# What chat apps, word processors and PDFs make of `--`: hyphens, dashes, the minus sign.
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"
DASH_STARTS = frozenset("-" + _DASHES)
DASHED = re.compile(f"([-{_DASHES}]{{1,2}})([A-Za-z][A-Za-z0-9_-]+)(?:=.*)?", re.DOTALL)


def misdashed(word: str) -> str | None:
    """The long flag meant by `—context-parallel-size` (an em dash) or `-context-parallel-size`
    (one dash), else None. slime's parsers read neither as the flag: it keeps its default, and
    before lint knew this, the word passed for a value of the flag before it."""
    match = DASHED.fullmatch(word)
    if not match or match[1] == "--":
        return None
    flag = "--" + match[2]
    if match[1] == "-" and flag not in known_flags() and flag.replace("_", "-") not in known_flags():
        return None  # `-x`, `-foo`: a value, as far as anyone can tell
    return flag


def is_option(word: str) -> bool:
    if word.startswith("--"):
        return len(word) > 2
    return word[:1] in DASH_STARTS and misdashed(word) is not None


@dataclass(frozen=True)
class FlagSpec:
    """How slime's parsers read a flag: between `least` and `most` words (most None: no limit), as
    `kind` ("int", "float", "str"; "-" for a switch)."""

    least: int
    most: int | None
    kind: str


_NARGS = {"?": (0, 1), "*": (0, None), "+": (1, None)}


@functools.lru_cache(maxsize=1)
def flag_specs() -> dict[str, FlagSpec]:
    """Every long option of slime's real parsers (slime + Megatron-LM + SGLang) and how they read
    it: cpverify/data/known_flags.txt, written by tools/gen_known_flags.py from the parsers themselves."""
    text = (resources.files("cpverify") / "data" / "known_flags.txt").read_text(encoding="utf-8")
    specs = {}
    for line in text.splitlines():
        if line.startswith("--"):
            flag, nargs, kind = line.split()
            least, most = _NARGS.get(nargs, (int(nargs), int(nargs)) if nargs.isdigit() else (0, None))
            specs[flag] = FlagSpec(least, most, kind)
    return specs


@functools.lru_cache(maxsize=1)
def known_flags() -> frozenset[str]:
    """Long options of slime's real parsers: slime + Megatron-LM + SGLang (tools/gen_known_flags.py)."""
    return frozenset(flag_specs())


def _chars(text: str) -> frozenset[int]:
    """The multiset of characters of `text` as a set of ints (the k-th `c` is ord(c) * 1024 + k),
    so that shared characters are one C-level set intersection."""
    seen: dict[str, int] = {}
    out = []
    for c in text:
        seen[c] = seen.get(c, 0) + 1
        out.append(ord(c) * 1024 + seen[c])
    return frozenset(out)


@functools.lru_cache(maxsize=1)
def _flag_index() -> tuple[dict[str, frozenset[int]], dict[int, tuple[str, ...]]]:
    """Each known flag's characters, and for each character the flags that hold it."""
    chars = {flag: _chars(flag) for flag in known_flags()}
    holders: dict[int, list[str]] = {}
    for flag, elements in chars.items():
        for element in elements:
            holders.setdefault(element, []).append(flag)
    return chars, {element: tuple(flags) for element, flags in holders.items()}


@functools.lru_cache(maxsize=4096)
def closest_flag(flag: str, cutoff: float = 0.85) -> str | None:
    """The known flag that `flag` most likely misspells (difflib's ratio >= cutoff), or None.

    The same answer as difflib.get_close_matches over all known flags, which costs about a
    millisecond per unknown flag. difflib's ratio is 2M/(a+b) with M at most the characters
    the two share, so a candidate must share `needed` of the flag's n characters, hence at least
    one of its n - needed + 1 rarest (prefix filtering): only the flags holding those are
    compared, and each distinct flag is looked up once."""
    chars, holders = _flag_index()
    mine, n = _chars(flag), len(flag)
    needed = math.ceil(cutoff * (n + math.ceil(n * cutoff / (2 - cutoff))) / 2)  # against the shortest candidate
    rarest = sorted(mine, key=lambda element: len(holders.get(element, ())))[: max(n - needed + 1, 0)]
    candidates = {known for element in rarest for known in holders.get(element, ())}
    close = difflib.get_close_matches(
        flag, [k for k in candidates if 2 * len(mine & chars[k]) >= cutoff * (n + len(k))], n=1, cutoff=cutoff)
    return close[0] if close else None


@functools.lru_cache(maxsize=1)
def unlisted_pass_through() -> tuple[str, ...]:
    """Pass-through prefixes the known flags do not cover: flags with them are accepted unchecked."""
    known = known_flags()
    return tuple(p for p in PASS_THROUGH_PREFIXES if not any(flag.startswith(p) for flag in known))
