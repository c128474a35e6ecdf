"""The plan: the exact command line and environment of every arm, before anything runs.

A plan is pure data built from a profile and a few paths. It guarantees the one property an
A/B of CP needs: paired arms differ only in the CP size (`--context-parallel-size` for slime,
`--cp` for the probe). `build_plan` refuses to return a plan that breaks it, and
`Plan.commands_sh()` writes the bash script that reproduces every arm exactly.

Train-only arms (profile `train-only`) read rollouts the plan's data commands write
(`Plan.data_commands`: cpverify.slime_hooks.make_rollouts, in the workload's Python) and carry
slime's own numerics check: the baseline arm saves its grad norm at every step
(`--ci-save-grad-norm P`), every other arm loads the same P (`--ci-load-grad-norm P`) and slime
asserts they agree within 1%. That handoff is the one difference besides CP a pair may have.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from cpverify.artifacts import check_run_id
from cpverify.errors import InputError
from cpverify.model import Arm
from cpverify.profiles import MAX_GPUS, Profile
from cpverify.redact import contains_secret, is_secret_name

SLIME_CP_FLAG = "--context-parallel-size"
PROBE_CP_FLAG = "--cp"
DEFAULT_SLIME_DIR = "/root/slime"
DEFAULT_MODEL_DIR = "/root/models/Qwen2.5-0.5B-Instruct"
DEFAULT_WORK_DIR = "/artifacts"  # the run's writable work directory as the workload sees it (Docker)
GRAD_NORM_SAVE, GRAD_NORM_LOAD = "--ci-save-grad-norm", "--ci-load-grad-norm"
ROLLOUT_DATA_FLAG = "--load-debug-rollout-data"
TRAIN_ONLY_PROMPT_LEN = 64  # prompt tokens of every synthetic sample
ROLLOUT_SEED = 1234


def arm_json(arm: Arm) -> dict:
    """An arm as plan.json and `cpverify plan --json` show it: secret values as ${NAME}."""
    return {
        "name": arm.name,
        "cp": arm.cp,
        "argv": [_mask_arg(arm.argv, i) for i in range(len(arm.argv))],
        "env": {k: (f"${{{k}}}" if _is_secret(k, v) else v) for k, v in arm.env},
        "workdir": arm.workdir,
        "seq_len": arm.seq_len,
        "slime_ref": arm.slime_ref,
    }


@dataclass(frozen=True)
class Plan:
    run_id: str
    profile: Profile
    arms: tuple[Arm, ...]
    comparisons: tuple[tuple[str, str], ...]  # (baseline arm name, candidate arm name)
    gpus: tuple[int, ...]
    model_dir: str
    data_path: str
    slime_dir: str
    work_dir: str = DEFAULT_WORK_DIR

    def arm(self, name: str) -> Arm:
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise InputError(f"plan {self.run_id} has no arm {name!r}", f"use one of: {', '.join(a.name for a in self.arms)}")

    def to_json(self) -> dict:
        return {
            "run_id": self.run_id,
            "profile": self.profile.name,
            "kind": self.profile.kind,
            "gpus": list(self.gpus),
            "model_dir": self.model_dir,
            "data_path": self.data_path,
            "slime_dir": self.slime_dir,
            "arms": [arm_json(arm) for arm in self.arms],
            "data_commands": [arm_json(arm) for arm in self.data_commands],
            "comparisons": [
                {"baseline": b, "candidate": c, "diff": arm_diff(self.arm(b), self.arm(c))}
                for b, c in self.comparisons
            ],
        }

    @property
    def data_commands(self) -> tuple[Arm, ...]:
        """The commands that write the rollouts the train-only arms read, one per rollout set.

        Built from each arm's own flags (one definition: the numbers slime reads are the ones
        the rollouts are made with), run in the arm's working directory with its Python.
        """
        commands: dict[str, Arm] = {}
        for arm in self.arms:
            _, opts = _options(arm.argv)
            templates = opts.get(ROLLOUT_DATA_FLAG)
            template = templates[-1] if templates else None
            if template is None or template in commands:
                continue

            def value(flag: str, default: str, opts=opts) -> str:
                return (opts.get(flag) or [default])[-1]

            argv = (arm.argv[0], "-m", "cpverify.slime_hooks.make_rollouts", "--out", template,
                    "--num-rollout", value("--num-rollout", "1"),
                    "--rollout-batch-size", value("--rollout-batch-size", "1"),
                    "--n-samples-per-prompt", value("--n-samples-per-prompt", "1"),
                    "--prompt-len", str(TRAIN_ONLY_PROMPT_LEN),
                    "--response-len", value("--rollout-max-response-len", str(arm.seq_len or 1024)),
                    "--seed", str(ROLLOUT_SEED))
            name = "rollouts" + (f"-s{_size(arm.seq_len)}" if arm.seq_len else "")
            commands[template] = Arm(name, 0, argv, (), arm.workdir, seq_len=arm.seq_len)
        return tuple(commands.values())

    def commands_sh(self) -> str:
        """A bash script that reruns every arm as planned: `bash commands.sh [ARM ...]`.

        Secret values (of a secret-looking name, or shaped like a credential: a token, a URL
        with a password, a signed URL; cpverify.redact decides) are written as ${NAME}
        references that the user must export; their values never reach the file.
        """
        # Every word that comes from the plan is shlex-quoted, and every comment is one line: a
        # path, an argument or a profile name can never become a command of its own.
        names = " ".join(shlex.quote(arm.name) for arm in self.arms)
        needed = sorted({name for arm in self.arms for name in _secret_refs(arm)})
        about = []
        if self.profile.kind == "slime":
            # a hub snapshot is named after its revision; anything else is a local directory (--model-dir)
            hub = self.model_dir.rstrip("/").endswith(f"/snapshots/{self.profile.model_revision}")
            model = (f"Model {self.profile.model_repo}@{self.profile.model_revision} in {self.model_dir}" if hub
                     else f"Model: the local directory {self.model_dir} (shaped as {self.profile.model_repo})")
            data = (f"rollouts under {self.work_dir} (prepare_data)" if self.data_commands
                    else f"prompts {self.data_path}")
            about.append(f"{model}; {data}; slime in {self.slime_dir}.")
        refs = sorted({arm.slime_ref for arm in self.arms if arm.slime_ref})
        if refs:
            about.append(f"slime revision: {', '.join(refs)}")
        lines = [
            "#!/usr/bin/env bash",
            _comment(f"cpverify {self.run_id}: profile {self.profile.name!r} ({self.profile.kind}), arms: {names}"),
            "# Reproduces each arm exactly as cpverify ran it. Usage: bash commands.sh [ARM ...]",
            *map(_comment, about),
            "set -euo pipefail",
            "",
            "# GPUs as numbered on the host; inside a container that sees only these, they are 0..N-1.",
            f"export CUDA_VISIBLE_DEVICES={shlex.quote(','.join(map(str, self.gpus)))}",
        ]
        for name in needed:
            lines.append(f': "${{{name}:?export {name} first (cpverify never writes its value)}}"')
        lines += ["", f"all_arms=({names})", "", "run_arm() {", '  case "$1" in']
        for arm in self.arms:
            lines.append(f"    {shlex.quote(arm.name)}) (")
            if arm.workdir != ".":
                lines.append(f"      cd {shlex.quote(arm.workdir)}")
            for key, value in arm.env:  # names are checked by the profile ([A-Za-z_][A-Za-z0-9_]*)
                shown = f'"${{{key}}}"' if _is_secret(key, value) else shlex.quote(value)
                lines.append(f"      export {key}={shown}")
            argv = [_mask_arg(arm.argv, i, shell=True) for i in range(len(arm.argv))]
            lines.append("      " + _wrap(argv, indent="        "))
            lines.append("    ) ;;")
        lines += [
            '    *) echo "unknown arm: $1 (arms: ${all_arms[*]})" >&2; return 2 ;;',
            "  esac",
            "}",
            "",
        ]
        if self.data_commands:
            lines += ["# The rollouts the train-only arms read: seeded, so the same files every time (a set already",
                      "# written is reused).", "prepare_data() {"]
            for command in self.data_commands:
                lines.append(f"  (cd {shlex.quote(command.workdir)} && "
                             + _wrap([shlex.quote(a) for a in command.argv], indent="    ") + ")")
            lines += ["}", "prepare_data", ""]
        lines += [
            'arms=("$@"); [ ${#arms[@]} -gt 0 ] || arms=("${all_arms[@]}")',
            'for arm in "${arms[@]}"; do run_arm "$arm"; done',
            "",
        ]
        return "\n".join(lines)


def build_plan(
    profile: Profile,
    *,
    run_id: str,
    gpus: tuple[int, ...] | list[int] | None = None,
    model_dir: str = DEFAULT_MODEL_DIR,
    data_path: str | None = None,
    slime_dir: str = DEFAULT_SLIME_DIR,
    slime_ref: str | None = None,
    python: str = "python3",
    work_dir: str = DEFAULT_WORK_DIR,
) -> Plan:
    """All arms of `profile` and the pairs to compare; raises InputError if a pair differs in more than CP.
    `python` is the arms' interpreter: python3 as slime's image and GPU hosts name the one with torch;
    the local runner's choice (--python) where it runs the arms itself. `work_dir` is the run's
    writable directory as the workload sees it: train-only arms read their rollouts from it and hand
    the baseline's grad norms over through it."""
    check_run_id(run_id)  # it is written into commands.sh
    gpus = tuple(range(profile.gpus)) if gpus is None else tuple(int(g) for g in gpus)
    if len(gpus) != profile.gpus or len(set(gpus)) != len(gpus) or min(gpus) < 0:
        raise InputError(
            f"profile {profile.name!r} runs on {profile.gpus} GPUs, but the GPUs given are {list(gpus)}",
            f"pass {profile.gpus} distinct GPU indices (e.g. --gpus {','.join(map(str, range(profile.gpus)))}) "
            "or override the profile's gpus",
        )
    data_path = str(data_path or profile.dataset_path())
    if profile.kind == "slime" and not profile.train_only:
        arms = tuple(_slime_arm(profile, cp, model_dir, data_path, slime_dir, slime_ref, python)
                     for cp in profile.cp_sizes)
        comparisons = tuple((f"cp{profile.baseline_cp}", f"cp{cp}") for cp in profile.candidate_cps)
        allowed = {SLIME_CP_FLAG}
    else:
        if profile.kind == "slime":
            arms = tuple(_train_only_arm(profile, cp, seq_len, model_dir, slime_dir, slime_ref, work_dir, python)
                         for seq_len in profile.seq_lens for cp in profile.cp_sizes)
            allowed = {SLIME_CP_FLAG}
        else:
            arms = tuple(_probe_arm(profile, cp, seq_len, python) for seq_len in profile.seq_lens
                         for cp in profile.cp_sizes)
            allowed = {PROBE_CP_FLAG}
        comparisons = tuple(
            (_arm_name(profile.baseline_cp, s), _arm_name(cp, s)) for s in profile.seq_lens for cp in profile.candidate_cps
        )
    plan = Plan(run_id, profile, arms, comparisons, gpus, model_dir, data_path, slime_dir, work_dir)
    for baseline, candidate in comparisons:
        check_pair(plan.arm(baseline), plan.arm(candidate), allowed=allowed)
    return plan


