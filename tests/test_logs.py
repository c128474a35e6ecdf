"""cpverify.parse: synthetic lines in the exact formats slime, Megatron, NCCL, torch, SGLang and
Ray print (format strings from their sources, values filled in), and hostile input."""

from __future__ import annotations

import io
import json
import math
import os
import random
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from cpverify import terminal
from cpverify.errors import InputError
from cpverify.parse import (
    LogParser,
    bars,
    coarse_class,
    dicts,
    line_text,
    metrics,
    normalise_transport,
    parse_dict,
    parse_file,
    parse_stream,
    records,
    scan,
    signatures,
    stream,
    tracebacks,
)
from cpverify.parse import parser as parsing
from cpverify.parse.signatures import GATE_TOKENS, SIGNATURES
from helpers.nobody import as_nobody, public_dir

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "real-logs"
ACTOR = "\x1b[36m(MegatronTrainRayActor pid=32167)\x1b[0m "
ROLLOUT = "\x1b[36m(RolloutManager pid=999)\x1b[0m "
STEP3 = (
    "[2026-08-21 10:00:28] model.py:918 - step 3: {'train/loss': -6.05e-09, 'train/pg_loss': -6.05e-09, "
    "'train/entropy_loss': 0.1844, 'train/pg_clipfrac': 0.0, 'train/ppo_kl': 0.0, "
    "'train/train_rollout_logprob_abs_diff': 0.0184, 'train/kl_loss': 0.002, 'train/grad_norm': 0.0799, "
    "'train/lr-pg_0': 1e-06, 'train/global_batch_size': 8, 'train/step': 3}"
)
TRAIN_PERF3 = (
    "[2026-08-21 10:00:28] train_metric_utils.py:401 - perf 3: {'perf/sleep_time': 4.03, "
    "'perf/update_weights_time': 0.33, 'perf/wake_up_time': 1.94, 'perf/data_preprocess_time': 0.002, "
    "'perf/train_wait_time': 11.3, 'perf/ref_log_probs_time': 1.4, 'perf/log_probs_time': 0.11, "
    "'perf/actor_train_time': 1.02, 'perf/train_time': 2.84, 'perf/log_probs_tflops': 11.6, "
    "'perf/actor_train_tflops': 3.7, 'perf/actor_train_tok_per_s': 2355.6, 'perf/step_time': 14.18, "
    "'perf/wait_time_ratio': 0.8}"
)
ROLLOUT_PERF3 = (
    "[2026-08-21 10:00:15] rollout_metrics.py:268 - perf 3: {'rollout/response_len/mean': 312.5, "
    "'perf/rollout_time': 3.25, 'perf/tokens_per_gpu_per_sec': 245.8}"
)


def parse_lines(lines: list[str]) -> records.ParsedLog:
    """Through the file path (block scanning), the way `cpverify parse` reads."""
    return parse_stream(io.BytesIO("\n".join(lines).encode() + b"\n"))


# What parse_stream says of a plain log's storage (a line-fed parser knows nothing of it).
STORED_PLAIN = {"compression": None, "encoding": "utf-8"}


def feed_all(data: bytes, as_text: bool = False) -> records.ParsedLog:
    """Every physical line through LogParser.feed, the way a runner streams."""
    parser = LogParser()
    for number, line in enumerate(io.BytesIO(data), 1):
        parser.feed(line.decode("utf-8", "replace") if as_text else line, number)
    return parser.result()


def test_a_line_is_cut_at_the_same_byte_whether_fed_as_text_or_bytes(monkeypatch):
    from cpverify.parse import parser as parsing

    monkeypatch.setattr(parsing, "MAX_LINE_BYTES", 100)
    data = ("(MegatronTrainRayActor pid=3) [2026-08-21 10:00:00] timer.py:32 - critic-step 3: {'t': '"
            + "é" * 9 + "'}\n").encode()  # 99 characters, 108 bytes
    assert feed_all(data, as_text=True).to_json() == feed_all(data).to_json()


def test_a_line_longer_than_the_cap_is_gated_by_its_head_in_blocks_as_line_by_line(monkeypatch):
    from cpverify.parse import parser as parsing

    monkeypatch.setattr(parsing, "MAX_LINE_BYTES", 100)
    # Its head, up to `consumed`, holds no gate word (`elapsed time per iteration` is past it).
    data = (b"(MegatronTrainRayActor pid=32167) [2026-08-21 10:00:00.123456] iteration        3/     100 | consumed "
            b"samples:         3072 | elapsed time per iteration (ms): 849.8 | lm loss: 2.274822E+00 |\n")
    assert feed_all(data).iterations == []
    assert parse_stream(io.BytesIO(data)).to_json() == {**feed_all(data).to_json(), "source": STORED_PLAIN}


# ---------------------------------------------------------------------------- records


def test_step_and_perf_records_with_ray_prefix_and_ansi():
    parsed = parse_lines([ROLLOUT + ROLLOUT_PERF3, ACTOR + STEP3, ACTOR + TRAIN_PERF3])
    (step,) = parsed.steps
    assert (step.step, step.line, step.kind, step.salvaged) == (3, 2, "step", False)
    assert step.metrics["train/grad_norm"] == 0.0799 and step.metrics["train/lr-pg_0"] == 1e-06
    rollout, train = parsed.perf
    assert (rollout.rollout, rollout.side, rollout.line) == (3, "rollout", 1)
    assert (train.rollout, train.side, train.line) == (3, "train", 3)
    assert train.metrics["perf/actor_train_time"] == 1.02 and train.metrics["perf/step_time"] == 14.18
    assert parsed.errors == []


def test_perf_side_from_keys_beats_missing_prefix_and_prefix_decides_unknown_keys():
    parsed = parse_lines(
        [
            TRAIN_PERF3,  # no prefix: keys say train
            ROLLOUT_PERF3,  # no prefix: keys say rollout
            "(MegatronTrainRayActor pid=1) [2026-08-21 10:00:28] x.py:1 - perf 4: {'perf/custom': 1.0}",
            "(RolloutManager pid=2) [2026-08-21 10:00:28] x.py:1 - perf 4: {'perf/custom': 2.0}",
            "[2026-08-21 10:00:28] x.py:1 - perf 5: {'perf/custom': 3.0}",  # no evidence: never train
        ]
    )
    assert [p.side for p in parsed.perf] == ["train", "rollout", "train", "rollout", "rollout"]


def test_old_total_train_time_is_normalised_to_step_time():
    parsed = parse_lines(
        [
            ACTOR + "[2025-09-26 10:00:00] train_metric_utils.py:1 - perf 2: {'perf/total_train_time': 287.26, "
            "'perf/actor_train_time': 200.0}"
        ]
    )
    (perf,) = parsed.perf
    assert perf.side == "train"
    assert perf.metrics["perf/step_time"] == perf.metrics["perf/total_train_time"] == 287.26


def test_critic_step_is_its_own_kind():
    parsed = parse_lines(
        [ACTOR + "[2026-08-21 10:00:28] model.py:918 - critic-step 7: {'critic/value_loss': 0.25}", ACTOR + STEP3]
    )
    assert [(s.kind, s.step) for s in parsed.steps] == [("critic-step", 7), ("step", 3)]
    assert parsed.errors == []  # different counters: no restart


def test_timer_end_elapsed_and_open_timers():
    parsed = parse_lines(
        [
            ACTOR + "[2026-08-21 10:00:00] timer.py:24 - Timer actor_train start",
            ACTOR + "[2026-08-21 10:01:21] timer.py:32 - Timer actor_train end (elapsed: 81.3s)",
            ACTOR + "[2026-08-21 10:01:22] timer.py:24 - Timer update_weights start",
        ]
    )
    assert [(t.name, t.elapsed_s, t.line) for t in parsed.timers] == [("actor_train", 81.3, 2)]
    assert parsed.timers_open == [("update_weights", 3)]


# Timer lines as slime prints them, and near misses: each piece of a line as slime prints it, or
# something else in its place (colour codes, no Ray prefix, a name a record or an elastic row would
# read, another message after it); and lines that change how the next lines are read (a traceback's
# header and frames, an elastic table's root cause, a message that may be wrapped).
_TIMER_PIECES = [  # (as slime prints it, something else)
    (["(MegatronTrainRayActor pid=32167) ", "(MegatronTrainRayActor pid=7, ip=10.0.0.1) ", ""],
     [ACTOR, "(exitcode pid=3) ", "[36m(A pid=2)[0m ", " ", "(A pid=1 +2s) "]),
    (["[2026-08-21 10:00:00] ", "[2026-08-21 10:00:00,123] "], ["[] ", "", "[now] "]),
    (["timer.py:24 - ", "timer.py:32 - "], ["cpverify.py:1 - ", "timer.py:x - ", "", "a-b.py:1 - "]),
    (["Timer actor_train ", "Timer update_weights ", "Timer train_wait "],
     ["Timer exitcode_7 ", "Timer cpverify-layout ", "Timer " + "a" * 201 + " ", "Timer x.y ", "Timer  "]),
    (["start", "end", "end (elapsed: 1.9s)", "end (elapsed: 1e3s)"],
     ["end (elapsed: nan s)", "end (elapsed: -e-s)", "end (elapsed: inf)", "start (elapsed: 2s)", "end (elapsed: nans)"]),
    ([""], [" ", "\r", " [repeated 3x across cluster]", ": {'a': 1}", "\r\n", "\r(A pid=1) x"]),
]
_TIMER_CONTEXT = st.sampled_from([
    "Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "    x()", "ValueError: boom",
    "Root Cause (first observed failure):", "  exitcode  : 1 (pid: 7)", "", "plain text",
    "torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/nccl/ProcessGroupNCCL.cpp:3",
    # a message a terminal wrapped at 80 columns (tests/data/real-logs/41_...): it may go on in the next line
    "RuntimeError: The size of tensor a (120) must match the size of tensor b (119) a", "t non-singleton dimension 2",
])
_SLIME_TIMER = "(MegatronTrainRayActor pid=1) [2026-08-21 10:00:00] timer.py:24 - Timer actor_train start"


@st.composite
def _timer_line(draw) -> str:
    odd = draw(st.sets(st.integers(0, len(_TIMER_PIECES) - 1), max_size=2))  # pieces printed otherwise
    return "".join(draw(st.sampled_from(other if i in odd else usual)) for i, (usual, other) in enumerate(_TIMER_PIECES))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_timer_line(), _TIMER_CONTEXT), max_size=24))
@example(["Traceback (most recent call last):", *[_SLIME_TIMER] * 9, '  File "x.py", line 1, in <module>', "ValueError: x"])
@example(["RuntimeError: The size of tensor a (120) must match the size of tensor b (119) a", _SLIME_TIMER,
          "t non-singleton dimension 2"])
def test_timer_lines_read_from_bytes_as_from_text(lines):
    data = ("\n".join(lines) + "\n").encode()
    as_text = feed_all(data, as_text=True).to_json()
    assert feed_all(data).to_json() == as_text
    assert parse_stream(io.BytesIO(data)).to_json() == {**as_text, "source": STORED_PLAIN}


def test_megatron_iteration_line_new_format():
    line = (
        " [2026-08-21 10:00:00] iteration       43/     100 | consumed samples:          344 | elapsed time per "
        "iteration (ms): 5444.9 | throughput per GPU (TFLOP/s/GPU): 123.4 | learning rate: 1.000000E-06 | "
        "global batch size:     8 | lm loss: 1.825991E+00 | loss scale: 1.0 | grad norm: 0.799 | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |"
    )
    (it,) = parse_lines([line]).iterations
    assert (it.iteration, it.total, it.line, it.elapsed_ms) == (43, 100, 1, 5444.9)
    assert it.metrics["lm loss"] == 1.825991 and it.metrics["throughput per GPU (TFLOP/s/GPU)"] == 123.4
    assert "elapsed time per iteration (ms)" not in it.metrics


