"""A log line as the parser reads it: terminal colour codes, their broken remnants and Ray's actor
prefix taken off, and the excerpt of it an error record keeps.

  * Ray prefixes a worker's line with its actor, `(MegatronTrainRayActor pid=N, ip=...) `, in
    colour on a TTY; a log copied without the escape character keeps `[36m` remnants.
  * `[repeated Nx across cluster]` ends a line Ray deduplicated (REPEATED); the first such line
    of a session goes on with Ray's note `(Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0
    ...)`.
"""

from __future__ import annotations

import re

from cpverify.terminal import CSI

EXCERPT_CHARS = 300

# Ray's prefix, possibly wrapped in (broken) colour codes: "[36m(Actor pid=1, ip=..)[0m ".
_PREFIX = re.compile(
    r"^(?:\x1b?\[[0-9;]{0,8}m)*\((?P<actor>[A-Za-z_][\w.:-]*)?(?: ?pid=\d+)?(?:, ?ip=[\w.:-]+)?"
    r"(?: \+[\w.]+)?\)(?:\x1b?\[[0-9;]{0,8}m)*\s?"
)
_BARE_REMNANT = re.compile(r"^(?:\[[0-9;]{1,8}m)+")
REPEATED = re.compile(r"\[repeated (\d+)x across cluster\](?: \(Ray deduplicates logs by default\.[^()]*\))?\s*$")

# Ray prefixes seen, by their text before the `)` (the first in a line that has one): (what
# follows the `)` up to the message -- colour codes and a blank --, the actor). A log has a few
# actors, each on many lines.
_PREFIXES: dict[str, tuple[str, str | None]] = {}
_MAX_PREFIXES = 4096


def unprefixed(seg: str) -> tuple[str | None, str] | None:
    """(Ray actor, message) of one piece of a line, colour codes and actor prefix removed; None
    when nothing but colour codes and blanks is left.

    The same as removing every colour code first and then the prefix (a property test checks
    it), but a Ray prefix carries its own codes, which _PREFIX takes along: a line with no other
    codes then needs no CSI pass at all. A prefix seen before is not matched again: _PREFIX
    ends in an optional blank, so where a match ended in one, any text that starts with that
    match matches it too (no part of the pattern reads past it).
    """
    m = None
    if seg[:1] in "([\x1b":
        head, _, rest = seg.partition(")")  # str.find would parse its arguments: slower
        known = _PREFIXES.get(head)
        if known is not None and rest[: len(known[0])] == known[0]:
            rest = rest[len(known[0]) :]
            if "\x1b" not in rest:
                return known[1], rest
        m = _PREFIX.match(seg)
    if m is not None:
        rest = seg[m.end() :]
        prefix = m.group()
        if prefix[-1:].isspace() and len(_PREFIXES) < _MAX_PREFIXES:
            head, _, tail = prefix.partition(")")
            _PREFIXES[head] = (tail, m.group("actor"))
        if "\x1b" not in rest:
            return m.group("actor"), rest
    if "\x1b" in seg:
        seg = CSI.sub("", seg)
    if not seg.strip():
        return None
    if seg[0] in "([":
        m = _PREFIX.match(seg)
        if m is not None:
            return m.group("actor"), seg[m.end() :]
        if seg[0] == "[":
            seg = _BARE_REMNANT.sub("", seg)
    return None, seg


def excerpt(text: str, pos: int) -> str:
    """At most EXCERPT_CHARS of `text` around `pos`, the place a match starts."""
    text = text.strip()
    if len(text) <= EXCERPT_CHARS:
        return text
    # Keep the head of the line (timestamp, rank) unless the match lies too far in.
    start = 0 if pos < EXCERPT_CHARS * 2 // 3 else min(pos - EXCERPT_CHARS // 3, len(text) - EXCERPT_CHARS)
    return ("…" if start else "") + text[start : start + EXCERPT_CHARS - 2] + "…"
