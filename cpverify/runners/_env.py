"""The environment a workload gets: never a credential.

Tokens are for cpverify's own downloads (fetch), not for the training run: slime, Ray
and SGLang print their environment and arguments in tracebacks and runtime-env dumps,
and those logs end up pasted into public issues. So every variable whose name looks
secret (HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY, ...) is dropped, whether it
comes from the caller's environment or from the plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cpverify.redact import is_secret_name


def workload_env(arm_env: Mapping[str, str] | Iterable[tuple[str, str]], base: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """(`base` + `arm_env` without secret-named variables, the names dropped)."""
    # plan.Arm keeps env as a tuple of pairs (hashable, ordered); a plain mapping works too
    merged = {**(base or {}), **{str(k): str(v) for k, v in dict(arm_env).items()}}
    dropped = sorted(name for name in merged if is_secret_name(name))
    return {k: v for k, v in merged.items() if k not in dropped}, dropped


def secret_values(arm_env: Mapping[str, str] | Iterable[tuple[str, str]], argv: Iterable[str] = (),
                  base: Mapping[str, str] | None = None) -> list[str]:
    """Values a log must never show: of secret-named variables (dropped above, but a workload may
    find them elsewhere) and of secret-named flags in argv (`--wandb-key V`, `--hf-token=V`), which
    the workload needs and Megatron prints in its argument listing."""
    merged = {**(base or {}), **{str(k): str(v) for k, v in dict(arm_env).items()}}
    values = [value for name, value in merged.items() if is_secret_name(name)]
    words = [str(a) for a in argv]
    for flag, following in zip(words, [*words[1:], ""]):
        name, eq, value = flag.partition("=")
        if not flag.startswith("--") or not is_secret_name(name):
            continue
        if eq:
            values.append(value)
        elif following and not following.startswith("--"):
            values.append(following)
    return [v for v in values if v]