def test_memory_usage_records():
    parsed = parse_lines(
        [
            ACTOR + "[2026-01-02 15:29:24] memory_utils.py:41 - [Rank 1] Memory-Usage after offload: {'gpu': '1', "
            "'total_GB': 79.11, 'free_GB': 70.0}"
        ]
    )
    (mem,) = parsed.memory
    assert (mem.label, mem.rank, mem.metrics) == ("after offload", 1, {"total_GB": 79.11, "free_GB": 70.0})


# ---------------------------------------------------------------------------- dict reprs


def test_dict_with_nan_and_inf_is_read_and_json_gets_null():
    parsed = parse_lines(
        [
            ACTOR + "[2026-08-21 10:00:28] model.py:918 - step 0: {'train/loss': nan, 'train/grad_norm': inf, "
            "'train/kl_loss': -inf, 'train/nan_count': 2}"
        ]
    )
    m = parsed.steps[0].metrics
    assert m["train/loss"] != m["train/loss"]  # nan
    assert m["train/grad_norm"] == float("inf") and m["train/kl_loss"] == float("-inf")
    assert m["train/nan_count"] == 2 and parsed.steps[0].salvaged is False
    doc = parsed.to_json()
    json.dumps(doc, allow_nan=False)  # valid JSON, no NaN literals
    assert doc["steps"][0]["metrics"]["train/loss"] is None


def test_dict_repr_holding_code_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    line = (
        "[2026-08-21 10:00:28] model.py:918 - step 1: {'train/loss': 0.5, "
        f"'train/x': __import__('os').system('touch {marker}'), 'train/grad_norm': 0.1}}"
    )
    log = tmp_path / "evil.log"
    log.write_text(line + "\n")
    (step,) = parse_file(log).steps
    assert not marker.exists()
    assert step.salvaged is True
    assert step.metrics == {"train/loss": 0.5, "train/grad_norm": 0.1}  # the call is not a number


def test_parse_dict_salvages_cut_and_fragmentary_reprs():
    assert parse_dict("{'a': 1, 'b': 2.5e-3}") == ({"a": 1.0, "b": 0.0025}, False)
    assert parse_dict("{'a': 1, 'b': 2.5, 'c': 'te") == ({"a": 1.0, "b": 2.5}, True)
    assert parse_dict("perf/rollout_time': 245.6, ") == ({"perf/rollout_time": 245.6}, True)
    assert parse_dict("{'a': (" * 10000) == ({}, True)  # deeply nested junk: no RecursionError


# ---------------------------------------------------------------------------- NCCL


@pytest.mark.parametrize(
    "via, expected",
    [
        ("P2P/CUMEM", "P2P/CUMEM"),
        ("P2P/CUMEM/read", "P2P/CUMEM"),
        ("P2P/IPC/read", "P2P/IPC"),
        ("P2P/IPC", "P2P/IPC"),
        ("P2P/direct pointer", "P2P/direct"),
        ("SHM/direct/direct", "SHM"),
        ("NET/Socket/0", "NET/Socket"),
        ("NET/IB/3/GDRDMA", "NET/IB/GDRDMA"),
        ("NET/IB/0", "NET/IB"),
        ("NET/AWS Libfabric/0/GDRDMA", "NET/AWS Libfabric/GDRDMA"),
        ("CollNet/x", "CollNet/x"),
    ],
)
def test_transport_normalisation(via, expected):
    assert normalise_transport(via) == expected


def nccl(rest: str) -> str:
    return ACTOR + f"e54db9740f9d:228141:228141 [0] NCCL INFO {rest}"


def test_socket_channels_are_a_tcp_fallback_and_using_network_socket_is_not():
    healthy = parse_lines([nccl("Using network Socket"), nccl("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM")])
    assert healthy.nccl.network == "Socket" and healthy.nccl.transports == ["P2P/CUMEM"]
    assert healthy.tcp_fallback is False and healthy.nccl_transport_warning() is None

    tcp = parse_lines([nccl("Using network Socket"), nccl("Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0")])
    assert tcp.nccl.transports == ["NET/Socket"] and tcp.tcp_fallback is True
    assert "TCP" in tcp.nccl_transport_warning()
    assert tcp.to_json()["nccl"]["tcp_fallback"] is True

    shm = parse_lines([nccl("Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct")])
    assert shm.tcp_fallback is False and "P2P" in shm.nccl_transport_warning()


def test_nccl_version_both_forms_and_several_versions():
    parsed = parse_lines(
        [nccl("NCCL version 2.28.9+cuda12.9"), "NCCL version 2.19.3+cuda12.3", nccl("NCCL version 2.28.9+cuda12.9")]
    )
    assert (parsed.nccl.version, parsed.nccl.cuda) == ("2.28.9", "12.9")
    assert parsed.nccl.versions == ["2.28.9", "2.19.3"]


def test_nccl_info_chatter_is_never_an_error():
    parsed = parse_lines(
        [
            nccl("NET/Plugin: Failed to find ncclNetPlugin_v7 symbol."),
            nccl("NET/IB : No device found."),
            nccl("Call to connect returned Connection timed out, retrying"),
        ]
    )
    assert parsed.errors == []


# ---------------------------------------------------------------------------- errors

