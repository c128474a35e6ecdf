"""A profile and a few paths -> every arm's exact argv and environment, and the pairs to compare."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cpverify.argv import options
from cpverify.artifacts import check_run_id
from cpverify.errors import InputError
from cpverify.lengths import length_label
from cpverify.model import Arm
from cpverify.plan.flags import GRAD_NORM_LOAD, GRAD_NORM_SAVE, PROBE_CP_FLAG, ROLLOUT_DATA_FLAG, SLIME_CP_FLAG
from cpverify.plan.pairs import arm_diff, cp_only_diff
from cpverify.plan.render import arm_json, commands_sh
from cpverify.profiles import MAX_GPUS, Profile

DEFAULT_SLIME_DIR = "/root/slime"
DEFAULT_MODEL_DIR = "/root/models/Qwen2.5-0.5B-Instruct"
DEFAULT_WORK_DIR = "/artifacts"  # the run's writable work directory as the workload sees it (Docker)
TRAIN_ONLY_PROMPT_LEN = 64  # prompt tokens of every synthetic sample
ROLLOUT_SEED = 1234


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
            _, opts = options(arm.argv)
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
        """A bash script that reruns every arm as planned: `bash commands.sh [ARM ...]`."""
        return commands_sh(self)


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
    one_cp: bool = False,
) -> Plan:
    """All arms of `profile` and the pairs to compare; raises InputError if a pair differs in more than CP.
    `python` is the arms' interpreter: python3 as slime's image and GPU hosts name the one with torch;
    the local runner's choice (--python) where it runs the arms itself. `work_dir` is the run's
    writable directory as the workload sees it: train-only arms read their rollouts from it and hand
    the baseline's grad norms over through it. `one_cp`: a profile of one CP size is allowed (each
    revision of an A/B; the A/B compares them)."""
    check_run_id(run_id)  # it is written into commands.sh
    if not profile.candidate_cps and not one_cp:  # `one_cp`: an A/B of two revisions compares them at one CP
        raise InputError(f"profile {profile.name!r} has one CP size ({profile.cp_sizes[0]}): a CP verification "
                         "compares two", "give two or more (--cp 1,2), or compare two slime revisions at that CP "
                         "(--slime-dir-candidate DIR or --slime-ref-candidate REF): an A/B at one CP, for one GPU")
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
        comparisons = tuple((arm_name(profile.baseline_cp), arm_name(cp)) for cp in profile.candidate_cps)
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
            (arm_name(profile.baseline_cp, s), arm_name(cp, s)) for s in profile.seq_lens for cp in profile.candidate_cps
        )
    plan = Plan(run_id, profile, arms, comparisons, gpus, model_dir, data_path, slime_dir, work_dir)
    for baseline, candidate in comparisons:
        cp_only_diff(plan.arm(baseline), plan.arm(candidate), allowed=allowed)
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
    return Arm(arm_name(cp), cp, argv, profile.env, slime_dir, slime_ref=slime_ref)


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
    return Arm(arm_name(cp, seq_len), cp, argv, profile.env, slime_dir, seq_len=seq_len, slime_ref=slime_ref)


def _probe_arm(profile: Profile, cp: int, seq_len: int, python: str) -> Arm:
    argv = (
        python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(profile.gpus),
        "-m", "cpverify.probe.workload",
        PROBE_CP_FLAG, str(cp), "--seq-len", str(seq_len),
        "--steps", str(profile.steps), "--warmup", str(profile.warmup_steps),
        *profile.probe_args,
    )
    return Arm(arm_name(cp, seq_len), cp, argv, profile.env, ".", seq_len=seq_len)


def _size(seq_len: int) -> str:
    return length_label(seq_len).lower()


def arm_name(cp: int, seq_len: int | None = None, *, role: str | None = None) -> str:
    """An arm's name, made once here from what the arm is (model.Arm carries each part as data, and
    nothing reads them back from it): `cp2`; `cp2-s16k` for seq_len=16384 (a profile of sequence
    lengths); `base-cp2` and `cand-cp2` for the roles of an A/B of two slime revisions."""
    return (f"{role}-" if role else "") + f"cp{cp}" + (f"-s{_size(seq_len)}" if seq_len else "")


def parse_gpus(text: str) -> tuple[int, ...]:
    """`0,1` -> (0, 1); `2` -> (0, 1) (a count, at most MAX_GPUS)."""
    try:
        if "," not in text:
            count = int(text)
            if count > MAX_GPUS:
                raise InputError(f"--gpus {text} is more GPUs than one node has (at most {MAX_GPUS}): both arms run "
                                 "on one node", "pass the count or the indices `nvidia-smi -L` lists, e.g. --gpus 2")
            if count < 1:  # `--gpus 0` read as "GPU 0" is a count of none
                raise InputError(f"--gpus {text} is a count of GPUs and runs nothing (a single number is a count; "
                                 "indices take a comma)", "write --gpus 2 for two GPUs, or the indices: --gpus 0,1")
            return tuple(range(count))
        indices = tuple(int(part) for part in text.split(",") if part.strip())
        if any(index < 0 for index in indices):
            raise InputError(f"--gpus {text}: a GPU index is 0 or more", "pass the indices `nvidia-smi -L` lists, "
                             "e.g. --gpus 0,1")
        return indices
    except ValueError:
        raise InputError(f"--gpus {text!r} is neither a count nor a list of indices", "write --gpus 2 or --gpus 0,1") from None