def _slime_words(profile: Profile, model_dir: str, python: str) -> tuple[str, ...]:
    """What every slime arm runs, before the flags that are per arm."""
    return (
        python, "train.py",
        *profile.train_args,
        *profile.model_args,
        # One node, all of the profile's GPUs. slime's default of 8 GPUs per node would make a
        # 2-GPU job wait forever for its placement group.
        "--actor-num-nodes", "1",
        "--actor-num-gpus-per-node", str(profile.gpus),
        # slime loads an HF directory directly for both; no torch_dist conversion needed.
        "--hf-checkpoint", model_dir,
        "--ref-load", model_dir,
    )


def _slime_arm(profile: Profile, cp: int, model_dir: str, data_path: str, slime_dir: str, slime_ref: str | None,
               python: str) -> Arm:
    argv = (*_slime_words(profile, model_dir, python), "--prompt-data", data_path, SLIME_CP_FLAG, str(cp))
    return Arm(f"cp{cp}", cp, argv, profile.env, slime_dir, slime_ref=slime_ref)


def rollout_dir(work_dir: str, seq_len: int) -> str:
    """Where the rollouts of one response length live (and the baseline's grad norms over them)."""
    return f"{work_dir.rstrip('/')}/train-only/s{_size(seq_len)}"


def _train_only_arm(profile: Profile, cp: int, seq_len: int, model_dir: str, slime_dir: str, slime_ref: str | None,
                    work_dir: str, python: str) -> Arm:
    data = rollout_dir(work_dir, seq_len)
    # slime fills {role}, {rollout_id} and {step_id}. Per revision in an A/B: two revisions may
    # legitimately differ in numerics, and each is checked against its own CP=1.
    revision = f"{re.sub(r'[^A-Za-z0-9._-]', '_', slime_ref)}-" if slime_ref else ""
    handoff = GRAD_NORM_SAVE if cp == profile.baseline_cp else GRAD_NORM_LOAD
    argv = (
        *_slime_words(profile, model_dir, python),
        "--rollout-max-response-len", str(seq_len),
        # one sample (prompt + response) per micro-batch per GPU: with CP=N a micro-batch holds N
        # samples shared by the N ranks, so every GPU carries the same tokens at every CP
        "--max-tokens-per-gpu", str(seq_len + TRAIN_ONLY_PROMPT_LEN),
        "--debug-train-only",
        ROLLOUT_DATA_FLAG, f"{data}/rollout_{{rollout_id}}.pt",
        handoff, f"{data}/grad-norm-{revision}{{role}}-{{rollout_id}}-{{step_id}}.pt",
        SLIME_CP_FLAG, str(cp),
    )
    return Arm(_arm_name(cp, seq_len), cp, argv, profile.env, slime_dir, seq_len=seq_len, slime_ref=slime_ref)


