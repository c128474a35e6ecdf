"""The code cpverify runs inside slime: the layout hook, the reward, the fixed-length generate.

Megatron, torch and slime cannot be installed on this machine (they need CUDA), so these
tests inject test doubles for `megatron.core.parallel_state`, `torch.distributed` and
`slime.rollout.sglang_rollout` into sys.modules. The doubles implement only the calls the
hooks make, with the signatures of Megatron-LM 1dcf0daf and slime 624b824a.
"""

from __future__ import annotations

import asyncio
import re
import sys
import types
from dataclasses import dataclass

import pytest

from cpverify.slime_hooks import generate, layout, reward

LAYOUT_LINE = re.compile(r"^cpverify-layout rank=(\d+) world=(\d+) tp=(\d+) pp=(\d+) cp=(\d+) dp=(\d+)$")


def fake_parallel_state(monkeypatch, *, tp=1, pp=1, cp=2, dp=1):
    """Test double: megatron.core.parallel_state (aliased as megatron.core.mpu in Megatron)."""
    ps = types.ModuleType("megatron.core.parallel_state")
    ps.get_tensor_model_parallel_world_size = lambda: tp
    ps.get_pipeline_model_parallel_world_size = lambda: pp
    ps.get_context_parallel_world_size = lambda: cp
    ps.get_data_parallel_world_size = lambda with_context_parallel=False: dp * (cp if with_context_parallel else 1)
    core = types.ModuleType("megatron.core")
    core.parallel_state = ps
    megatron = types.ModuleType("megatron")
    megatron.core = core
    for name, module in (("megatron", megatron), ("megatron.core", core), ("megatron.core.parallel_state", ps)):
        monkeypatch.setitem(sys.modules, name, module)


def fake_torch_distributed(monkeypatch, *, rank, world, initialized=True):
    """Test double: torch.distributed after init_process_group."""
    dist = types.ModuleType("torch.distributed")
    dist.is_available = lambda: True
    dist.is_initialized = lambda: initialized
    dist.get_rank = lambda: rank
    dist.get_world_size = lambda: world
    torch = types.ModuleType("torch")
    torch.distributed = dist
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)


def no_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    monkeypatch.setitem(sys.modules, "torch.distributed", None)


# --- layout -------------------------------------------------------------------------------------


def test_layout_line_per_rank_from_torch_distributed(monkeypatch, capsys):
    fake_parallel_state(monkeypatch, tp=1, pp=1, cp=2, dp=1)
    for rank in (0, 1):
        fake_torch_distributed(monkeypatch, rank=rank, world=2)
        layout.log_layout(types.SimpleNamespace(rank=99, world_size=99))  # dist wins over args
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["cpverify-layout rank=0 world=2 tp=1 pp=1 cp=2 dp=1",
                     "cpverify-layout rank=1 world=2 tp=1 pp=1 cp=2 dp=1"]
    assert all(LAYOUT_LINE.match(line) for line in lines)


def test_layout_falls_back_to_slime_args_without_torch(monkeypatch, capsys):
    fake_parallel_state(monkeypatch, tp=2, pp=1, cp=1, dp=4)
    no_torch(monkeypatch)
    layout.log_layout(types.SimpleNamespace(rank=5, world_size=8))
    assert capsys.readouterr().out == "cpverify-layout rank=5 world=8 tp=2 pp=1 cp=1 dp=4\n"


def test_layout_uses_args_when_process_group_is_not_up(monkeypatch, capsys):
    fake_parallel_state(monkeypatch, cp=1, dp=2)
    fake_torch_distributed(monkeypatch, rank=7, world=7, initialized=False)
    layout.log_layout(types.SimpleNamespace(rank=1, world_size=2))
    assert capsys.readouterr().out.strip() == "cpverify-layout rank=1 world=2 tp=1 pp=1 cp=1 dp=2"


def test_layout_hook_never_raises_into_training(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "megatron", None)  # no Megatron at all
    monkeypatch.setitem(sys.modules, "megatron.core", None)
    layout.log_layout(types.SimpleNamespace(rank=0, world_size=1))
    out = capsys.readouterr().out
    assert out.startswith("cpverify-layout unavailable: ModuleNotFoundError") or out.startswith(
        "cpverify-layout unavailable: ImportError")
    assert not LAYOUT_LINE.match(out.strip())  # the parser must not mistake it for a layout


