"""A command line's `--flag value...` groups: the one reading of an argv list cpverify's stages share.

slime, Megatron-LM and SGLang parse `--flag value` and `--flag=value` alike, the last occurrence
of a flag winning; every word up to the first `--flag` is the command (`python3 train.py`). A
pasted shell script is another matter: the lint's shell interpreter (cpverify.lint) reads those.
"""

from __future__ import annotations

from collections.abc import Sequence


def groups(argv: Sequence[str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(leading words, [(--flag, its values), ...] in order), `--flag=value` split."""
    lead: list[str] = []
    found: list[tuple[str, list[str]]] = []
    for token in argv:
        if token.startswith("--") and len(token) > 2:
            flag, eq, value = token.partition("=")
            found.append((flag, [value] if eq else []))
        elif found:
            found[-1][1].append(token)
        else:
            lead.append(token)
    return lead, found


def options(argv: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(leading words, {--flag: values}); a repeated flag keeps every value, in order."""
    lead, found = groups(argv)
    merged: dict[str, list[str]] = {}
    for flag, values in found:
        merged.setdefault(flag, []).extend(values)
    return lead, merged


def value(argv: Sequence[str], flag: str) -> str | None:
    """The value of the flag's last occurrence (argparse: the last one wins); "" when it has none,
    None when the flag is absent."""
    values = next((values for f, values in reversed(groups(argv)[1]) if f == flag), None)
    return None if values is None else (values[0] if values else "")