def _probe_arm(profile: Profile, cp: int, seq_len: int, python: str) -> Arm:
    argv = (
        python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(profile.gpus),
        "-m", "cpverify.probe.workload",
        PROBE_CP_FLAG, str(cp), "--seq-len", str(seq_len),
        "--steps", str(profile.steps), "--warmup", str(profile.warmup_steps),
        *profile.probe_args,
    )
    return Arm(_arm_name(cp, seq_len), cp, argv, profile.env, ".", seq_len=seq_len)


def _size(seq_len: int) -> str:
    return f"{seq_len // 1024}k" if seq_len % 1024 == 0 else str(seq_len)


def _arm_name(cp: int, seq_len: int) -> str:
    return f"cp{cp}-s{_size(seq_len)}"


# --- arm comparison ----------------------------------------------------------------------


def _options(argv: tuple[str, ...]) -> tuple[list[str], dict[str, list[str]]]:
    """(leading words, {--flag: values}) with `--flag=value` split; repeated flags keep every value."""
    lead: list[str] = []
    options: dict[str, list[str]] = {}
    current: str | None = None
    for token in argv:
        if token.startswith("--") and len(token) > 2:
            flag, eq, value = token.partition("=")
            current = flag
            options.setdefault(flag, [])
            if eq:
                options[flag].append(value)
        elif current is None:
            lead.append(token)
        else:
            options[current].append(token)
    return lead, options


