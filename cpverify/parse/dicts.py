"""slime's metric dicts, as printed: `step N: {...}`, `perf N: {...}`, `Memory-Usage x: {...}`.

They are Python reprs: read as JSON where that reads them as ast.literal_eval would (in C:
orjson where installed, else json), else with ast.literal_eval after quoting bare nan/inf --
never eval. When that fails (a cut line, a hand-copied fragment with a missing quote) the
`'key': number` pairs are salvaged with a tolerant regex and the record is marked salvaged.

A number that is not finite reads as one however it was printed: Python's `nan`/`inf`, JSON's
`NaN`/`Infinity`, C's `-nan`, `%E`'s `NAN`/`INF`, and numpy's or torch's scalars around it
(`np.float64(nan)`, `tensor(inf, device='cuda:0')`). A loss the log printed as NaN in any of these
spellings is a NaN loss, never a key left out.
"""

from __future__ import annotations

import ast
import json
import math
import re
import sys
import warnings
from typing import Any

_NONFINITE = r"[+-]?(?i:nan|inf(?:inity)?)"  # every spelling float() reads as NaN or infinite
_NONFINITE_WORD = re.compile(_NONFINITE)
_BARE_NONFINITE = re.compile(r"([:\[,(]\s*)(" + _NONFINITE + r")(?=\s*[,}\])])")
# numpy's and torch's scalars, as their reprs print them: np.float64(0.5), tensor(0.5, device='cuda:0').
_WRAPPED_SCALAR = re.compile(r"\b(?:np|numpy)\.(?:float|int|uint)\d{0,3}\(\s*([^(),]{1,64}?)\s*\)"
                             r"|\btensor\(\s*([^(),]{1,64}?)\s*(?:,[^()]{0,200}(?:\([^()]{0,64}\))?[^()]{0,200})?\)")
# Keys start only after a delimiter and are bounded: no backtracking across a long word.
_SALVAGE_PAIR = re.compile(
    r"(?:^|(?<=[{,\s]))'?([A-Za-z_][\w./-]{0,200})'?\s*:\s*"
    r"(-?(?:\d{1,40}\.?\d{0,40}(?:[eE][-+]?\d{1,4})?|\.\d{1,40}(?:[eE][-+]?\d{1,4})?)|" + _NONFINITE
    + r")(?=\s*(?:,|\}|$))"
)


def nonfinite_word(value: str) -> bool:
    """Is `value` a word float() reads as NaN or infinite (nan, NaN, -nan, INF, Infinity)?"""
    return _NONFINITE_WORD.fullmatch(value) is not None


def _float(v: int | float) -> float:
    try:
        return float(v)
    except OverflowError:  # an int literal beyond float range
        return math.inf if v > 0 else -math.inf


def _numeric_items(obj: Any) -> dict[str, float]:
    if not isinstance(obj, dict):
        return {}
    out: dict[str, float] = {}
    for k, v in obj.items():
        if isinstance(v, bool):
            continue
        # Interned: every record repeats the same few dozen keys; memory grows per value only.
        if isinstance(v, (int, float)):
            out[sys.intern(str(k))] = _float(v)
        elif isinstance(v, str) and nonfinite_word(v):
            out[sys.intern(str(k))] = float(v)
    return out


# slime's dicts are flat reprs: str keys, numbers, a few strings. Where the text holds no `"` and
# no backslash, swapping `'` for `"` changes no string and gives JSON that a JSON reader reads
# exactly as ast.literal_eval reads the repr -- but for JSON's own words (true, false, null,
# NaN, Infinity: names, not values, to Python; a later key may hide them) and Python's bare
# nan/inf and True/False/None, which JSON refuses: such texts go to literal_eval (a property test
# checks the two agree, with each reader). A string value counts where it is a non-finite number's
# word, as in _numeric_items.
_NUMBERS = frozenset({float, int})
_FLOATS = frozenset({float})

try:  # reads slime's dicts ~3x faster than json (a dependency; the Docker image installs cpverify without it)
    import orjson
except ImportError:
    orjson = None  # type: ignore[assignment]

JSON_READERS = ("json",) if orjson is None else ("orjson", "json")
JSON_READER = JSON_READERS[0]  # what _flat_repr reads JSON with (tests and the benchmark try both)


def _json_constant(name: str) -> float:
    raise ValueError(f"{name} is no Python literal")


