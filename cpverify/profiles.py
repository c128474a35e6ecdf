"""Named profiles: what one verification runs, as frozen dataclasses.

Like torchtitan's job config, every field maps one-to-one to a CLI override
(`--set pass_ratio=1.5`) and to a key of an override TOML file (cpverify.overrides), so a profile printed in
a verdict is the whole story of what ran. Four profiles ship:

  smoke       the seeds' 2-GPU Qwen2.5-0.5B run (CP=1 vs CP=2), corrected so it runs on slime HEAD;
  long        the same with responses forced to 8K tokens, where CP has something to split;
  train-only  slime's trainer alone on rollouts cpverify generates (no SGLang), at response
              lengths the user picks (`--seq-len`), with slime's own CP=1-vs-CP=N grad-norm check;
  probe       a torch-native ring-attention check (cpverify.probe.workload) that needs no slime.

Paths (model, prompts, slime checkout) and the CP size are not in `train_args`: the plan
fills them in per arm (cpverify.plan), so two arms cannot drift apart by accident.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cpverify import argv
from cpverify.errors import InputError
from cpverify.lengths import length_label
from cpverify.model import WORKLOADS, Limits, Workload
from cpverify.prompts import packaged_dataset_path

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Both arms run on one node (--actor-num-nodes 1, torchrun --standalone); no node has more GPUs.
MAX_GPUS = 64

# Flags the plan writes into each slime arm from its own inputs; a profile must not set them.
PLAN_OWNED_FLAGS = (
    "--context-parallel-size",
    "--actor-num-nodes",
    "--actor-num-gpus-per-node",
    "--hf-checkpoint",
    "--ref-load",
    "--prompt-data",
)
# ... and into each train-only arm: the response length from `seq_lens`, the rollouts cpverify
# writes, and the grad-norm handoff from the baseline arm to the others (cpverify.plan).
TRAIN_ONLY_OWNED_FLAGS = (
    "--rollout-max-response-len",
    "--max-tokens-per-gpu",
    "--debug-train-only",
    "--load-debug-rollout-data",
    "--ci-save-grad-norm",
    "--ci-load-grad-norm",
)

QWEN_REPO = "Qwen/Qwen2.5-0.5B-Instruct"
# Commit of `main` for Qwen/Qwen2.5-0.5B-Instruct: the snapshot directory name that many
# independent projects record (~/.cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B-Instruct/
# snapshots/7ae5576...). Pinned so CP=1 and CP=2 and a rerun next month load the same weights.
QWEN_REVISION = "7ae557604adf67be50417f59c2c2f167def9a775"

# slime's scripts/models/qwen2.5-0.5B.sh (MODEL_ARGS). Megatron cannot read the HF config
# itself; without these slime fails with "hf_validate_args failed: ...".
QWEN25_05B_MODEL_ARGS = (
    "--swiglu",
    "--num-layers", "24",
    "--hidden-size", "896",
    "--ffn-hidden-size", "4864",
    "--num-attention-heads", "14",
    "--use-rotary-position-embeddings",
    "--disable-bias-linear",
    "--add-qkv-bias",
    "--normalization", "RMSNorm",
    "--norm-epsilon", "1e-6",
    "--rotary-base", "1000000",
    "--group-query-attention",
    "--num-query-groups", "2",
    "--vocab-size", "151936",
)

REWARD_FN = "cpverify.slime_hooks.reward.length_reward"
LAYOUT_FN = "cpverify.slime_hooks.layout.log_layout"
FIXED_LENGTH_GENERATE_FN = "cpverify.slime_hooks.generate.generate_to_max_len"

# The seeds' run (seeds 000/001), corrected. Each change is commented where it is made.
SMOKE_TRAIN_ARGS = (
    "--train-backend", "megatron",
    # (--actor-num-nodes 1 --actor-num-gpus-per-node N come from the plan, from `gpus`.)
    "--colocate",
    "--input-key", "messages",
    "--apply-chat-template",
    "--rollout-shuffle",
    # The seed's `--rollout-num 8` does not exist. Megatron's parser (slime's flags included,
    # abbreviations off) drops it with parse_known_args, so num_rollout stays unset and slime stops
    # with "num_epoch is not set, but num_rollout is not set"; SGLang's parser (abbreviations on)
    # meanwhile reads it as --rollout-num-gpus-per-engine 8.
    # 16 rollouts: rollout 0, sometimes 1, is warm-up in real slime (found in each round's data), and
    # 7 counted steps were not enough for a decisive verdict in every real run; 14 are.
    "--num-rollout", "16",
    "--rollout-batch-size", "2",
    # The seed's `--n-samples-per-prompt 1` gives 2 samples per rollout for a global batch of 8:
    # dp_schedule asserts "num_rollouts (2) < global_batch_size (8)". 2 x 4 = 8: one step per rollout.
    "--n-samples-per-prompt", "4",
    "--rollout-max-response-len", "1024",
    "--global-batch-size", "8",
    "--advantage-estimator", "gspo",
    "--use-kl-loss",
    "--kl-loss-coef", "0.0",
    "--kl-loss-type", "low_var_kl",
    "--entropy-coef", "0.0",
    "--optimizer", "adam",
    "--lr", "1e-6",
    "--lr-decay-style", "constant",
    "--weight-decay", "0.1",
    "--adam-beta1", "0.9",
    "--adam-beta2", "0.98",
    # The seed's `--sequence-parallel` is dropped: with TP=1 Megatron switches it off with a
    # warning ("Disabling sequence parallelism because tensor model parallelism is disabled"),
    # so keeping it only suggests a layout that never ran.
    "--tensor-model-parallel-size", "1",
    "--pipeline-model-parallel-size", "1",
    "--use-dynamic-batch-size",
    "--max-tokens-per-gpu", "2048",
    "--rollout-num-gpus-per-engine", "1",
    # As slime's own 0.5B tests set it (tests/test_qwen2.5_0.5B_short.py): colocated, SGLang's
    # KV cache must leave room for Megatron's weights and optimizer state on the same GPU.
    "--sglang-mem-fraction-static", "0.7",
    # The seed sets no reward: slime stops with "Rule-based RM type is not specified". The
    # prompts have no labels, so a deterministic, label-free, network-free reward is used
    # (not `--rm-type random`, which is unseeded and makes the two arms train differently).
    "--custom-rm-path", REWARD_FN,
    # slime's logs never state the effective CP size; this hook prints it from every rank
    # (`cpverify-layout rank=... cp=... dp=...`) so a silently ignored CP flag is caught.
    "--custom-megatron-init-path", LAYOUT_FN,
    # Megatron defaults both to 0.1: random masks make CP=1 and CP=2 numerics incomparable.
    "--attention-dropout", "0.0",
    "--hidden-dropout", "0.0",
    # Megatron fuses the weight-gradient accumulation with apex's fused_weight_gradient_mlp_cuda
    # and raises in ColumnParallelLinear where apex is absent (any slime environment but slime's
    # image). Both arms pay the same small cost, so the CP ratio is unaffected.
    "--no-gradient-accumulation-fusion",
    # --ci-test asserts in-process, every step: train/train_rollout_logprob_abs_diff <= 0.1
    # (Megatron's recomputed log-probs agree with SGLang's) and -1 < rollout/log_probs < 0.
    # --ci-disable-kl-checker (kept from the seed) turns off the exact-equality checks at the
    # first step -- ppo_kl < 1e-8, kl_loss < 1e-8, |log_probs - ref_log_probs| < 1e-8 at
    # rollout 0 -- which slime's CI runs on deterministic setups; this run is not one.
    "--ci-test",
    "--ci-disable-kl-checker",
)

# Real slime's warm-up varies by host and run: on 2x H200 (slime 624b824a, 24-rollout train-only runs)
# actor_train took 2.6-7.0 s at rollout 0 and 0.8-2.8 s at rollout 1 against a steady ~0.34 s, and on
# one H200 rollout 1 was already steady. So each round's warm-up is found in its own data
# (cpverify.verdict.rounds.warmup_end); `--set warmup_steps=N` fixes a count instead.
SLIME_WARMUP = None

SLIME_ENV = (
    # Megatron asserts this for TP>1 or CP>1 on Hopper and older: without it CP=1 runs and
    # CP=2 dies, which would look like a CP bug.
    ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
    # slime's CI helper turns NVLink SHARP multicast on where NVLink exists; set it off
    # explicitly so the result does not depend on which launcher ran before.
    ("NCCL_NVLS_ENABLE", "0"),
    # INFO prints the NCCL version and the per-channel transport (P2P/CUMEM vs NET/Socket)
    # that the verdict reports; the volume is a few hundred lines per process group.
    ("NCCL_DEBUG", "INFO"),
    # Ray folds identical lines of different ranks into "[repeated Nx across cluster]",
    # which would hide per-rank layout lines and per-rank errors.
    ("RAY_DEDUP_LOGS", "0"),
    ("RAY_USE_UVLOOP", "0"),  # as slime's own launcher sets it
    ("PYTHONUNBUFFERED", "1"),  # lines reach the log as they happen, not at exit
    ("PYTHONPATH", "/root/Megatron-LM"),
)


def _derived(args: tuple[str, ...], *, replace: dict[str, str] | None = None, drop=frozenset(),
             add: tuple[str, ...] = ()) -> tuple[str, ...]:
    """`args` with some flags' values replaced and some flags dropped (with their values), then `add`."""
    replace = replace or {}
    lead, groups = argv.groups(args)
    out = list(lead)
    for flag, values in groups:
        if flag in drop:
            continue
        out += [flag, *([replace[flag], *values[1:]] if flag in replace and values else values)]
    return (*out, *add)