def arm_diff(a: Arm, b: Arm) -> list[str]:
    """Printable differences between two arms: argv flags, leading words, env, workdir."""
    diff = []
    lead_a, opts_a = _options(a.argv)
    lead_b, opts_b = _options(b.argv)
    if lead_a != lead_b:
        diff.append(f"command: {shlex.join(lead_a)} -> {shlex.join(lead_b)}")
    for flag in [*opts_a, *(f for f in opts_b if f not in opts_a)]:
        va, vb = opts_a.get(flag), opts_b.get(flag)
        if va != vb:
            diff.append(f"{flag}: {_show(va)} -> {_show(vb)}")
    env_a, env_b = a.env_dict, b.env_dict
    for key in [*env_a, *(k for k in env_b if k not in env_a)]:
        if env_a.get(key) != env_b.get(key):
            shown = (("<secret>", "<secret>") if _is_secret(key, env_a.get(key) or env_b.get(key) or "")
                     else (env_a.get(key, "(unset)"), env_b.get(key, "(unset)")))
            diff.append(f"env {key}: {shown[0]} -> {shown[1]}")
    if a.workdir != b.workdir:
        diff.append(f"workdir: {a.workdir} -> {b.workdir}")
    return diff


def grad_norm_handoff(a: Arm, b: Arm) -> set[str]:
    """The flags of slime's grad-norm check wired from baseline `a` to candidate `b`, if it is wired
    exactly so: `a` saves to one path and loads nothing, `b` loads that same path and saves nothing."""
    _, opts_a = _options(a.argv)
    _, opts_b = _options(b.argv)
    saved, loaded = opts_a.get(GRAD_NORM_SAVE), opts_b.get(GRAD_NORM_LOAD)
    if saved and len(saved) == 1 and saved == loaded and GRAD_NORM_LOAD not in opts_a and GRAD_NORM_SAVE not in opts_b:
        return {GRAD_NORM_SAVE, GRAD_NORM_LOAD}
    return set()


