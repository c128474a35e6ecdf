"""The shell-paste interpreter: a pasted slime command (a launch script, `ray job submit ... --
python3 train.py ...`, an argv list) -> its environment, its options in order, what lint cannot see."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cpverify.errors import InputError
from cpverify.lint.flags import flag_specs, is_option

TRAIN_SCRIPTS = ("train.py", "train_async.py")
NOT_PASTED = "the train.py command, not in the paste"  # what a paste of argument arrays alone leaves out


@dataclass
class ParsedCommand:
    """A command line split into what lint needs: env assignments, options in order, opaque words."""

    env: dict[str, str] = field(default_factory=dict)
    options: list[tuple[str, list[str]]] = field(default_factory=list)  # (--flag, values) in order
    opaque: list[str] = field(default_factory=list)  # ${ARRAY[@]} and the like: lint cannot see inside
    cut_off: list[list[str]] = field(default_factory=list)  # --flag lines after a missing backslash
    stray: list[tuple[str, str]] = field(default_factory=list)  # (word, the flag before it or "") no parser takes
    env_unknown: str = ""  # where the environment comes from when lint cannot read it

    def has(self, flag: str) -> bool:
        return any(f == flag for f, _ in self.options)

    def value(self, flag: str) -> str | None:
        """The value of the last occurrence (argparse: the last one wins)."""
        for f, values in reversed(self.options):
            if f == flag:
                return values[0] if values else ""
        return None

    def number(self, flag: str, default: float | None = None, kind=int):
        """The flag's value as `kind`; `default` when absent; None when not a literal number ("$CP")."""
        raw = self.value(flag)
        if raw is None:
            return default
        try:
            return kind(raw)
        except ValueError:
            return None


