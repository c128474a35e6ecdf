"""Lint a slime command line before any GPU is held.

Why a linter: slime, Megatron and SGLang all parse with `parse_known_args`, so a misspelled
flag is silently dropped (`--context_parallel_size 2` runs CP=1), and several mistakes only
surface minutes into a run (batch arithmetic in dp_schedule, CUDA_DEVICE_MAX_CONNECTIONS in
Megatron's validation, a placement group that never fills). Each finding names the flag,
why it matters (quoting the error slime would raise) and the fix.

Accepts any pasted command: a string (backslash continuations, leading `VAR=value`, `export`
lines, `python train.py`, `ray job submit ... -- python3 train.py`) or an argv list.
The checks follow slime 624b824a and Megatron-LM 1dcf0daf (see cpverify/data/known_flags.txt).
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
import shlex
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources

from cpverify.errors import InputError

ERROR = "error"
WARNING = "warning"

SLIME_DEFAULT_GPUS_PER_NODE = 8
SLIME_DEFAULT_SEQ_LENGTH = 4096
TRAIN_SCRIPTS = ("train.py", "train_async.py")
DEFAULT_ROLLOUT_FUNCTION = "slime.rollout.sglang_rollout.generate_rollout"
PASS_THROUGH_PREFIXES = ("--sglang-", "--router-")  # SGLang server/router flags, forwarded as-is
DSA_MODEL_HINTS = ("deepseek-v3.2", "deepseek_v32", "glm-5", "glm5")  # --allgather-cp is allowed for these


@dataclass(frozen=True)
class Finding:
    severity: str  # "error" | "warning"
    flag: str
    why: str
    fix: str
    where: str = ""  # the arm, when a plan is linted


@dataclass
class ParsedCommand:
    """A command line split into what lint needs: env assignments, options in order, opaque words."""

    env: dict[str, str] = field(default_factory=dict)
    options: list[tuple[str, list[str]]] = field(default_factory=list)  # (--flag, values) in order
    opaque: list[str] = field(default_factory=list)  # ${ARRAY[@]} and the like: lint cannot see inside
    cut_off: list[list[str]] = field(default_factory=list)  # --flag lines after a missing backslash
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
    (?P<space>(?:[ \t\r]|\\\n)+)   # a backslash-newline continues the line
  | (?P<separator>[;&|\n]+)
  | (?P<comment>\#[^\n]*)
  | (?P<word>(?:[^ \t\r\n;&|'"\\]+ | '[^']*' | "[^"\\]*(?:\\.[^"\\]*)*" | \\[^\n])+)
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
    text = text.replace("\r\n", "\n")  # a script saved on Windows
    commands: list[list[str]] = [[]]
    for lexeme in _LEXEME.finditer(text):
        kind = lexeme.lastgroup
        if kind == "separator":
            commands.append([])
        elif kind == "word":
            commands[-1].append(_unquote(lexeme.group()))
        elif kind == "unclosed":
            where = text.count("\n", 0, lexeme.start()) + 1
            what = "a trailing backslash" if lexeme.group() == "\\" else f"an unclosed {lexeme.group()} quote"
            raise InputError(f"cannot split the command line: {what} on line {where}",
                             "check the quotes in the pasted command")
    return [c for c in commands if c]


# What chat apps, word processors and PDFs make of `--`: hyphens, dashes, the minus sign.
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"
_DASH_STARTS = frozenset("-" + _DASHES)
_DASHED = re.compile(f"([-{_DASHES}]{{1,2}})([A-Za-z][A-Za-z0-9_-]+)(?:=.*)?", re.DOTALL)


def misdashed(word: str) -> str | None:
    """The long flag meant by `—context-parallel-size` (an em dash) or `-context-parallel-size`
    (one dash), else None. slime's parsers read neither as the flag: it keeps its default, and
    before lint knew this, the word passed for a value of the flag before it."""
    match = _DASHED.fullmatch(word)
    if not match or match[1] == "--":
        return None
    flag = "--" + match[2]
    if match[1] == "-" and flag not in known_flags() and flag.replace("_", "-") not in known_flags():
        return None  # `-x`, `-foo`: a value, as far as anyone can tell
    return flag


def _is_option(word: str) -> bool:
    if word.startswith("--"):
        return len(word) > 2
    return word[:1] in _DASH_STARTS and misdashed(word) is not None


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
    commands = _commands(command)
    index = next((i for i, c in enumerate(commands) if any(_is_train(w) for w in c)), None)
    if index is None:  # no train.py: the command with the first --flag
        index = next((i for i, c in enumerate(commands) if any(_is_option(w) for w in c)), 0)
    scope = _ShellScope()
    for words in commands[:index]:
        scope.run(words)
    words = commands[index] if commands else []
    start = next((i + 1 for i, w in enumerate(words) if _is_train(w)), None)
    if start is None:  # just flags, or `python -u something --flags`: options begin at the first --flag
        start = next((i for i, w in enumerate(words) if _is_option(w)), len(words))
    parsed = ParsedCommand(env={**(env or {}), **scope.exported})
    _read_launcher(words[:start], scope, parsed)
    for word in scope.expand_arrays(words[start:]):
        if word.startswith("$") and _OPAQUE.match(word) and scope.expand(word) == word:
            parsed.opaque.append(word)
        elif _is_option(word):  # a mistyped dash too: its value must not pass for the previous flag's
            flag, eq, value = word.partition("=")
            parsed.options.append((flag, [scope.expand(value)] if eq else []))
        elif parsed.options:
            parsed.options[-1][1].append(scope.expand(word))
    # `--flag ...` lines right after train.py's command: the shell ran them as commands of their own
    for words in commands[index + 1:]:
        if not (_is_option(words[0]) or _OPAQUE.match(words[0])):
            break
        parsed.cut_off.append(words)
    return parsed


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


# --- the known flags --------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def known_flags() -> frozenset[str]:
    """Long options of slime's real parsers: slime + Megatron-LM + SGLang (tools/gen_known_flags.py)."""
    text = (resources.files("cpverify") / "data" / "known_flags.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.startswith("--"))


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
def _closest_flag(flag: str, cutoff: float = 0.85) -> str | None:
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
def _unlisted_pass_through() -> tuple[str, ...]:
    """Pass-through prefixes the known flags do not cover: flags with them are accepted unchecked."""
    known = known_flags()
    return tuple(p for p in PASS_THROUGH_PREFIXES if not any(flag.startswith(p) for flag in known))


# Mistakes seen in the wild, with what slime actually does with them.
_ROLLOUT_NUM_WHY = (
    "slime has no --rollout-num. SGLang's pre-parser (abbreviations allowed) reads it as "
    "--rollout-num-gpus-per-engine, the other parsers drop it, and slime stops with `AssertionError: "
    "num_epoch is not set, but num_rollout is not set, please set --num-rollout or --num-epoch` "
    "(or, when --num-epoch is set, silently runs a different length)"
)
_ALIASES = {  # flag -> canonical flag; using the alias silently keeps the default
    "--rollout-num": "--num-rollout",
    "--num-rollouts": "--num-rollout",
    "--cp": "--context-parallel-size",
    "--cp-size": "--context-parallel-size",
    "--context-parallel": "--context-parallel-size",
    "--tp": "--tensor-model-parallel-size",
    "--tp-size": "--tensor-model-parallel-size",
    "--pp": "--pipeline-model-parallel-size",
    "--pp-size": "--pipeline-model-parallel-size",
}
_REMOVED = {
    "--megatron-to-hf-mode": (
        WARNING,
        "removed from slime; it is now silently ignored",
        "delete it: slime loads the HF directory given to --hf-checkpoint / --ref-load directly",
    ),
}
_FUNCTION_PATH = re.compile(r"^--(custom-[a-z0-9-]+-path|[a-z0-9-]*function-path|rollout-sample-hook-path)$")


def _check_flags(cmd: ParsedCommand) -> list[Finding]:
    found: list[Finding] = []
    known = known_flags()
    seen: dict[str, list[str]] = {}
    for flag, values in cmd.options:
        shown = f"{flag} {' '.join(values)}".strip()
        if flag in seen and seen[flag] != values:
            found.append(Finding(WARNING, flag, f"given twice ({flag} {' '.join(seen[flag])} and {shown}); the last one wins",
                                 "keep one"))
        seen[flag] = values
        meant = misdashed(flag)
        if meant:
            dash_match = _DASHED.fullmatch(flag)
            dash = dash_match[1] if dash_match else "--"
            spelled = "a single '-', not `--`" if dash == "-" else " + ".join(
                f"{unicodedata.name(c, 'a dash').lower()} (U+{ord(c):04X})" for c in dash
            ) + ", not `--` (chat apps and word processors turn `--` into a dash)"
            found.append(Finding(
                ERROR, flag,
                f"starts with {spelled}: slime's parsers do not read it as {meant}, so {meant} keeps its default",
                f"{meant} {' '.join(values)}".strip()))
        elif flag in _ALIASES:
            canonical = _ALIASES[flag]
            why = _ROLLOUT_NUM_WHY if flag == "--rollout-num" else (
                f"slime knows no {flag}; its parsers drop unknown flags silently, so {canonical} keeps its default")
            found.append(Finding(ERROR, flag, why, f"{canonical} {' '.join(values)}".strip()))
        elif flag in _REMOVED:
            severity, why, fix = _REMOVED[flag]
            found.append(Finding(severity, flag, why, fix))
        elif flag in known or flag.startswith(_unlisted_pass_through()):
            continue
        elif "_" in flag and (flag.replace("_", "-") in known or flag.replace("_", "-").startswith(PASS_THROUGH_PREFIXES)):
            dashed = flag.replace("_", "-")
            found.append(Finding(
                ERROR, flag,
                f"slime's parsers know only {dashed} and drop unknown flags silently: {shown} is ignored "
                f"and {dashed} keeps its default",
                f"{dashed} {' '.join(values)}".strip(),
            ))
        else:
            close = _closest_flag(flag)
            if close:
                found.append(Finding(ERROR, flag, f"unknown flag; slime ignores it silently, so {close} keeps its default",
                                     f"did you mean {close}?"))
            else:
                found.append(Finding(WARNING, flag,
                                     "not a flag of slime 624b824a / Megatron-LM 1dcf0daf / SGLang 0.5.15.post1; slime ignores unknown "
                                     "flags silently",
                                     "check the spelling against `python train.py --help` of your slime"))
    backend = cmd.value("--train-backend")
    if backend not in (None, "megatron"):
        found.append(Finding(
            ERROR, "--train-backend",
            f"slime's only backend is megatron (FSDP was removed in #1664): train.py exits with "
            f"`argument --train-backend: invalid choice: '{backend}' (choose from 'megatron')`",
            "--train-backend megatron, or drop the flag (it is the default)",
        ))
    for flag, values in cmd.options:
        if _FUNCTION_PATH.match(flag) and values and "." not in values[0] and not values[0].startswith("$"):
            found.append(Finding(ERROR, flag, f"{values[0]!r} is not a dotted path; slime imports `module.function`",
                                 f"{flag} package.module.function"))
    return found


# --- required flags -----------------------------------------------------------------------------


def _check_required(cmd: ParsedCommand) -> list[Finding]:
    train_only = cmd.has("--debug-train-only") or cmd.has("--load-debug-rollout-data")
    # a custom rollout function (e.g. slime's SFT rollout) may neither generate nor score
    custom_rollout = cmd.value("--rollout-function-path") not in (None, DEFAULT_ROLLOUT_FUNCTION)
    # an opaque ${ARRAY[@]} may hold the flag: then say so instead of failing
    severity = WARNING if cmd.opaque else ERROR
    hidden = f" (unless it is inside {', '.join(cmd.opaque)}, which lint cannot see)" if cmd.opaque else ""
    found = []

    def need(flags: tuple[str, ...], why: str, fix: str) -> None:
        # a misspelling of the flag (--rollout-num) is reported once, by _check_flags
        misspelled = any(cmd.has(alias) for alias, canonical in _ALIASES.items() if canonical in flags)
        if not misspelled and not any(cmd.has(f) for f in flags):
            found.append(Finding(severity, " or ".join(flags), why + hidden, fix))

    need(("--hf-checkpoint",), "missing: SGLang and the tokenizer load the model from it", "--hf-checkpoint /path/to/hf/model")
    need(("--rollout-batch-size",), "missing: slime requires it (`the following arguments are required`)",
         "--rollout-batch-size N (prompts per rollout)")
    need(("--num-rollout", "--num-epoch"),
         "missing: slime stops with `num_epoch is not set, but num_rollout is not set`", "--num-rollout N")
    if not train_only:
        need(("--prompt-data",), "missing: rollout has no prompts", "--prompt-data /path/to/prompts.jsonl")
    if not (train_only or custom_rollout):
        need(("--rollout-max-response-len",), "missing: generation fails with a TypeError on max_new_tokens=None",
             "--rollout-max-response-len 1024")
        need(("--rm-type", "--custom-rm-path"),
             "missing: rewards fail with `NotImplementedError: Rule-based RM type is not specified.`",
             "--rm-type <type> for labelled data, or --custom-rm-path module.function")
    need(("--num-layers",),
         "missing MODEL_ARGS: Megatron cannot read the HF config, and slime fails with `hf_validate_args failed`",
         "source slime's scripts/models/<model>.sh and pass ${MODEL_ARGS[@]} (e.g. qwen2.5-0.5B.sh)")
    return found


# --- batch arithmetic ---------------------------------------------------------------------------


def _check_batches(cmd: ParsedCommand, dp: int | None) -> list[Finding]:
    found: list[Finding] = []
    rbs = cmd.number("--rollout-batch-size")
    n = cmd.number("--n-samples-per-prompt", 1)
    gbs = cmd.number("--global-batch-size")
    steps = cmd.number("--num-steps-per-rollout")
    if None in (rbs, n) or rbs <= 0 or n <= 0:
        return found
    samples = rbs * n
    if steps:
        derived = samples // steps
        if gbs is not None and gbs != derived:
            found.append(Finding(
                ERROR, "--global-batch-size",
                f"slime asserts `global_batch_size {gbs} is not equal to rollout_batch_size {rbs} * "
                f"n_samples_per_prompt {n} // num_steps_per_rollout {steps}`",
                f"--global-batch-size {derived}, or drop it (slime derives it from --num-steps-per-rollout)",
            ))
        gbs = derived
    if gbs:
        if samples < gbs:
            k = next(k for k in range(1, gbs + 1) if rbs * k >= gbs and rbs * k % gbs == 0)
            found.append(Finding(
                ERROR, "--global-batch-size",
                f"each rollout yields --rollout-batch-size {rbs} x --n-samples-per-prompt {n} = {samples} samples, "
                f"fewer than --global-batch-size {gbs}: slime's dp_schedule stops with `AssertionError: "
                f"num_rollouts ({samples}) < global_batch_size ({gbs}); need at least one rollout per step.`",
                f"--n-samples-per-prompt {k} (a group of {k} responses per prompt), or --global-batch-size {samples}",
            ))
        elif samples % gbs:
            found.append(Finding(
                WARNING, "--global-batch-size",
                f"{samples} samples per rollout is not a multiple of --global-batch-size {gbs}: "
                f"dp_schedule drops the last {samples % gbs} samples of every rollout",
                f"--global-batch-size {math.gcd(samples, gbs)} or a rollout size that is a multiple of {gbs}",
            ))
        mbs = cmd.number("--micro-batch-size", 1)
        if dp and mbs and gbs % (mbs * dp):
            found.append(Finding(
                ERROR, "--global-batch-size",
                f"Megatron asserts `global batch size ({gbs}) is not divisible by micro batch size ({mbs}) "
                f"times data parallel size ({dp})`",
                f"a --global-batch-size that is a multiple of {mbs * dp}",
            ))
    osbs = cmd.number("--over-sampling-batch-size")
    if osbs is not None and osbs < rbs:
        found.append(Finding(ERROR, "--over-sampling-batch-size",
                             f"slime asserts over_sampling_batch_size {osbs} >= rollout_batch_size {rbs}",
                             f"--over-sampling-batch-size {rbs} or more"))
    if cmd.has("--use-dynamic-batch-size") and not cmd.has("--max-tokens-per-gpu"):
        found.append(Finding(ERROR, "--use-dynamic-batch-size",
                             "slime asserts `max_tokens_per_gpu must be set when use_dynamic_batch_size is set`",
                             "--max-tokens-per-gpu 2048 (or more for long responses)"))
    return found


# --- GPU arithmetic and parallel layout ---------------------------------------------------------


def parallel_layout(cmd: ParsedCommand) -> dict[str, int] | None:
    """{"world", "tp", "pp", "cp", "dp"} as Megatron would compute them; None when not computable."""
    nodes = cmd.number("--actor-num-nodes", 1)
    per_node = cmd.number("--actor-num-gpus-per-node", SLIME_DEFAULT_GPUS_PER_NODE)
    tp = cmd.number("--tensor-model-parallel-size", 1)
    pp = cmd.number("--pipeline-model-parallel-size", 1)
    cp = cmd.number("--context-parallel-size", 1)
    if None in (nodes, per_node, tp, pp, cp) or min(nodes, per_node, tp, pp, cp) < 1:
        return None
    world = nodes * per_node
    dp = world // (tp * pp * cp) if world % (tp * pp * cp) == 0 else 0
    return {"world": world, "tp": tp, "pp": pp, "cp": cp, "dp": dp}


def _check_layout(cmd: ParsedCommand, layout: dict[str, int] | None, gpus: int | None) -> list[Finding]:
    found = []
    if not cmd.has("--actor-num-gpus-per-node"):
        short = gpus is not None and gpus < SLIME_DEFAULT_GPUS_PER_NODE
        found.append(Finding(
            ERROR if short else WARNING, "--actor-num-gpus-per-node",
            f"not set: slime defaults to {SLIME_DEFAULT_GPUS_PER_NODE} GPUs per node"
            + (f", but {gpus} are available: Ray waits forever for the placement group" if short else ""),
            f"--actor-num-gpus-per-node {gpus or 'N'}",
        ))
    if layout is None:
        return found
    world, tp, pp, cp = layout["world"], layout["tp"], layout["pp"], layout["cp"]
    if layout["dp"] == 0:
        found.append(Finding(
            ERROR, "--context-parallel-size",
            f"Megatron asserts `world size ({world}) is not divisible by total_model_size ({tp * pp * cp})` "
            f"(world = --actor-num-nodes x --actor-num-gpus-per-node; model = TP {tp} x PP {pp} x CP {cp})",
            f"a TP x PP x CP that divides {world}, e.g. --context-parallel-size {math.gcd(world, cp)}",
        ))
    if gpus is not None:
        nodes = cmd.number("--actor-num-nodes", 1) or 1
        rollout = 0 if cmd.has("--colocate") else (cmd.number("--rollout-num-gpus", 0) or 0)
        needed = world + rollout
        if nodes == 1 and needed > gpus and cmd.has("--actor-num-gpus-per-node"):
            found.append(Finding(
                ERROR, "--actor-num-gpus-per-node",
                f"the job needs {needed} GPUs ({world} for training" + (f" + {rollout} for rollout" if rollout else "")
                + f") but {gpus} are available: Ray waits forever for the placement group",
                f"--actor-num-gpus-per-node {max(1, gpus - rollout)}"
                + (" or --colocate (training and rollout share the GPUs)" if rollout else ""),
            ))
        if cp > gpus:
            found.append(Finding(ERROR, "--context-parallel-size", f"CP={cp} needs {cp} GPUs; {gpus} are available",
                                 f"--context-parallel-size {gpus} or less"))
    if cp > 1:
        seq = cmd.number("--seq-length", SLIME_DEFAULT_SEQ_LENGTH)
        if seq is not None and seq % (2 * cp):
            found.append(Finding(
                ERROR, "--seq-length",
                f"Megatron asserts `seq-length should be a multiple of 2 * context-parallel-size` ({seq} % {2 * cp} != 0)",
                f"--seq-length {seq + (2 * cp - seq % (2 * cp))}",
            ))
        if cmd.has("--allgather-cp"):
            model = (cmd.value("--hf-checkpoint") or "").lower()
            if not any(hint in model for hint in DSA_MODEL_HINTS):
                found.append(Finding(
                    ERROR, "--allgather-cp",
                    "with CP>1 slime allows --allgather-cp only for DSA models (DeepSeek-V3.2, GLM-5.1); other "
                    "models use the zigzag CP layout and slime refuses to start",
                    "remove --allgather-cp",
                ))
    if cmd.has("--sequence-parallel") and tp == 1:
        found.append(Finding(
            WARNING, "--sequence-parallel",
            "with TP=1 Megatron switches it off (`Disabling sequence parallelism because tensor model parallelism "
            "is disabled`): the flag describes a layout that does not run",
            "remove --sequence-parallel (or use it with --tensor-model-parallel-size > 1)",
        ))
    return found


# --- environment and other cross-flag rules --------------------------------------------------


def _check_env(cmd: ParsedCommand, layout: dict[str, int] | None) -> list[Finding]:
    found = []
    tp = layout["tp"] if layout else cmd.number("--tensor-model-parallel-size", 1)
    cp = layout["cp"] if layout else cmd.number("--context-parallel-size", 1)
    if ((tp or 1) > 1 or (cp or 1) > 1) and cmd.env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1":
        current = cmd.env.get("CUDA_DEVICE_MAX_CONNECTIONS")
        unknown = cmd.env_unknown and current is None
        found.append(Finding(
            WARNING if unknown else ERROR, "CUDA_DEVICE_MAX_CONNECTIONS",
            (f"cannot be read from {cmd.env_unknown[:60]}" if unknown else "not set" if current is None
             else f"is {current!r}") + f" with TP={tp or '?'}, CP={cp or '?'}: Megatron asserts "
            "(on Hopper and older) `Using tensor model parallelism or context parallelism require setting the "
            "environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1`: CP=1 runs and CP=2 dies",
            "export CUDA_DEVICE_MAX_CONNECTIONS=1 (with ray job submit: in --runtime-env-json env_vars)",
        ))
    kl, kl_loss = cmd.number("--kl-coef", 0.0, float), cmd.number("--kl-loss-coef", 0.0, float)
    if kl and kl_loss:
        found.append(Finding(ERROR, "--kl-coef", "slime asserts `Only one of kl_coef and kl_loss_coef can be set`",
                             "set one of --kl-coef / --kl-loss-coef to 0"))
    if cmd.has("--save-interval") and not cmd.has("--save"):
        found.append(Finding(ERROR, "--save-interval", "slime asserts `'--save' is required when save_interval is set`",
                             "--save /path/to/checkpoints, or drop --save-interval"))
    return found


# --- entry points ---------------------------------------------------------------------------------


def lint_argv(argv: str | Sequence[str], *, env: dict[str, str] | None = None, gpus: int | None = None) -> list[Finding]:
    """Findings for one slime command line (errors first). `env` is the environment it runs with,
    beyond the `VAR=value` assignments in the command itself; `gpus` is how many GPUs the host has."""
    cmd = parse_command(argv, env=env)
    layout = parallel_layout(cmd)
    found = [
        *_check_flags(cmd),
        *_check_required(cmd),
        *_check_batches(cmd, layout["dp"] if layout else None),
        *_check_layout(cmd, layout, gpus),
        *_check_env(cmd, layout),
    ]
    for words in cmd.cut_off:
        found.append(Finding(
            ERROR, words[0],
            f"`{shlex.join(words)[:80]}` is a line of its own: the line before it does not end with a backslash, "
            "so the shell ends the train.py command there and runs this line separately; train.py never sees it",
            "end the previous line with ` \\`",
        ))
    if cmd.opaque:
        found.append(Finding(WARNING, " ".join(cmd.opaque),
                             "shell expansions lint cannot see into; checks on the flags inside them are skipped",
                             "paste the expanded command (e.g. from `bash -x`), or lint the file with the arrays defined"))
    return sorted(found, key=lambda f: f.severity != ERROR)


def lint_plan(plan, *, gpus: int | None = None) -> list[Finding]:
    """Lint every arm of a cpverify plan (slime arms as command lines; probe arms by their shape).
    `gpus` is how many GPUs the host has (default: the plan's own)."""
    host = len(plan.gpus) if gpus is None else gpus
    found: list[Finding] = []
    if host < len(plan.gpus):
        found.append(Finding(ERROR, "gpus", f"profile {plan.profile.name} runs on {len(plan.gpus)} GPUs; the host has {host}",
                             "run on a host with enough GPUs, or override the profile (--set gpus=N --set cp_sizes=1,N)"))
    for arm in plan.arms:
        if plan.profile.kind == "slime":
            arm_findings = lint_argv(list(arm.argv), env=arm.env_dict, gpus=host)
        else:
            arm_findings = _check_probe_arm(arm, host)
        found += [Finding(f.severity, f.flag, f.why, f.fix, where=arm.name) for f in arm_findings]
    return sorted(found, key=lambda f: f.severity != ERROR)


def _check_probe_arm(arm, gpus: int) -> list[Finding]:
    found = []
    if arm.cp > gpus:
        found.append(Finding(ERROR, "--cp", f"CP={arm.cp} needs {arm.cp} GPUs; {gpus} are available", f"--cp {gpus} or less"))
    if arm.seq_len and arm.cp > 1 and arm.seq_len % (2 * arm.cp):
        found.append(Finding(
            ERROR, "--seq-len",
            f"load-balanced ring attention needs seq_len % (2 x cp) == 0; torch raises a bare AssertionError "
            f"for {arm.seq_len} at CP={arm.cp}",
            f"--seq-len {arm.seq_len + (2 * arm.cp - arm.seq_len % (2 * arm.cp))}",
        ))
    return found


def has_errors(findings: Sequence[Finding]) -> bool:
    return any(f.severity == ERROR for f in findings)


def format_findings(findings: Sequence[Finding]) -> str:
    from tabulate import tabulate

    with_where = any(f.where for f in findings)
    rows = [([f.where] if with_where else []) + [f.severity, f.flag, f.why, f.fix] for f in findings]
    headers = (["arm"] if with_where else []) + ["severity", "flag", "why", "fix"]
    widths = ([None] if with_where else []) + [None, 32, 70, 44]
    return tabulate(rows, headers=headers, tablefmt="grid", maxcolwidths=widths)
