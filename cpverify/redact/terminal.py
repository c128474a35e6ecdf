"""The terminal, redacted: while `redacted_terminal` is active, sys.stdout and sys.stderr are
swapped for streams that pass each whole line through a Redactor and then make it inert
(cpverify.terminal.inert); `print_json` writes a JSON document through them, field by field.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from cpverify.redact.redactor import Redactor
from cpverify.terminal import inert


def _inert_but_redraw(text: str) -> str:
    """inert(), but one carriage return that opens the text stays: it is how a progress bar (tqdm,
    huggingface_hub's downloads) redraws its own line; anywhere else it would hide what came before."""
    return "\r" + inert(text[1:]) if text.startswith("\r") else inert(text)


class _RedactingStream:
    """A text stream that passes whole lines through a redactor before the real stream sees them,
    then makes them inert (cpverify.terminal.inert: no control character a log holds acts on the
    terminal); `with_controls()` is the same without that, for a display that draws with them.
    Redaction comes first: it reads a line as the terminal will show it (cpverify.redact.credentials), and
    inert() would turn a backspace between a name and its value into text that parts them."""

    def __init__(self, stream, redactor: Redactor, *, controls: bool = False) -> None:
        self._stream = stream
        self._clean = (lambda text: text) if controls else _inert_but_redraw
        self.use(redactor)

    def with_controls(self) -> _RedactingStream:
        """This stream's terminal and redactor, its control sequences kept: for rich's live display,
        whose own text is made inert where it is built (cpverify.progress)."""
        return _RedactingStream(self._stream, self.redactor, controls=True)

    def use(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._line = redactor.lines()
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            *complete, self._pending = self._pending.split("\n")
            self._emit("".join(self._clean(self._line(line + "\n")) for line in complete))
        return len(text)

    def _emit(self, text: str) -> None:
        """Write to the real stream. A reader that went away (`cpverify verdict ... | head`) ends what
        is shown, not the command: it goes on and exits with its own code (a FAIL must not become the
        0 of a closed pipe); later output goes to /dev/null, so the interpreter's last flush is quiet."""
        try:
            self._stream.write(text)
        except BrokenPipeError:
            _discard(self._stream)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:  # a progress line redrawn with \r, or a prompt: it is shown now
            self._emit(self._clean(self._line(self._pending)))
            self._pending = ""
        try:
            self._stream.flush()
        except BrokenPipeError:
            _discard(self._stream)

    def __getattr__(self, name: str):  # isatty, encoding, fileno ...: the real stream's
        return getattr(self._stream, name)


def _discard(stream) -> None:
    """Point a stream whose reader has gone at /dev/null (Python's advice for SIGPIPE:
    https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def print_json(obj: Any) -> None:
    """`print(json.dumps(obj))`, the same text, redacted field by field (Redactor.json) by the
    terminal's redactor (a fresh Redactor outside one) and written in pieces, never held whole.

    The terminal's text rules would see the document as one line: megabytes through every rule
    (seconds, for `cpverify parse --json` of a big log), a pair rule that leaves
    `"name": <redacted:secret>` (no longer JSON), a literal secret missed where JSON escapes it.
    Inert already (cpverify.terminal): json.dumps escapes every control character."""
    stream = sys.stdout
    write: Callable[[str], object]
    if isinstance(stream, _RedactingStream):
        stream.flush()  # what was printed before comes first
        redactor, write = stream.redactor, stream._emit  # past the text rules; a reader gone, handled
    else:
        redactor, write = Redactor(), stream.write
    for piece in _json_pieces(redactor.json(obj, share=True)):
        write(piece)
    write("\n")
    stream.flush()


_JSON_BATCH = 1024  # list items a piece: enough to stay in json's C encoder, little to hold


def _json_pieces(value: Any) -> Iterator[str]:
    """json.dumps(value) in pieces: a dict's items one by one, a long list a batch at a time."""
    if type(value) is dict and all(type(key) is str for key in value):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield (", " if i else "") + json.dumps(key) + ": "
            yield from _json_pieces(item)
        yield "}"
    elif type(value) is list and len(value) > _JSON_BATCH:
        yield "["
        for start in range(0, len(value), _JSON_BATCH):
            yield (", " if start else "") + json.dumps(value[start : start + _JSON_BATCH])[1:-1]
        yield "]"
    else:
        yield json.dumps(value)


@contextlib.contextmanager
def redacted_terminal(redactor: Redactor) -> Iterator[None]:
    """While active, everything written to sys.stdout and sys.stderr is redacted by `redactor`.
    Nested use swaps the redactor (a run's own placeholders) and restores the outer one after."""
    streams = ("stdout", "stderr")
    outer = {name: getattr(sys, name) for name in streams}
    previous = {}
    for name, stream in outer.items():
        if isinstance(stream, _RedactingStream):
            stream.flush()
            previous[name] = stream.redactor
            stream.use(redactor)
        else:
            setattr(sys, name, _RedactingStream(stream, redactor))
    try:
        yield
    finally:
        for name, stream in outer.items():
            current = getattr(sys, name)
            if isinstance(current, _RedactingStream):
                with contextlib.suppress(OSError, ValueError):  # a closed or broken stream
                    current.flush()
            if name in previous:
                stream.use(previous[name])
            else:
                setattr(sys, name, stream)
