"""What the parser recognises as an error: signatures, their classes, and the pre-filter.

Each signature names a fine error class, cheap trigger substrings and (optionally) a regex
that must match. COARSE_CLASS maps fine classes to the coarse vocabulary of the parse contract (ARCHITECTURE.md). GATE_TOKENS
is the pre-filter: every trigger (and every record marker of cpverify.parse.parser) contains one of
its words, lower-cased, so a line without any of them can be skipped unread.
Add a signature here with a line of the real program's output in tests/test_logs.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cpverify.parse.bars import TQDM_STILL, still_bar
from cpverify.parse.native import NATIVE_TRIGGERS, SIGNAL_CAUSES, native_crash, native_cuda, signal_detail

__all__ = ["SIGNAL_CAUSES", "signal_detail"]  # the parser's and the tests' one reading of a signal

TB_HEADER = "Traceback (most recent call last)"


def number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def integer(text: str) -> int | None:
    """The int of a captured digit string, None when it is none (`²` is a \\d, 5000 digits too many)."""
    try:
        return int(text)
    except ValueError:
        return None


def _scalar(text: str) -> int | float | str:
    value: int | float | None = integer(text)
    if value is None:
        value = number(text)
    return text if value is None else value


@dataclass(frozen=True)
class Signature:
    cls: str
    triggers: tuple[str, ...]  # cheap substrings: the regex runs only when one is present
    regex: re.Pattern[str] | None = None
    detail: Callable[[re.Match[str] | None, str], dict[str, Any] | None] | None = None
    # A trigger without a regex match may be a message a terminal hard-wrapped: the parser
    # then tries the regex once more on this line joined with the next one.
    joins: bool = False
    # When the class was already reported, a later line of this signature adds its detail
    # to that report (Ray prints `ActorDiedError` first, the worker's exit type lines later).
    enriches: bool = False
    # A line holding one of these is no such error, whatever else it says (torch_memory_saver's
    # `CUDA_ERROR_OUT_OF_MEMORY (may not be an issue ...)`: the allocator frees its cache and retries).
    unless: tuple[str, ...] = ()
    # The detail the next line may add, whatever it holds (SGLang logs a dead scheduler's exit code
    # on the line after, in words the gate does not know).
    then: Callable[[str], dict[str, Any]] | None = None


def _sig(cls: str, *triggers: str, rx: str | None = None, detail=None, joins=False, enriches=False,
         unless: tuple[str, ...] = (), then=None) -> Signature:
    return Signature(cls, triggers, re.compile(rx) if rx else None, detail, joins, enriches, unless, then)


def _fields(**patterns: str) -> Callable[[re.Match[str] | None, str], dict[str, Any]]:
    """A detail extractor: each named regex's first group (a number where it is one)."""
    compiled = {k: re.compile(p) for k, p in patterns.items()}

    def extract(_m: re.Match[str] | None, text: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, rx in compiled.items():
            found = rx.search(text)
            if found:
                out[key] = _scalar(found.group(1))
        return out

    return extract


def _group(name: str) -> Callable[[re.Match[str] | None, str], dict[str, Any]]:
    return lambda m, _t: {name: m.group(1).strip()} if m and m.group(1) else {}


def _launcher_failed(_m: re.Match[str] | None, text: str) -> dict[str, Any]:
    found = _EXITCODE.search(text)
    if found is None:
        return {}
    code = int(found.group(1))
    return {"exit_code": code, **(signal_detail(-code) if code < 0 else {})}


_EXITCODE = re.compile(r"exitcode\s*:\s*(-?\d{1,4})\b")
_PROCESS_EXIT = re.compile(r"\bExit code: (-?\d{1,4})\s*$")


def _process_exit(text: str) -> dict[str, Any]:
    """A multiprocessing exit code as SGLang logs it (`Exit code: -9`): a negative one is a signal."""
    found = _PROCESS_EXIT.search(text)
    if found is None:
        return {}
    code = int(found.group(1))
    return {"exit_code": code, **(signal_detail(-code) if code < 0 else {})}
_RAY_EXIT_TYPE = re.compile(r"Worker exit type: ([A-Z_]{1,40})")
_RAY_EXIT_DETAIL = re.compile(r"Worker exit detail: (.{1,300}?)(?= There are some| Some common|$)")


def _ray_worker_died(_m: re.Match[str] | None, text: str) -> dict[str, Any]:
    """Ray's words on a dead worker (GCS GenWorkerDiedCause, raylet HandleClientConnectionError)."""
    out: dict[str, Any] = {}
    kind = _RAY_EXIT_TYPE.search(text)
    if kind:
        out["exit_type"] = kind.group(1)
    said = _RAY_EXIT_DETAIL.search(text)
    if said:
        out["exit_detail"] = said.group(1).strip()
    if "connection error code" in text or "OOM killer" in text:
        # The raylet lost the worker's socket: nothing was raised, the process just vanished.
        out["cause"] = ("the worker process vanished without an error: most likely killed by SIGKILL "
                        "(the host OOM killer), else a native crash (SIGSEGV)")
    elif "memory limits" in text:
        out["cause"] = "the worker exited with no exit code: it may have exceeded the pod's memory limit"
    elif "because its owner has died" in text:
        out["cause"] = "the process that created the actor died first: look for its error above"
    return out


def _shape(m: re.Match[str] | None, _t: str) -> dict[str, Any]:
    assert m is not None
    return {k: int(v) for k, v in m.groupdict().items() if v is not None}


# fine class -> the contract's coarse class (ARCHITECTURE.md) (a class not listed is its own coarse class)
COARSE_CLASS = {
    "nccl_heartbeat_stuck": "hang",
    "nccl_cuda_failure": "nccl_error",
    "nccl_unhandled_system_error": "nccl_error",
    "nccl_internal_error": "nccl_error",
    "nccl_invalid_usage": "nccl_error",
    "nccl_remote_error": "nccl_error",
    "nccl_shm_failure": "nccl_error",
    "torch_distributed_error": "nccl_error",
    "sglang_not_enough_memory": "cuda_oom",
    "cuda_device_assert": "cuda_error",
    "cudnn_error": "cuda_error",
    "cublas_error": "cuda_error",
    "native_check_failed": "assertion_error",
    "native_crash": "crash",
    "nccl_invalid_argument": "nccl_error",
    "cp_shape_mismatch": "collective_shape_mismatch",
    "tensor_shape_mismatch": "collective_shape_mismatch",
    "ray_host_oom": "ray_actor_died",
    "sglang_server_startup_failure": "sglang_startup_failure",
    "sglang_scheduler_exception": "sglang_error",
    "sglang_child_process_failed": "sglang_error",
    "dist_store_timeout": "hang",
    "ray_node_died": "ray_actor_died",
    "python_fatal_error": "crash",
    "sglang_health_check_failed": "sglang_error",
    "sglang_http_500": "sglang_error",
    "sglang_http_5xx": "sglang_error",
    "slime_flush_cache_timeout": "sglang_error",
    "slime_http_max_retries": "sglang_error",
    "argparse_unrecognized_arguments": "argparse_error",
    "argparse_ambiguous_option": "argparse_error",
    "argparse_invalid_choice": "argparse_error",
    "argparse_missing_required": "argparse_error",
    "megatron_cuda_device_max_connections": "assertion_error",
    "megatron_world_size_not_divisible": "assertion_error",
    "megatron_seq_length_multiple": "assertion_error",
    "slime_num_rollouts_lt_global_batch": "assertion_error",
    "slime_num_rollout_not_set": "assertion_error",
    "slime_ci_threshold": "assertion_error",
    "slime_grad_norm_mismatch": "assertion_error",
    "slime_hf_validate_args_failed": "config_error",
    "slime_ref_load_missing": "config_error",
    "missing_path": "config_error",
    "slime_rm_type_missing": "config_error",
    "torch_memory_saver_missing": "environment_error",
    "ray_placement_group_wait": "resource_wait",
}


def coarse_class(cls: str) -> str:
    """The contract's coarse class (ARCHITECTURE.md) of a (possibly finer) error class."""
    return COARSE_CLASS.get(cls, cls)


_NCCL_TIMEOUT_DETAIL = _fields(
    op=r"OpType=(\w+)",
    seq=r"(?:SeqNum=|[Tt]imeout (?:at NCCL work|is detected by watchdog at work): )(\d+)",
    timeout_ms=r"Timeout\(ms\)=(\d+)",
    ran_ms=r"ran for (\d+) milliseconds",
    last_enqueued=r"last enqueued NCCL work: (\d+)",
    last_completed=r"last completed NCCL work: (\d+)",
)
_OOM_DETAIL = _fields(
    tried=r"Tried to allocate ([\d.]+ [KMGT]?i?B)",
    gpu=r"GPU (\d+) has a total capacity",
    capacity=r"total capacity of ([\d.]+ [KMGT]?i?B)",
    free=r"of which ([\d.]+ [KMGT]?i?B) is free",
    allocated_by_pytorch=r"(?<![\d.])([\d.]{1,20} [KMGT]?i?B) is allocated by PyTorch",
)

# Order matters only within one line (fine classes before the generic ones of their family).
# Every trigger contains a GATE_TOKENS word, case-insensitively (tests/test_logs.py checks it).
SIGNATURES: tuple[Signature, ...] = (
    # NCCL / torch.distributed
    # ProcessGroupNCCL's watchdog: checkTimeout's `Watchdog caught collective operation timeout:
    # WorkNCCL(SeqNum=...)`, then watchdogHandler's own line, `Timeout at NCCL work: N, last enqueued
    # NCCL work: M, last completed NCCL work: K.` (torch 2.4-2.6; newer: `Work timeout is detected by
    # watchdog at work: N, ...`), which a fragment may hold alone.
    _sig("nccl_timeout", "collective operation timeout", "Timeout at NCCL work: ",
         "Work timeout is detected by watchdog", detail=_NCCL_TIMEOUT_DETAIL),
    _sig(
        "dist_store_timeout",
        "DistStoreError",
        rx=r"DistStoreError: Timed out",
        detail=_fields(waited_s=r"after (\d+) seconds", joined=r"(\d+/\d+) clients joined"),
    ),
    _sig(
        "nccl_heartbeat_stuck",
        "watchdog got stuck",
        "Heartbeat monitor timed out",
        detail=_fields(stuck_s=r"stuck for (\d+) seconds"),
    ),
    # ncclGetErrorString's words (init.cc) name the NCCL result wherever it is printed
    _sig(
        "nccl_cuda_failure",
        "Cuda failure",
        "ncclUnhandledCudaError",
        "unhandled cuda error",
        detail=_fields(reason=r"Cuda failure (?:\d+ )?'([^']*)'"),
    ),
    _sig("nccl_unhandled_system_error", "unhandled system error", "ncclSystemError"),
    _sig("nccl_internal_error", "ncclInternalError", "internal error - please report"),
    _sig("nccl_invalid_usage", "NCCL error", "NCCL Error", rx=r"NCCL [Ee]rror.{0,300}?invalid usage"),
    _sig("nccl_invalid_argument", "NCCL error", "NCCL Error", rx=r"NCCL [Ee]rror.{0,300}?invalid argument"),
    _sig("nccl_remote_error", "ncclRemoteError", "remote process exited or there was a network error"),
    _sig("nccl_shm_failure", "Error while creating shared memory segment"),
    # TransformerEngine's NVTE_CHECK_NCCL says `NCCL Error: `
    _sig("nccl_error", "NCCL error", "NCCL Error: ", "DistBackendError", "Some NCCL operations have failed"),
    _sig("torch_distributed_error", "after torch distributed error"),
    _sig("nccl_warn", "NCCL WARN"),
    # CUDA
    _sig(
        "cuda_oom",
        "out of memory",
        "OUT_OF_MEMORY",
        "cudaErrorMemoryAllocation",
        "OutOfMemoryError",
        "ALLOC_FAILED",
        "Failed to CUDA calloc",
        rx=r"CUDA out of memory|CUDA (?:driver )?error: out of memory|CUDA_ERROR_OUT_OF_MEMORY"
        r"|cudaErrorMemoryAllocation|torch\.(?:cuda\.)?OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED"
        r"|CUDNN_STATUS_ALLOC_FAILED|Failed to CUDA calloc",  # NCCL's alloc.h
        detail=_OOM_DETAIL,
        unless=("(may not be an issue",),
    ),
    _sig("cuda_oom", *NATIVE_TRIGGERS, "Cuda failure", detail=native_cuda("cuda_oom"),
         unless=("(may not be an issue",)),
    _sig("sglang_not_enough_memory", "Not enough memory. Please try to increase --mem-fraction-static"),
    _sig(
        "cuda_illegal_memory_access", "illegal memory access", "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS"
    ),
    _sig("cuda_illegal_memory_access", *NATIVE_TRIGGERS, detail=native_cuda("cuda_illegal_memory_access")),
    # a kernel's own assert(): the device prints `<file>:<line>: <f>: block: [x,y,z], thread: [x,y,z] Assertion ...`
    _sig("cuda_device_assert", "` failed.", rx=r"block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion `"),
    _sig("cuda_device_assert", *NATIVE_TRIGGERS, "Cuda failure", detail=native_cuda("cuda_device_assert")),
    # cuDNN and cuBLAS in their callers' words (torch: `cuDNN error: CUDNN_STATUS_...`, `CUDA error:
    # CUBLAS_STATUS_... when calling`; TransformerEngine: `cuDNN Error: [cudnn_frontend] Error: ...`, `cuBLAS Error:`)
    _sig("cudnn_error", "cuDNN Error", "cuDNN error", "error: CUDNN_STATUS_", "Error: CUDNN_STATUS_",
         "[cudnn_frontend] Error",
         detail=_fields(reason=r"(?:cuDNN [Ee]rror: |\[cudnn_frontend\] Error: )+(.{1,200}?)(?:\.? For more|\s*$)"),
         unless=("ALLOC_FAILED",)),
    _sig("cublas_error", "cuBLAS Error", "error: CUBLAS_STATUS_", "Error: CUBLAS_STATUS_",
         detail=_fields(reason=r"\b(CUBLAS_STATUS_[A-Z_]+)"),
         unless=("ALLOC_FAILED",)),
    _sig("cuda_error", *NATIVE_TRIGGERS, detail=native_cuda("cuda_error")),
    # native checks: TransformerEngine's NVTE_CHECK, torch's TORCH_INTERNAL_ASSERT, C's assert()
    _sig(
        "native_check_failed",
        "Assertion failed: ",
        "INTERNAL ASSERT FAILED",
        "' failed.",
        rx=r" in function [^:\n]{1,200}: Assertion failed: (.{1,300})|(.{0,200}INTERNAL ASSERT FAILED at .{1,200})"
        r"|: Assertion `(.{1,300})' failed\.",
        detail=lambda m, _t: {"check": next(g for g in m.groups() if g).strip()} if m else {},
        unless=("block: [",),
    ),
    # the process died in native code: an uncaught C++ exception (std::terminate), a signal
    _sig(
        "native_crash",
        "terminate called",
        "received at time=",
        "(core dumped)",
        rx=r"terminate called (?:after throwing|recursively|without an active exception)"
        r"|\*\*\* SIG(?:SEGV|ABRT|BUS|ILL|FPE) received at time=|\(core dumped\)",
        detail=native_crash,
    ),
    # shapes of collectives / CP (raised as exceptions: the word Error is on the line)
    _sig(
        "collective_shape_mismatch",
        "Error",
        rx=r"[Mm]ismatch between collectives|output tensor size must be equal to world_size"
        r"|scatter/gather must|same size as output size times world size",
    ),
    _sig(
        "cp_shape_mismatch",
        "Error",
        rx=r"log_prob length mismatch|Shape mismatch before whitening|loss_masks\.shape:"
        r"|AssertionError: Expected \d+,? got",
    ),
    # PyTorch's own shape checks (ATen ExpandUtils infer_size / inferExpandGeometry, cat, view,
    # matmul): in CP code they are the sequence split going wrong. Long enough to be hard-wrapped.
    _sig(
        "tensor_shape_mismatch",
        "size of tensor a",
        "expanded size of the tensor",
        "Sizes of tensors must match",
        "shapes cannot be multiplied",
        "is invalid for input of size",
        rx=r"The size of tensor a \((?P<a>\d{1,12})\) must match the size of tensor b \((?P<b>\d{1,12})\) "
        r"at non-singleton dimension (?P<dim>\d{1,3})\b"
        r"|The expanded size of the tensor \((?P<expanded>\d{1,12})\) must match the existing size "
        r"\((?P<existing>\d{1,12})\) at non-singleton dimension (?P<dim2>\d{1,3})\b"
        r"|Sizes of tensors must match except in dimension \d{1,3}\. Expected size (?P<expected>\d{1,12}) but got "
        r"size (?P<got>\d{1,12})\b"
        r"|shapes cannot be multiplied \(\d{1,12}x\d{1,12} and \d{1,12}x\d{1,12}\)"
        r"|shape '\[[-\d, ]{0,100}\]' is invalid for input of size (?P<size>\d{1,15})\b",
        detail=_shape,
        joins=True,
    ),
    # Ray
    # Ray's worker-death wording (gcs_actor_manager GenWorkerDiedCause: "The actor is dead because
    # its worker process has died. Worker exit type: X Worker exit detail: Y"); out-of-memory
    # kills name NODE_OUT_OF_MEMORY, a dead node has its own sentence.
    _sig(
        "ray_host_oom",
        "Worker exit type: NODE_OUT_OF_MEMORY",
        "ray.exceptions.OutOfMemoryError",
        "node running low on memory",
        "killed due to memory pressure",
        detail=_ray_worker_died,
    ),
    _sig("ray_node_died", "NodeDiedError", "The actor is dead because its node has died"),
    _sig(
        "ray_actor_died",
        "ActorDiedError",
        "The actor died unexpectedly",
        "RayActorError",
        "killed while executing a task by an unexpected system error",
        "The actor is dead because",
        detail=_ray_worker_died,
        enriches=True,
    ),
    _sig("ray_actor_unavailable", "ActorUnavailableError"),
    _sig("ray_task_error", "RayTaskError"),
    _sig(
        "ray_job_failed",
        "' failed",
        "entrypoint command failed",
        rx=r"Job '[^']+' failed|Job entrypoint command failed",
        detail=_fields(exit_code=r"exit code (-?\d+)"),
    ),
    _sig("ray_placement_group_wait", "Waiting for placement group", detail=_fields(elapsed_s=r"elapsed ([\d.]+)s")),
    # SGLang (and slime's view of it)
    _sig("sglang_server_startup_failure", "Initialization failed", "Server process terminated unexpectedly"),
    # SGLang's engine, a scheduler process dead before it was ready (_wait_for_scheduler_ready): `Rank N
    # scheduler is dead. Please check if there are relevant logs.`, then `Exit code: N` (-9: SIGKILL).
    _sig("sglang_server_startup_failure", "scheduler is dead. Please check", rx=r"Rank (\d+) scheduler is dead",
         detail=lambda m, _t: {"rank": int(m.group(1))} if m else {}, then=_process_exit),
    _sig("sglang_scheduler_exception", "Scheduler hit an exception", "Exception in run_scheduler_process"),
    _sig("sglang_child_process_failed", "It usually means the child failed", "Child process unexpectedly failed",
         detail=_fields(exit_code=r"with an exit code (-?\d+)")),  # SGLang's engine: SIGQUIT, or older SIGCHLD
    _sig("sglang_health_check_failed", "Health check failed for rollout engine"),
    _sig("sglang_http_500", 'HTTP/1.1" 500', rx=r'"[A-Z]+ [^"]* HTTP/1\.1" 500\b'),
    _sig("sglang_http_5xx", 'HTTP/1.1" 5', rx=r'"[A-Z]+ [^"]* HTTP/1\.1" 5(?!00)\d\d\b'),
    _sig("slime_flush_cache_timeout", "Timeout while flushing cache"),
    _sig("slime_http_max_retries", "failing", rx=r"Max retries \(\d+\) reached"),
    # argparse (slime, Megatron, SGLang and any launcher)
    _sig(
        "argparse_unrecognized_arguments",
        "error: unrecognized arguments:",
        rx=r"error: unrecognized arguments: (.*)",
        detail=_group("arguments"),
    ),
    _sig(
        "argparse_ambiguous_option",
        "error: ambiguous option:",
        rx=r"error: ambiguous option: (.*)",
        detail=_group("option"),
    ),
    _sig(
        "argparse_invalid_choice",
        "error: argument",
        rx=r"error: argument (.{0,200}?): invalid choice:",
        detail=_group("argument"),
    ),
    _sig("argparse_missing_required", "error: the following arguments are required:"),
    _sig("argparse_error", ": error: ", rx=r"^[\w./\\-]{1,120}: error: "),
    # asserts and configuration (Megatron, slime): raised as exceptions, "Error" is on the line
    _sig(
        "megatron_cuda_device_max_connections",
        "Error",
        rx=r"requires? setting the environment variable CUDA_DEVICE_MAX_CONNECTIONS",
    ),
    _sig("megatron_world_size_not_divisible", "Error", rx=r"world[ _]size \(\d+\) is not divisible by"),
    _sig("megatron_seq_length_multiple", "Error", rx=r"seq-length should be a multiple of"),
    _sig("slime_num_rollouts_lt_global_batch", "Error", rx=r"num_rollouts \(\d+\) < global_batch_size \(\d+\)"),
    _sig("slime_num_rollout_not_set", "Error", rx=r"num_rollout is not set"),
    _sig("slime_ci_threshold", "AssertionError: threshold="),
    _sig("slime_grad_norm_mismatch", "Error", rx=r"grad norm mismatch"),
    _sig("assertion_error", "AssertionError"),
    _sig("slime_hf_validate_args_failed", "hf_validate_args failed"),
    _sig("slime_ref_load_missing", "Error", rx=r"ref_load\b.{0,300}?\bdoes not exist"),
    _sig("missing_path", "Error", rx=r"(?:FileNotFoundError|AssertionError): .{0,300}?\bdoes not exist"),
    _sig("slime_rm_type_missing", "Error", rx=r"RM type is not specified"),
    _sig("torch_memory_saver_missing", "Cannot find torch_memory_saver"),
    # launchers
    # torch.distributed.elastic: the agent's `failed (exitcode: -9) local_rank: 0 (pid: N)`, then
    # ChildFailedError and its table, whose root-cause rows the parser reads (LogParser._elastic_row).
    _sig("launcher_failed", "failed (exitcode", "ChildFailedError", detail=_launcher_failed, enriches=True),
    _sig("subprocess_failed", "CalledProcessError", detail=_fields(exit_code=r"exit status (-?\d+)")),
    _sig("python_fatal_error", "Fatal Python error", detail=_fields(reason=r"Fatal Python error: (.{1,80})")),
    # Python
    _sig("python_traceback", TB_HEADER),
    # hangs: a progress bar that never moved (tqdm prints `0/N [15:00<?, ?it/s]` when it is closed or
    # redrawn). A bar that moves, however slowly, is no hang by itself: LogParser._bar follows it.
    _sig("hang", "?it/s]", rx=TQDM_STILL.pattern, detail=still_bar),
)

# The pre-filter. A line whose lower-cased text holds none of these words is skipped unread:
# most of a real log is noise. parse_stream looks for them across whole blocks with
# bytes.find, feed() within each line. Every word costs one pass over the data, so the list
# is short and its words broad; every signature trigger and record marker contains one.
GATE_TOKENS = (
    "error",
    "fail",
    "except",
    "timeout",  # not "time": slime's perf keys (`perf/train_time`) hold it a dozen times a line
    "timed out",
    "timer ",
    "time per iteration",
    "stuck",
    "memory",
    "unexpectedly",
    "placement group",
    ": {",
    "perf/",
    "cpverify-",
    " via ",
    "nccl version",
    "using network",
    "net/ib : using",
    "nccl warn",
    "traceback",
    'file "',
    "s/it]",
    "?it/s]",
    'http/1.1" 5',
    "of tensor",
    "size of the tensor",
    "shapes cannot",
    "invalid for input of size",
    " is dead",  # Ray's `The actor is dead because ...`, SGLang's `Rank 0 scheduler is dead.`
    "root cause",
    "exitcode",
    "received by pid",
    "terminate called",  # std::terminate (`... an instance of 'gloo::EnforceNotMet'`: no other gate word)
    "core dumped",  # the shell: `Segmentation fault (core dumped)`
    "received at time=",  # absl's signal handler: `*** SIGSEGV received at time=...`
    ".. ",  # Megatron-LM's argument dump: `  context_parallel_size ........ 2` (the dots' end)
)
GATE_BYTES = tuple(t.encode() for t in GATE_TOKENS)


def gated(lowered: bytes | str) -> bool:
    """Whether a lower-cased line holds a gate word."""
    if isinstance(lowered, bytes):
        # One character per byte, so the same words match; and `in` on str is cheap, where on
        # bytes it first tries the word as an int (and makes and drops a TypeError).
        lowered = lowered.decode("latin-1")
    for token in GATE_TOKENS:
        if token in lowered:
            return True
    return False
