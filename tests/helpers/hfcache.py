"""Build a small huggingface_hub cache on disk, in the hub's real layout, for offline tests.

Model weights cannot be downloaded here, so tests create the cache that `snapshot_download`
would have left: blobs/<etag> (sha256 for LFS files, the git blob sha1 for small ones),
snapshots/<commit>/<file> -> ../../blobs/<etag>, refs/main. The real huggingface_hub code
then runs against it with HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

# config.json of a Qwen2.5-0.5B-shaped model (the values MODEL_ARGS must agree with)
QWEN_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "num_hidden_layers": 24, "hidden_size": 896, "intermediate_size": 4864,
    "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936, "rope_theta": 1000000.0,
}


def _git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def make_model_cache(hf_cache: Path, repo: str, revision: str, *, config: dict | None = None) -> Path:
    """Return the snapshot directory of a tiny fake `repo`@`revision` inside `hf_cache`."""
    files = {
        "config.json": json.dumps(config or QWEN_CONFIG).encode(),
        "tokenizer_config.json": b'{"model_max_length": 32768}',
        "generation_config.json": b'{"do_sample": true}',
        "model.safetensors": os.urandom(4096),  # stands for an LFS file: its etag is the sha256
    }
    repo_dir = Path(hf_cache) / f"models--{repo.replace('/', '--')}"
    snapshot = repo_dir / "snapshots" / revision
    (repo_dir / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        etag = hashlib.sha256(data).hexdigest() if name.endswith(".safetensors") else _git_sha1(data)
        (repo_dir / "blobs" / etag).write_bytes(data)
        link = snapshot / name
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to(Path("../../blobs") / etag)
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / "main").write_text(revision)
    return snapshot
