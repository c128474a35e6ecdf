"""GitHub-flavoured markdown that shows text as it was and does nothing else: the building blocks of
verdict.md.

Text from a log (an error line, an argument's value, a path) lands in a comment that a maintainer
reads on GitHub. There it must not ping people (`@user`), cross-link issues (`#1062`, `owner/repo#1`,
a commit SHA), turn into a link or an image, open HTML, break out of a code span with a stray
backtick, or draw math (`$x$`). Three forms keep it inert, and every piece of verdict.md that can
hold such text is written with one of them:

  code(text)    an inline code span, its fence longer than any backtick run in the text
  fenced(text)  a code block, the same rule for its fence
  prose(text)   readable text: markdown punctuation backslash-escaped, and every word GitHub would
                act on after rendering (a mention, a reference, a URL, an e-mail, a SHA, an emoji
                name) put in a code span; text between backticks is a code span too, so cpverify's
                own `flag` spans render as code

Control characters go through cpverify.terminal.inert first (verdict.md is also read with `cat`).
tests/test_report.py renders arbitrary text through cmark-gfm and checks that it round-trips with no
link, image, HTML or mention.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from cpverify.terminal import inert

_BACKTICKS = re.compile(r"`+")
# Words GitHub acts on in rendered text (outside code): @mentions and e-mails, issue and pull
# references (#12, GH-12, owner/repo#12), URLs and bare www. links, commit SHAs (7+ hex digits with a
# letter and a digit), emoji names (:tada:). GFM links www. after any character but a letter or a
# digit (`_www.x` is a link: the underscore is a word character, so no \b there).
_LIVE_WORD = re.compile(r"@|#\d|\bGH-\d|://|(?<![^\W_])www\.|:[\w+-]+:|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,}\b",
                        re.IGNORECASE)
# Punctuation markdown (and GitHub's math) would read as syntax; `|` is the table's to escape. An
# underscore between two letters or digits opens no emphasis in GFM, so actor_train stays as it is.
_SYNTAX = re.compile(r"([\\`*\[\]<>!&~$])|(?<![^\W_])_|_(?![^\W_])")
_UNIT = re.compile(r"`[^`\n]+`|[^\s`]+|`+")  # a `span` (spaces and all), a run of other text, stray backticks


def _one_line(text: str) -> str:
    return " ".join(inert(text).split())


def code(text: str) -> str:
    """An inline code span showing `text` exactly (on one line): its fence one backtick longer than
    the longest run inside, padded where the text begins or ends with a backtick or a space."""
    text = " ".join(inert(text).split("\n"))
    if not text:
        return ""
    fence = "`" * (1 + max((len(run) for run in _BACKTICKS.findall(text)), default=0))
    # CommonMark strips one space from both ends of a span that is not all spaces
    pad = " " if text.strip(" ") and (text[0] in "` " or text[-1] in "` ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def fenced(text: str, lang: str = "text") -> str:
    """A code block whose fence is longer than any backtick run inside it."""
    text = inert(text).rstrip()
    fence = "`" * max(3, 1 + max((len(run) for run in _BACKTICKS.findall(text)), default=0))
    return f"{fence}{lang}\n{text}\n{fence}" if text else f"{fence}{lang}\n{fence}"


def _is_span(unit: str) -> bool:
    return len(unit) > 2 and unit[0] == unit[-1] == "`" and "`" not in unit[1:-1]


def _group(units: list[str]) -> str:
    """Units with no space between them. A `span` is a code span of its inside, other text escaped;
    but a group with text GitHub would act on, a stray backtick, or two spans side by side (their
    fences would merge) is one code span of the whole."""
    spans = [_is_span(u) for u in units]
    if any(u.startswith("`") and not s for u, s in zip(units, spans, strict=True)) or \
            any(a and b for a, b in zip(spans, spans[1:], strict=False)) or \
            any(_LIVE_WORD.search(u) for u, s in zip(units, spans, strict=True) if not s):
        return code("".join(units))
    return "".join(code(u[1:-1]) if s else _SYNTAX.sub(lambda m: "\\" + m.group(), u) for u, s in zip(units, spans, strict=True))


def prose(text: str) -> str:
    """`text` as inert, readable inline markdown (one line)."""
    text = _one_line(text)
    out: list[str] = []
    units: list[str] = []
    end = 0
    for unit in _UNIT.finditer(text):
        if units and unit.start() > end:  # a space: the group before it is complete
            out.append(_group(units))
            units = []
        units.append(unit.group())
        end = unit.end()
    if units:
        out.append(_group(units))
    joined = " ".join(out)
    if joined[:1] in ("#", "+", "=", "-"):  # would open a heading or a list at a line's start
        return "\\" + joined
    return re.sub(r"^(\d+)([.)])", r"\1\\\2", joined)


def details(summary: str, body: str) -> str:
    """A folded block; the summary is HTML text (escaped), the body markdown (blank lines let GitHub
    render it)."""
    return f"<details><summary>{html.escape(_one_line(summary), quote=False)}</summary>\n\n{body}\n\n</details>"


def cell(text: str) -> str:
    """A table cell from markdown: one line, its pipes escaped (GFM reads `\\|` as a pipe, in code
    spans too)."""
    return text.replace("\r", " ").replace("\n", " ").replace("|", "\\|")


def table(rows: Sequence[Sequence[str]], headers: Sequence[str], align: str = "") -> str:
    """A compact pipe table (no padding: a verdict must stay under GitHub's 65,536 characters).
    Cells are markdown already (prose() or code()); `align`: one letter per column, l or r."""
    rule = [("---:" if a == "r" else "---") for a in align.ljust(len(headers), "l")]
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
