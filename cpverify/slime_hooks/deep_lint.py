"""Deep lint, the workload side: slime's own `parse_args()` on each arm's arguments.

slime, SGLang and Megatron parse with `parse_known_args`, so only the parsers themselves know
which flags a given slime version consumes, and only slime's validation knows which
combinations it refuses. This module runs them where train.py will run -- inside the image for
the Docker runner, in the user's environment for local and Ray -- but never on a GPU:

    python3 -m cpverify.slime_hooks.deep_lint REQUEST.json       (cwd: the slime checkout)

REQUEST: {"arch": 9, "arms": [{"name": "cp1", "argv": [train.py's arguments], "env": {...}}]}.
`arch` answers Megatron's question about the GPU architecture (the major compute capability;
Megatron asserts CUDA_DEVICE_MAX_CONNECTIONS=1 for TP/CP > 1 before Blackwell), which a process
that sees no GPU cannot ask the device. For each arm one line is printed,

    cpverify-deep-lint {"name", "ok", "stage", "error", "unknown", "schedule", "needs"}

stage: where it failed -- "import" (slime cannot be imported here), "argparse", "validation",
"dp_schedule" (slime's own micro-batch scheduler on one rollout of worst-case lengths, what
RolloutManager runs after the GPUs are held and a rollout was generated) or "environment" (the
arguments need something this Python lacks). `unknown`: flags that no parser consumed, which
train.py would ignore silently. cpverify.lint.deep (the host side) turns the lines into findings.

Like every slime hook this imports only the standard library besides slime itself.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import traceback

MARKER = "cpverify-deep-lint "


@contextlib.contextmanager
def recorded_parsers():
    """Every argparse parser that parses sys.argv meanwhile, as [parser, leftovers] pairs.

    leftovers is None when the parser stopped with an error. Parsers given an explicit list
    are not slime's argument parsers (they parse something else) and are not recorded.
    """
    seen: list[list] = []
    original = argparse.ArgumentParser.parse_known_args

    def recording(self, args=None, namespace=None):
        entry = [self, None]
        if args is None:
            seen.append(entry)
        result = original(self, args, namespace)
        entry[1] = list(result[1])
        return result

    argparse.ArgumentParser.parse_known_args = recording
    try:
        yield seen
    finally:
        argparse.ArgumentParser.parse_known_args = original


def option_strings(seen) -> set[str]:
    """The long options the recorded parsers define: the flags this slime consumes."""
    return {option for parser, _ in seen for option in parser._option_string_actions if option.startswith("--")}


def unconsumed(seen, argv: list[str]) -> list[str] | None:
    """Flags of argv that every parser which finished left over; None when none finished."""
    leftovers = [{_flag(t) for t in left if t.startswith("--")} for _, left in seen if left is not None]
    if not leftovers:
        return None
    flags = dict.fromkeys(_flag(t) for t in argv if t.startswith("--") and len(t) > 2)
    return [flag for flag in flags if all(flag in left for left in leftovers)]


def _flag(token: str) -> str:
    return token.partition("=")[0]


def _answer_arch(arch: int | None) -> None:
    """Megatron asks torch for the GPU's major compute capability; here there is no GPU to ask."""
    if arch is None:
        return
    try:
        import megatron.training.arguments as megatron_arguments
    except ImportError:
        return
    if hasattr(megatron_arguments, "get_device_arch_version"):
        megatron_arguments.get_device_arch_version = lambda: arch


