"""Fetch the model (huggingface_hub) and stage the prompt data, then prove both are whole.

The model lands in a huggingface_hub cache inside the cpverify cache (<cache>/hf, the data in
<cache>/data), the one place `cpverify fetch` and `cpverify run` both use and the GPU containers
mount read-only.
Verification works offline: huggingface_hub names every blob in its cache after the
hub's own checksum (sha256 for LFS files, the git blob sha1 for small ones), so a
truncated or corrupted download is caught by re-hashing each blob against its name.
Online, `HfApi.verify_repo_checksums` compares against the hub's tree as well.

The token (HF_TOKEN) is read by huggingface_hub from the environment of *this*
process only; nothing here logs it, and no workload container ever receives it.

No network is an environment condition (EnvironmentBlocked, exit 4), not bad input: the hub is
asked first whether it can be reached at all (one connection, a few seconds), so an offline host
gets one line at once instead of huggingface_hub's retries, and a model already in the cache is
used without the network.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import shutil
import socket
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cpverify import argv, config
from cpverify.artifacts import atomic_writer
from cpverify.errors import DatasetError, EnvironmentBlocked, ModelError
from cpverify.prompts import load_prompts

# Files a Megatron+SGLang run of a Qwen2.5 checkpoint reads; weights are checked separately.
REQUIRED_FILES = ("config.json", "tokenizer_config.json", "generation_config.json")
MODEL_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "merges.txt", "vocab.json"]
CONNECT_TIMEOUT_S = 5.0  # is the hub (or the proxy in front of it) there at all: one TCP connection
NO_HUB_FIX = ("connect this machine to the network (or set HF_ENDPOINT to a hub mirror, HTTPS_PROXY to a proxy); "
              "or run `cpverify fetch` where the hub can be reached and copy the cache (--cache), or pass "
              "--model-dir with a local copy of the model")

# config.json key -> Megatron flag that must agree with it (MODEL_ARGS of slime's scripts/models/*.sh)
CONFIG_TO_FLAG = {
    "num_hidden_layers": "--num-layers",
    "hidden_size": "--hidden-size",
    "intermediate_size": "--ffn-hidden-size",
    "num_attention_heads": "--num-attention-heads",
    "num_key_value_heads": "--num-query-groups",
    "vocab_size": "--vocab-size",
    "rope_theta": "--rotary-base",
}


@dataclass
class SnapshotReport:
    path: Path
    revision: str | None
    checked: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


# -- the cache: one layout for `cpverify fetch` and every step of `cpverify run` ---------------

def cache_root(given: str | os.PathLike[str] | None = None) -> Path:
    """The cpverify cache: `--cache`, else CPVERIFY_CACHE, else ~/.cache/cpverify."""
    return Path(given or config.cache()).expanduser()


def model_cache(root: Path) -> Path:
    """The huggingface_hub cache inside the cpverify cache (the arms mount the whole root)."""
    return Path(root) / "hf"


def data_dir(root: Path) -> Path:
    """Where the prompt data is staged, beside the model cache."""
    return Path(root) / "data"


def snapshot_dir(root: Path, repo: str, revision: str) -> Path:
    """huggingface_hub's snapshot directory of `repo`@`revision` under `root` (a path on this machine or
    as a container sees the mounted cache); fixed in advance because the revision is a pinned commit."""
    return model_cache(root) / f"models--{repo.replace('/', '--')}" / "snapshots" / revision


def fetch_model(repo_id: str, revision: str, *, cache_dir: Path | None = None, offline: bool | None = None,
                endpoint: str | None = None) -> Path:
    """Download (or find in the cache) `repo_id` at `revision`; return the snapshot directory.

    Raises ModelError when the hub says no (a gated, missing or private repo, an unknown revision)
    or when downloads are off and the cache lacks the model; EnvironmentBlocked when the hub
    cannot be reached and the cache lacks it."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    cache_dir = Path(cache_dir or model_cache(cache_root()))
    if offline is None:
        offline = config.hf_offline()
    endpoint = (endpoint or constants.ENDPOINT).rstrip("/")
    what = f"{repo_id}@{revision[:12]}"
    unreachable = None if offline else hub_unreachable(endpoint)
    try:
        with _hub_quiet():
            path = snapshot_download(repo_id, revision=revision, cache_dir=cache_dir, allow_patterns=MODEL_PATTERNS,
                                     local_files_only=offline or unreachable is not None, endpoint=endpoint)
    except LocalEntryNotFoundError as exc:
        if unreachable is not None:
            raise EnvironmentBlocked(f"cannot reach the Hugging Face hub at {endpoint} ({unreachable}), and "
                                     f"{what} is not in the cache {cache_dir}", NO_HUB_FIX) from None
        if offline:
            raise ModelError(
                f"{what} is not in the cache {cache_dir} and downloads are off (HF_HUB_OFFLINE=1 or --offline)",
                "run `cpverify fetch` once on a machine with network access to the hub (or set HF_ENDPOINT to a "
                "mirror), or point --cache at a cache that holds it",
            ) from exc
        # the hub answered the connection but not the download (down, a 5xx, a broken proxy)
        raise EnvironmentBlocked(f"downloading {what} from {endpoint} failed: {_first_line(exc)}", NO_HUB_FIX) from exc
    except GatedRepoError as exc:
        raise ModelError(f"{repo_id} is gated and this token has no access.", "accept the model's licence on the hub and export HF_TOKEN") from exc
    except RevisionNotFoundError as exc:
        raise ModelError(f"revision {revision!r} does not exist in {repo_id}.", "pass a commit sha that exists (see the model's history on the hub)") from exc
    except RepositoryNotFoundError as exc:
        raise ModelError(f"{repo_id} does not exist on the hub (or is private).", "check the repo id, or export HF_TOKEN for a private repo") from exc
    except _transport_errors() as exc:  # the connection dropped during the download, after the retries
        raise EnvironmentBlocked(f"downloading {what} from {endpoint} failed: {type(exc).__name__}: "
                                 f"{_first_line(exc)}", "rerun `cpverify fetch` (the download resumes); "
                                 + NO_HUB_FIX) from exc
    return Path(path)


