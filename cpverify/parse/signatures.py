"""What the parser recognises as an error: signatures, their classes, and the pre-filter.

Each signature names a fine error class, cheap trigger substrings and (optionally) a regex
that must match. COARSE_CLASS maps fine classes to the coarse vocabulary of the parse contract (ARCHITECTURE.md). GATE_TOKENS
is the pre-filter: every trigger (and every record marker of cpverify.parse.parser) contains one of
its words, lower-cased, so a line without any of them can be skipped unread.
Add a signature here with a line of the real program's output in tests/test_logs.py.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SLOW_SECONDS_PER_ITEM = 300.0  # a tqdm bar this slow per item may be stuck: it is watched until it moves
HANG_NO_PROGRESS_S = 600.0  # a bar at 0/N for this long is stuck
TB_HEADER = "Traceback (most recent call last)"
# A tqdm bar that measured its rate: `desc: 6%|▋   | 1/16 [11:01<2:45:20, 661.36s/it]`.
_TQDM_RATE = re.compile(
    r"(?<!\d)([0-9]{1,12})/([0-9]{1,12}) \[((?:[0-9]{1,6}:)?[0-9]{1,2}:[0-9]{2})<[^,\]]*,"
    r"\s*([0-9]{1,12}(?:\.[0-9]{1,6})?)s/it\]"
)
_TQDM_PERCENT = re.compile(r"\s*\d{1,3}%\|[^|]*\|\s*$")
_TQDM_STILL = re.compile(r"\b0/([0-9]{1,12}) \[((?:[0-9]{1,6}:)?[0-9]{1,2}:[0-9]{2})<\?, \?it/s\]")


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


def _sig(cls: str, *triggers: str, rx: str | None = None, detail=None, joins=False, enriches=False,
         unless: tuple[str, ...] = ()) -> Signature:
    return Signature(cls, triggers, re.compile(rx) if rx else None, detail, joins, enriches, unless)


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


def _clock_s(text: str) -> float:
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


@dataclass(frozen=True)
class Bar:
    """The last state a tqdm bar printed: its description, items done of total, seconds so far and per item."""

    desc: str
    done: int
    total: int
    elapsed_s: float
    s_per_it: float

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    @property
    def slow(self) -> bool:
        return self.s_per_it >= SLOW_SECONDS_PER_ITEM

    def detail(self) -> dict[str, Any]:
        return {"s_per_it": self.s_per_it, "done": self.done, "total": self.total, "elapsed_s": self.elapsed_s}


def last_bar(text: str) -> Bar | None:
    """The last tqdm state in `text` that shows a rate in seconds per item (`... 1/16 [11:01<2:45:20,
    661.36s/it]`); None when it holds none. A bar redrawn with carriage returns: its last drawing."""
    at = text.rfind("s/it]")
    if at == -1:
        return None
    start = text.rfind("\r", 0, at) + 1
    m = None
    for m in _TQDM_RATE.finditer(text, start):
        pass
    if m is None:
        return None
    desc = _TQDM_PERCENT.sub("", text[start : m.start()]).strip().removesuffix(":")  # tqdm: `{desc}: {pct}%|`
    return Bar(desc, int(m.group(1)), int(m.group(2)), _clock_s(m.group(3)), float(m.group(4)))


# Why a process died of a signal, for the verdict's headline. The launcher prints the signal as
# a negative exit code (torch.distributed.elastic: `exitcode: -9`, `Signal 9 (SIGKILL)`).
SIGNAL_CAUSES = {
    "SIGKILL": "killed by SIGKILL, likely the host OOM killer (check `dmesg` for 'Out of memory: Killed process')",
    "SIGSEGV": "segmentation fault (SIGSEGV): a native crash in a CUDA, NCCL or extension library",
    "SIGABRT": "aborted (SIGABRT): a C++ check or NCCL/CUDA aborted the process",
    "SIGBUS": "bus error (SIGBUS), often a too small /dev/shm (--shm-size)",
    "SIGTERM": "terminated by SIGTERM from outside (a scheduler, a timeout, or the launcher after another rank failed)",
    "SIGINT": "interrupted (SIGINT)",
}


def signal_detail(number: int) -> dict[str, Any]:
    """{"signal": "SIGKILL", "cause": "..."} for a signal number; {} when it is none."""
    try:
        name = signal.Signals(number).name
    except ValueError:
        return {}
    return {"signal": name, "cause": SIGNAL_CAUSES.get(name, f"killed by {name}")}


def _launcher_failed(_m: re.Match[str] | None, text: str) -> dict[str, Any]:
    found = _EXITCODE.search(text)
    if found is None:
        return {}
    code = int(found.group(1))
    return {"exit_code": code, **(signal_detail(-code) if code < 0 else {})}


_EXITCODE = re.compile(r"exitcode\s*:\s*(-?\d{1,4})\b")
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


def _tqdm_still(m: re.Match[str] | None, _t: str) -> dict[str, Any] | None:
    assert m is not None
    elapsed = _clock_s(m.group(2))
    return {"done": 0, "total": int(m.group(1)), "elapsed_s": elapsed} if elapsed >= HANG_NO_PROGRESS_S else None


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


# CUDA errors as the native libraries slime loads report them, in their own words and usually with
# no Python traceback (each library's error macro, read in its source):
#   torch (C10_CUDA_CHECK)                 CUDA error: <cudaGetErrorString>   (driver API: CUDA driver error: ...)
#   TransformerEngine (NVTE_CHECK_CUDA),   <file>:<line> in function <f>: CUDA Error: <string>
#   flashinfer (FLASHINFER_CUDA_CALL)      CUDA Error: <string> (<code>) <file>: line <n> at function <f>
#   torch_memory_saver (colocated mode)    [torch_memory_saver.cpp] cudaError error: <code> (<string>)  file=...
#                                          [torch_memory_saver.cpp] CUresult error: <code> (<string>) ...; before
#                                          0.0.9: CUresult error  result=<code> file=... (ROCm: hipError_t error)
#   NCCL (CUDACHECK, CUCHECK)              Cuda failure '<string>' / Cuda failure <code> '<string>';
#                                          NCCL WARN ... : CUDA error <code> '<string>'
#   sgl-kernel (CHECK_CUDA_SUCCESS)        the bare string, raised: RuntimeError: <string>
#   anywhere                               the enum's name: cudaErrorIllegalAddress, CUDA_ERROR_OUT_OF_MEMORY
# What failed decides the class: out of memory (code 2) cuda_oom, an illegal memory access (700)
# cuda_illegal_memory_access, a device-side assert (710) cuda_device_assert, anything else cuda_error.
_NATIVE_CUDA = tuple(re.compile(rx) for rx in (
    r"\bCUDA (?:driver )?error: (?P<reason>[^\n]+?)(?: when calling|\s*$)",
    r"\bCUDA Error: (?P<reason>.+?)(?: \((?P<code>\d+)\)|\. For more information|\s*$)",
    r"\b(?:cudaError|CUresult|hipError_t) error:? +(?:result=)?(?P<code>-?\d+)(?: \((?P<reason>[^)]*)\))?",
    r"\bCUDA error (?P<code>\d+) '(?P<reason>[^']*)'",
    r"\b(?P<name>cudaError(?!_t\b)[A-Z]\w*|CUDA_ERROR_[A-Z_]+)\b",
    r"(?:Error|Exception): (?P<reason>out of memory|an illegal memory access was encountered|misaligned address"
    r"|unspecified launch failure|an illegal instruction was encountered|device-side assert triggered)\s*$",
))
# NCCL's own format: only its specific causes are CUDA classes (the rest is nccl_cuda_failure's).
_NCCL_CUDA = re.compile(r"\bCuda failure (?:(?P<code>\d+) )?'(?P<reason>[^']*)'")
_CUDA_CAUSES = (  # class, words of its cudaGetErrorString, its codes (runtime and driver agree), its enum names
    ("cuda_oom", ("out of memory", "alloc_failed"), {2}, {"cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY"}),
    ("cuda_illegal_memory_access", ("illegal memory access",), {700},
     {"cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS"}),
    ("cuda_device_assert", ("device-side assert",), {710}, {"cudaErrorAssert", "CUDA_ERROR_ASSERT"}),
)
_NATIVE_TRIGGERS = ("CUDA error", "CUDA driver error", "CUDA Error", "cudaError", "CUresult error", "hipError_t error",
                    "CUDA_ERROR_", "out of memory", "illegal memory access", "Error: misaligned address",
                    "unspecified launch failure", "Error: an illegal instruction", "Error: device-side assert")
_LIBRARY_MARKS = (("torch_memory_saver", "torch_memory_saver"), ("transformer_engine", "TransformerEngine"),
                  ("flashinfer", "flashinfer"), ("sgl_kernel", "sgl-kernel"), ("sgl-kernel", "sgl-kernel"),
                  ("apex", "apex"), ("NCCL", "NCCL"))


def _cuda_cause(reason: str, code: int | None, name: str) -> str:
    reason = reason.lower()
    for cls, words, codes, names in _CUDA_CAUSES:
        if any(word in reason for word in words) or code in codes or name in names:
            return cls
    return "cuda_error"


def _native_cuda(cls: str) -> Callable[[re.Match[str] | None, str], dict[str, Any] | None]:
    """A detail extractor that answers only when the line reports a CUDA error of class `cls`."""

    def extract(_m: re.Match[str] | None, text: str) -> dict[str, Any] | None:
        formats = _NATIVE_CUDA if cls == "cuda_error" else (*_NATIVE_CUDA, _NCCL_CUDA)
        for rx in formats:
            found = rx.search(text)
            if found is None:
                continue
            parts = found.groupdict()
            code = integer(parts.get("code") or "")
            reason, name = (parts.get("reason") or "").strip(), parts.get("name") or ""
            if _cuda_cause(reason, code, name) != cls:
                return None
            detail: dict[str, Any] = {"reason": reason or name} if reason or name else {}
            if code is not None:
                detail["code"] = code
            library = next((lib for mark, lib in _LIBRARY_MARKS if mark in text), None)
            if library:
                detail["library"] = library
            return detail
        return None

    return extract


def _native_crash(_m: re.Match[str] | None, text: str) -> dict[str, Any]:
    """An uncaught C++ exception (std::terminate aborts), or a signal the process died of."""
    thrown = _TERMINATE.search(text)
    if thrown:
        return {"exception": thrown.group(1), "signal": "SIGABRT",
                "cause": "a C++ exception nobody caught: std::terminate aborted the process (its what() line follows)"}
    killed = _CRASH_SIGNAL.search(text)
    if killed:
        name = killed.group(1) or _SHELL_SIGNALS.get(killed.group(2) or "", "")
        return signal_detail(signal.Signals[name].value) if name in signal.Signals.__members__ else {}
    return {}


_TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']{1,200})'")
_SHELL_SIGNALS = {"Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
                  "Illegal instruction": "SIGILL", "Floating point exception": "SIGFPE"}
_CRASH_SIGNAL = re.compile(r"\*\*\* (SIG[A-Z]+) received at time=|(" + "|".join(_SHELL_SIGNALS) + r") \(core dumped\)")

_NCCL_TIMEOUT_DETAIL = _fields(
    op=r"OpType=(\w+)",
    seq=r"SeqNum=(\d+)",
    timeout_ms=r"Timeout\(ms\)=(\d+)",
    ran_ms=r"ran for (\d+) milliseconds",
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
    _sig("nccl_timeout", "collective operation timeout", detail=_NCCL_TIMEOUT_DETAIL),
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
    _sig("cuda_oom", *_NATIVE_TRIGGERS, "Cuda failure", detail=_native_cuda("cuda_oom"),
         unless=("(may not be an issue",)),
    _sig("sglang_not_enough_memory", "Not enough memory. Please try to increase --mem-fraction-static"),
    _sig(
        "cuda_illegal_memory_access", "illegal memory access", "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS"
    ),
    _sig("cuda_illegal_memory_access", *_NATIVE_TRIGGERS, detail=_native_cuda("cuda_illegal_memory_access")),
    # a kernel's own assert(): the device prints `<file>:<line>: <f>: block: [x,y,z], thread: [x,y,z] Assertion ...`
    _sig("cuda_device_assert", "` failed.", rx=r"block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion `"),
    _sig("cuda_device_assert", *_NATIVE_TRIGGERS, "Cuda failure", detail=_native_cuda("cuda_device_assert")),
    # cuDNN and cuBLAS in their callers' words (torch: `cuDNN error: CUDNN_STATUS_...`, `CUDA error:
    # CUBLAS_STATUS_... when calling`; TransformerEngine: `cuDNN Error: [cudnn_frontend] Error: ...`, `cuBLAS Error:`)
    _sig("cudnn_error", "cuDNN Error", "cuDNN error", "error: CUDNN_STATUS_", "Error: CUDNN_STATUS_",
         "[cudnn_frontend] Error",
         detail=_fields(reason=r"(?:cuDNN [Ee]rror: |\[cudnn_frontend\] Error: )+(.{1,200}?)(?:\.? For more|\s*$)"),
         unless=("ALLOC_FAILED",)),
    _sig("cublas_error", "cuBLAS Error", "error: CUBLAS_STATUS_", "Error: CUBLAS_STATUS_",
         detail=_fields(reason=r"\b(CUBLAS_STATUS_[A-Z_]+)"),
         unless=("ALLOC_FAILED",)),
    _sig("cuda_error", *_NATIVE_TRIGGERS, detail=_native_cuda("cuda_error")),
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
        rx=r"terminate called (?:after throwing|recursively|without an active exception)|\*\*\* SIG[A-Z]+ received at "
        r"time=|\(core dumped\)",
        detail=_native_crash,
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
    _sig("hang", "?it/s]", rx=_TQDM_STILL.pattern, detail=_tqdm_still),
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
    "actor is dead",
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