def _long_train_args() -> tuple[str, ...]:
    """smoke's flags with 8K responses and a micro-batch budget that holds one of them."""
    # 9216 tokens per GPU holds one 8192-token response plus its prompt per micro-batch, as in
    # slime's own tests/test_qwen2.5_0.5B_short.py; with CP=2 a micro-batch holds 2 x 9216
    # tokens shared by the two CP ranks, so the per-GPU load matches CP=1/DP=2.
    replaced = {"--rollout-max-response-len": "8192", "--max-tokens-per-gpu": "9216"}
    # --ci-test checks -1 < mean rollout log-prob < 0. Text forced past EOS has a high-entropy
    # tail whose mean log-prob can fall below -1: a failure that says nothing about CP.
    # (train/train_rollout_logprob_abs_diff is still logged, and the verdict can read it.)
    dropped = {"--ci-test", "--ci-disable-kl-checker"}
    # A 0.5B instruct model stops after a few hundred tokens; this generate hook sets SGLang's
    # ignore_eos so every response runs to --rollout-max-response-len and the CP load is known.
    return _derived(SMOKE_TRAIN_ARGS, replace=replaced, drop=dropped,
                    add=("--custom-generate-function-path", FIXED_LENGTH_GENERATE_FN))


def _train_only_args() -> tuple[str, ...]:
    """smoke's model and training flags without what only rollout uses (the device kit's proven run)."""
    dropped = {
        # rollout: SGLang, the prompts, the reward. The rollouts cpverify writes carry their
        # tokens and rewards, and --load-debug-rollout-data starts no SGLang engine.
        "--input-key", "--apply-chat-template", "--rollout-shuffle", "--rollout-num-gpus-per-engine",
        "--sglang-mem-fraction-static", "--custom-rm-path",
        # colocation only makes room for SGLang; without it nothing is offloaded between rollouts
        "--colocate",
        # --ci-test compares Megatron's log-probs with the rollout's (synthetic rollouts have none)
        # and wants -1 < mean log-prob < 0; slime's grad-norm check (wired by the plan) is the
        # numerics gate of this profile instead
        "--ci-test", "--ci-disable-kl-checker",
        # set per arm by the plan from the response length (`seq_lens`)
        "--rollout-max-response-len", "--max-tokens-per-gpu",
    }
    # 24 rollouts: the first two are warm-up in real slime; with 22 counted steps the interval of a
    # ~1.25x ratio was about +-10% in real 24-rollout runs on 2x H200 (8 rollouts: +-25%).
    replaced = {"--num-rollout": "24"}
    # cuDNN attention through TransformerEngine (which slime's CP needs anyway: it packs sequences),
    # so no flash-attn wheel is needed (none exists for every torch).
    return _derived(SMOKE_TRAIN_ARGS, replace=replaced, drop=dropped, add=("--attention-backend", "fused"))


