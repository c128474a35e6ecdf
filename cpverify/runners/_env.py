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
