"""Build the pinned GPU image and read back what is really inside it.

The build context is the repository root (filtered by .dockerignore), so
`docker build -f docker/Dockerfile .` and compose's `build:` give the same image. docker-py's low-level `api.build(decode=True)` streams the build log
(`images.build()` buffers it all: https://github.com/docker/docker-py/issues/2079),
which is what lets a person watch progress.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from cpverify.artifacts import atomic_writer, open_in_place
from cpverify.errors import EnvironmentBlocked, InputError

ROOT = Path(__file__).resolve().parent.parent
DOCKER_DIR = ROOT / "docker"
LOCK_FILE = DOCKER_DIR / "versions.lock"
# What cpverify needs inside the image besides itself: the steps run there, the verdict included
# (numpy, scipy). docker/Dockerfile installs exactly these (tests/test_image.py holds the two equal).
CONTAINER_REQUIREMENTS = ("tabulate", "rich", "packaging", "huggingface_hub", "numpy", "scipy")
# The package's other dependencies, and why the image needs no install step of its own for them.
NOT_INSTALLED_IN_IMAGE = {
    "docker": "the host drives the engine; nothing in the image talks to it",
    "hyperscan": "installed by its own line, from the lock's HYPERSCAN_PIP_SPEC (x86_64 only)",
    "orjson": "comes with SGLang in slime's image; the parser falls back to json without it",
    "nvidia-ml-py": "comes with SGLang in slime's image; the doctor falls back to nvidia-smi without it",
    "tomli": "Python < 3.11 only; slime's image has 3.12",
}

# Printed by a throwaway container to record what the image really holds. Every probe is
# guarded: an image without torch or Megatron still reports the rest.
_VERSIONS_SCRIPT = r"""
import importlib.metadata as md, json, subprocess
out = {}
for dist in ("torch", "sglang", "megatron-core", "transformer_engine", "flash_attn", "ray", "cpverify", "nvidia-nccl-cu12", "nvidia-nccl-cu13",
             "hyperscan", "orjson"):
    try: out[dist] = md.version(dist)
    except Exception: pass
try:
    import torch
    out["cuda"] = torch.version.cuda
    out["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else None
except Exception as exc:
    out["torch_error"] = repr(exc)[:200]
for name, path in (("slime_commit", "/root/slime"), ("megatron_commit", "/root/Megatron-LM")):
    try: out[name] = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20).stdout.strip() or None
    except Exception: pass
