"""Lint a slime command line before any GPU is held.

Why a linter: slime, Megatron and SGLang all parse with `parse_known_args`, so a misspelled
flag is silently dropped (`--context_parallel_size 2` runs CP=1), and several mistakes only
surface minutes into a run (batch arithmetic in dp_schedule, CUDA_DEVICE_MAX_CONNECTIONS in
Megatron's validation, a placement group that never fills). Each finding names the flag,
why it matters (quoting the error slime would raise) and the fix.

Accepts any pasted command: a string (backslash continuations, leading `VAR=value`, `export`
lines, `python train.py`, `ray job submit ... -- python3 train.py`) or an argv list.
The checks follow slime 624b824a and Megatron-LM 1dcf0daf (see cpverify/data/known_flags.txt).

  shell.py     the shell-paste interpreter: a pasted command -> its environment and options
  flags.py     the flags slime's parsers know, how many words each takes and of what type; what a
               misspelled or mis-dashed flag meant
  checks.py    the checks, and the entry points lint_argv (one command line) and lint_plan
  findings.py  what the lint reports, and the table of it
  deep.py      the deep lint, the host side: slime's own parser's verdict on every arm, as findings
"""

from cpverify.lint.checks import lint_argv, lint_plan, parallel_layout
from cpverify.lint.findings import ERROR, WARNING, Finding, format_findings, has_errors
from cpverify.lint.flags import PASS_THROUGH_PREFIXES, flag_specs, known_flags, misdashed
from cpverify.lint.shell import TRAIN_SCRIPTS, ParsedCommand, parse_command

__all__ = [
    "ERROR", "PASS_THROUGH_PREFIXES", "TRAIN_SCRIPTS", "WARNING", "Finding", "ParsedCommand", "format_findings",
    "flag_specs", "has_errors", "known_flags", "lint_argv", "lint_plan", "misdashed", "parallel_layout", "parse_command",
]
