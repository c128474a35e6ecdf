"""The checks of a slime command line, and the lint's entry points: `lint_argv` (one command line)
and `lint_plan` (every arm of a plan)."""

from __future__ import annotations

import math
import re
import shlex
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cpverify.lint.findings import ERROR, WARNING, Finding
from cpverify.lint.flags import (
    DASHED,
    PASS_THROUGH_PREFIXES,
    closest_flag,
    flag_specs,
    known_flags,
    misdashed,
    unlisted_pass_through,
)
from cpverify.lint.shell import ParsedCommand, parse_command

if TYPE_CHECKING:
    from cpverify.model import Arm
    from cpverify.plan import Plan

SLIME_DEFAULT_GPUS_PER_NODE = 8
SLIME_DEFAULT_SEQ_LENGTH = 4096
DEFAULT_ROLLOUT_FUNCTION = "slime.rollout.sglang_rollout.generate_rollout"
DSA_MODEL_HINTS = ("deepseek-v3.2", "deepseek_v32", "glm-5", "glm5")  # --allgather-cp is allowed for these


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
_REMOVED = {  # flag -> (severity, why, fix); {tp} in a fix: the SGLang engine's TP (--rollout-num-gpus-per-engine)
    "--megatron-to-hf-mode": (
        WARNING,
        "removed from slime; it is now silently ignored",
        "delete it: slime loads the HF directory given to --hf-checkpoint / --ref-load directly",
    ),
}
# SGLang's deprecated arguments (its server-arguments docs) are gone from SGLang 0.5.15.post1: slime's
# SGLang parser drops them silently, and what they switched on stays off.
_SGLANG_REMOVED = {
    "--sglang-enable-ep-moe": ("expert parallelism (SGLang: `set --ep-size to the same value as --tp-size`; "
                               "slime gives each engine --rollout-num-gpus-per-engine GPUs as its TP)",
                               "--sglang-ep-size {tp}"),
    "--sglang-enable-deepep-moe": ("DeepEP all-to-all", "--sglang-moe-a2a-backend deepep"),
    "--sglang-enable-flashinfer-cutlass-moe": ("the FlashInfer CUTLASS MoE kernels",
                                               "--sglang-moe-runner-backend flashinfer_cutlass"),
    "--sglang-enable-flashinfer-cutedsl-moe": ("the FlashInfer CuTe DSL MoE kernels",
                                               "--sglang-moe-runner-backend flashinfer_cutedsl"),
    "--sglang-enable-flashinfer-trtllm-moe": ("the FlashInfer TRT-LLM MoE kernels",
                                              "--sglang-moe-runner-backend flashinfer_trtllm"),
    "--sglang-enable-triton-kernel-moe": ("the Triton MoE kernels", "--sglang-moe-runner-backend triton_kernel"),
    "--sglang-enable-flashinfer-mxfp4-moe": ("the FlashInfer MXFP4 MoE kernels",
                                             "--sglang-moe-runner-backend flashinfer_mxfp4"),
}
_REMOVED.update({flag: (ERROR, f"removed from SGLang (deprecated, then dropped before 0.5.15.post1): slime's SGLang "
                              f"parser ignores it silently, so {what} stays off", fix)
                 for flag, (what, fix) in _SGLANG_REMOVED.items()})
_FUNCTION_PATH = re.compile(r"^--(custom-[a-z0-9-]+-path|[a-z0-9-]*function-path|rollout-sample-hook-path)$")


def meant(flag: str) -> str | None:
    """The known flag that `flag`, which slime's parsers do not read, stands for: an alias
    (--cp), a mis-dashed (—cp-size) or underscored (--context_parallel_size) spelling, a typo
    (--context-paralel-size); None for a flag they read, or one too far from any."""
    if flag in known_flags() or flag in _REMOVED:
        return None
    if flag in _ALIASES:
        return _ALIASES[flag]
    dashed = misdashed(flag) or flag
    for candidate in (dashed, dashed.replace("_", "-")):
        if candidate != flag and candidate in known_flags():
            return candidate
    return closest_flag(flag)


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
            dash_match = DASHED.fullmatch(flag)
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
            found.append(Finding(severity, flag, why, fix.format(tp=cmd.value("--rollout-num-gpus-per-engine") or "N")))
        elif flag in known or flag.startswith(unlisted_pass_through()):
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
            close = closest_flag(flag)
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

    given = {meant(flag) or flag for flag, _ in cmd.options}

    def need(flags: tuple[str, ...], why: str, fix: str) -> None:
        # a misspelling of the flag (--rollout-num, --rollout-batch-sise) is reported once, by _check_flags
        if not given.intersection(flags):
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
    # slime scores a sample with the rule-based reward only when its reward is still empty
    # (sglang_rollout.generate_and_rm): a custom generate function may have set it.
    if not (train_only or custom_rollout or cmd.has("--custom-generate-function-path")):
        need(("--rm-type", "--custom-rm-path"),
             "missing: rewards fail with `NotImplementedError: Rule-based RM type is not specified.`",
             "--rm-type <type> for labelled data (or an rm_type in every prompt's metadata), or --custom-rm-path "
             "module.function")
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
    """{"world", "tp", "pp", "cp", "dp", "ep", "etp"} as Megatron would compute them (dp 0 where TP x PP x
    CP does not divide the world); None when not computable."""
    nodes = cmd.number("--actor-num-nodes", 1)
    per_node = cmd.number("--actor-num-gpus-per-node", SLIME_DEFAULT_GPUS_PER_NODE)
    tp = cmd.number("--tensor-model-parallel-size", 1)
    pp = cmd.number("--pipeline-model-parallel-size", 1)
    cp = cmd.number("--context-parallel-size", 1)
    ep = cmd.number("--expert-model-parallel-size", 1)
    etp = cmd.number("--expert-tensor-parallel-size", tp)  # Megatron: None means the TP size
    sizes = (nodes, per_node, tp, pp, cp, ep, etp)
    if None in sizes or min(sizes) < 1:
        return None
    world = nodes * per_node
    dp = world // (tp * pp * cp) if world % (tp * pp * cp) == 0 else 0
    return {"world": world, "tp": tp, "pp": pp, "cp": cp, "dp": dp, "ep": ep, "etp": etp}