print("CPVERIFY_VERSIONS " + json.dumps(out))
"""


def read_lock(path: Path = LOCK_FILE) -> dict[str, str]:
    """KEY=VALUE lines; '#' comments; empty values are kept (they mean 'not set')."""
    if not Path(path).is_file():
        raise InputError(
            f"{path} not found: building the image needs a cpverify checkout (docker/Dockerfile and its lock)",
            "run from a clone of the cpverify repository, or pass --image TAG of an image you already built",
        )
    values: dict[str, str] = {}
    for n, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip().isidentifier():
            raise InputError(f"{path}:{n}: not a KEY=VALUE line: {raw!r}", "fix the line or restore docker/versions.lock from git")
        values[key.strip()] = value.strip()
    return values


def build_args(lock: dict[str, str], overrides: dict[str, str] | None = None) -> dict[str, str]:
    args = {k: v for k, v in lock.items() if not k.startswith("EXPECT_") and k != "BASE_IMAGE_DIGEST"}
    if lock.get("BASE_IMAGE_DIGEST"):
        args["BASE_IMAGE"] = f"{lock['BASE_IMAGE'].split(':')[0]}@{lock['BASE_IMAGE_DIGEST']}"
    args.update(overrides or {})
    return args


def image_tag(args: dict[str, str]) -> str:
    """Tag derived from the build arguments and the cpverify sources: same inputs, same tag."""
    digest = hashlib.sha256(json.dumps(args, sort_keys=True).encode())
    for path in sorted((ROOT / "cpverify").rglob("*.py")) + [DOCKER_DIR / "Dockerfile"]:
        digest.update(path.read_bytes())
    return f"cpverify-slime:{digest.hexdigest()[:12]}"


def stage_wheels(wheel_dir: Path) -> dict[str, str]:
    """Use pre-fetched wheels (offline hosts, CI) for the in-container requirements.

    They are copied into docker/wheels/ (part of the build context) and the build is told to
    use no index at all, so nothing is fetched during the build.
    """
    target = DOCKER_DIR / "wheels"
    target.mkdir(exist_ok=True)
    for whl in wheels_in(wheel_dir):  # through a temporary of its own: never through a link at the wheel's name
        with whl.open("rb") as wheel, atomic_writer(target / whl.name, binary=True) as out:
            shutil.copyfileobj(wheel, out)
    return {"PIP_ARGS": "--no-index"}


def wheels_in(wheel_dir: Path) -> list[Path]:
    """The wheels of --wheel-dir; InputError naming the command that fills it when there are none."""
    wheels = list(Path(wheel_dir).glob("*.whl"))
    if not wheels:
        spec = read_lock().get("HYPERSCAN_PIP_SPEC", "")
        raise InputError(f"no wheels in --wheel-dir {wheel_dir}",
                         f"`pip download -d {wheel_dir} {' '.join(CONTAINER_REQUIREMENTS)} {spec}` first")
    return wheels


def build_image(*, tag: str, args: dict[str, str], client=None,
                on_line: Callable[[str], None] = print, log_path: Path | None = None) -> str:
    """Build with docker-py, streaming each build line to `on_line` and `log_path`; return the image id."""
    client = client or _client()
    # never through a link planted at the log's name
    log = open(open_in_place(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a", encoding="utf-8") if log_path else None
    image_id = None
    last_error = None
    try:
        for chunk in client.api.build(path=str(ROOT), dockerfile="docker/Dockerfile", tag=tag, buildargs=args, rm=True, forcerm=True,
                                      decode=True, network_mode="host", pull=False):
            text = chunk.get("stream") or chunk.get("status") or ""
            if "error" in chunk:
                last_error = chunk.get("error", "").strip()
                text = f"ERROR: {last_error}\n"
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
            if text:
                if log:
                    log.write(text if text.endswith("\n") else text + "\n")
                    log.flush()
                for line in text.splitlines():
                    if line.strip():
                        on_line(line)
    finally:
        if log:
            log.close()
    if last_error or not image_id:
        base = args.get("BASE_IMAGE", "?")
        raise EnvironmentBlocked(
            f"image build failed: {last_error or 'no image id returned'}",
            f"read the build log{f' {log_path}' if log_path else ''}; if the base {base} cannot be pulled, "
            "`docker pull` it first or pass --base-image",
        )
    return image_id


def inspect_image(image: str, *, client=None) -> dict:
    """Image id, digests, labels, and the versions a throwaway (GPU-less) container reports."""
    client = client or _client()
    img = client.images.get(image)
    facts = {"image": image, "image_id": img.id, "repo_digests": img.attrs.get("RepoDigests", []),
             "labels": (img.attrs.get("Config") or {}).get("Labels") or {}}
    container = client.containers.create(img.id, ["python3", "-c", _VERSIONS_SCRIPT], labels={"cpverify.managed": "1"})
    try:
        container.start()
        container.wait(timeout=120)
        output = container.logs().decode("utf-8", "replace")
    finally:
        container.remove(force=True)
    for line in output.splitlines():
        if line.startswith("CPVERIFY_VERSIONS "):
            facts["versions"] = json.loads(line.split(" ", 1)[1])
    return facts


def resolve_digest(image: str, *, client=None) -> str:
    """The registry's manifest digest of `image` without pulling it, or 'unresolved: why'.

    Recorded in env.json so a verdict names the exact base, and so the lock can be pinned
    (BASE_IMAGE_DIGEST) from a run that could reach the registry.
    """
    import docker.errors

    client = client or _client()
    try:
        return client.images.get_registry_data(image).id
    except docker.errors.DockerException as exc:
        local = _local_digest(client, image)
        return local or f"unresolved: {str(exc).splitlines()[0][:200]}"


def _local_digest(client, image: str) -> str | None:
    import docker.errors

    try:
        digests = client.images.get(image).attrs.get("RepoDigests") or []
    except docker.errors.DockerException:
        return None
    return digests[0].split("@", 1)[1] if digests else None


def compare_expected(lock: dict[str, str], versions: dict) -> list[str]:
    """Human-readable differences between the lock's EXPECT_* values and what the image holds."""
    pairs = {
        "EXPECT_CUDA": versions.get("cuda"),
        "EXPECT_TORCH": (versions.get("torch") or "").split("+")[0] or None,
        "EXPECT_NCCL": versions.get("nccl"),
        "EXPECT_MEGATRON_COMMIT": versions.get("megatron_commit"),
        "EXPECT_TRANSFORMER_ENGINE": versions.get("transformer_engine"),
        "EXPECT_SGLANG": versions.get("sglang"),
    }
    return [f"{key[7:].lower()}: expected {lock[key]}, image has {actual or 'none'}"
            for key, actual in pairs.items() if lock.get(key) and actual != lock[key]]


def _client():
    from cpverify.runners.docker import connect

    return connect()