def lint_arm(parse_args, name: str, argv: list[str], env: dict[str, str]) -> dict:
    """slime's parse_args() on one arm, with the arm's environment; never raises."""
    result: dict = {"name": name, "ok": False, "stage": None, "error": None, "unknown": None, "schedule": None,
                    "needs": []}
    saved_env, saved_argv = dict(os.environ), sys.argv
    os.environ.update(env)
    sys.argv = ["train.py", *argv]
    stderr = io.StringIO()
    args = None
    try:
        with recorded_parsers() as seen, contextlib.redirect_stderr(stderr):
            try:
                args = parse_args()
            except SystemExit as exc:  # argparse printed `train.py: error: ...` and exited
                errors = [line for line in stderr.getvalue().splitlines() if ": error: " in line]
                result.update(stage="argparse", error=errors[-1] if errors else f"argparse exited with {exc.code}")
            except Exception as exc:  # noqa: BLE001  (slime's, Megatron's or SGLang's validation, whatever it raises)
                result.update(stage="validation", error=f"{type(exc).__name__}: {exc}",
                              where=traceback.format_exc().strip().splitlines()[-3:])
        result["unknown"] = unconsumed(seen, argv)
        if args is not None:
            _check_schedule(args, result)
            _check_environment(args, result)
            result["ok"] = result["stage"] is None
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv
    return result


def _check_schedule(args, result: dict) -> None:
    """slime's DP/micro-batch scheduler on one rollout of worst-case sample lengths."""
    try:
        from slime.utils.dp_schedule import build_dp_schedule
    except ImportError:  # an older slime without it: nothing to simulate
        return
    response = getattr(args, "rollout_max_response_len", None)
    if not response:
        return
    samples = args.rollout_batch_size * args.n_samples_per_prompt
    cp, tp, pp = args.context_parallel_size, args.tensor_model_parallel_size, args.pipeline_model_parallel_size
    dp = getattr(args, "data_parallel_size", None) or args.world_size // (tp * pp * cp)
    length = (getattr(args, "rollout_max_prompt_len", None) or 256) + response
    config = {"dp_size": dp, "cp_size": cp, "vpp_size": getattr(args, "virtual_pipeline_model_parallel_size", None) or 1,
              "microbatch_group_size_per_vp_stage": getattr(args, "microbatch_group_size_per_vp_stage", None) or 1}
    try:
        _, _, per_rank, _ = build_dp_schedule(args, config, [length] * samples, global_batch_size=args.global_batch_size,
                                              rollout_indices=list(range(samples)))
    except AssertionError as exc:
        result.update(stage="dp_schedule", error=f"AssertionError: {exc}")
        return
    except Exception:  # noqa: BLE001  (another slime version's signature: the schedule cannot be simulated here)
        return
    result["schedule"] = {"samples": samples, "dp": dp, "steps_per_rollout": len(per_rank),
                          "microbatches_per_rank": per_rank}


def _check_environment(args, result: dict) -> None:
    """What the arguments need from this Python that parse_args does not look for."""
    if getattr(args, "gradient_accumulation_fusion", False):
        try:
            import fused_weight_gradient_mlp_cuda  # noqa: F401  (apex's CUDA extension)
        except ImportError:
            result["needs"].append("fused_weight_gradient_mlp_cuda")
            if result["stage"] is None:
                result.update(stage="environment", error=(
                    "gradient accumulation fusion is on but apex's fused_weight_gradient_mlp_cuda is not importable "
                    "here: Megatron raises `ColumnParallelLinear was called with gradient_accumulation_fusion set to "
                    "True but the custom CUDA extension fused_weight_gradient_mlp_cuda module is not found` at "
                    "model build"))


def main(request_path: str) -> int:
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    arms = request["arms"]
    try:
        from slime.utils.arguments import parse_args

        _answer_arch(request.get("arch"))
    except BaseException as exc:  # noqa: BLE001  (anything slime's import chain raises)
        error = f"{type(exc).__name__}: {exc}"
        for arm in arms:
            _emit({"name": arm["name"], "ok": False, "stage": "import", "error": error, "unknown": None,
                   "schedule": None, "needs": []})
        return 0
    for arm in arms:
        _emit(lint_arm(parse_args, arm["name"], list(arm["argv"]), dict(arm.get("env", {}))))
    return 0


def _emit(result: dict) -> None:
    # slime, Megatron and SGLang print plenty to stdout: the marker keeps this line findable
    print(MARKER + json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python3 -m cpverify.slime_hooks.deep_lint REQUEST.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
