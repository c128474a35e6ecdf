"""What the native libraries slime loads print when they fail: CUDA errors in each library's own words,
uncaught C++ exceptions and fatal signals. Usually with no Python traceback.

The signatures built on these live in cpverify.parse.signatures (SIGNATURES).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from typing import Any

# Why a process died of a signal, for the verdict's headline: the one wording, whether a log says
# so (torch.distributed.elastic prints the signal as a negative exit code, `exitcode: -9`, `Signal 9
# (SIGKILL)`) or an arm's own exit code does (128 + N: cpverify.runners.watch.exit_text).
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
NATIVE_TRIGGERS = ("CUDA error", "CUDA driver error", "CUDA Error", "cudaError", "CUresult error", "hipError_t error",
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


def native_cuda(cls: str) -> Callable[[re.Match[str] | None, str], dict[str, Any] | None]:
    """A detail extractor that answers only when the line reports a CUDA error of class `cls`."""

    def extract(_m: re.Match[str] | None, text: str) -> dict[str, Any] | None:
        formats = _NATIVE_CUDA if cls == "cuda_error" else (*_NATIVE_CUDA, _NCCL_CUDA)
        for rx in formats:
            found = rx.search(text)
            if found is None:
                continue
            parts = found.groupdict()
            code = int(parts["code"]) if parts.get("code") else None
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


def native_crash(_m: re.Match[str] | None, text: str) -> dict[str, Any]:
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
# Only the signals a process raises on itself when native code fails: absl's handler (Ray's workers)
# also prints `*** SIGTERM received at time=` when a job is stopped from outside, which is no crash.
_CRASH_SIGNAL = re.compile(r"\*\*\* (SIG(?:SEGV|ABRT|BUS|ILL|FPE)) received at time=|(" + "|".join(_SHELL_SIGNALS)
                           + r") \(core dumped\)")