# (line as printed, the exact set of classes it must give)
ERROR_LINES = [
    (
        "[rank0]:[E1225 12:58:32.712922209 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=17, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600043 "
        "milliseconds before timing out.",
        {"nccl_timeout"},
    ),
    # the watchdog's own line after it (watchdogHandler), torch 2.4-2.6 and newer
    (
        "[rank3]:[E909 09:55:46.996672294 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 3] Timeout at NCCL "
        "work: 2070, last enqueued NCCL work: 2082, last completed NCCL work: 2069.",
        {"nccl_timeout"},
    ),
    (
        "[rank0]:[E ProcessGroupNCCL.cpp:2030] [PG ID 0 PG GUID 0(default_pg) Rank 0] Work timeout is detected by "
        "watchdog at work: 31, last enqueued NCCL work: 58, last completed NCCL work: 30.",
        {"nccl_timeout"},
    ),
    (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        {"nccl_cuda_failure", "nccl_error"},  # ncclGetErrorString(ncclUnhandledCudaError)
    ),
    (
        "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)",
        {"nccl_invalid_usage", "nccl_error"},
    ),
    (
        "h:1:2 [0] include/shm.h:28 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 9)",
        {"nccl_shm_failure", "nccl_error", "nccl_warn"},
    ),
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.11 GiB of which 1.5 GiB is free.",
        {"cuda_oom"},
    ),
    ("RuntimeError: CUDA error: out of memory", {"cuda_oom"}),
    ("RuntimeError: CUDA driver error: out of memory", {"cuda_oom"}),
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        {"cuda_oom"},
    ),
    (
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
        {"dist_store_timeout", "hang"},
    ),
    (
        "ray.exceptions.NodeDiedError: The node with node id 3f2a has been marked dead.",
        {"ray_node_died", "ray_actor_died"},
    ),
    (
        "[2025-03-11 15:02:53] Received sigquit from a child process. It usually means the child failed.",
        {"sglang_child_process_failed", "sglang_error"},
    ),
    ("Fatal Python error: Segmentation fault", {"python_fatal_error", "crash"}),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", {"cuda_illegal_memory_access"}),
    ("RuntimeError: CUDA error: device-side assert triggered", {"cuda_device_assert", "cuda_error"}),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", {"cuda_error"}),
    (
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=4, OpType=ALLREDUCE, TensorShape=[1024])",
        {"collective_shape_mismatch"},
    ),
    ("AssertionError: log_prob length mismatch", {"cp_shape_mismatch", "collective_shape_mismatch", "assertion_error"}),
    (
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
        {"ray_actor_died"},
    ),
    (
        "(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
        "troubleshoot the problem, check the logs for the dead worker.",
        {"ray_actor_died"},
    ),
    (
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        {"ray_host_oom", "ray_actor_died"},
    ),
    ("Job 'raysubmit_6FxKLbWn8dTSNBJb' failed", {"ray_job_failed"}),
    (
        "[2026-08-21 10:00:00] placement_group.py:65 - Waiting for placement group of 8 GPUs (elapsed 120s): "
        "2 GPUs registered with Ray, 2 available.",
        {"ray_placement_group_wait", "resource_wait"},
    ),
    (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        {"sglang_not_enough_memory", "cuda_oom"},
    ),
    (
        "[2026-08-21 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        {"sglang_scheduler_exception", "sglang_error", "python_traceback"},
    ),
    (
        "[2026-08-21 10:00:00] http_utils.py:1 - Max retries (3) reached, failing...",
        {"slime_http_max_retries", "sglang_error"},
    ),
    (
        "train.py: error: argument --train-backend: invalid choice: 'fsdp' (choose from 'megatron')",
        {"argparse_invalid_choice", "argparse_error"},
    ),
    (
        "train.py: error: the following arguments are required: --hf-checkpoint",
        {"argparse_missing_required", "argparse_error"},
    ),
    ("usage.py: error: too many cooks", {"argparse_error"}),
    (
        "AssertionError: Using tensor model parallelism or context parallelism require setting the environment "
        "variable CUDA_DEVICE_MAX_CONNECTIONS to 1",
        {"megatron_cuda_device_max_connections", "assertion_error"},
    ),
    (
        "AssertionError: world size (2) is not divisible by total_model_size (total_model_size=4)",
        {"megatron_world_size_not_divisible", "assertion_error"},
    ),
    (
        "AssertionError: seq-length should be a multiple of 2 * context-parallel-size if context-parallel-size > 1.",
        {"megatron_seq_length_multiple", "assertion_error"},
    ),
    (
        "AssertionError: num_rollouts (2) < global_batch_size (8); need at least one rollout per step.",
        {"slime_num_rollouts_lt_global_batch", "assertion_error"},
    ),
    (
        "AssertionError: num_epoch is not set, but num_rollout is not set, please set --num-rollout or --num-epoch",
        {"slime_num_rollout_not_set", "assertion_error"},
    ),
    ("AssertionError: grad norm mismatch: 0.5 != 0.7", {"slime_grad_norm_mismatch", "assertion_error"}),
    ("AssertionError: threshold=0.1 log_dict={'train/x': 0.3}", {"slime_ci_threshold", "assertion_error"}),
    ("ValueError: hf_validate_args failed: hidden_size 896 != 1024", {"slime_hf_validate_args_failed", "config_error"}),
    ("NotImplementedError: Rule-based RM type is not specified.", {"slime_rm_type_missing", "config_error"}),
    (
        "FileNotFoundError: ref_load /root/Qwen2.5-0.5B does not exist, please check the path.",
        {"slime_ref_load_missing", "missing_path", "config_error"},
    ),
    (
        "AssertionError: args.load='/ckpt' does not exist or is an empty directory. Did you specify the wrong folder?",
        {"missing_path", "config_error", "assertion_error"},
    ),
    ("Exception: Server process terminated unexpectedly.", {"sglang_server_startup_failure", "sglang_startup_failure"}),
    ("TimeoutError: Timeout while flushing cache.", {"slime_flush_cache_timeout", "sglang_error"}),
    (
        "[2026-08-21 10:00:00] health_monitor.py:154 - Health check failed for rollout engine 0 (ray timeout or "
        "error). Killing actor. Exception: boom",
        {"sglang_health_check_failed", "sglang_error"},
    ),
    (
        "AssertionError: Expected 1024, got torch.Size([1020])",
        {"cp_shape_mismatch", "collective_shape_mismatch", "assertion_error"},
    ),
    (
        "AssertionError: threshold=0.1 log_dict={'perf/actor_train_time': 1.0, 'train/train_rollout_logprob_abs_diff': "
        "0.3}",
        {"slime_ci_threshold", "assertion_error"},
    ),
    (
        "RuntimeError: Cannot find torch_memory_saver dynamic library",
        {"torch_memory_saver_missing", "environment_error"},
    ),
    # Ray's worker-death sentence (gcs_actor_manager GenWorkerDiedCause), Ray-prefixed by the log monitor
    (
        "(TaskRunner pid=81190) The actor is dead because its worker process has died. Worker exit type: "
        "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.",
        {"ray_actor_died"},
    ),
    (
        "The actor is dead because its worker process has died. Worker exit type: NODE_OUT_OF_MEMORY Worker exit "
        "detail: Task was killed due to the node running low on memory.",
        {"ray_host_oom", "ray_actor_died"},
    ),
    (
        "The actor is dead because its owner has died. Owner Id: 01000000ffffffffffffffffffffffffffffffffffffffff "
        "Owner Ip address: 10.0.0.1 Owner worker exit type: SYSTEM_ERROR",
        {"ray_actor_died"},
    ),
    (
        "The actor is dead because its node has died. Node Id: 0b6abfec3ad8acdb94e5c2968c71a4c4582b2f43f3d72a9a",
        {"ray_node_died", "ray_actor_died"},
    ),
    # PyTorch's shape checks (ATen ExpandUtils, cat, view, matmul)
    (
        "[rank1]: RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048) at "
        "non-singleton dimension 1",
        {"tensor_shape_mismatch", "collective_shape_mismatch"},
    ),
    (
        "RuntimeError: The expanded size of the tensor (2048) must match the existing size (4096) at non-singleton "
        "dimension 0.  Target sizes: [2048, 1, 32, 128].  Tensor sizes: [4096, 1, 1, 128]",
        {"tensor_shape_mismatch", "collective_shape_mismatch"},
    ),
    (
        "RuntimeError: Sizes of tensors must match except in dimension 0. Expected size 2048 but got size 1024 for "
        "tensor number 1 in the list.",
        {"tensor_shape_mismatch", "collective_shape_mismatch"},
    ),
    (
        "RuntimeError: shape '[2, -1, 32, 128]' is invalid for input of size 1048576",
        {"tensor_shape_mismatch", "collective_shape_mismatch"},
    ),
    (
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4096x1024 and 2048x1024)",
        {"tensor_shape_mismatch", "collective_shape_mismatch"},
    ),
    # torch.distributed.elastic's agent (2.x logs through its own logger, no [ERROR] tag)
    (
        "E1223 05:18:02.971000 3304089 site-packages/torch/distributed/elastic/multiprocessing/api.py:882] failed "
        "(exitcode: -11) local_rank: 0 (pid: 3304209) of binary: /usr/bin/python3",
        {"launcher_failed"},
    ),
    ("actor train:   0%|          | 0/16 [15:00<?, ?it/s]", {"hang"}),
    # Native libraries, in their own words (each one's error macro; real lines from the issues named)
    # torch_memory_saver (slime's colocated mode), csrc/utils.h CUDA_ERROR_CHECK / CURESULT_CHECK
    ("[torch_memory_saver.cpp] cudaError error: 2 (out of memory)  file=csrc/core.cpp func=resume line=172",
     {"cuda_oom"}),  # torch_memory_saver#99
    ("[torch_memory_saver.cpp] CUresult error  result=2 file=csrc/torch_memory_saver.cpp func=cu_mem_create "
     "line=103 (5)", {"cuda_oom"}),  # torch_memory_saver#4: CUresult 2 is CUDA_ERROR_OUT_OF_MEMORY
    ("[torch_memory_saver.cpp] CUresult error  result=1 file=csrc/torch_memory_saver.cpp func=resume line=214",
     {"cuda_error"}),  # torch_memory_saver#35
    ("[torch_memory_saver.cpp] CUresult error: 700 (an illegal memory access was encountered)  file=csrc/core.cpp "
     "func=pause line=190", {"cuda_illegal_memory_access"}),
    ("[torch_memory_saver.cpp] hipError_t error  result=2 file=csrc/torch_memory_saver_hip.cpp func=cu_mem_create "
     "line=103", {"cuda_oom"}),  # torch_memory_saver#9 (ROCm)
    # TransformerEngine, common/util/logging.h NVTE_ERROR: `<file>:<line> in function <f>: <what>`
    ("RuntimeError: /workspace/TransformerEngine/transformer_engine/common/fused_attn/fused_attn_f16_arbitrary_seqlen"
     ".cu:227 in function operator(): cuDNN Error: [cudnn_frontend] Error: No execution plans built successfully.. "
     "For more information, enable cuDNN error logging by setting CUDNN_LOGERR_DBG=1 and CUDNN_LOGDEST_DBG=stderr in "
     "the environment.", {"cudnn_error", "cuda_error"}),  # TransformerEngine#651
    ("RuntimeError: /workspace/TransformerEngine/transformer_engine/common/gemm/cublaslt_gemm.cu:300 in function "
     "cublas_gemm: CUDA Error: an illegal memory access was encountered", {"cuda_illegal_memory_access"}),
    ("RuntimeError: /workspace/TransformerEngine/transformer_engine/common/gemm/cublaslt_gemm.cu:452 in function "
     "cublas_gemm: cuBLAS Error: the requested functionality is not supported", {"cublas_error", "cuda_error"}),
    ("RuntimeError: /workspace/TransformerEngine/transformer_engine/pytorch/csrc/extensions/attention.cpp:85 in "
     "function fused_attn_fwd: Assertion failed: cu_seqlens_q.dtype() == torch::kInt32. cu_seqlens_q must be int32.",
     {"native_check_failed", "assertion_error"}),
    ("RuntimeError: /workspace/TransformerEngine/transformer_engine/common/comm_gemm_overlap/userbuffers/"
     "userbuffers.cu:2100 in function f: NCCL Error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
     {"nccl_unhandled_system_error", "nccl_error"}),
    # flashinfer, include/flashinfer/utils.cuh FLASHINFER_CUDA_CALL
    ("CUDA Error: misaligned address (716) /flashinfer/include/flashinfer/attention/prefill.cuh: line 2155 at "
     "function cudaLaunchKernel(...)", {"cuda_error"}),
    # sgl-kernel's CHECK_CUDA_SUCCESS raises the bare cudaGetErrorString
    ("RuntimeError: an illegal memory access was encountered", {"cuda_illegal_memory_access"}),
    ("RuntimeError: out of memory", {"cuda_oom"}),
    # torch (c10): cuBLAS/cuDNN statuses, the enum named in its hint, internal asserts, a kernel's assert()
    ("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, "
     "k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, compute_type, "
     "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`", {"cublas_error", "cuda_error"}),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a "
     "non-contiguous input.", {"cudnn_error", "cuda_error"}),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED", {"cuda_oom"}),
    ("Search for `cudaErrorLaunchFailure' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html "
     "for more information.", {"cuda_error"}),
    ("RuntimeError: CUDA driver error: device not ready", {"cuda_error"}),  # torch-max-mem#45
    ("RuntimeError: !handles_.at(i) INTERNAL ASSERT FAILED at \"/pytorch/c10/cuda/CUDACachingAllocator.cpp\":430, "
     "please report a bug to PyTorch.", {"native_check_failed", "assertion_error"}),  # torch-max-mem#45
    ("/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [0,0,0], thread: [0,0,0] "
     "Assertion `srcIndex < srcSelectDimSize` failed.", {"cuda_device_assert", "cuda_error"}),
    # NCCL: its CUDACHECK's words, its allocator's, and a CUDA error inside a WARN
    ("Cuda failure 'out of memory'", {"nccl_cuda_failure", "nccl_error", "cuda_oom"}),
    ("[rank0]: Failed to CUDA calloc async 4 bytes", {"cuda_oom"}),
    ("transport/nvls.cc:287 NCCL WARN Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA "
     "error 401 'the operation cannot be performed in the present state'.", {"cuda_error", "nccl_warn"}),
    ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
     "invalid argument (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5",
     {"nccl_invalid_argument", "nccl_error"}),
    # the process died in native code
    ("terminate called after throwing an instance of 'gloo::EnforceNotMet'", {"native_crash", "crash"}),
    ("terminate called after throwing an instance of 'c10::Error'", {"native_crash", "crash"}),
    ("*** SIGSEGV received at time=1718000000 on cpu 12 ***", {"native_crash", "crash"}),
    ("Segmentation fault (core dumped)", {"native_crash", "crash"}),
    ("python3: /src/csrc/x.cpp:10: void f(int): Assertion `n > 0' failed.", {"native_check_failed", "assertion_error"}),
]


@pytest.mark.parametrize("line, expected", ERROR_LINES, ids=lambda v: v if isinstance(v, str) else None)
def test_error_signatures(line, expected):
    parsed = parse_lines(["noise before", ACTOR + line])
    assert parsed.error_classes() == expected
    assert {e.line for e in parsed.errors} == {2}
    assert all(len(e.text) <= line_text.EXCERPT_CHARS for e in parsed.errors)


@pytest.mark.parametrize(
    "line",
    [
        ACTOR + STEP3.replace("train/kl_loss", "train/error_rate"),  # a metric named like an error
        '(SGLangEngine pid=1) [2026-01-29 06:53:43] INFO:     1.2.3.4:5 - "POST /generate HTTP/1.1" 200 OK',
        "Rollout generation: 100%|██████████| 256/256 [29:15<00:00,  6.86s/it]",
        "Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]",
        'ray job submit --runtime-env-json=\'{"env_vars": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}}\'',
        "UserWarning: When using sequence parallelism it is recommended to set the environment variable "
        "CUDA_DEVICE_MAX_CONNECTIONS to 1 for maximum speedup",
        "[2026-08-21 10:00:00] data_source.py:147 - Checkpoint /ckpt/rollout does not exist.",
        ACTOR + "[2026-08-21 10:00:00] memory_utils.py:41 - [Rank 0] Memory-Usage before offload: {'gpu': '0'}",
        ACTOR + "[2026-08-21 10:00:00] timer.py:32 - Timer train end (elapsed: 2.8s)",
        # torch_memory_saver's notice that the allocator will free its cache and retry (torch_memory_saver#99)
        "[torch_memory_saver.cpp] cuMemCreate CUDA_ERROR_OUT_OF_MEMORY (may not be an issue e.g. torch allocator "
        "will free cache and retry)",
        "[torch_memory_saver.cpp] hipMemCreate hipErrorOutOfMemory (may not be an issue e.g. torch allocator will "
        "free cache and retry)",
        # TransformerEngine's NVTE_WARN shares NVTE_ERROR's format
        "/te/transformer_engine/pytorch/csrc/extensions/x.cpp:12 in function f: Falling back to unfused attention",
        "update weights: 100%|██████████| 1/1 [10:37<00:00, 637.00s/it]",  # a slow step that finished
        # absl's signal handler when a Ray job is stopped from outside: no crash of native code
        "(raylet) *** SIGTERM received at time=1718000000 on cpu 3 ***",
    ],
)
def test_healthy_lines_are_not_errors(line):
    assert parse_lines([line]).errors == []


