"""Regenerate cpverify/data/known_flags.txt from git checkouts of slime and Megatron-LM.

slime, SGLang and Megatron all parse with `parse_known_args`, so an unknown flag is silently
dropped (see cpverify/lint.py). The linter therefore needs the list of flags that *do* exist.
This script reads the argument definitions statically (no import: Megatron needs torch/CUDA):

  * every string literal that looks like a long option in slime's argument modules and in
    Megatron-LM's megatron/training/arguments.py;
  * `--no-x` for options declared with argparse.BooleanOptionalAction;
  * flags Megatron generates from config dataclasses (ArgumentGroupFactory): `--field-name`,
    and for booleans also `--no-field-name` / `--disable-field-name`;
  * the same from the lines slime's image adds with docker/patch/latest/megatron.patch.

The list errs on the side of including too much: a missing flag makes lint wrongly warn.

Usage:
  python tools/gen_known_flags.py SLIME_GIT_DIR SLIME_COMMIT MEGATRON_GIT_DIR MEGATRON_COMMIT \
      > cpverify/data/known_flags.txt
(Megatron's commit: the one slime's docker/Dockerfile checks out at that slime commit.)
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys

SLIME_FILES = [
    "slime/utils/arguments.py",
    "slime/backends/megatron_utils/arguments.py",
    "slime/backends/sglang_utils/arguments.py",
]
MEGATRON_PATCH = "docker/patch/latest/megatron.patch"  # applied by slime's Dockerfile
MEGATRON_ARGS = "megatron/training/arguments.py"
# config dataclasses that Megatron turns into flags, and the files defining them
MEGATRON_DATACLASS_FILES = [
    "megatron/core/model_parallel_config.py",
    "megatron/core/transformer/transformer_config.py",
    "megatron/training/common_config.py",
    "megatron/training/resilience_config.py",
    "megatron/training/training_config.py",
]
LONG_OPTION = re.compile(r"""["'](--[a-z0-9][a-z0-9-]*)["']""")


def show(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
        check=True, capture_output=True, text=True,
    ).stdout


def literal_flags(source: str) -> set[str]:
    return set(LONG_OPTION.findall(source))


def boolean_optional_flags(source: str) -> set[str]:
    """`--no-x` for every add_argument("--x", action=argparse.BooleanOptionalAction)."""
    flags: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        action = next((k.value for k in node.keywords if k.arg == "action"), None)
        if getattr(action, "attr", getattr(action, "id", None)) != "BooleanOptionalAction":
            continue
        for arg in node.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                flags.add("--no-" + arg.value[2:])
    return flags


def patch_flags(patch: str) -> set[str]:
    """Flags added by a unified diff: literal options, and config dataclass fields it adds."""
    flags: set[str] = set()
    path = ""
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            path = line.rsplit(" b/", 1)[-1]
        elif line.startswith("+") and not line.startswith("+++"):
            flags |= literal_flags(line)
            field = re.match(r"^\+    ([a-z][a-z0-9_]*): ([^=]+?) = ", line)
            if field and path in MEGATRON_DATACLASS_FILES:
                flags |= dataclass_flags(f"class C:\n    {field.group(1)}: {field.group(2)} = None\n")
    return flags


def dataclass_flags(source: str) -> set[str]:
    flags: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                name = stmt.target.id
                if name.startswith("_"):
                    continue
                dashed = name.replace("_", "-")
                flags.add(f"--{dashed}")
                if ast.unparse(stmt.annotation) in ("bool", "Optional[bool]", "bool | None"):
                    flags.update({f"--no-{dashed}", f"--disable-{dashed}"})
    return flags


def main(slime_dir: str, slime_commit: str, meg_dir: str, meg_commit: str) -> None:
    slime: set[str] = set()
    for path in SLIME_FILES:
        source = show(slime_dir, slime_commit, path)
        slime |= literal_flags(source) | boolean_optional_flags(source)
    source = show(meg_dir, meg_commit, MEGATRON_ARGS)
    megatron = literal_flags(source) | boolean_optional_flags(source)
    megatron |= patch_flags(show(slime_dir, slime_commit, MEGATRON_PATCH))
    for path in MEGATRON_DATACLASS_FILES:
        source = show(meg_dir, meg_commit, path)
        # fields may rename their flag through metadata {"argparse_meta": {"arg_names": [...]}}
        megatron |= dataclass_flags(source) | literal_flags(source)
    print("# Known long options. Generated by tools/gen_known_flags.py; do not edit by hand.")
    print(f"# slime {slime_commit}; Megatron-LM {meg_commit}.")
    print("# `--sglang-*` and `--router-*` are SGLang pass-through and are not listed.")
    for flag in sorted(slime | megatron):
        if not flag.startswith(("--sglang-", "--router-")):
            print(flag)


if __name__ == "__main__":
    main(*sys.argv[1:5])
