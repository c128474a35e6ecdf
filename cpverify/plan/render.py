"""A plan as people see it: the arms of plan.json and `cpverify plan --json`, and commands.sh.

Secret values (of a secret-looking name, or shaped like a credential; cpverify.redact decides)
are shown as ${NAME} references the user exports; their values never reach a file.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cpverify.model import Arm
from cpverify.redact import contains_secret, follows_secret_flag, is_secret_name, secret_arguments

if TYPE_CHECKING:
    from cpverify.plan.build import Plan


def arm_json(arm: Arm) -> dict:
    """An arm as plan.json and `cpverify plan --json` show it: secret values as ${NAME}."""
    return {
        "name": arm.name,
        "cp": arm.cp,
        "argv": shown_argv(arm.argv),
        "env": {k: (f"${{{k}}}" if is_secret(k, v) else v) for k, v in arm.env},
        "workdir": arm.workdir,
        "seq_len": arm.seq_len,
        "slime_ref": arm.slime_ref,
        "role": arm.role,
    }


def commands_sh(plan: Plan) -> str:
    """A bash script that reruns every arm as planned: `bash commands.sh [ARM ...]`.

    Secret values (of a secret-looking name, or shaped like a credential: a token, a URL
    with a password, a signed URL; cpverify.redact decides) are written as ${NAME}
    references that the user must export; their values never reach the file.
    """
    # Every word that comes from the plan is shlex-quoted, and every comment is one line: a
    # path, an argument or a profile name can never become a command of its own.
    names = " ".join(shlex.quote(arm.name) for arm in plan.arms)
    needed = sorted({name for arm in plan.arms for name in _secret_refs(arm)})
    about = []
    if plan.profile.kind == "slime":
        # a hub snapshot is named after its revision; anything else is a local directory (--model-dir)
        hub = plan.model_dir.rstrip("/").endswith(f"/snapshots/{plan.profile.model_revision}")
        model = (f"Model {plan.profile.model_repo}@{plan.profile.model_revision} in {plan.model_dir}" if hub
                 else f"Model: the local directory {plan.model_dir} (shaped as {plan.profile.model_repo})")
        data = (f"rollouts under {plan.work_dir} (prepare_data)" if plan.data_commands
                else f"prompts {plan.data_path}")
        about.append(f"{model}; {data}; slime in {plan.slime_dir}.")
    refs = sorted({arm.slime_ref for arm in plan.arms if arm.slime_ref})
    if refs:
        about.append(f"slime revision: {', '.join(refs)}")
    lines = [
        "#!/usr/bin/env bash",
        _comment(f"cpverify {plan.run_id}: profile {plan.profile.name!r} ({plan.profile.kind}), arms: {names}"),
        "# Reproduces each arm exactly as cpverify ran it. Usage: bash commands.sh [ARM ...]",
        *map(_comment, about),
        "set -euo pipefail",
        "",
        "# GPUs as numbered on the host; inside a container that sees only these, they are 0..N-1.",
        f"export CUDA_VISIBLE_DEVICES={shlex.quote(','.join(map(str, plan.gpus)))}",
    ]
    for name in needed:
        lines.append(f': "${{{name}:?export {name} first (cpverify never writes its value)}}"')
    lines += ["", f"all_arms=({names})", "", "run_arm() {", '  case "$1" in']
    for arm in plan.arms:
        lines.append(f"    {shlex.quote(arm.name)}) (")
        if arm.workdir != ".":
            lines.append(f"      cd {shlex.quote(arm.workdir)}")
        for key, value in arm.env:  # names are checked by the profile ([A-Za-z_][A-Za-z0-9_]*)
            shown = f'"${{{key}}}"' if is_secret(key, value) else shlex.quote(value)
            lines.append(f"      export {key}={shown}")
        lines.append("      " + _wrap(shown_argv(arm.argv, shell=True), indent="        "))
        lines.append("    ) ;;")
    lines += [
        '    *) echo "unknown arm: $1 (arms: ${all_arms[*]})" >&2; return 2 ;;',
        "  esac",
        "}",
        "",
    ]
    if plan.data_commands:
        lines += ["# The rollouts the train-only arms read: seeded, so the same files every time (a set already",
                  "# written is reused).", "prepare_data() {"]
        for command in plan.data_commands:
            lines.append(f"  (cd {shlex.quote(command.workdir)} && "
                         + _wrap([shlex.quote(a) for a in command.argv], indent="    ") + ")")
        lines += ["}", "prepare_data", ""]
    lines += [
        'arms=("$@"); [ ${#arms[@]} -gt 0 ] || arms=("${all_arms[@]}")',
        'for arm in "${arms[@]}"; do run_arm "$arm"; done',
        "",
    ]
    return "\n".join(lines)


def is_secret(name: str, value: str) -> bool:
    # is_secret_name knows that --input-key names a dataset column and --wandb-key a credential;
    # contains_secret knows a token, a URL password or a signed URL whatever its name
    return is_secret_name(name) or contains_secret(value or "")


def _ref_name(flag: str) -> str:
    """--wandb-key -> WANDB_KEY: the variable a user exports to fill a masked flag (a shell name)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", flag.lstrip("-")).upper()
    return ("_" + name if name[:1].isdigit() else name) or "CPVERIFY_SECRET"


def _comment(text: str) -> str:
    """One comment line: a newline in a path or a name would end the comment and start a command."""
    return "# " + " ".join(text.split())


def shown_argv(argv: Sequence[str], *, shell: bool = False) -> list[str]:
    """argv for printing: each secret value (cpverify.redact.secret_arguments) as ${NAME}, NAME the
    variable its flag names (--wandb-key V -> ${WANDB_KEY}) or CPVERIFY_SECRET; double-quoted, and
    every other word shell-quoted, when `shell`."""
    secrets = secret_arguments(argv)
    shown = []
    for i, word in enumerate(argv):
        if i not in secrets:
            shown.append(shlex.quote(word) if shell else word)
            continue
        flag = word[: len(word) - len(secrets[i]) - 1] if word != secrets[i] else ""  # --flag=SECRET
        named_by = flag or (argv[i - 1] if follows_secret_flag(argv, i) else "")
        ref = f"${{{_ref_name(named_by) if named_by else 'CPVERIFY_SECRET'}}}"
        if flag:
            shown.append(f'{shlex.quote(flag + "=")}"{ref}"' if shell else f"{flag}={ref}")
        else:
            shown.append(f'"{ref}"' if shell else ref)
    return shown


def _secret_refs(arm: Arm) -> set[str]:
    """Names of the variables commands.sh needs the user to export."""
    refs = {key for key, value in arm.env if is_secret(key, value)}
    for word, shown in zip(arm.argv, shown_argv(arm.argv), strict=True):
        if shown != word:
            refs.update(re.findall(r"\$\{(\w+)\}", shown))
    return refs


def _wrap(words: list[str], *, indent: str) -> str:
    """argv as one shell command, one `--flag value...` group per line."""
    lines: list[str] = []
    for word in words:
        if not lines or word.startswith("--"):
            lines.append(word)
        else:
            lines[-1] += " " + word
    return (" \\\n" + indent).join(lines)