def test_first_occurrence_only_and_fine_and_coarse_on_one_line():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB."
    parsed = parse_lines([oom, "x", oom, "RuntimeError: NCCL error: unhandled system error", oom])
    assert [(e.cls, e.line, e.coarse) for e in parsed.errors] == [
        ("cuda_oom", 1, "cuda_oom"),
        ("nccl_unhandled_system_error", 4, "nccl_error"),
        ("nccl_error", 4, "nccl_error"),
    ]
    assert coarse_class("nccl_unhandled_system_error") == "nccl_error" and coarse_class("cuda_oom") == "cuda_oom"


def test_sglang_startup_traceback_context():
    parsed = parse_lines(
        [
            "Traceback (most recent call last):",
            '  File "/sgl-workspace/sglang/python/sglang/srt/distributed/parallel_state.py", line 1100, in '
            "initialize_model_parallel",
            "    _TP = init_model_parallel_group(",
            "RuntimeError: NCCL error: unhandled system error",
            "Traceback (most recent call last):",
            '  File "/root/slime/train.py", line 34, in train',
            "    actor_model.update_weights()",
            "AssertionError",
        ]
    )
    assert parsed.first_error("sglang_server_startup_failure").line == 4
    assert [(tb.line, tb.exception, tb.exception_line) for tb in parsed.tracebacks] == [
        (1, "RuntimeError: NCCL error: unhandled system error", 4),
        (5, "AssertionError", 8),
    ]
    assert parsed.tracebacks[1].frames[0].code == "actor_model.update_weights()"


# ---------------------------------------------------------------------------- own lines


def test_cpverify_layout_check_and_busbw_lines():
    parsed = parse_lines(
        [
            ACTOR + "cpverify-layout rank=0 world=2 tp=1 pp=1 cp=2 dp=1",
            "(MegatronTrainRayActor pid=32168) [2026-08-21 10:00:00] hook.py:9 - cpverify-layout rank=1 world=2 "
            "tp=1 pp=1 cp=2 dp=1",
            'cpverify-check name=ring_attention_vs_full status=pass value=0.0012 bound=0.01 detail="max rel err"',
            'cpverify-check name=grad_norm status=fail value=nan bound=0.01 detail="said \\"nan\\" twice"',
            "cpverify-check name=speed status=warn",
            "cpverify-busbw op=all_reduce bytes=536870912 busbw_gbps=314.8 algbw_gbps=157.4 ranks=2",
        ]
    )
    assert parsed.to_json()["layout"] == {
        "cp": 2, "dp": 1, "tp": 1, "pp": 1, "world": 2, "ranks": [0, 1], "source": "cpverify-layout"
    }
    passed, failed, warned = parsed.checks
    assert (passed.name, passed.status, passed.value, passed.bound, passed.detail, passed.line) == (
        "ring_attention_vs_full",
        "pass",
        0.0012,
        0.01,
        "max rel err",
        3,
    )
    assert failed.status == "fail" and failed.value != failed.value and failed.detail == 'said "nan" twice'
    assert (warned.status, warned.value, warned.bound) == ("warn", None, None)
    assert [(e.cls, e.line) for e in parsed.errors] == [("cp_correctness", 4)]
    assert parsed.errors[0].detail == {"check": "grad_norm", "value": None, "bound": 0.01}
    assert parsed.to_json()["checks"][1]["value"] is None
    json.dumps(parsed.to_json(), allow_nan=False)
    (bw,) = parsed.bandwidth
    assert (bw.op, bw.bytes, bw.busbw_gbps, bw.algbw_gbps, bw.extra, bw.line) == (
        "all_reduce",
        536870912,
        314.8,
        157.4,
        {"ranks": "2"},
        6,
    )


def test_layout_mismatch_keeps_the_first_layout():
    parsed = parse_lines(
        ["cpverify-layout rank=0 world=2 tp=1 pp=1 cp=2 dp=1", "cpverify-layout rank=1 world=2 tp=1 pp=1 cp=1 dp=2"]
    )
    assert (parsed.layout.cp, parsed.layout.dp) == (2, 1)
    (mismatch,) = parsed.errors
    assert (mismatch.cls, mismatch.line, mismatch.detail["reported"]["cp"]) == ("layout_mismatch", 2, 1)


@pytest.mark.parametrize("line", [
    "cpverify-layout rank=0 world=2 tp=1 pp=1 cp=0 dp=2",
    "cpverify-layout rank=0 world=2 tp=1 pp=1 cp=999999999999999999999 dp=2",
    "cpverify-layout rank=0 world=2 tp=1 pp=1 cp=2 dp=2",
    "cpverify-layout rank=0 world=4 tp=1 pp=-1 cp=2 dp=-2",
])
def test_an_impossible_layout_line_states_no_layout(line):
    """An edited or garbled hook line (CP=10^21, 0, a negative size) states no layout: no verdict may
    judge two logs at CPs no run can have."""
    assert parse_lines([line]).layout is None


def test_no_layout_line_means_null():
    assert parse_lines([ACTOR + STEP3]).to_json()["layout"] is None


def megatron_args(**sizes: int) -> list[str]:
    """Megatron-LM's argument dump as `_print_args` (megatron/training/arguments.py) prints it."""
    lines = [f"  {name} {'.' * (48 - len(name))} {value}" for name, value in sorted(sizes.items())]
    return ["------------------------ arguments ------------------------", *lines,
            "-------------------- end of arguments ---------------------"]


SIZES = {"context_parallel_size": 2, "data_parallel_size": 1, "tensor_model_parallel_size": 1,
         "pipeline_model_parallel_size": 1, "world_size": 2}


def test_megatron_argument_dump_states_the_layout_where_no_hook_line_does():
    for prefix in ("", "[default0]:", ROLLOUT, "[2026-08-21 10:00:00] "):
        parsed = parse_lines([ACTOR + STEP3, *(prefix + line for line in megatron_args(**SIZES))])
        assert parsed.to_json()["layout"] == {
            "cp": 2, "dp": 1, "tp": 1, "pp": 1, "world": 2, "ranks": [0], "source": "megatron-arguments"
        }, prefix
        assert parsed.errors == []


def test_the_hook_line_wins_over_megatron_arguments_before_or_after_it():
    hook = "cpverify-layout rank=0 world=2 tp=1 pp=1 cp=1 dp=2"
    for lines in ([hook, *megatron_args(**SIZES)], [*megatron_args(**SIZES), hook]):
        layout = parse_lines(lines).layout
        assert (layout.cp, layout.dp, layout.source) == (1, 2, "cpverify-layout")


def test_only_megatrons_own_format_states_a_layout():
    without_cp = megatron_args(**{k: v for k, v in SIZES.items() if k != "context_parallel_size"})
    cases = {
        "dots not to column 50": ["  context_parallel_size .. 2", *without_cp],
        "a size missing": without_cp,
        "a size not a number": megatron_args(**{**SIZES, "tensor_model_parallel_size": "None"}),  # type: ignore[arg-type]
        "a size of zero": megatron_args(**{**SIZES, "pipeline_model_parallel_size": 0}),
        "sizes that do not make the world": megatron_args(**{**SIZES, "world_size": 4}),
    }
    for why, lines in cases.items():
        assert parse_lines(lines).layout is None, why


def test_the_first_megatron_dump_counts():
    parsed = parse_lines([*megatron_args(**SIZES), *megatron_args(**{**SIZES, "context_parallel_size": 1})])
    assert parsed.layout.cp == 2


# ---------------------------------------------------------------------------- hostile input


def test_empty_file(tmp_path):
    log = tmp_path / "empty.log"
    log.write_bytes(b"")
    doc = parse_file(log).to_json()
    assert doc["lines"] == 0
    assert all(doc[k] == [] for k in ("steps", "perf", "timers", "iterations", "errors"))
    assert doc["layout"] is None and doc["nccl"]["version"] is None


def test_binary_garbage(tmp_path):
    data = os.urandom(3 * 1024 * 1024)
    log = tmp_path / "garbage.log"
    log.write_bytes(data)
    parsed = parse_file(log)
    assert parsed.lines == data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    json.dumps(parsed.to_json(), allow_nan=False)


def test_non_utf8_bytes_around_records(tmp_path):
    log = tmp_path / "latin1.log"
    log.write_bytes(
        b"\xff\xfe\xfa caf\xe9\n"
        + (ACTOR + STEP3).encode()[:-1]
        + b"\xe9}\n"  # a stray Latin-1 byte in the dict
        + b"\xc3\x28 "
        + (ACTOR + TRAIN_PERF3).encode()
        + b"\n"
    )
    parsed = parse_file(log)
    assert [(s.step, s.line) for s in parsed.steps] == [(3, 2)]
    assert parsed.steps[0].metrics["train/grad_norm"] == 0.0799
    assert [(p.rollout, p.side, p.line) for p in parsed.perf] == [(3, "train", 3)]