LONG_TRAIN_ARGS = _long_train_args()
TRAIN_ONLY_TRAIN_ARGS = _train_only_args()

PROBE_ENV = (
    # NVLink multicast off: on shared hosts a crash inside it can take the GPUs out of service
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
    ("NVSHMEM_DISABLE_NVLS", "1"),
    # version and per-channel transport lines for the verdict, without the full INFO flood
    ("NCCL_DEBUG", "INFO"),
    ("NCCL_DEBUG_SUBSYS", "INIT,P2P,NET"),
    ("PYTHONUNBUFFERED", "1"),
)


@dataclass(frozen=True)
class Profile:
    """One verification. Every field can be overridden by name (CLI `--set k=v` or TOML)."""

    name: str
    kind: Workload
    about: str  # what the profile is for, in words; its numbers are `description`'s, read from the fields
    model_repo: str = QWEN_REPO
    model_revision: str = QWEN_REVISION
    model_args: tuple[str, ...] = QWEN25_05B_MODEL_ARGS
    dataset: str = "cp_smoke.jsonl"  # a file shipped in cpverify/data, or a path
    gpus: int = 2
    cp_sizes: tuple[int, ...] = (1, 2)
    baseline_cp: int = 1
    # leading steps (rollouts) left out of the statistics; None: found in each round's data (slime)
    warmup_steps: int | None = 1
    metric: str = "perf/actor_train_time"
    pass_ratio: float = 1.3  # PASS when candidate/baseline of `metric` (median and mean alike) stays below this
    # fewer steps in a round after its warm-up -> INCONCLUSIVE; at least what an interval at `confidence`
    # needs (6 at 95%: cpverify.verdict.stats.min_sample), checked when a run starts
    min_counted_steps: int = 6
    confidence: float = 0.95  # level of the ratio's interval
    deterministic: bool = False  # the arms run deterministically: first-step numerics gate the verdict
    deadline_s: float = 3600.0
    hang_s: float = 600.0  # no new log line for this long -> hang (NCCL's watchdog is 10 min)
    stall_s: float = 1200.0  # lines but no training step for this long -> stalled
    train_args: tuple[str, ...] = ()  # slime only; MODEL_ARGS, paths, GPUs and CP are added by the plan
    env: tuple[tuple[str, str], ...] = ()
    # probe and train-only: one arm per (cp, length) -- the probe's sequence length, train-only's
    # response length (every synthetic response has exactly this many tokens)
    seq_lens: tuple[int, ...] = ()
    train_only: bool = False  # slime only: train on rollouts cpverify writes (cpverify.plan), no SGLang
    steps: int = 0  # probe only: timed steps per arm
    probe_args: tuple[str, ...] = ()  # probe only: extra workload flags for every arm (e.g. --bypass-cp, --gqa repeat)

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise InputError(
                f"profile {self.name!r} is not valid: " + "; ".join(problems),
                "fix the override (see `cpverify plan --profile NAME` for the fields and their values)",
            )

    @property
    def description(self) -> str:
        """What the profile runs: its numbers read from the fields the plan is built from (so a
        --set that changes the plan changes them too), then `about`."""
        cps = " then ".join(f"CP={cp}" for cp in self.cp_sizes) if len(self.cp_sizes) == 2 else \
            "CP=" + ", ".join(map(str, self.cp_sizes))
        where = f"{cps} on the same {self.gpus} GPUs"
        if self.kind == "probe":
            return (f"{where}; sequences of {_tokens(self.seq_lens)} tokens, {self.warmup_steps} warm-up and "
                    f"{self.steps} timed steps per arm. {self.about}")
        shape = self.shape()
        rollouts = f"{shape['rollouts']} rollouts" if shape["rollouts"] is not None else "slime's default rollouts"
        batch = f" of {shape['prompts']} prompts x {shape['samples']} samples" if shape["prompts"] else ""
        length = f"responses {'of exactly' if shape['exact'] else 'up to'} {_tokens(shape['response_tokens'])} tokens"
        warmup = ("the warm-up found in each round" if self.warmup_steps is None
                  else f"the first {self.warmup_steps} warm-up")
        return f"{self.model_repo}, {rollouts}{batch} ({warmup}), {length}; {where}. {self.about}"

    def shape(self) -> dict[str, Any]:
        """A slime profile's run as its train args and fields say it: rollouts, prompts per rollout,
        samples per prompt, response length (tokens), and whether every response has exactly that length."""
        def number(flag: str) -> int | None:
            value = argv.value(self.train_args, flag)
            return int(value) if value is not None and value.isdigit() else None

        exact = self.train_only or FIXED_LENGTH_GENERATE_FN in self.train_args
        lengths = self.seq_lens if self.train_only else (number("--rollout-max-response-len"),)
        return {"rollouts": self.planned_rollouts, "prompts": number("--rollout-batch-size"),
                "samples": number("--n-samples-per-prompt"), "response_tokens": lengths, "exact": exact}

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def candidate_cps(self) -> tuple[int, ...]:
        return tuple(cp for cp in self.cp_sizes if cp != self.baseline_cp)

    def dataset_path(self) -> Path:
        """The prompt file: a bare name is looked up among the files shipped with cpverify."""
        path = Path(self.dataset)
        if path.is_absolute() or path.parent != Path("."):
            return path
        return packaged_dataset_path(self.dataset)

    @property
    def planned_rollouts(self) -> int | None:
        """Rollouts every arm is started with (ids 0..n-1): slime's --num-rollout, or the probe's
        warm-up plus measured steps; None when the train args do not say (slime then counts epochs)."""
        if self.kind == "probe":
            return (self.warmup_steps or 0) + self.steps
        count = argv.value(self.train_args, "--num-rollout")
        try:
            return int(count) if count is not None else None
        except ValueError:  # "$N": not a literal number
            return None

    def limits(self) -> Limits:
        """The runner limits of this profile."""
        return Limits(deadline_s=self.deadline_s, hang_s=self.hang_s, stall_s=self.stall_s)


