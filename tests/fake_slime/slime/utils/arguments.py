"""Stand-in for slime's argument parsing (slime/utils/arguments.py at 624b824a), for tests only.

What it imitates, because cpverify's deep lint and tools/gen_known_flags.py depend on it:
  * `parse_args()` reads sys.argv with several parsers, each through `parse_known_args`: a
    pre-parser (allow_abbrev off) for the flags that steer parsing, SGLang's parser (abbreviations
    ON, as in slime: `--rollout-num 8` is read as --rollout-num-gpus-per-engine) skipped in
    train-only mode, and the main Megatron + slime parser (allow_abbrev off). Unknown flags are
    left over by every parser and silently ignored;
  * validation errors with slime's own messages: `hf_validate_args failed: ...` (MODEL_ARGS vs the
    HF config.json), `num_epoch is not set, but num_rollout is not set, ...`, Megatron's
    CUDA_DEVICE_MAX_CONNECTIONS assertion for TP/CP > 1.
The flags are the ones cpverify's profiles pass plus a few; nothing else of slime is imitated.
Standard library only.
"""

import argparse
import json
import os
from pathlib import Path

# (flag, kwargs) of the main parser; a small subset of slime + Megatron.
_MAIN_FLAGS = [
    ("--actor-num-nodes", {"type": int, "default": 1}),
    ("--actor-num-gpus-per-node", {"type": int, "default": 8}),
    ("--colocate", {"action": "store_true"}),
    ("--hf-checkpoint", {"default": None}),
    ("--ref-load", {"default": None}),
    ("--prompt-data", {"default": None}),
    ("--input-key", {"default": "input"}),
    ("--apply-chat-template", {"action": "store_true"}),
    ("--rollout-shuffle", {"action": "store_true"}),
    ("--num-rollout", {"type": int, "default": None}),
    ("--num-epoch", {"type": int, "default": None}),
    ("--rollout-batch-size", {"type": int, "required": True}),
    ("--n-samples-per-prompt", {"type": int, "default": 1}),
    ("--rollout-max-response-len", {"type": int, "default": None}),
    ("--rollout-max-prompt-len", {"type": int, "default": None}),
    ("--global-batch-size", {"type": int, "default": None}),
    ("--micro-batch-size", {"type": int, "default": 1}),
    ("--advantage-estimator", {"default": "grpo"}),
    ("--use-kl-loss", {"action": "store_true"}),
    ("--kl-loss-coef", {"type": float, "default": 0.0}),
    ("--kl-loss-type", {"default": "kl"}),
    ("--entropy-coef", {"type": float, "default": 0.0}),
    ("--optimizer", {"default": "adam"}),
    ("--lr", {"type": float, "default": 1e-6}),
    ("--lr-decay-style", {"default": "constant"}),
    ("--weight-decay", {"type": float, "default": 0.0}),
    ("--adam-beta1", {"type": float, "default": 0.9}),
    ("--adam-beta2", {"type": float, "default": 0.999}),
    ("--tensor-model-parallel-size", {"type": int, "default": 1}),
    ("--pipeline-model-parallel-size", {"type": int, "default": 1}),
    ("--context-parallel-size", {"type": int, "default": 1}),
    ("--sequence-parallel", {"action": "store_true"}),
    ("--use-dynamic-batch-size", {"action": "store_true"}),
    ("--max-tokens-per-gpu", {"type": int, "default": None}),
    ("--custom-rm-path", {"default": None}),
    ("--custom-megatron-init-path", {"default": None}),
    ("--custom-generate-function-path", {"default": None}),
    ("--attention-dropout", {"type": float, "default": 0.1}),
    ("--hidden-dropout", {"type": float, "default": 0.1}),
    ("--attention-backend", {"default": "auto"}),
    ("--no-gradient-accumulation-fusion", {"action": "store_false", "dest": "gradient_accumulation_fusion"}),
    ("--use-wandb", {"action": "store_true"}),
    ("--wandb-key", {"default": None}),
    ("--wandb-host", {"default": None}),
    ("--ci-test", {"action": "store_true"}),
    ("--ci-disable-kl-checker", {"action": "store_true"}),
    ("--ci-save-grad-norm", {"default": None}),
    ("--ci-load-grad-norm", {"default": None}),
    # MODEL_ARGS (Megatron)
    ("--swiglu", {"action": "store_true"}),
    ("--num-layers", {"type": int, "default": None}),
    ("--hidden-size", {"type": int, "default": None}),
    ("--ffn-hidden-size", {"type": int, "default": None}),
    ("--num-attention-heads", {"type": int, "default": None}),
    ("--use-rotary-position-embeddings", {"action": "store_true"}),
    ("--disable-bias-linear", {"action": "store_false", "dest": "add_bias_linear"}),
    ("--add-qkv-bias", {"action": "store_true"}),
    ("--normalization", {"default": "LayerNorm"}),
    ("--norm-epsilon", {"type": float, "default": 1e-5}),
    ("--rotary-base", {"type": int, "default": 10000}),
    ("--group-query-attention", {"action": "store_true"}),
    ("--num-query-groups", {"type": int, "default": 1}),
    ("--vocab-size", {"type": int, "default": None}),
]
# config.json key -> the argument hf_validate_args compares it with
_HF_CHECKS = {"hidden_size": "hidden_size", "num_attention_heads": "num_attention_heads",
              "num_hidden_layers": "num_layers", "intermediate_size": "ffn_hidden_size"}