def hub_unreachable(endpoint: str, *, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why `endpoint` cannot be reached from here (its host or its proxy does not resolve or does not
    accept a connection), or None when it can: one connection, instead of huggingface_hub's retries
    of every request (six warnings over ~24 s with no network)."""
    url = urllib.parse.urlsplit(endpoint)
    host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(url.scheme) or urllib.request.getproxies().get("all")
    if proxy and not urllib.request.proxy_bypass(host):  # HTTPS_PROXY and friends, NO_PROXY honoured
        target = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host, port, via = target.hostname or "", target.port or 80, f" (the proxy {target.hostname})"
    else:
        via = ""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.gaierror as exc:
        return f"{host}{via}: {exc.strerror or exc}"
    except OSError as exc:  # refused, unreachable, timed out
        return f"{host}:{port}{via}: {exc.strerror or exc}"


@contextlib.contextmanager
def _hub_quiet() -> Iterator[None]:
    """huggingface_hub's own retry warnings off for the download: its outcome is reported once,
    by the error raised above (the progress bars stay)."""
    hub = logging.getLogger("huggingface_hub")
    level = hub.level
    hub.setLevel(logging.ERROR)
    try:
        yield
    finally:
        hub.setLevel(level)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What a dropped connection raises, whichever HTTP client this huggingface_hub uses: the
    socket's own errors, requests' (0.x), httpx's TransportError (1.x) or httpx2's (later)."""
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError, socket.gaierror]
    for module, name in (("requests.exceptions", "ConnectionError"), ("requests.exceptions", "Timeout"),
                         ("httpx", "TransportError"), ("httpx2", "TransportError")):
        with contextlib.suppress(ImportError, AttributeError):
            errors.append(getattr(importlib.import_module(module), name))
    return tuple(errors)


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def verify_snapshot(path: Path, *, revision: str | None = None) -> SnapshotReport:
    """Check a model directory offline: required files present, every cached blob matches its checksum."""
    from huggingface_hub.utils.sha import git_hash, sha_fileobj

    path = Path(path)
    report = SnapshotReport(path=path, revision=revision)
    if not path.is_dir():
        report.problems.append(f"{path} does not exist or is not a directory")
        return report
    for name in REQUIRED_FILES:
        if not (path / name).is_file():
            report.problems.append(f"missing {name}")
    report.problems += _missing_weights(path)

    for entry in sorted(path.rglob("*")):
        if not entry.is_file() or ".cache" in entry.parts:
            continue
        blob = entry.resolve()
        expected = blob.name  # huggingface_hub cache: blobs/<etag>; a plain copy has no checksum to check
        if not _is_hex(expected):
            continue
        report.checked += 1
        with open(blob, "rb") as stream:
            actual = sha_fileobj(stream).hex() if len(expected) == 64 else git_hash(stream.read())
        if actual != expected:
            report.problems.append(f"{entry.relative_to(path)} is truncated or corrupted (checksum {actual[:12]}… != {expected[:12]}…)")
    return report