def _problems(p: Profile) -> list[str]:
    problems = []
    if p.kind not in WORKLOADS:
        problems.append(f"kind must be one of {', '.join(WORKLOADS)}, not {p.kind!r}")
    if not 1 <= p.gpus <= MAX_GPUS:
        problems.append(f"gpus must be 1 to {MAX_GPUS} (the GPUs of one node), not {p.gpus}")
    if not p.cp_sizes or any(not isinstance(cp, int) or cp < 1 for cp in p.cp_sizes):
        problems.append(f"cp_sizes must be positive integers, not {p.cp_sizes!r}")
    elif len(set(p.cp_sizes)) != len(p.cp_sizes):
        problems.append(f"cp_sizes repeats a size: {p.cp_sizes!r}")
    elif p.baseline_cp not in p.cp_sizes:
        problems.append(f"baseline_cp {p.baseline_cp} is not one of cp_sizes {p.cp_sizes!r}")
    elif p.baseline_cp != min(p.cp_sizes):
        # The verdict asks what a larger CP costs against the smaller one (cpverify.verdict.decide).
        problems.append(f"baseline_cp {p.baseline_cp} must be the smallest of cp_sizes {p.cp_sizes!r}: every "
                        f"larger CP is measured against it (leave baseline_cp={min(p.cp_sizes)})")
    else:  # one CP size is a plan only for an A/B of two revisions (cpverify.plan.build_plan says so)
        too_big = [cp for cp in p.cp_sizes if cp > p.gpus or p.gpus % cp]
        if too_big:
            problems.append(f"cp sizes {too_big} do not divide gpus={p.gpus} (CP ranks come out of the GPUs)")
    if p.kind == "probe" and p.warmup_steps is None:
        problems.append("a probe profile runs warmup_steps unmeasured steps: give it a number")
    if (p.warmup_steps is not None and p.warmup_steps < 0) or p.min_counted_steps < 1:
        problems.append("warmup_steps must be >= 0 and min_counted_steps >= 1")
    if not 0 < p.pass_ratio < math.inf:  # NaN fails both; an infinite ratio would pass every ratio
        problems.append(f"pass_ratio must be a finite number > 0 (e.g. 1.3), not {p.pass_ratio}")
    if not 0 < p.confidence < 1:
        problems.append(f"confidence must be between 0 and 1, not {p.confidence}")
    if min(p.deadline_s, p.hang_s, p.stall_s) <= 0:
        problems.append("deadline_s, hang_s and stall_s must be positive")
    # An env name becomes `export NAME=...` in commands.sh and a key of the workload's environment.
    bad_names = [name for name, _ in p.env if not ENV_NAME.fullmatch(name)]
    if bad_names:
        problems.append(f"env names {bad_names} are not variable names ([A-Za-z_][A-Za-z0-9_]*)")
    words = [*p.train_args, *p.model_args, *p.probe_args, *(word for pair in p.env for word in pair)]
    if any("\0" in word for word in words):
        problems.append("an argument or env value holds a NUL character, which no command line can carry")
    if p.kind == "slime":
        owned_flags = PLAN_OWNED_FLAGS + (TRAIN_ONLY_OWNED_FLAGS if p.train_only else ())
        owned = [a for a in p.train_args if a.split("=")[0] in owned_flags]
        if owned:
            problems.append(f"train_args must not set {', '.join(owned)}: the plan sets them (paths, GPUs, CP, "
                            "and for train-only the response length and rollouts, per arm)")
        if p.train_only and (not p.seq_lens or any(s < 1 for s in p.seq_lens)):
            problems.append("a train-only profile needs positive seq_lens (the response lengths)")
        if not p.train_only and p.seq_lens:
            problems.append("seq_lens applies to the probe and train-only profiles; a slime profile's response "
                            "length is --rollout-max-response-len in train_args")
    elif p.train_only:
        problems.append("train_only applies to slime profiles only")
    if p.kind == "probe":
        if not p.seq_lens or any(s < 1 for s in p.seq_lens):
            problems.append("a probe profile needs positive seq_lens")
        # the workload runs `warmup_steps` unmeasured steps, then prints `steps` measured ones
        # numbered from warmup_steps on, so the verdict's "rollout >= warmup" keeps all of them
        if p.steps < p.min_counted_steps:
            problems.append(f"steps ({p.steps}) must be at least min_counted_steps ({p.min_counted_steps})")
    return problems


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="smoke",
            kind="slime",
            about=(
                "The seeds' run, corrected: GSPO with SGLang rollouts colocated. Short sequences: it shows that "
                "CP works, and what CP costs where it cannot help."
            ),
            train_args=SMOKE_TRAIN_ARGS,
            env=SLIME_ENV,
            warmup_steps=SLIME_WARMUP,
        ),
        Profile(
            name="long",
            kind="slime",
            about=(
                "smoke with every response forced to its full length (EOS ignored), so CP has attention work "
                "to split."
            ),
            train_args=LONG_TRAIN_ARGS,
            env=SLIME_ENV,
            warmup_steps=SLIME_WARMUP,
            deadline_s=7200.0,
        ),
        Profile(
            name="train-only",
            kind="slime",
            about=(
                "slime's trainer alone, no SGLang: smoke's model and training flags on rollouts that cpverify "
                "writes with slime's own Sample class (seeded, identical for every arm; --seq-len sets the "
                "response length). The CP=1 arm saves its grad norms and slime asserts the other arms' match "
                "within 1% at every step. The fastest answer to 'does CP work, and what does it cost in "
                "training', free of rollout noise."
            ),
            train_args=TRAIN_ONLY_TRAIN_ARGS,
            env=SLIME_ENV,
            warmup_steps=SLIME_WARMUP,
            train_only=True,
            seq_lens=(1024,),
        ),
        Profile(
            name="probe",
            kind="probe",
            about=(
                "torch-native ring attention (no slime): causal SDPA per sequence length, checked against a "
                "single-GPU reference."
            ),
            # the first steps carry NCCL communicator setup and kernel autotuning
            warmup_steps=3,
            min_counted_steps=10,
            seq_lens=(16384, 65536),
            steps=20,
            env=PROBE_ENV,
            deadline_s=900.0,
            hang_s=300.0,
            stall_s=300.0,
        ),
    )
}


def _tokens(lengths) -> str:
    """(1024, 8192) -> '1K, 8K': lengths as the CLI's --seq-len takes them."""
    return ", ".join("?" if n is None else length_label(n) for n in lengths)


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise InputError(
            f"unknown profile {name!r}",
            f"use one of: {', '.join(PROFILES)}",
        ) from None