def test_ten_megabyte_line_keeps_memory_flat(tmp_path):
    log = tmp_path / "giant.log"
    with log.open("wb") as f:
        f.write(b"Rollout generation: " + b"\xe2\x96\x88" * (10 * 1024 * 1024 // 3) + b" 3/4 [00:01<00:00]\r")
        f.write(b" step 99: {'train/loss': 1.0}\n")  # beyond the 64 KiB head: not read
        f.write((ACTOR + STEP3 + "\n").encode())
    tracemalloc.start()
    try:
        parsed = parse_file(log)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [(s.step, s.line) for s in parsed.steps] == [(3, 2)]
    assert parsed.lines == 2
    assert peak < 6 * 1024 * 1024, f"peak {peak} bytes while the file is 10 MB"


def test_ten_megabyte_line_through_feed_is_cut():
    parser = LogParser()
    parser.feed("x" * 10_000_000 + " step 1: {'a': 1}", 1)
    parser.feed(STEP3, 2)
    assert [s.step for s in parser.result().steps] == [3]


def test_truncated_mid_line(tmp_path):
    log = tmp_path / "cut.log"
    log.write_bytes(
        (ACTOR + STEP3 + "\n").encode() + b"[2026-08-21] model.py:918 - step 4: {'train/loss': 0.5, 'train/gr"
    )
    parsed = parse_file(log)
    assert [(s.step, s.line, s.salvaged) for s in parsed.steps] == [(3, 1, False), (4, 2, True)]
    assert parsed.steps[1].metrics == {"train/loss": 0.5}
    assert parsed.lines == 2


def test_two_runs_concatenated():
    def run(cp: int) -> list[str]:
        layout = f"cpverify-layout rank=0 world=2 tp=1 pp=1 cp={cp} dp={2 // cp}"
        return [layout] + [ACTOR + STEP3.replace("step 3:", f"step {n}:") for n in range(3)]

    parsed = parse_lines(run(1) + run(2))
    assert [(s.step, s.line) for s in parsed.steps] == [(0, 2), (1, 3), (2, 4), (0, 6), (1, 7), (2, 8)]
    assert parsed.layout.cp == 1
    assert {(e.cls, e.line) for e in parsed.errors} == {("layout_mismatch", 5), ("run_restarted", 6)}


@given(st.integers(1, 40), st.data())
@settings(max_examples=60, deadline=None)
def test_steps_that_go_back_at_all_are_a_restarted_run(last, data):
    """A run resumed from a checkpoint prints steps it printed already: back by one (the usual
    resume) as much as back to the start."""
    back = data.draw(st.integers(1, last), label="steps back")
    steps = [*range(last + 1), last - back]
    parsed = parse_lines([ACTOR + STEP3.replace("step 3:", f"step {n}:") for n in steps])
    (restart,) = [e for e in parsed.errors if e.cls == "run_restarted"]
    assert restart.line == len(steps)
    assert (restart.detail["step"], restart.detail["after_step"]) == (last - back, last)


def test_steps_that_only_go_forward_are_one_run():
    parsed = parse_lines([ACTOR + STEP3.replace("step 3:", f"step {n}:") for n in (0, 1, 2, 4, 9)])
    assert parsed.errors == []


def test_ansi_carriage_returns_and_repeated_suffix_on_one_physical_line():
    line = (
        ACTOR
        + "actor train:  50%|█████     | 2/4 [00:01<00:01,  1.9it/s]\r"
        + ACTOR
        + "actor train: 100%|██████████| 4/4 [00:02<00:00,  1.9it/s]\r"
        + ACTOR
        + STEP3
        + " [repeated 2x across cluster]\r"
    )
    parsed = parse_lines(["first line", line, "[36m(MegatronTrainRayActor pid=9)[0m " + TRAIN_PERF3])
    (step,) = parsed.steps
    assert (step.step, step.line) == (3, 2)
    assert step.metrics["train/step"] == 3 and step.salvaged is False
    assert [(p.side, p.line) for p in parsed.perf] == [("train", 3)]  # bare `[36m` remnant stripped


RAY_DEDUP_NOTE = ("(Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
                  "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication "
                  "for more options.)")


@pytest.mark.parametrize("note", ["", " " + RAY_DEDUP_NOTE, " " + RAY_DEDUP_NOTE + "   "])
def test_the_first_deduplicated_line_and_rays_note_after_it_read_as_any_other(note):
    """Ray appends its note to the first line it deduplicates in a session: the line is read all the same."""
    timeout = ERROR_LINES[0][0]
    parsed = parse_lines([ACTOR + STEP3 + " [repeated 2x across cluster]" + note,
                          ACTOR + timeout + " [repeated 7x across cluster]" + note])
    (step,) = parsed.steps
    assert step.salvaged is False and step.metrics["train/step"] == 3
    assert parsed.first_error("nccl_timeout").detail["repeated"] == 7


def _strip_then_unprefix(seg: str) -> tuple[str | None, str] | None:
    """The reference unprefixed must equal: every colour code removed first, then the prefix."""
    seg = terminal.CSI.sub("", seg)
    if not seg.strip():
        return None
    if seg[0] in "([":
        m = line_text._PREFIX.match(seg)
        if m:
            return m.group("actor"), seg[m.end() :]
        if seg[0] == "[":
            seg = line_text._BARE_REMNANT.sub("", seg)
    return None, seg


_PIECES = st.sampled_from(
    ["\x1b[36m", "\x1b[0m", "\x1b[2K", "\x1b[38;5;208;1m", "\x1b[1;2;3;4;5m", "\x1b[?25l", "[36m", "[0m", "\x1b",
     "(MegatronTrainRayActor pid=1)", "(A pid=2, ip=10.0.0.1)", "(pid=3)", "(", ")", "[", "m", " ", "  ", "\t",
     "pid=3", "step 1: {'a': 1}", "Error", "A"]
)


@given(st.lists(_PIECES, max_size=8).map("".join))
@settings(max_examples=500, deadline=None)
def test_the_prefix_taking_its_colour_codes_equals_stripping_them_first(seg):
    assert line_text.unprefixed(seg) == _strip_then_unprefix(seg)


@given(st.lists(_PIECES, max_size=8).map("".join), st.lists(_PIECES, max_size=8).map("".join))
@settings(max_examples=500, deadline=None)
def test_a_prefix_seen_before_is_taken_as_a_match_would_take_it(first, second):
    """unprefixed remembers Ray prefixes; a line that starts with one must read as if matched afresh."""
    line_text._PREFIXES.clear()
    for seg in (first, first + second, second, first + first):
        assert line_text.unprefixed(seg) == _strip_then_unprefix(seg)


_JUNK = st.lists(st.sampled_from(["x", "/", "-", " ", "3", "٣", ": {", "{", "] ", "[Rank ", "step", "model.py:918 - "]),
                 max_size=4).map("".join)
_RECORD_LIKE = st.tuples(
    _JUNK,
    st.sampled_from(["step", "perf", "critic-step", "rollout", "eval", "steps", "x"]),
    st.sampled_from([" ", "", "  "]),
    st.sampled_from(["3", "12", "٣", "1234567890123", ""]), st.sampled_from([": {'a': 1}", ": {", ":{", ": "]), _JUNK,
).map("".join)
_MEMORY_LIKE = st.tuples(
    _JUNK, st.sampled_from(["[Rank 1] ", "[Rank 12] ", "[Rank ", "[Rank x] ", ""]),
    st.sampled_from(["Memory-Usage ", "Memory-Usage", ""]), st.sampled_from(["before offload", "", "x" * 210]),
    st.sampled_from([": {'gpu': '0'}", ": {", ": "]), _JUNK,
).map("".join)


@given(st.one_of(_RECORD_LIKE, _MEMORY_LIKE, st.tuples(_RECORD_LIKE, _MEMORY_LIKE).map(" ".join)))
@settings(max_examples=800, deadline=None)
def test_record_and_memory_lines_found_from_their_anchor_as_by_a_full_search(msg):
    def same(a, b):
        if a is None or b is None:
            return a is b
        return a.span() == b.span() and a.groups() == b.groups()

    assert same(metrics.record_match(msg), metrics.RECORD.search(msg))
    assert same(metrics.memory_match(msg), metrics.MEMORY.search(msg))


def test_pathological_long_lines_do_not_backtrack():
    """Guard against catastrophic regex backtracking, not a speed claim (see benchmarks/).

    Each line is 64 KiB aimed at one pattern; before the patterns were bounded the first
    ones took minutes (quadratic). Linear parsing takes well under a second for all of them.
    """
    n = parsing.MAX_LINE_BYTES
    lines = [
        "step 1: {" + "a" * n,
        "perf/x': " + "a" * n,
        "1" * n + "s/it]",
        "Error repeated " + " " * n + "x",
        "cpverify-check " + "a" * n,
        "Timer " + "a" * n,
        "CUDA out of memory " + "1." * (n // 2) + " GiB is allocated by PyTorch",
        "Error " + "ref_load " * (n // 9),
        "Memory-Usage " * (n // 13) + ": {",
    ]
    data = ("\n".join(lines) + "\nTraceback (most recent call last):\n" + "Error" * (n // 5) + "\n").encode()
    start = time.perf_counter()
    parsed = parse_stream(io.BytesIO(data))
    assert time.perf_counter() - start < 20
    assert parsed.lines == len(lines) + 2


def test_torchrun_rank_prefixed_traceback():
    parsed = parse_lines(
        [
            "[rank1]: Traceback (most recent call last):",
            '[rank1]:   File "/root/slime/slime/backends/megatron_utils/cp_utils.py", line 216, in '
            "slice_log_prob_with_cp",
            "[rank1]:     assert len(log_prob) == response_length, (",
            "[rank1]: AssertionError: log_prob length mismatch: len(log_prob)=10, response_length=12, total_length=40",
        ]
    )
    (tb,) = parsed.tracebacks
    assert [(f.func, f.lineno, f.code) for f in tb.frames] == [
        ("slice_log_prob_with_cp", 216, "assert len(log_prob) == response_length, (")
    ]
    assert tb.exception_line == 4 and tb.exception.startswith("AssertionError: log_prob length mismatch")
    assert parsed.first_error("cp_shape_mismatch").line == 4


def test_source_lines_of_a_traceback_are_never_classified():
    frames = []
    for n in range(tracebacks.MAX_FRAMES + 5):  # past the frame cap too
        frames += [f'  File "/sgl/pynccl_wrapper.py", line {n}, in NCCL_CHECK', '    raise RuntimeError(f"NCCL error")']
    parsed = parse_lines(["Traceback (most recent call last):", *frames, "RuntimeError: NCCL error: x"])
    assert {e.line for e in parsed.errors} == {1, len(frames) + 2}  # header, exception line
    (tb,) = parsed.tracebacks
    assert len(tb.frames) == tracebacks.MAX_FRAMES and tb.frames[-1].code == 'raise RuntimeError(f"NCCL error")'
    assert tb.exception == "RuntimeError: NCCL error: x"


@pytest.mark.parametrize(
    "line",
    [
        "cpverify-layout rank=² world=٣ tp=1 pp=1 cp=2 dp=1",  # \d matches these; int() does not
        '  File "/root/slime/train.py", line ' + "9" * 5000 + ", in train",  # beyond int's digit limit
        "step " + "1" * 5000 + ": {'a': 1}",
        "step 1: {'train/loss': 1" + "0" * 400 + "}",  # an int literal beyond float range
        "update weights:  6%| | 1/16 [11:01<2:45:20, 1.2.3s/it]",
        "torch.distributed.DistStoreError: Timed out after " + "9" * 5000 + " seconds",
        "step 1: {'a': 1.2.3e}",  # would make ast warn "invalid decimal literal"
    ],
)
def test_malformed_numbers_never_crash(line, recwarn):
    parsed = parse_lines([line])
    json.dumps(parsed.to_json(), allow_nan=False)
    assert not [w for w in recwarn if issubclass(w.category, SyntaxWarning)]


def test_fuzzed_real_lines_never_crash():
    """Seeded mutations of every fixture line and every signature line (fixed seed: reproducible)."""
    rng = random.Random(20260821)
    corpus = [line for line, _ in ERROR_LINES] + [STEP3, TRAIN_PERF3, ROLLOUT_PERF3]
    for path in sorted(DATA.glob("*.log")):
        corpus += path.read_text(encoding="utf-8", errors="replace").splitlines()
    junk = ["²", "٣", "9" * 5000, "\x00", "\r", "\x1b[3", "'", '"', "{", "}", ":", "nan", "(", "\\", "1.2.3", "𝟙"]
    for _ in range(3000):
        line = rng.choice(corpus)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(line) + 1)
            if rng.random() < 0.6:
                line = line[:pos] + rng.choice(junk) + line[pos:]
            else:
                line = line[:pos] + line[pos + rng.randint(0, 10) :]
        parser = LogParser()
        parser.feed(line, 1)
        parser.feed(line.encode("utf-8", "replace"), 2)
        json.dumps(parser.result().to_json(), allow_nan=False)


def test_result_is_a_snapshot():
    parser = LogParser()
    parser.feed(STEP3, 1)
    first = parser.result()
    parser.feed(STEP3.replace("step 3", "step 4"), 2)
    assert [s.step for s in first.steps] == [3]
    assert [s.step for s in parser.result().steps] == [3, 4]


# ---------------------------------------------------------------------------- the pre-filter


def test_every_trigger_and_marker_contains_a_gate_token():
    words = [t for sig in SIGNATURES for t in sig.triggers] + list(parsing._RECORD_MARKERS)
    missing = [w for w in words if not any(token in w.lower() for token in GATE_TOKENS)]
    assert missing == []


def _synthetic_log() -> bytes:
    lines = [line for line, _ in ERROR_LINES] + [
        ROLLOUT + ROLLOUT_PERF3,
        ACTOR + STEP3,
        ACTOR + TRAIN_PERF3,
        nccl("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"),
        "x" * 5000 + " step 9: {'a': 1}",
        "Traceback (most recent call last):",
        '  File "/root/slime/train.py", line 34, in train',
        "",
        "2026-03-18 05:25:02",
        "    actor_model.update_weights()",
        "perf/rollout_time': 1.5",
        "'perf/total_train_time': 2.5, ",
        "cpverify-layout rank=0 world=2 tp=1 pp=1 cp=2 dp=1",
    ]
    return ("\n".join(lines) + "\n").encode() + b"\xff tail without newline step 1: {'a': 2}"


@pytest.mark.parametrize("engine", scan.ENGINES)
@pytest.mark.parametrize("block", [1, 7, 100, 4096, 1 << 20])
def test_block_scanning_equals_feeding_every_line(monkeypatch, block, engine):
    monkeypatch.setattr(scan, "ENGINE", engine)
    data = _synthetic_log()
    for path in [None, *sorted(DATA.glob("*.log"))]:
        raw = data if path is None else path.read_bytes()
        if parse_stream(io.BytesIO(raw)).source != STORED_PLAIN:
            continue  # stored otherwise (UTF-16): its bytes are not lines
        expected = feed_all(raw).to_json()
        assert feed_all(raw, as_text=True).to_json() == expected
        monkeypatch.setattr(stream, "READ_BLOCK_BYTES", block)
        assert parse_stream(io.BytesIO(raw)).to_json() == {**expected, "source": STORED_PLAIN}, path


def test_block_scanning_equals_feeding_with_short_line_cap(monkeypatch):
    monkeypatch.setattr(parsing, "MAX_LINE_BYTES", 64)
    monkeypatch.setattr(stream, "READ_BLOCK_BYTES", 50)
    data = _synthetic_log()
    assert parse_stream(io.BytesIO(data)).to_json() == {**feed_all(data).to_json(), "source": STORED_PLAIN}


# ---------------------------------------------------------------------------- files and CLI


def test_missing_file_is_an_input_error_naming_path_and_fix(tmp_path):
    with pytest.raises(InputError) as info:
        parse_file(tmp_path / "nope.log")
    assert "nope.log" in info.value.problem and info.value.fix


def test_directory_is_an_input_error(tmp_path):
    with pytest.raises(InputError) as info:
        parse_file(tmp_path)
    assert "directory" in info.value.problem and info.value.fix


def test_unreadable_file_is_an_input_error():
    """A real EACCES (root reads any file, so the parse runs as `nobody`)."""
    with public_dir() as public:
        log = public / "secret.log"
        log.write_text("x\n")
        log.chmod(0)
        proc = as_nobody("import json\nfrom cpverify.errors import InputError\nfrom cpverify.parse import parse_file",
                         f"try:\n    parse_file({str(log)!r})\nexcept InputError as e:\n"
                         "    print(json.dumps([e.problem, e.fix]))")
    assert proc.returncode == 0 and proc.stdout, proc.stderr
    problem, fix = json.loads(proc.stdout)
    assert problem == f"log file {log} is not readable by this user" and "chmod" in fix


def cpverify(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cpverify", *args], input=stdin, capture_output=True, cwd=REPO, timeout=60
    )


def test_cli_missing_file_exits_2_with_the_fix(tmp_path):
    proc = cpverify("parse", str(tmp_path / "nope.log"))
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert "nope.log" in err and "fix:" in err


def test_cli_json_contract_keys(tmp_path):
    log = tmp_path / "arm.log"
    log.write_text("\n".join([ACTOR + STEP3, ACTOR + TRAIN_PERF3, "RuntimeError: CUDA error: out of memory"]) + "\n")
    proc = cpverify("parse", str(log), "--json")
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert {"steps", "perf", "timers", "iterations", "errors", "nccl", "layout"} <= set(doc)
    assert set(doc["nccl"]) >= {"version", "transports", "network"}
    assert doc["errors"] == [
        {
            "class": "cuda_oom",
            "line": 3,
            "text": "RuntimeError: CUDA error: out of memory",
            "coarse": "cuda_oom",
            "detail": {},
        }
    ]
    assert doc["perf"][0]["side"] == "train" and doc["steps"][0]["step"] == 3


def test_cli_summary_and_stdin():
    raw = (DATA / "20_openrlhf-issue624-ray-prefixed-nccl-watchdog-timeout.log").read_bytes()
    proc = cpverify("parse", "-")
    assert proc.returncode == 0 and "0 lines" in proc.stdout.decode()
    proc = cpverify("parse", "-", stdin=raw)
    out = proc.stdout.decode()
    assert proc.returncode == 0
    assert "error class" in out and "nccl_timeout" in out and "layout: not stated in the log" in out


def test_cli_summary_shows_judged_medians(tmp_path):
    log = tmp_path / "arm.log"
    perf = [ACTOR + TRAIN_PERF3.replace("perf 3:", f"perf {n}:").replace("1.02", str(1.0 + n)) for n in range(4)]
    log.write_text("\n".join(perf) + "\n")
    out = cpverify("parse", str(log)).stdout.decode()
    # rollouts 1..3 are counted (rollout 0 is warm-up): actor_train_time 2, 3, 4 -> median 3, n 3
    row = next(line for line in out.splitlines() if line.startswith("perf/actor_train_time"))
    assert row.split() == ["perf/actor_train_time", "3", "3"]


def test_lines_printed_by_the_cpverify_probe_parse():
    """The CONTRACT with cpverify.probe: its formatters' lines come back as records."""
    from cpverify.probe.rules import format_busbw, format_check, format_layout

    lines = [
        format_layout(0, 2, 2),
        format_layout(1, 2, 2),
        format_check("cp_output_vs_reference", "fail", float("nan"), 0.01, 'max "rel" err\nover \\ 2 lines'),
        format_busbw("all_reduce", 268435456, 310.2, 155.1),
    ]
    parsed = parse_lines([ACTOR + line for line in lines])
    assert (parsed.layout.cp, parsed.layout.dp, parsed.layout.ranks) == (2, 1, [0, 1])
    (check,) = parsed.checks
    assert (check.name, check.status, check.bound, check.detail) == (
        "cp_output_vs_reference",
        "fail",
        0.01,
        'max "rel" err over \\ 2 lines',
    )
    assert [(e.cls, e.line) for e in parsed.errors] == [("cp_correctness", 3)]
    assert [(b.op, b.bytes, b.busbw_gbps, b.algbw_gbps) for b in parsed.bandwidth] == [
        ("all_reduce", 268435456, 310.2, 155.1)
    ]


# ---------------------------------------------------------------------------- causes, wrapped lines, formats


def test_ray_worker_death_detail_and_cause_through_a_ray_prefix():
    (line,) = [line for line, _ in ERROR_LINES if line.startswith("(TaskRunner pid=81190) The actor is dead")]
    parsed = parse_lines(["noise", line])
    died = parsed.first_error("ray_actor_died")
    assert died.detail["actor"] == "TaskRunner" and died.detail["exit_type"] == "SYSTEM_ERROR"
    assert "SIGKILL" in died.detail["cause"]


def test_node_out_of_memory_is_a_host_oom():
    (line,) = [line for line, classes in ERROR_LINES if "ray_host_oom" in classes and "NODE_OUT" in line]
    host = parse_lines([line]).first_error("ray_host_oom")
    assert host.detail["exit_type"] == "NODE_OUT_OF_MEMORY"
    assert host.detail["exit_detail"] == "Task was killed due to the node running low on memory."


ELASTIC_NEW = [  # torch >= 2.0: other failures first, then the root cause (errors/__init__.py templates)
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "pretrain_gpt.py FAILED",
    "------------------------------------------------------------",
    "Failures:",
    "[1]:",
    "  time      : 2025-05-21_15:43:04",
    "  host      : node-a",
    "  rank      : 1 (local_rank: 1)",
    "  exitcode  : -15 (pid: 14751)",
    "  error_file: <N/A>",
    "  traceback : Signal 15 (SIGTERM) received by PID 14751",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2025-05-21_15:43:03",
    "  host      : node-a",
    "  rank      : 0 (local_rank: 0)",
    "  exitcode  : -9 (pid: 14750) (SIGKILL)",
    "  error_file: <N/A>",
    "  traceback : Signal 9 (SIGKILL) received by PID 14750",
    "============================================================",
]
ELASTIC_OLD = [  # torch 1.9/1.10: root cause first, `msg:` rows, then the other failures
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "***************************************",
    "            train.py FAILED            ",
    "=======================================",
    "Root Cause:",
    "[0]:",
    "  time: 2021-10-12_07:33:18",
    "  rank: 0 (local_rank: 0)",
    "  exitcode: -11 (pid: 2817)",
    "  error_file: <N/A>",
    '  msg: "Signal 11 (SIGSEGV) received by PID 2817"',
    "=======================================",
    "Other Failures:",
    "[1]:",
    "  time: 2021-10-12_07:33:18",
    "  rank: 1 (local_rank: 1)",
    "  exitcode: -15 (pid: 2818)",
    "  error_file: <N/A>",
    '  msg: "Signal 15 (SIGTERM) received by PID 2818"',
    "***************************************",
]


@pytest.mark.parametrize(
    "lines, code, signal",
    [(ELASTIC_NEW, -9, "SIGKILL"), (ELASTIC_OLD, -11, "SIGSEGV"), (ELASTIC_NEW[13:], -9, "SIGKILL")],
    ids=["new-format", "old-format", "table-without-header"],
)
def test_childfailederror_root_cause_wins_over_other_failures(lines, code, signal):
    parsed = parse_lines(lines)
    (failed,) = [e for e in parsed.errors if e.cls == "launcher_failed"]
    assert (failed.detail["exit_code"], failed.detail["signal"]) == (code, signal)
    assert failed.detail["cause"] == signatures.signal_detail(-code)["cause"]


def test_the_agent_line_is_overruled_by_the_tables_root_cause():
    agent = "[ERROR] failed (exitcode: -15) local_rank: 1 (pid: 14751) of binary: /usr/bin/python"
    parsed = parse_lines([agent, *ELASTIC_NEW])
    failed = parsed.first_error("launcher_failed")
    assert failed.line == 1 and failed.detail["exit_code"] == -9 and failed.detail["signal"] == "SIGKILL"


SHAPE = (
    "[rank1]: RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048) at "
    "non-singleton dimension 1"
)


@given(cut=st.integers(min_value=len("[rank1]: RuntimeError: The size of tensor a"), max_value=len(SHAPE) - 1))
@settings(max_examples=60, deadline=None)
def test_a_hard_wrap_anywhere_after_the_trigger_still_gives_the_whole_shape_error(cut):
    parsed = parse_lines(["noise", SHAPE[:cut], SHAPE[cut:], "after"])
    shape = parsed.first_error("tensor_shape_mismatch")
    assert shape is not None and shape.line == 2
    assert (shape.detail["a"], shape.detail["b"]) == (4096, 2048)
    # the same through feed(), line by line (the runner's path)
    parser = LogParser()
    for number, line in enumerate(["noise", SHAPE[:cut], SHAPE[cut:], "after"], 1):
        parser.feed(line, number)
    assert {**parser.result().to_json(), "source": STORED_PLAIN} == parsed.to_json()


def test_a_wrapped_message_is_not_joined_across_a_blank_line_or_with_unrelated_text():
    head = SHAPE[:80]
    classes = parse_lines([head, "", SHAPE[80:]]).error_classes()
    assert "tensor_shape_mismatch" not in classes
    assert "tensor_shape_mismatch" not in parse_lines([head, "INFO something else entirely"]).error_classes()


def test_the_watchdogs_own_timeout_line_names_the_work_and_the_queue():
    (timeout,) = parse_lines([
        "[rank3]:[E909 09:55:46.996672294 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 3] Timeout at NCCL "
        "work: 2070, last enqueued NCCL work: 2082, last completed NCCL work: 2069."]).errors
    assert timeout.cls == "nccl_timeout"
    assert timeout.detail == {"seq": 2070, "last_enqueued": 2082, "last_completed": 2069}


_PERF_KEYS = st.sampled_from(["perf/sleep_time", "perf/update_weights_time", "perf/train_wait_time",
                              "perf/actor_train_time", "perf/step_time", "perf/actor_train_tflops"])


@given(
    metrics=st.dictionaries(_PERF_KEYS, st.floats(0, 1e4, allow_nan=False), min_size=1),
    kind=st.sampled_from(["step", "perf", "critic-step"]),
    prefix=st.sampled_from(["", ACTOR, "(MegatronTrainRayActor pid=38610) [2026-01-05 12:20:29] model.py:44 - "]),
    width=st.integers(60, 240),  # no terminal is narrower
)
@settings(max_examples=80, deadline=None)
def test_a_record_hard_wrapped_at_any_terminal_width_reads_as_the_whole_line(metrics, kind, prefix, width):
    """A terminal wraps at its width without adding a character: every piece but the last is that wide.
    (Where it wraps before the dict has begun, the record starts on the line its header does.)"""
    line = f"{prefix}{kind} 7: {metrics!r}"
    assume(width > line.index("{"))
    pieces = [line[i : i + width] for i in range(0, len(line), width)]
    whole = parse_lines(["before", line, "after"])
    wrapped = parse_lines(["before", *pieces, "after"])
    assert (wrapped.steps, wrapped.perf) == (whole.steps, whole.perf)
    assert [r.line for r in wrapped.steps + wrapped.perf] == [2]
    parser = LogParser()  # the same through feed(), line by line (the runner's path)
    for number, piece in enumerate(["before", *pieces, "after"], 1):
        parser.feed(piece, number)
    assert {**parser.result().to_json(), "source": STORED_PLAIN} == wrapped.to_json()


def test_a_record_cut_short_keeps_what_a_comma_closed_and_the_lines_after_it_are_read():
    cut = TRAIN_PERF3[: TRAIN_PERF3.index("'perf/train_wait_time': 11") + len("'perf/train_wait_time': 11")]
    whole, _ = parse_dict(TRAIN_PERF3[TRAIN_PERF3.index("{") :])
    parsed = parse_lines([cut, "Traceback (most recent call last):", '  File "x.py", line 1, in f',
                          "RuntimeError: CUDA error: an illegal memory access was encountered"])
    (perf,) = parsed.perf
    assert perf.line == 1 and perf.salvaged
    # 11.3 cut to 11 is no value: the pairs before it are whole
    assert perf.metrics == {k: v for k, v in whole.items() if k in
                            ("perf/sleep_time", "perf/update_weights_time", "perf/wake_up_time",
                             "perf/data_preprocess_time")}
    assert {"python_traceback", "cuda_illegal_memory_access"} <= parsed.error_classes()
    # a record cut on a short line is no wrap: the next line is never joined to it
    short = parse_lines(["perf 3: {'perf/step_time': 14.1, 'perf/train_ti", "me': 2.0}"])
    assert short.perf[0].metrics == {"perf/step_time": 14.1}


def test_a_wrapped_record_ends_at_a_blank_line_a_ray_prefix_or_another_record():
    head = TRAIN_PERF3[:100]
    rest = TRAIN_PERF3[100:]
    for after in ("", ACTOR + "INFO elsewhere " + rest, STEP3):
        parsed = parse_lines([head, after, rest])
        perf = next(p for p in parsed.perf if p.line == 1)
        assert "perf/step_time" not in perf.metrics, after


@pytest.mark.parametrize("code, signal", [(-9, "SIGKILL"), (-11, "SIGSEGV"), (1, None)])
def test_a_dead_sglang_scheduler_is_a_startup_failure_with_the_exit_code_of_the_next_line(code, signal):
    parsed = parse_lines(["[07-01 15:20:44] Rank 1 scheduler is dead. Please check if there are relevant logs.",
                          f"[07-01 15:20:46] Exit code: {code}"])
    (failure,) = [e for e in parsed.errors if e.cls == "sglang_server_startup_failure"]
    assert (failure.line, failure.coarse, failure.detail["rank"], failure.detail["exit_code"]) == (
        1, "sglang_startup_failure", 1, code)
    assert failure.detail.get("signal") == signal


def test_only_the_line_right_after_a_dead_scheduler_gives_its_exit_code():
    parsed = parse_lines(["Rank 0 scheduler is dead. Please check if there are relevant logs.", "something else",
                          "Exit code: -9"])
    assert "exit_code" not in parsed.first_error("sglang_server_startup_failure").detail
    assert parse_lines(["Exit code: -9"]).errors == []  # alone it says nothing of what exited


def test_gzip_and_utf16_through_stdin_and_the_cli(tmp_path):
    import gzip as gz

    text = "\n".join([ACTOR + STEP3, ACTOR + TRAIN_PERF3, SHAPE]) + "\n"
    plain = parse_stream(io.BytesIO(text.encode())).to_json()
    for name, data in {
        "gz": gz.compress(text.encode()),
        "utf16le": text.encode("utf-16"),  # Python writes the BOM
        "utf16be": b"\xfe\xff" + text.encode("utf-16-be"),
        "gz-of-utf16": gz.compress(text.encode("utf-16")),
        "utf8-bom": b"\xef\xbb\xbf" + text.encode(),
    }.items():
        doc = parse_stream(io.BytesIO(data)).to_json()
        for key in ("steps", "perf", "errors", "lines"):
            assert doc[key] == plain[key], (name, key)
    proc = subprocess.run(
        [sys.executable, "-m", "cpverify", "parse", "-", "--json"],
        input=gz.compress(text.encode()),
        capture_output=True,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["steps"] == plain["steps"]


def test_a_cut_gzip_keeps_what_was_read_and_says_so(tmp_path):
    import gzip as gz

    lines = [ACTOR + STEP3.replace("step 3", f"step {i}") for i in range(1, 2001)]
    data = gz.compress(("\n".join(lines) + "\n").encode())
    cut = tmp_path / "arm.log.gz"
    cut.write_bytes(data[: len(data) // 2])
    parsed = parse_file(cut)
    assert 0 < len(parsed.steps) < 2000
    assert [s.step for s in parsed.steps] == list(range(1, len(parsed.steps) + 1))
    assert parsed.source["cut"]  # the cut is recorded with the source


def test_a_gzip_that_is_not_one_is_an_input_error_with_the_fix(tmp_path):
    bad = tmp_path / "arm.log.gz"
    bad.write_bytes(b"\x1f\x8b" + b"not gzip at all" * 10)
    with pytest.raises(InputError) as info:
        parse_file(bad)
    assert "gzip" in str(info.value) and "gzip -t" in info.value.fix
    proc = subprocess.run(
        [sys.executable, "-m", "cpverify", "parse", str(bad)], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert proc.returncode == 2 and "gzip -t" in proc.stderr


def test_gzip_is_streamed_not_read_whole(tmp_path):
    import gzip as gz

    path = tmp_path / "big.log.gz"
    with gz.open(path, "wb") as out:
        for i in range(120_000):  # ~14 MB of text, a few hundred KB compressed
            out.write(f"{ACTOR}NCCL INFO Channel {i % 32:02d}/0 : {i % 8}[{i % 8}] -> 1[1] via P2P/CUMEM\n".encode())
    tracemalloc.start()
    try:
        parsed = parse_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert parsed.lines == 120_000 and parsed.nccl.transports == ["P2P/CUMEM"]
    assert peak < 8 * 1024 * 1024, peak  # a whole-file read alone would take 14 MB


_KEYS = st.text(st.characters(blacklist_characters="'\\\n\r", blacklist_categories=("Cs",)), max_size=12)
_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.booleans(),
    st.none(),
    st.sampled_from(["nan", "inf", "-inf", "0", "x y", ""]),
)


# Dict-like text built of Python's literals and JSON's words (true, null, NaN, -0, ...), which the
# fast reader must not take for Python's.
_ODD_VALUES = st.sampled_from(
    ["1", "-0", "0", "00", "007", "1.5", "-2.5e-09", "1E+5", "1.", ".5", "1e400", "1" + "0" * 400, "true", "True",
     "false", "null", "None", "NaN", "nan", "inf", "-inf", "Infinity", "-Infinity", "'nan'", "'-inf'", "'x y'",
     "[1]", "{'c': 2}", '"a"', "1_0", "0x1", "+1", "- 1", "--1", "'a\tb'"]
)
_DICT_SOUP = st.tuples(
    st.lists(
        st.tuples(st.sampled_from(["'a'", "'b'", "'nan'", '"a"', "1", "'a\tb'"]), st.sampled_from([": ", ":", " :\n"]),
                  _ODD_VALUES),
        max_size=5,
    ),
    st.sampled_from([", ", ",", " ,\t"]),
    st.sampled_from(["", ",", " x", "}"]),
).map(lambda t: "{" + t[1].join(k + colon + v for k, colon, v in t[0]) + "}" + t[2])


@given(st.one_of(st.dictionaries(_KEYS, _VALUES, max_size=12).map(repr), _DICT_SOUP))
@example("{'a': 1" + "0" * 400 + ", 'b': 2}")  # an int past float range is inf, as Python's float(int) says
@example("{'a': true, 'a': 1}")  # JSON's true, hidden by a later key, is still no Python
@example("{'a': -0, 'b': [1], 'c': 'inf'}")
@example("{'a': 18446744073709551616, 'b': -9223372036854775809, 'c': 1e-400, 'd': 8}")  # past 64 bits: orjson
@settings(max_examples=600, deadline=None)
@pytest.mark.parametrize("reader", dicts.JSON_READERS)
def test_dicts_read_fast_equal_ast_literal_eval(reader, text):
    """slime prints its dicts with Python's repr, bare nan/inf included; anything else must
    read as ast.literal_eval (then the salvaging regex) reads it, whichever JSON reader reads it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dicts, "JSON_READER", reader)
        fast, salvaged = parse_dict(text)
    slow, slow_salvaged = dicts._parse_dict_literal(text)
    assert salvaged == slow_salvaged
    assert list(fast) == list(slow)
    for key, value in fast.items():
        assert type(value) is float  # an int would print as one in the JSON
        assert value == slow[key] or (math.isnan(value) and math.isnan(slow[key]))
        assert math.copysign(1, value) == math.copysign(1, slow[key])  # -0 is Python's int 0


@pytest.mark.parametrize("reader", dicts.JSON_READERS)
def test_slimes_dicts_take_the_fast_path(monkeypatch, reader):
    monkeypatch.setattr(dicts, "JSON_READER", reader)
    for line in (STEP3, TRAIN_PERF3, ROLLOUT_PERF3):
        assert dicts._flat_repr(line[line.index("{") :]) is not None, line


def test_a_number_past_pythons_digit_limit_is_data_not_a_crash():
    # int("1" * 5000) raises ValueError (Python's 4300-digit limit): a parser that calls it dies.
    parsed = parse_lines([ACTOR + "model.py:918 - step 1: {'train/loss': " + "1" * 5000 + ", 'train/step': 1}"])
    (step,) = parsed.steps
    assert (step.step, step.salvaged, step.metrics) == (1, True, {"train/step": 1.0})


# Transport words that are prefixes of one another: the block scan must tell them apart.
_VIA_WORDS = st.sampled_from(
    ["P2P/CUMEM", "P2P/CUMEM/read", "P2P/IPC", "P2P/IPC/read", "P2P/direct", "SHM/direct/direct", "SHM",
     "NET/IB/0", "NET/IB/0/GDRDMA", "NET/IB/1/GDRDMA", "NET/Socket/0", "NET/Socket/1", "COLLNET", "P"]
) | st.text(st.sampled_from("P2/CUMNETIBSocket01"), min_size=1, max_size=12)


@pytest.mark.parametrize("engine", scan.ENGINES)
@given(seen=st.sets(_VIA_WORDS, max_size=8), word=_VIA_WORDS, end=st.sampled_from(["", " pointer", "\r", "\t"]))
@settings(max_examples=300, deadline=None)
def test_a_channel_line_is_found_exactly_when_its_transport_word_is_unseen(engine, seen, word, end):
    data = f"{nccl('Channel 00/0 : 0[0] -> 1[1] via ' + word + end)}\nnoise\n".encode()
    _, vias = scan.BlockScan(engine, {w.encode() for w in seen}).scan(data, 0, len(data))
    assert vias == ([0] if word not in seen else [])


@given(
    words=st.lists(
        st.sampled_from([*(t.upper() for t in GATE_TOKENS), *GATE_TOKENS, "noise", "", "x" * 30, "via P2P/IPC"]),
        max_size=40,
    ),
    seen=st.sets(_VIA_WORDS, max_size=4),
)
@settings(max_examples=200, deadline=None)
def test_both_block_scans_find_the_same_lines(words, seen):
    if len(scan.ENGINES) < 2:
        pytest.skip("hyperscan is not installed here (no wheel for this platform)")
    data = ("\n".join(" ".join(words[i : i + 3]) for i in range(0, len(words), 3)) + "\n").encode()
    found = []
    for engine in scan.ENGINES:
        starts, vias = scan.BlockScan(engine, {w.encode() for w in seen}).scan(data, 0, len(data))
        found.append((starts, vias))
    assert found[0] == found[1]


def _channel_or_step(item: tuple[str, int, bool]) -> str:
    word, n, channel = item
    if channel:
        return nccl(f"Channel {n % 32:02d}/0 : {n}[{n % 8}] -> 0[0] via {word}")
    return ACTOR + f"step {n}: {{'train/loss': 0.5}}"


@pytest.mark.parametrize("engine", scan.ENGINES)
@given(lines=st.lists(st.tuples(_VIA_WORDS, st.integers(0, 63), st.booleans()).map(_channel_or_step), max_size=60))
@settings(max_examples=150, deadline=None)
def test_no_new_transport_is_missed_however_the_blocks_fall(engine, lines):
    """Blocks of 256 bytes: the channel pattern is compiled again and again as the cache grows."""
    data = ("\n".join(lines) + "\n").encode()
    expected: list[str] = []
    for line in lines:
        if " via " in line:
            transport = normalise_transport(line.rsplit(" via ", 1)[1])
            if transport not in expected:
                expected.append(transport)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scan, "ENGINE", engine)
        patch.setattr(stream, "READ_BLOCK_BYTES", 256)
        parsed = parse_stream(io.BytesIO(data))
    assert parsed.nccl.transports == expected
    assert parsed.to_json() == {**feed_all(data).to_json(), "source": STORED_PLAIN}



# ---------------------------------------------------------------------------- tracebacks without a header

_FRAMES = [
    ('  File "/root/slime/train.py", line 34, in train', "    actor_model.update_weights()"),
    ('  File "/root/slime/slime/ray/actor_group.py", line 124, in update_weights', "    return ray.get(refs)"),
    ('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 2882, in get',
     "    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)"),
    ('  File "/root/Megatron-LM/megatron/core/parallel_state.py", line 780, in initialize_model_parallel',
     "    raise RuntimeError("),
]
_EXCEPTIONS = [
    "ValueError: Invalid type of object refs, <class 'NoneType'>, is given.",
    "KeyError: 'rollout_id'",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "AssertionError: num_rollouts (2) < global_batch_size (8); need at least one rollout per step.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "RuntimeError: world_size (8) is not divisible by expert_tensor_model_pipeline_parallel size (16)",
    "ray.exceptions.RayTaskError(ValueError): ray::RolloutManager.generate() (pid=918378, ip=10.0.0.1)",
    "Exception: Capture cuda graph failed: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed",
    "ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)",
    "StopIteration",
    "UserWarning: an error raised from a warning filter",
    "slime.utils.errors.RolloutCollapsed: every reward of the batch is NaN",
]


@settings(max_examples=200, deadline=None)
@given(frames=st.lists(st.sampled_from(_FRAMES), min_size=1, max_size=4), exception=st.sampled_from(_EXCEPTIONS),
       prefix=st.sampled_from(["", "[rank0]: ", ACTOR]), carets=st.booleans())
def test_a_traceback_without_its_header_gives_what_it_gives_with_it(frames, exception, prefix, carets):
    """A paste that lost `Traceback (most recent call last):`, or Ray's remote traceback, which never has
    it: the same classes, python_traceback included, and the same exception."""
    body = [line for frame, code in frames for line in (frame, code, *(["    ^^^^^^"] if carets else []))]
    headed = parse_lines([prefix + line for line in ["Traceback (most recent call last):", *body, exception]])
    cut = parse_lines([prefix + line for line in [*body, exception]])
    assert cut.error_classes() == headed.error_classes() and "python_traceback" in cut.error_classes()
    traceback = cut.first_error("python_traceback")
    assert traceback.line == len(body) + 1  # the exception's line: nothing above it says "traceback"
    assert (traceback.detail["exception"], traceback.detail["frames_from"]) == (exception.split(":")[0], 1)
    assert headed.first_error("python_traceback").detail["exception"] == exception.split(":")[0]


@settings(max_examples=100, deadline=None)
@given(frames=st.lists(st.sampled_from(_FRAMES), min_size=1, max_size=4), exception=st.sampled_from(_EXCEPTIONS),
       depth=st.integers(0, 3), prefix=st.sampled_from(["", ACTOR]))
def test_an_exception_groups_margin_hides_nothing_of_its_tracebacks(frames, exception, depth, prefix):
    """Python 3.11+ prints the tracebacks inside an exception group behind a margin (`  | `, nested
    ones further in, the first line `  + Exception Group Traceback ...`)."""
    lines = ["Traceback (most recent call last):", *(line for pair in frames for line in pair), exception]
    margin = " " * (2 + 2 * depth)
    grouped = [prefix + margin + ("+ " if i == 0 else "| ") + line for i, line in enumerate(lines)]
    plain, seen = parse_lines([prefix + line for line in lines]), parse_lines(grouped)
    assert [(tb.exception, tb.frames) for tb in seen.tracebacks] == [(tb.exception, tb.frames) for tb in plain.tracebacks]
    assert seen.error_classes() == plain.error_classes()


@pytest.mark.parametrize("logged", ["INFO: Shutting down", "Note: NumExpr detected 16 cores", "WARNING: retrying"])
def test_a_lone_word_after_the_frames_is_a_loggers_line_not_the_exception(logged):
    parsed = parse_lines(["Traceback (most recent call last):", *(line for pair in _FRAMES for line in pair), logged])
    assert parsed.tracebacks[0].exception is None


def test_frames_that_end_in_no_exception_are_no_traceback_error():
    """`traceback.print_stack()` and cut pastes print frames only: nothing failed that the log shows."""
    parsed = parse_lines([line for frame in _FRAMES for line in frame] + ["[2026-08-21 10:00:28] train.py:1 - done"])
    assert parsed.errors == [] and len(parsed.tracebacks) == 1


# ---------------------------------------------------------------------------- slow progress bars


def _tqdm(done: int, total: int, s_per_it: float, desc: str = "Update weights") -> str:
    """A bar as tqdm itself draws it (tqdm comes with huggingface_hub)."""
    from tqdm import tqdm

    return tqdm.format_meter(done, total, done * s_per_it, prefix=desc)


_STOP = ["Traceback (most recent call last):", '  File "/root/slime/train.py", line 34, in train',
         "    actor_model.update_weights()"]


@settings(max_examples=200, deadline=None)
@given(total=st.integers(1, 64), s_per_it=st.floats(1.5, 5000), moves=st.integers(1, 5))
def test_a_bar_that_finishes_is_no_hang_however_slow(total, s_per_it, moves):
    """A ten-minute step that completes (637 s/it) is slow, not hung, even when the run stops later."""
    steps = sorted({max(1, total * k // moves) for k in range(1, moves + 1)} | {total})
    lines = [_tqdm(done, total, s_per_it) for done in steps] + _STOP + ["KeyboardInterrupt"]
    assert parse_lines(lines).first_error("hang") is None


@settings(max_examples=200, deadline=None)
@given(done=st.integers(1, 15), s_per_it=st.floats(1.5, 5000), end=st.sampled_from(["", "KeyboardInterrupt", "cut",
                                                                                    "ValueError: bad"]))
def test_an_unfinished_slow_bar_is_a_hang_only_when_the_run_was_stopped_under_it(done, s_per_it, end):
    """Stopped under it: a traceback that ends in Ctrl-C (or a wait's timeout), or is cut before its
    exception, right after the bar. A log that just ends there, or a real error, is no hang."""
    bar = _tqdm(done, 16, s_per_it)
    lines = [bar] + {"": [], "cut": _STOP}.get(end, [*_STOP, end])
    hang = parse_lines(lines).first_error("hang")
    shown = float(bar.rsplit(", ", 1)[1].split("s/it")[0])  # the pace as the bar prints it
    stopped = end in ("KeyboardInterrupt", "cut") and shown >= bars.SLOW_SECONDS_PER_ITEM
    assert (hang is not None) == stopped
    if stopped:
        assert hang.line == 1 and (hang.detail["done"], hang.detail["total"], hang.detail["s_per_it"]) == (
            done, 16, shown)


def test_a_traceback_given_up_before_the_log_ends_does_not_make_a_slow_bar_a_hang():
    """Only a log that ends inside the traceback says the run was stopped there: a traceback whose
    exception the parser did not recognise, followed by more output, says nothing of the bar."""
    lines = [_tqdm(1, 16, 661.36), *_STOP, "slime.utils.SomethingHappened", *(["[2026] x.py:1 - going on"] * 9)]
    assert parse_lines(lines).first_error("hang") is None
    assert parse_lines(lines[:4]).first_error("hang").line == 1


def test_a_slow_bar_that_moves_on_is_forgotten_and_the_stopped_one_is_named():
    lines = [_tqdm(1, 16, 661.36), _tqdm(2, 16, 650.0), "[2026-08-21 10:00:28] x.py:1 - still here", *_STOP,
             "ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready."]
    hang = parse_lines(lines).first_error("hang")
    assert (hang.line, hang.detail["done"], hang.detail["stopped_by"]) == (2, 2, "GetTimeoutError")


def test_the_last_drawing_of_a_bar_redrawn_with_carriage_returns_is_read():
    line = "\r".join(_tqdm(done, 4, 700.0) for done in (1, 2, 3, 4))
    assert bars.last_bar(line) == bars.Bar("Update weights", 4, 4, 2800.0, 700.0)
    assert parse_lines([line, *_STOP, "KeyboardInterrupt"]).first_error("hang") is None
