"""The environment a workload gets: an allow-list, never this machine's credentials.

A workload's environment is
  * the plan's env, whole: the profile's variables and what the user set on purpose (`--set
    env=...`, `--config` [env]). A secret the user passes there is one the workload needs; it
    reaches the workload, and its value is scrubbed from the log (`secret_values`) and masked in
    every artifact;
  * on top of the image (Docker) or the cluster (Ray), nothing else of this machine;
  * with the local runner, which has no image, the part of this machine's environment that the
    stack needs to start (INHERITED_NAMES, INHERITED_PREFIXES): the interpreter and its
    libraries, the locale and temporary directories, and the settings slime, Megatron,
    torch, NCCL, CUDA, Ray, SGLang and Triton read. Even from those, a variable goes when its
    name or its value looks secret (RAY_JOB_HEADERS, RAY_ADDRESS with a password, ...).

Never inherited: the fetch step's HF_TOKEN and HF_ENDPOINT (the model is fetched and verified
before any arm; the workload reads it from disk), proxies (a training run has no business on
the network; a proxy URL often carries a password), cloud and CI credentials, everything else.
slime, Ray and SGLang print their environment and arguments in tracebacks and runtime-env dumps,
and those logs end up pasted into public issues.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from cpverify.redact import (
    contains_secret,
    is_secret_name,
    literal_secret,
    secret_arguments,
    secret_fragments,
)

# Names a local workload inherits from this machine, and why.
INHERITED_NAMES = frozenset({
    # the shell basics every program expects
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "LANG", "LANGUAGE", "TMPDIR", "TMP", "TEMP",
    # the interpreter and its libraries: a venv or conda env holding torch, slime, Megatron
    "PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PYTHONIOENCODING",
    "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "LD_LIBRARY_PATH", "LD_PRELOAD", "LIBRARY_PATH", "CPATH",
    # CPU threading of torch and the data loaders
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    # caches on this machine (compiled kernels; the model files are read from the plan's path)
    "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_CACHE", "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_CACHE", "TRANSFORMERS_OFFLINE",
})
INHERITED_PREFIXES = (
    "LC_",  # locale
    "CUDA_", "NVIDIA_", "CUBLAS_", "CUDNN_", "NCCL_", "NVSHMEM_", "UCX_", "GLOO_",  # GPUs and collectives
    "TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "TRITON_", "NVTE_", "MEGATRON_",  # torch, Transformer Engine, Megatron
    "RAY_", "SGLANG_", "WANDB_",  # slime's Ray cluster, its rollout engine, its optional W&B logging
)


def _inherited(name: str, value: str) -> bool:
    return ((name in INHERITED_NAMES or name.startswith(INHERITED_PREFIXES))
            and not is_secret_name(name) and not contains_secret(value))


def _pairs(env: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    # plan.Arm keeps env as a tuple of pairs (hashable, ordered); a plain mapping works too
    return {str(k): str(v) for k, v in dict(env).items()}


# Search paths a plan may extend but must not replace: a profile's PYTHONPATH=/root/Megatron-LM is
# where slime's image keeps Megatron; a local slime environment has its own path list, which must
# come first (its Megatron, its packages, cpverify itself).
PATH_LISTS = ("PYTHONPATH",)


def workload_env(arm_env: Mapping[str, str] | Iterable[tuple[str, str]],
                 base: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """(the allowed part of `base` (this machine's environment, local runner only) + the plan's
    `arm_env` whole, the names of `base` left out). A PATH_LISTS variable in both keeps `base`'s
    entries first and appends the plan's."""
    base = dict(base or {})
    kept = {name: value for name, value in base.items() if _inherited(name, value)}
    arm = _pairs(arm_env)
    for name in PATH_LISTS:
        if kept.get(name) and name in arm:
            entries = kept[name].split(os.pathsep)
            arm[name] = os.pathsep.join(entries + [e for e in arm[name].split(os.pathsep) if e not in entries])
    return {**kept, **arm}, sorted(set(base) - set(kept))


def secret_values(arm_env: Mapping[str, str] | Iterable[tuple[str, str]], argv: Iterable[str] = (),
                  base: Mapping[str, str] | None = None) -> list[str]:
    """Values a log must never show: of secret-named variables and flags in the plan (the workload
    has them and Megatron prints its arguments: `--wandb-key V`, `--hf-token=V`), of this
    machine's secret-named variables (a workload may find them elsewhere), and the secret parts
    of any other value (the password of `--wandb-host=https://u:PW@host`, printed alone)."""
    merged = {**dict(base or {}), **_pairs(arm_env)}
    values = [value for name, value in merged.items() if literal_secret(name, value)]
    values += [fragment for value in merged.values() for fragment in secret_fragments(value)]
    for secret in secret_arguments(argv).values():
        values += [secret, *secret_fragments(secret)]
    return [v for v in dict.fromkeys(values) if v]
