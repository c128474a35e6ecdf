"""Synthetic rollouts for the train-only profile, in slime's own --save-debug-rollout-data format.

The train-only profile runs slime's train.py with `--load-debug-rollout-data DIR/rollout_{rollout_id}.pt`:
no SGLang, the trainer reads saved rollouts instead. This writes them, in the workload's Python
(inside the image, or the user's slime environment), with slime's own `Sample` class and, where
slime has it, slime's own writer -- so the format is whatever this slime reads, not a copy:

    python3 -m cpverify.slime_hooks.make_rollouts --out DIR/rollout_{rollout_id}.pt --num-rollout 24 \\
        --rollout-batch-size 2 --n-samples-per-prompt 4 --prompt-len 64 --response-len 8192 --seed 1234

Each rollout holds rollout-batch-size groups of n-samples-per-prompt samples; a group shares a
prompt of prompt-len random token ids; every response is exactly response-len tokens (so the work
CP splits is known, as the probe's --seq-len), with a random reward in [0, 1) so GSPO has
advantages to train on. Deterministic: rollout i depends only on (seed, i), so every arm trains on
identical data. The files are written once: a manifest beside them records the request, and a
request already fulfilled is not written again.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

MANIFEST = "cpverify-rollouts.json"
FIRST_TOKEN = 4  # ids below are special tokens in small vocabularies (unk, eos, pad, ...)


def make_samples(rollout_id: int, *, batch: int, n: int, prompt_len: int, response_len: int, vocab: int,
                 seed: int) -> list:
    """The Samples of one rollout (slime's Sample objects)."""
    from slime.utils.types import Sample

    rng = random.Random(f"{seed}-{rollout_id}")  # str seeds are hashed stably: same data on every host
    samples = []
    for group in range(batch):
        prompt = [rng.randrange(FIRST_TOKEN, vocab) for _ in range(prompt_len)]
        for k in range(n):
            response = [rng.randrange(FIRST_TOKEN, vocab) for _ in range(response_len)]
            samples.append(Sample(group_index=rollout_id * batch + group, index=(rollout_id * batch + group) * n + k,
                                  prompt="", tokens=prompt + response, response_length=response_len,
                                  reward=rng.random(), status=Sample.Status.COMPLETED))
    return samples


def save(template: str, samples: list, rollout_id: int) -> None:
    try:
        from slime.observability.rollout_data_utils import save_debug_rollout_data
    except ImportError:  # slime before 624b824a saved from RolloutManager, in this same format
        import torch

        path = Path(template.format(rollout_id=rollout_id))
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"rollout_id": rollout_id, "samples": [s.to_dict() for s in samples]}, path)
        return
    save_debug_rollout_data(template, samples, rollout_id=rollout_id, evaluation=False)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m cpverify.slime_hooks.make_rollouts", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="path template with {rollout_id}, as --load-debug-rollout-data takes it")
    p.add_argument("--num-rollout", type=int, required=True)
    p.add_argument("--rollout-batch-size", type=int, required=True)
    p.add_argument("--n-samples-per-prompt", type=int, required=True)
    p.add_argument("--prompt-len", type=int, required=True)
    p.add_argument("--response-len", type=int, required=True)
    p.add_argument("--vocab", type=int, default=4096, help="token ids are drawn from [4, vocab)")
    p.add_argument("--seed", type=int, default=1234)
    a = p.parse_args(argv)
    if "{rollout_id}" not in a.out:
        p.error("--out must contain {rollout_id}")
    if min(a.num_rollout, a.rollout_batch_size, a.n_samples_per_prompt, a.prompt_len, a.response_len) < 1 \
            or a.vocab <= FIRST_TOKEN:
        p.error("counts and lengths must be positive, and --vocab larger than 4")
    request = {k: v for k, v in vars(a).items()}
    manifest = Path(a.out).parent / MANIFEST
    files = [Path(a.out.format(rollout_id=i)) for i in range(a.num_rollout)]
    if manifest.is_file() and json.loads(manifest.read_text()) == request and all(f.is_file() for f in files):
        print(f"cpverify-rollouts: reusing {a.num_rollout} rollouts in {manifest.parent}", flush=True)
        return 0
    manifest.unlink(missing_ok=True)  # written last: a half-written set is never taken for a whole one
    for rollout_id in range(a.num_rollout):
        samples = make_samples(rollout_id, batch=a.rollout_batch_size, n=a.n_samples_per_prompt,
                               prompt_len=a.prompt_len, response_len=a.response_len, vocab=a.vocab, seed=a.seed)
        save(a.out, samples, rollout_id)
    # through a temporary of its own (mkstemp: O_EXCL, a fresh name), then renamed: never through a link
    fd, tmp = tempfile.mkstemp(dir=manifest.parent, prefix=f".{MANIFEST}.", suffix=".tmp")
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(request, indent=1) + "\n")
    os.replace(tmp, manifest)
    print(f"cpverify-rollouts: wrote {a.num_rollout} rollouts of {a.rollout_batch_size * a.n_samples_per_prompt} "
          f"samples ({a.prompt_len} prompt + {a.response_len} response tokens) to {manifest.parent}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