def _pre_parse_mode():
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--train-backend", type=str, choices=["megatron"], default="megatron")
    parser.add_argument("--debug-rollout-only", action="store_true")
    parser.add_argument("--debug-train-only", action="store_true")
    parser.add_argument("--load-debug-rollout-data", type=str, default=None)
    return parser.parse_known_args()[0]


def _sglang_parse_args():
    parser = argparse.ArgumentParser(add_help=False)  # abbreviations on, as slime's SGLang parser
    parser.add_argument("--rollout-num-gpus-per-engine", type=int, default=1)
    parser.add_argument("--sglang-mem-fraction-static", type=float, default=None)
    parser.add_argument("--sglang-api-key", type=str, default=None)
    return parser.parse_known_args()[0]


def parse_args():
    pre = _pre_parse_mode()
    sglang = None if pre.debug_train_only or pre.load_debug_rollout_data else _sglang_parse_args()
    parser = argparse.ArgumentParser(description="Megatron-LM Arguments", allow_abbrev=False)
    for flag, kwargs in _MAIN_FLAGS:
        parser.add_argument(flag, **kwargs)
    args, _ = parser.parse_known_args()
    for namespace in (pre, sglang):
        for key, value in vars(namespace or argparse.Namespace()).items():
            setattr(args, key, value)
    if args.hf_checkpoint:
        _hf_validate_args(args, json.loads((Path(args.hf_checkpoint) / "config.json").read_text()))
    args.world_size = args.actor_num_nodes * args.actor_num_gpus_per_node
    if args.load_debug_rollout_data is not None:
        args.debug_train_only = True
    assert args.num_epoch is not None or args.num_rollout is not None, (
        "num_epoch is not set, but num_rollout is not set, please set --num-rollout or --num-epoch")
    if args.tensor_model_parallel_size > 1 or args.context_parallel_size > 1:
        assert os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1", (
            "Using tensor model parallelism or context parallelism require setting the environment variable "
            "CUDA_DEVICE_MAX_CONNECTIONS to 1")
    return args


def _hf_validate_args(args, config):
    errors = [f"{key} in hf config {config[key]} is not equal to {name} {getattr(args, name)}, please check the config."
              for key, name in _HF_CHECKS.items() if key in config and config[key] != getattr(args, name)]
    if errors:
        raise AssertionError("hf_validate_args failed: " + "; ".join(errors))
