"""What cpverify prints on a terminal: text a log wrote, made inert; and the terminal's width.

A log is written by programs cpverify does not control (slime, Ray, NCCL, a user's script), and
its text reaches the terminal in headlines, check details, phase names and error messages. A
control character in it acts on the terminal instead of showing: OSC 52 writes the clipboard,
backspaces or a carriage return make `FAIL` display as `PASS`, a CSI sequence moves the cursor
over earlier lines. `inert()` is the one neutraliser; the terminal streams
(cpverify.redact.redacted_terminal) apply it to every line cpverify prints, and the live
progress display to the text it draws (the display's own cursor movements are the only control
sequences that reach the terminal).
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Sequence

# CSI sequences (colours, cursor movement, erasing; ECMA-48: parameter bytes 0x30-0x3F, intermediate
# bytes 0x20-0x2F, a final byte) carry no text: removed, the one definition of them (a log's colour
# codes, nvidia-smi's underlines). What remains of a sequence that removal could join
# (ESC ESC[31m[2K) is escaped by inert(), so nothing is re-formed.
CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# C0 controls but tab and newline, DEL, C1 controls (\x9b is a one-byte CSI), the bidirectional
# overrides and isolates (they reorder what is shown) and the Unicode line separators.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def strip_csi(text: str) -> str:
    """`text` without CSI sequences (a log's colour codes: Ray colours its actor prefixes on a TTY)."""
    return CSI.sub("", text) if "\x1b" in text else text


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """`text` with no character that acts on a terminal: colour and cursor sequences removed, every
    other control character shown as its escape (`\\x1b`, `\\r`, `\\u202e`). Tabs and newlines stay;
    a carriage return before a newline (a Windows line end) goes. Idempotent."""
    if text.isprintable():
        return text
    text = text.replace("\r\n", "\n")
    return CONTROL.sub(_visible, CSI.sub("", text))


# An OSC (a hyperlink's `ESC]8;;URL BEL`): its text is not shown where it stands.
_OSC = re.compile(r"\x1b\](?P<text>[^\x07\x1b\n]*)(?:\x07|\x1b\\)?")


def as_shown(line: str) -> str:
    """`line` as the credential rules read one that holds control characters: as inert() shows it
    (colour and cursor sequences gone, other control characters parting their neighbours, here as
    spaces), and the text of its OSCs (a link's URL may hold a password) after it."""
    hidden = [m.group("text") for m in _OSC.finditer(line)]
    line = _OSC.sub("", line)
    if hidden:
        body = line.rstrip("\r\n")
        line = " ".join([body, *hidden]) + line[len(body):]
    return CONTROL.sub(" ", CSI.sub("", line.replace("\r\n", "\n")))


def width(default: int = 100) -> int:
    """The terminal's columns (COLUMNS wins, as rich and shutil read it); `default` off a terminal."""
    return max(40, shutil.get_terminal_size((default, 24)).columns)


def wrap(text: str, *, indent: str = "", first: str | None = None, columns: int | None = None) -> str:
    """`text` made inert and wrapped to the terminal at word boundaries (measured as it will show: an
    escaped control character is four columns); a word longer than a line (a path, a URL) stands on
    a line of its own rather than being cut mid-word."""
    columns = columns or width()
    return textwrap.fill(inert(text), width=columns, initial_indent=indent if first is None else first, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def fill_cells(rows: Sequence[Sequence], widths: Sequence[int | None]) -> list[list[str]]:
    """Table cells wrapped to their column's width at word boundaries, for tabulate (whose own
    wrapping cuts at hyphens: `--context-` / `parallel-size`); only a word longer than its column
    is cut. Cells are made inert: a table often shows a log's or a pasted command's text."""
    return [[inert(str(cell)) if width is None else
             "\n".join(textwrap.wrap(inert(str(cell)), width=width, break_on_hyphens=False)) or ""
             for cell, width in zip(row, widths, strict=True)] for row in rows]