def _divisor_fix(world: int, product: int, flag: str, value: int) -> str:
    """The largest value of `flag` (now `value`, a factor of `product`) that makes the product divide `world`."""
    rest = product // value
    fits = [v for v in range(value, 0, -1) if world % (rest * v) == 0]
    return f"{flag} {fits[0]}" if fits else f"a {flag} whose product with the others divides {world}"


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
            f"a TP x PP x CP that divides {world}, e.g. {_divisor_fix(world, tp * pp * cp, '--context-parallel-size', cp)}",
        ))
    ep, etp = layout["ep"], layout["etp"]
    if world % (ep * etp * pp):
        etp_said = "--expert-tensor-parallel-size" if cmd.has("--expert-tensor-parallel-size") else "TP, its default"
        found.append(Finding(
            ERROR, "--expert-model-parallel-size",
            f"Megatron stops with `world_size ({world}) is not divisible by expert_tensor_model_pipeline_parallel "
            f"size ({ep * etp * pp})` (experts are laid out as EP {ep} x ETP {etp} ({etp_said}) x PP {pp} over the "
            f"{world} training GPUs)",
            f"{_divisor_fix(world, ep * etp * pp, '--expert-model-parallel-size', ep)}, or more training GPUs "
            f"(a multiple of {ep * etp * pp})",
        ))
    experts = cmd.number("--num-experts")
    if ep > 1 and experts is not None and experts % ep:
        found.append(Finding(
            ERROR, "--expert-model-parallel-size",
            f"Megatron asserts `Number of experts should be a multiple of expert model parallel_size.` "
            f"({experts} experts, EP {ep})",
            f"{_divisor_fix(experts, ep, '--expert-model-parallel-size', ep)}",
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


# --- values -----------------------------------------------------------------------------------

# Integer flags that count something there must be at least one of: parallel group sizes, batch
# sizes, GPUs, nodes, samples. Megatron divides the world by the group sizes (0: ZeroDivisionError),
# slime's scheduler the samples by the batch sizes; a negative size makes no layout at all.
_POSITIVE = re.compile(r"-(?:parallel|tp|dp|ep|pp|cp|dcp|attn-cp|moe-dp)-size$|-batch-size$"
                       r"|^--(?:actor|critic)-num-(?:nodes|gpus-per-node)$|^--rollout-num-gpus-per-engine$"
                       r"|^--n-samples-per(?:-eval)?-prompt$")
_CONVERT = {"int": int, "float": float}
_BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "0", "1"})


def _check_values(cmd: ParsedCommand) -> list[Finding]:
    """Values as slime's parsers read them: each through the type argparse converts it with (a word
    that is none stops train.py), sizes of at least one, and words no parser takes."""
    found: list[Finding] = []
    specs = flag_specs()
    for flag, values in cmd.options:
        spec = specs.get(flag)
        convert = _CONVERT.get(spec.kind) if spec else None
        if convert is None:
            continue
        for value in values:
            if "$" in value:
                continue  # a shell variable lint cannot expand
            try:
                number = convert(value)
            except ValueError:
                found.append(Finding(
                    ERROR, flag,
                    f"{value!r} is not {'an integer' if convert is int else 'a number'}: train.py stops at once with "
                    f"`error: argument {flag}: invalid {spec.kind} value: {value!r}`",  # type: ignore[union-attr]
                    f"{flag} <{'integer' if convert is int else 'number'}>"))
                continue
            if convert is int and number < 1 and _POSITIVE.search(flag):
                found.append(Finding(
                    ERROR, flag,
                    f"{flag} {value}: a size or count must be at least 1 (Megatron and slime divide by it: "
                    f"ZeroDivisionError for 0; a negative size makes no layout)",
                    f"{flag} 1 or more"))
    for word, after in cmd.stray:
        spec = specs.get(after)
        if after and spec is not None and spec.most == 0:
            taken = f"{after} is a switch and takes no value"
            fix = (f"drop `{word}`: {after} alone switches it on; leave {after} out to keep it off"
                   if word.lower() in _BOOLEAN_WORDS else f"drop `{word}`, or give it the flag it belongs to")
        elif after:
            taken = f"{after} takes {spec.most if spec else '?'} value{'s' if spec and spec.most != 1 else ''}"
            fix = f"drop `{word}`, or give it the flag it belongs to"
        else:
            taken, fix = "it comes before any flag", f"drop `{word}`, or give it the flag it belongs to"
        found.append(Finding(
            ERROR, word,
            f"a word no parser takes ({taken}): slime's parsers leave it over and drop it silently, so what it "
            f"says does not happen",
            fix))
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
        *_check_values(cmd),
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


def lint_plan(plan: Plan, *, gpus: int | None = None) -> list[Finding]:
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


def _check_probe_arm(arm: Arm, gpus: int) -> list[Finding]:
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
