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
# letter and a digit), emoji names (:tada:).
_LIVE_WORD = re.compile(r"@|#\d|\bGH-\d|://|\bwww\.|:[\w+-]+:|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,}\b",
                        re.IGNORECASE)
# Punctuation markdown (and GitHub's math) would read as syntax; `|` is the table's to escape.
_SYNTAX = re.compile(r"([\\`*_\[\]<>!&~$])")
_LEADING = re.compile(r"^(?:[#+=-]|\d+(?=[.)]))")  # what opens a heading or a list at a line's start
_SPAN = re.compile(r"`([^`\n]+)`")


def _one_line(text: str) -> str:
    return " ".join(inert(text).split())


def code(text: str) -> str:
    """An inline code span showing `text` exactly (on one line): its fence one backtick longer than
    the longest run inside, padded where the text begins or ends with a backtick or a space."""
    text = " ".join(inert(text).split("\n"))
    if not text:
        return ""
    fence = "`" * (1 + max((len(run) for run in _BACKTICKS.findall(text)), default=0))
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def fenced(text: str, lang: str = "text") -> str:
    """A code block whose fence is longer than any backtick run inside it."""
    text = inert(text).rstrip()
    fence = "`" * max(3, 1 + max((len(run) for run in _BACKTICKS.findall(text)), default=0))
    return f"{fence}{lang}\n{text}\n{fence}"


def _word(word: str) -> str:
    return code(word) if _LIVE_WORD.search(word) else _SYNTAX.sub(r"\\\1", word)


def prose(text: str) -> str:
    """`text` as inert, readable inline markdown (one line)."""
    text = _one_line(text)
    out, end = [], 0
    for span in _SPAN.finditer(text):
        out.append(_words(text[end:span.start()]))
        out.append(code(span.group(1)))
        end = span.end()
    out.append(_words(text[end:]))
    joined = "".join(out)
    return _LEADING.sub(lambda m: "\\" + m.group() if not m.group().isdigit() else m.group() + "\\", joined, count=1) \
        if not joined.startswith("`") else joined


def _words(text: str) -> str:
    return " ".join(_word(word) if word else "" for word in text.split(" "))


def details(summary: str, body: str) -> str:
    """A folded block; the summary is HTML text (escaped), the body markdown (blank lines let GitHub
    render it)."""
    return f"<details><summary>{html.escape(_one_line(summary), quote=False)}</summary>\n\n{body}\n\n</details>"


def cell(text: str) -> str:
    """A table cell from markdown: one line, its pipes escaped (GFM reads `\\|` as a pipe, in code
    spans too)."""
    return " ".join(text.split()).replace("|", "\\|")


def table(rows: Sequence[Sequence[str]], headers: Sequence[str], align: str = "") -> str:
    """A compact pipe table (no padding: a verdict must stay under GitHub's 65,536 characters).
    Cells are markdown already (prose() or code()); `align`: one letter per column, l or r."""
    rule = [("---:" if a == "r" else "---") for a in align.ljust(len(headers), "l")]
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(cell(c) or " " for c in row) + " |" for row in rows]
    return "\n".join(lines)