# The decoder's C scanner itself (set by JSONDecoder.__init__; typeshed does not list it):
# raw_decode's Python wrapper only adds a whitespace skip.
_JSON_SCAN = json.JSONDecoder(parse_constant=_json_constant).scan_once  # type: ignore[attr-defined]


def _flat_repr(text: str) -> dict[str, float] | None:
    """The numeric items of a flat dict repr (stripped), or None when the text is not one."""
    if '"' in text or "\\" in text or "true" in text or "false" in text or "null" in text:
        return None
    js = text.replace("'", '"')
    obj: Any = None
    if JSON_READER == "orjson":
        try:
            obj = orjson.loads(js)  # the whole text or an error
        except orjson.JSONDecodeError:  # stricter than json (an int past 64 bits and float range): json decides
            pass
        else:
            if type(obj) is not dict:
                return None
            if _FLOATS.issuperset(map(type, obj.values())):
                return obj  # its keys are shared already: orjson keeps one str per short key it reads
    if obj is None:
        try:
            obj, end = _JSON_SCAN(js, 0)
        except (StopIteration, ValueError, RecursionError):
            return None
        if type(obj) is not dict or end != len(text):
            return None
    return _numbers(obj)


def _numbers(obj: dict[str, Any]) -> dict[str, float]:
    """The numeric items of a flat repr's dict as JSON read it."""
    # Numbers, and Python's nan/inf words as strings; other strings, lists and dicts are no
    # numbers (as in _numeric_items). Keys interned: every record repeats the same few dozen,
    # so memory grows per value only.
    intern, numbers, word = sys.intern, _NUMBERS, nonfinite_word
    try:
        return {intern(key): float(value) for key, value in obj.items()
                if type(value) in numbers or (type(value) is str and word(value))}
    except OverflowError:  # an int beyond float range
        return {intern(key): float(value) if type(value) is str else _float(value) for key, value in obj.items()
                if type(value) in numbers or (type(value) is str and word(value))}


def parse_plain_dict(body: bytes) -> tuple[dict[str, float], bool]:
    """parse_dict of a dict's bytes that hold no `"`, no backslash and only ASCII, with no blank
    around them (as cpverify.parse.plain takes them): a dict of numbers alone, the common case,
    without decoding it or testing each value in Python; any other goes to parse_dict."""
    if JSON_READER == "orjson":
        try:
            obj = orjson.loads(body.replace(b"'", b'"'))
        except orjson.JSONDecodeError:
            obj = None
        if type(obj) is dict:
            kinds = set(map(type, obj.values()))
            if kinds <= _FLOATS:  # no JSON word among the values, then (true, false, null are none)
                return obj, False
            if b"true" in body or b"false" in body or b"null" in body:  # Python's own words are not these
                return parse_dict(body.decode("ascii"))
            if kinds <= _NUMBERS:  # ints among them: floats, as _flat_repr makes them
                try:
                    return dict(zip(map(sys.intern, obj), map(float, obj.values()), strict=True)), False
                except OverflowError:  # an int beyond float range
                    pass
            return _numbers(obj), False  # what _flat_repr makes of the dict it reads
    return parse_dict(body.decode("ascii"))


def parse_dict(text: str) -> tuple[dict[str, float], bool]:
    """The numeric items of a printed Python dict, and whether they had to be salvaged.

    Only a regex (flat reprs) or ast.literal_eval reads the text (never eval): a repr holding
    code is data that fails to parse, and then a tolerant regex keeps the `'key': number` pairs
    it can find.
    """
    flat = _flat_repr(text.strip())
    return (flat, False) if flat is not None else _parse_dict_literal(text)


def _parse_dict_literal(text: str) -> tuple[dict[str, float], bool]:
    candidate = text.strip()
    if "(" in candidate:
        candidate = _WRAPPED_SCALAR.sub(lambda m: m.group(1) or m.group(2), candidate)
    low = candidate.lower()
    if "nan" in low or "inf" in low:
        candidate = _BARE_NONFINITE.sub(r"\1'\2'", candidate)
    try:
        with warnings.catch_warnings():  # "invalid decimal literal" and friends: junk is data here
            warnings.simplefilter("ignore")
            return _numeric_items(ast.literal_eval(candidate)), False
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {sys.intern(m.group(1)): float(m.group(2)) for m in _SALVAGE_PAIR.finditer(text)}, True