def check_pair(a: Arm, b: Arm, *, allowed: set[str]) -> list[str]:
    """The diff of a compared pair; raises InputError unless it is exactly a change of CP (plus,
    for train-only arms, the grad-norm handoff from a to b)."""
    diff = arm_diff(a, b)
    changed = {line.split(":", 1)[0] for line in diff}
    handoff = grad_norm_handoff(a, b)
    wired = {GRAD_NORM_SAVE, GRAD_NORM_LOAD} & {*_options(a.argv)[1], *_options(b.argv)[1]}
    if wired and not handoff:  # both save, the baseline loads, one side only: no check, or a check of nothing
        raise InputError(f"arms {a.name} and {b.name} wire slime's grad-norm check wrongly ({', '.join(sorted(wired))})",
                         f"the baseline saves ({GRAD_NORM_SAVE} P) and the candidate loads the same P "
                         f"({GRAD_NORM_LOAD} P), as the train-only profile wires it; or neither uses them")
    permitted = allowed | handoff
    extra = [line for line in diff if line.split(":", 1)[0] not in permitted]
    if extra or not changed & allowed:
        problem = (
            f"arms {a.name} and {b.name} differ in more than the CP size: " + "; ".join(extra)
            if extra else f"arms {a.name} and {b.name} do not differ in the CP size ({', '.join(sorted(allowed))})"
        )
        raise InputError(problem, "a CP comparison must change only the CP flag; fix the profile overrides")
    return diff


def _show(values: list[str] | None) -> str:
    if values is None:
        return "(absent)"
    return shlex.join(values) if values else "(set)"


# --- secrets -----------------------------------------------------------------------------


def _is_secret(name: str, value: str) -> bool:
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


def _mask_arg(argv: tuple[str, ...], i: int, *, shell: bool = False) -> str:
    """argv[i] for printing: a secret value becomes ${NAME} (double-quoted when `shell`)."""
    token, prev = argv[i], (argv[i - 1] if i else "")
    flag, eq, value = token.partition("=")
    if token.startswith("--") and eq and _is_secret(flag, value):
        ref = f"${{{_ref_name(flag)}}}"
        return f'{shlex.quote(flag + "=")}"{ref}"' if shell else f"{flag}={ref}"
    after_secret_flag = (prev.startswith("--") and "=" not in prev and is_secret_name(prev)
                         and not token.startswith("--"))
    if after_secret_flag or contains_secret(token):
        ref = f"${{{_ref_name(prev) if after_secret_flag else 'CPVERIFY_SECRET'}}}"
        return f'"{ref}"' if shell else ref
    return shlex.quote(token) if shell else token


def _secret_refs(arm: Arm) -> set[str]:
    """Names of the variables commands.sh needs the user to export."""
    refs = {key for key, value in arm.env if _is_secret(key, value)}
    for i, token in enumerate(arm.argv):
        masked = _mask_arg(arm.argv, i)
        if masked != token:
            refs.update(re.findall(r"\$\{(\w+)\}", masked))
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


# --- CLI ---------------------------------------------------------------------------------


def parse_gpus(text: str) -> tuple[int, ...]:
    """`0,1` -> (0, 1); `2` -> (0, 1) (a count, at most MAX_GPUS)."""
    try:
        if "," not in text:
            count = int(text)
            if count > MAX_GPUS:
                raise InputError(f"--gpus {text} is more GPUs than one node has (at most {MAX_GPUS}): both arms run "
                                 "on one node", "pass the count or the indices `nvidia-smi -L` lists, e.g. --gpus 2")
            return tuple(range(count))
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise InputError(f"--gpus {text!r} is neither a count nor a list of indices", "write --gpus 2 or --gpus 0,1") from None