def test_layout_line_is_flushed(monkeypatch):
    """Ray forwards actor stdout as it is written; an unflushed line could be lost on a crash."""
    fake_parallel_state(monkeypatch)
    no_torch(monkeypatch)

    class Recorder:
        def __init__(self):
            self.text, self.flushed_text = "", None

        def write(self, s):
            self.text += s

        def flush(self):
            self.flushed_text = self.text

    rec = Recorder()
    monkeypatch.setattr(sys, "stdout", rec)
    layout.log_layout(types.SimpleNamespace(rank=0, world_size=2))
    assert rec.flushed_text == rec.text and rec.text.startswith("cpverify-layout rank=0")


# --- reward -----------------------------------------------------------------------------------------


@dataclass
class Sample:
    """Test double with the fields of slime.utils.types.Sample that the reward reads."""

    response: str = ""
    response_length: int = 0
    label: str | None = None


def run(coro):
    return asyncio.run(coro)


def test_length_reward_is_a_deterministic_score_in_unit_interval():
    args = types.SimpleNamespace(rollout_max_response_len=1024)
    scores = [run(reward.length_reward(args, Sample("x" if n else "", n))) for n in (0, 1, 256, 512, 1024, 5000)]
    assert scores == [0.0, 1 / 1024, 0.25, 0.5, 1.0, 1.0]
    again = [run(reward.length_reward(args, Sample("x" if n else "", n))) for n in (0, 1, 256, 512, 1024, 5000)]
    assert again == scores


def test_length_reward_needs_no_label_and_accepts_slimes_kwargs():
    args = types.SimpleNamespace(rollout_max_response_len=100)
    assert run(reward.length_reward(args, Sample("a b", 50, label=None), evaluation=False)) == 0.5


def test_length_reward_batched_mode_returns_one_score_per_sample():
    args = types.SimpleNamespace(rollout_max_response_len=10)
    assert run(reward.length_reward(args, [Sample("", 0), Sample("", 5), Sample("", 20)])) == [0.0, 0.5, 1.0]


def test_length_reward_counts_words_when_no_token_count_and_has_a_default_target():
    assert run(reward.length_reward(types.SimpleNamespace(), Sample("one two three", 0))) == 3 / 1024
    assert run(reward.length_reward(types.SimpleNamespace(rollout_max_response_len=None), Sample("", 2048))) == 1.0


def test_length_score_rejects_a_bad_target():
    with pytest.raises(ValueError):
        reward.length_score(5, 0)


# --- fixed-length generate ---------------------------------------------------------------------


def test_generate_to_max_len_sets_ignore_eos_without_mutating_slimes_params(monkeypatch):
    """Test double for slime.rollout.sglang_rollout.generate(args, sample, sampling_params)."""
    calls = []

    async def fake_generate(args, sample, sampling_params):
        calls.append((args, sample, dict(sampling_params)))
        sample.response_length = sampling_params["max_new_tokens"]
        return sample

    module = types.ModuleType("slime.rollout.sglang_rollout")
    module.generate = fake_generate
    for name in ("slime", "slime.rollout"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "slime.rollout.sglang_rollout", module)

    params = {"max_new_tokens": 8192, "temperature": 1.0}
    args, sample = object(), Sample()
    result = run(generate.generate_to_max_len(args, sample, params))
    assert result is sample and sample.response_length == 8192
    assert calls == [(args, sample, {"max_new_tokens": 8192, "temperature": 1.0, "ignore_eos": True})]
    assert params == {"max_new_tokens": 8192, "temperature": 1.0}
    # slime passes evaluation= only to functions that declare it
    import inspect

    assert "evaluation" not in inspect.signature(generate.generate_to_max_len).parameters


def test_profiles_point_at_these_hooks():
    from cpverify.profiles import FIXED_LENGTH_GENERATE_FN, LAYOUT_FN, REWARD_FN

    for path, fn in ((LAYOUT_FN, layout.log_layout), (REWARD_FN, reward.length_reward),
                     (FIXED_LENGTH_GENERATE_FN, generate.generate_to_max_len)):
        module, _, name = path.rpartition(".")  # how slime's load_function resolves it
        assert getattr(sys.modules[module], name) is fn
