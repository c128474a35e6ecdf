"""Files the user names: reading a text file (`lint --file`, `run --config`) as UTF-8 or a clear
error, and showing any file's name.

Editors on other systems save Latin-1 or UTF-16, and people pass binaries by mistake; each
of these becomes an InputError that names the file, what it is, and how to convert it,
instead of a UnicodeDecodeError traceback. A file's name may itself not be UTF-8 (Python
holds such bytes as surrogates, which no UTF-8 file or terminal takes) or hold control
characters: `shown_name` is how a name is printed or recorded.
"""

from __future__ import annotations

import codecs
import os
import shlex
import sys
from pathlib import Path

from cpverify.errors import InputError

_WIDE_BOMS = {codecs.BOM_UTF32_LE: "UTF-32", codecs.BOM_UTF32_BE: "UTF-32",
              codecs.BOM_UTF16_LE: "UTF-16", codecs.BOM_UTF16_BE: "UTF-16"}  # UTF-32 first: its LE BOM starts as UTF-16's


def read_user_text(path: str, *, what: str) -> str:
    """The text of `path` ('-' is stdin), decoded as UTF-8 (a UTF-8 BOM is dropped)."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist", "check the path") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path} is a directory, not a file", "pass the path of a file inside it") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}", "check the path and its permissions") from None
    convert = f"iconv -f {{}} -t UTF-8 {path} > {path}.utf8"
    wide = next((name for bom, name in _WIDE_BOMS.items() if data.startswith(bom)), None)
    if wide:
        raise InputError(f"{what} {path} is {wide} text, not UTF-8", f"save it as UTF-8 ({convert.format(wide)})")
    if b"\0" in data:
        raise InputError(f"{what} {path} is a binary file (it holds NUL bytes), not text",
                         "pass the text file that holds the command or settings")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                         f"save it as UTF-8 (from Latin-1: {convert.format('LATIN1')})") from None


def shown_name(name: str | bytes) -> str:
    """A file name as text that is safe to print or record: bytes that are not UTF-8 (a name
    from another system: argv holds them as surrogates) as \\xNN, and control and format
    characters (an escape sequence, a newline, a right-to-left override) as their escapes."""
    raw = name if isinstance(name, bytes) else os.fsencode(name)
    text = raw.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def shown_command(argv: list[str]) -> str:
    """A command line from argv as printable shell text (each word through shown_name)."""
    return shlex.join(shown_name(word) for word in argv)
