"""Generate every response to exactly --rollout-max-response-len tokens (profile `long`).

CP only pays off on long sequences, and a 0.5B instruct model stops after a few hundred
tokens. This wraps slime's own SGLang generate and sets SGLang's `ignore_eos` sampling
parameter, so the length of every training sequence -- and so the work CP splits -- is known.

Signature confirmed in slime 624b824a (slime/rollout/sglang_rollout.py, generate_and_rm):
  custom_generate_func(args, sample, sampling_params) -> Sample   (awaited; `evaluation=` is
  passed only when the function declares it, which this one does not).
"""

from __future__ import annotations


async def generate_to_max_len(args, sample, sampling_params):
    from slime.rollout.sglang_rollout import generate

    params = dict(sampling_params)  # slime reuses the dict it passed: never mutate it
    params["ignore_eos"] = True
    return await generate(args, sample, params)
