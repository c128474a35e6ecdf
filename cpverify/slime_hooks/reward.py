"""A reward for prompts without labels: deterministic, local, and cheap.

Signature confirmed in slime 624b824a (slime/rollout/rm_hub/__init__.py, docs/en/get_started/
customization.md "Reward Model (--custom-rm-path)"):
  async def custom_rm(args, sample, **kwargs) -> float                 per sample (default)
  async def batched_custom_rm(args, samples, **kwargs) -> list[float]  with --group-rm, or when
                                                                       a generate hook returns lists
slime loads the same path for both, so `length_reward` accepts a Sample or a list of them.

Why length: the seeds' prompts have no reference answers, `--rm-type random` is unseeded (the
two arms would train on different signals) and a remote RM needs the network. A reward that
depends only on the response makes CP=1 and CP=2 see the same reward for the same text, and
still varies inside a GSPO group so advantages are not all zero.
"""

from __future__ import annotations

DEFAULT_TARGET_TOKENS = 1024


def length_score(response_tokens: int, target_tokens: int) -> float:
    """min(1, tokens / target): 0 for an empty response, 1 at or beyond the target length."""
    if target_tokens <= 0:
        raise ValueError(f"target_tokens must be positive, not {target_tokens}")
    return min(1.0, max(0, response_tokens) / target_tokens)


def _response_tokens(sample) -> int:
    n = int(getattr(sample, "response_length", 0) or 0)
    response = getattr(sample, "response", None)
    if n == 0 and response:
        n = len(response.split())  # a generate hook that filled text but not the length
    return n


async def length_reward(args, sample, **kwargs):
    """Reward in [0, 1] growing with the response length, up to --rollout-max-response-len."""
    target = int(getattr(args, "rollout_max_response_len", None) or DEFAULT_TARGET_TOKENS)
    if isinstance(sample, list):
        return [length_score(_response_tokens(s), target) for s in sample]
    return length_score(_response_tokens(sample), target)