# --- parsing a pasted command --------------------------------------------------------------

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_OPAQUE = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)(\[[@*]\])?\}?$")
_ARRAY_START = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=\(")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
# A shell word: plain characters, 'single-quoted', "double-quoted" (unrolled so an unclosed quote
# fails in one linear scan) and \-escapes, joined (`a"b c"d` is one word). One regex pass over
# the text keeps lint linear: shlex grows each token a character at a time (quadratic on a long
# word) and costs microseconds per character.
_LEXEME = re.compile(r"""
    (?P<space>(?:[ \t\r]|\\\r?\n)+)   # a backslash-newline continues the line (CRLF: a script saved on Windows)
  | (?P<redirect>\d*(?:&>>?|>>?|<)(?:&(?:\d+|-))?)  # 2>&1, >log, &>>log: the file is no argument
  | (?P<separator>[;&|\n]+)
  | (?P<comment>\#[^\n]*)
  | (?P<word>(?:[^ \t\r\n;&|'"\\]+ | '[^']*' | "[^"\\]*(?:\\.[^"\\]*)*" | \\(?!\r?\n).)+)
  | (?P<unclosed>['"\\])
""", re.VERBOSE | re.DOTALL)
_WORD_PART = re.compile(r"""'([^']*)'|"([^"\\]*(?:\\.[^"\\]*)*)"|\\(.)|([^'"\\]+)""", re.DOTALL)
_DOUBLE_QUOTED_ESCAPE = re.compile(r'\\([\\"$`\n])')  # what a backslash escapes inside "..." (bash)


def _unquote(word: str) -> str:
    """The word as the program receives it: quotes removed, escapes resolved."""
    if "'" not in word and '"' not in word and "\\" not in word:
        return word  # most words: nothing to remove
    parts = []
    for single, double, escaped, plain in _WORD_PART.findall(word):
        parts.append(single or escaped or plain
                     or _DOUBLE_QUOTED_ESCAPE.sub(lambda m: "" if m[1] == "\n" else m[1], double))
    return "".join(parts)


def _commands(command: str | Sequence[str]) -> list[list[str]]:
    """The simple commands of a paste, as word lists (a newline, `;`, `&&`, `|` end a command)."""
    if not isinstance(command, str) and not (len(command) == 1 and any(c.isspace() for c in command[0])):
        # an argv; drop the continuation backslashes a whitespace-split paste leaves as words
        return [[t for t in (str(t) for t in command) if t.strip() not in ("", "\\")]]
    text = command if isinstance(command, str) else command[0]
    commands: list[list[str]] = [[]]
    target = False  # the next word is the file of a redirection
    for lexeme in _LEXEME.finditer(text):
        kind = lexeme.lastgroup
        if kind == "separator":
            commands.append([])
            target = False
        elif kind == "redirect":
            target = "&" not in lexeme.group().lstrip("0123456789&")  # `2>&1` names no file
        elif kind == "word":
            if not target:
                commands[-1].append(_unquote(lexeme.group()))
            target = False
        elif kind == "unclosed":
            where = text.count("\n", 0, lexeme.start()) + 1
            what = "a trailing backslash" if lexeme.group() == "\\" else f"an unclosed {lexeme.group()} quote"
            raise InputError(f"cannot split the command line: {what} on line {where}",
                             "check the quotes in the pasted command")
    return [c for c in commands if c]


def _is_train(word: str) -> bool:
    return word.rsplit("/", 1)[-1] in TRAIN_SCRIPTS


class _ShellScope:
    """What the lines before train.py's command leave behind: variables, exports, arrays."""

    def __init__(self) -> None:
        self.variables: dict[str, str] = {}
        self.exported: dict[str, str] = {}
        self.arrays: dict[str, list[str]] = {}
        self._open_array: list[str] | None = None  # an array definition spanning lines

    def expand(self, word: str) -> str:
        """$MODEL and ${MODEL} -> the value assigned earlier in the paste (unknown ones stay)."""
        if "$" not in word:
            return word
        return _VARIABLE.sub(lambda m: self.variables.get(m.group(1) or m.group(2), m.group(0)), word)

    def expand_arrays(self, words: list[str]) -> list[str]:
        """${ARRAY[@]} of an array the paste defines -> its words."""
        out: list[str] = []
        for word in words:
            array = _OPAQUE.match(word) if word.startswith("$") else None
            out.extend(self.arrays[array.group(1)] if array and array.group(1) in self.arrays else [word])
        return out

    def run(self, words: list[str]) -> None:
        """Take in one simple command: `NAME=v`, `export NAME=v`, `export NAME`, `NAME=(...)`."""
        start = _ARRAY_START.match(words[0])
        if self._open_array is None and start:
            self._open_array = self.arrays[start.group(1)] = []
            words = [words[0].split("=(", 1)[1], *words[1:]]
        if self._open_array is not None:
            for word in words:
                closing = word.endswith(")")
                word = word[:-1] if closing else word
                if word:
                    self._open_array.append(self.expand(word))
                if closing:
                    self._open_array = None
                    return
            return
        exported = words[0] == "export"
        for word in words[exported:]:
            match = _ASSIGNMENT.match(word)
            if match:
                self.variables[match.group(1)] = self.expand(match.group(2))
                if exported:
                    self.exported[match.group(1)] = self.variables[match.group(1)]
            elif exported and word in self.variables:
                self.exported[word] = self.variables[word]
            elif not exported:
                return  # `NAME=v other-command`: the assignment belongs to that command only


def parse_command(command: str | Sequence[str], *, env: dict[str, str] | None = None) -> ParsedCommand:
    """Split a pasted slime command into env assignments, options and opaque words.

    In a pasted script, the command that runs train.py is the one linted; `export` lines and
    `VAR=value` prefixes before it are its environment, `NAME=value` and `NAME=(...)` lines
    fill `$NAME` and `${NAME[@]}`, and lines after it that start with a --flag were cut off
    from it by a missing backslash.
    """
    # `bash -x` prints each command it runs behind `+ ` (`++ ` one level in): the trace of a script
    commands = [c[1:] if len(c) > 1 and not c[0].strip("+") else c for c in _commands(command)]
    in_array = _array_lines(commands)  # `NAME=(` ... `)`: a line in it is a word list, no command
    index = next((i for i, c in enumerate(commands) if not in_array[i] and any(_is_train(w) for w in c)), None)
    if index is None:  # no train.py: the command with the first --flag
        index = next((i for i, c in enumerate(commands) if not in_array[i] and any(is_option(w) for w in c)), None)
    scope = _ShellScope()
    for words in commands[: len(commands) if index is None else index]:
        scope.run(words)
    arrays_only = index is None and bool(scope.arrays)
    if arrays_only:
        # Only arrays (an issue quotes its CKPT_ARGS=(...), ROLLOUT_ARGS=(...)): slime's scripts pass
        # every one of them to train.py, so together they are its options -- some of them: the
        # command, its environment and its other arrays (MODEL_ARGS) are not in the paste.
        commands, index = [*commands, [f"${{{name}[@]}}" for name in scope.arrays]], len(commands)
    index = index or 0
    words = commands[index] if commands else []
    start = next((i + 1 for i, w in enumerate(words) if _is_train(w)), None)
    if start is None:  # just flags, or `python -u something --flags`: options begin at the first --flag
        start = next((i for i, w in enumerate(words) if is_option(w) or _OPAQUE.match(w)), len(words))
    parsed = ParsedCommand(env={**(env or {}), **scope.exported})
    _read_launcher(words[:start], scope, parsed)
    if arrays_only:
        parsed.opaque.append(NOT_PASTED)
        parsed.env_unknown = NOT_PASTED
    unseen = False  # after an opaque ${ARRAY[@]}: its last flag, which lint cannot see, may take the words
    for word in scope.expand_arrays(words[start:]):
        if word.startswith("$") and _OPAQUE.match(word) and scope.expand(word) == word:
            parsed.opaque.append(word)
            unseen = True
        elif is_option(word):  # a mistyped dash too: its value must not pass for the previous flag's
            flag, eq, value = word.partition("=")
            parsed.options.append((flag, [scope.expand(value)] if eq else []))
            unseen = False
        elif parsed.options and _takes_another(*parsed.options[-1]) or unseen:
            if parsed.options and not unseen:
                parsed.options[-1][1].append(scope.expand(word))
        else:  # argparse leaves it over, and slime's parse_known_args drops it without a word
            parsed.stray.append((scope.expand(word), parsed.options[-1][0] if parsed.options else ""))
    # `--flag ...` lines right after train.py's command: the shell ran them as commands of their own
    for words in commands[index + 1:]:
        if not (is_option(words[0]) or _OPAQUE.match(words[0])):
            break
        parsed.cut_off.append(words)
    return parsed


def _array_lines(commands: list[list[str]]) -> list[bool]:
    """Per command: whether it lies inside a multi-line `NAME=(...)` (its first line included)."""
    inside, out = False, []
    for words in commands:
        opens = not inside and _ARRAY_START.match(words[0]) is not None
        out.append(inside or opens)
        if opens or inside:
            inside = not any(w.endswith(")") for w in (words if inside else [words[0].split("=(", 1)[1], *words[1:]]))
    return out


def _takes_another(flag: str, values: list[str]) -> bool:
    """Whether the parsers read one more word as the flag's value (a flag they do not know: any number)."""
    spec = flag_specs().get(flag)
    return spec is None or spec.most is None or len(values) < spec.most


def _read_launcher(prefix: list[str], scope: _ShellScope, parsed: ParsedCommand) -> None:
    """Environment from the words before train.py: `A=1 python`, ray's --runtime-env-json."""
    for i, word in enumerate(prefix):
        match = _ASSIGNMENT.match(word)
        if match and all(_ASSIGNMENT.match(w) for w in prefix[:i]):  # `A=1 B=2 python train.py`
            parsed.env[match.group(1)] = scope.expand(match.group(2))
        runtime_env = word.partition("=")[2] if word.startswith("--runtime-env-json=") else (
            prefix[i + 1] if word == "--runtime-env-json" and i + 1 < len(prefix) else None)
        if runtime_env:
            try:  # ray job submit --runtime-env-json='{"env_vars": {...}}'
                env_vars = json.loads(scope.expand(runtime_env)).get("env_vars", {})
                parsed.env.update({k: str(v) for k, v in env_vars.items()})
            except (ValueError, AttributeError):  # "${RUNTIME_ENV_JSON}" from a heredoc, say
                parsed.env_unknown = f"--runtime-env-json {runtime_env}"