def _missing_weights(path: Path) -> list[str]:
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (ValueError, KeyError) as exc:
            return [f"model.safetensors.index.json is unreadable: {exc}"]
        return [f"missing weight shard {s}" for s in sorted(shards) if not (path / s).is_file()]
    if not any(path.glob("*.safetensors")):
        return ["missing model weights (*.safetensors)"]
    return []


def _is_hex(name: str) -> bool:
    return len(name) in (40, 64) and all(c in "0123456789abcdef" for c in name)


def check_model_args(path: Path, model_args: list[str] | tuple[str, ...]) -> list[str]:
    """Compare config.json with the profile's MODEL_ARGS; return one line per disagreement."""
    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError) as exc:
        return [f"config.json unreadable: {exc}"]
    problems = []
    for key, flag in CONFIG_TO_FLAG.items():
        given = argv.value(model_args, flag)  # `--num-layers 24` or `--num-layers=24`, as Megatron reads it
        if key not in config or not given:
            continue
        try:
            differs = float(config[key]) != float(given)
        except ValueError:
            problems.append(f"MODEL_ARGS has {flag} {given!r}, not a number")
            continue
        if differs:
            problems.append(f"config.json {key}={config[key]} but MODEL_ARGS has {flag} {given}")
    return problems


def ensure_model(path: Path, *, model_args=(), revision: str | None = None) -> SnapshotReport:
    """Verify a model directory and raise ModelError naming every problem and the fix."""
    report = verify_snapshot(path, revision=revision)
    problems = report.problems + (check_model_args(path, model_args) if report.path.is_dir() else [])
    if problems:
        raise ModelError(
            f"model at {path} is not usable: " + "; ".join(problems),
            "delete the damaged files (or the whole snapshot) and run `cpverify fetch` again; "
            "for a MODEL_ARGS mismatch, use the profile's model or pass the matching --model-args",
        )
    return report


def stage_dataset(source: Path, data_dir: Path) -> Path:
    """Validate the prompt file and copy it next to the model cache, where containers mount it."""
    load_prompts(source)  # raises DatasetError with the line number on any bad line
    target = data_dir / Path(source).name
    try:
        prompts = Path(source).open("rb")
    except OSError as exc:  # it was read a moment ago
        raise DatasetError(f"could not read {source}: {exc.strerror or exc}", "check that the file is readable") from exc
    # atomically, through a temporary file of its own: two runs sharing the cache may stage at once
    with prompts, atomic_writer(target, binary=True, flag="--cache") as out:
        shutil.copyfileobj(prompts, out)
    return target
