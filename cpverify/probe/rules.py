"""The probe's rules, free of torch: padding, bandwidth formulas, the correctness gate and the line formats.

Nothing here imports torch, so CI (no GPU, maybe no torch) tests every decision the probe makes.
The lines are read back by cpverify's one log parser (cpverify.parse), `cpverify probe`'s
summary included:

    cpverify-layout rank=0 world=2 tp=1 pp=1 cp=2 dp=1
    cpverify-check name=cp_output_vs_reference status=pass value=0.0012 bound=0.01 detail="..."
    cpverify-busbw op=all_reduce bytes=268435456 busbw_gbps=310.2 algbw_gbps=310.2
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

# Qwen2.5-0.5B attention shape (scripts/models/qwen2.5-0.5B.sh: 14 heads, 2 query groups, hidden 896).
QWEN25_05B_HEADS = 14
QWEN25_05B_KV_HEADS = 2
QWEN25_05B_HEAD_DIM = 64

# Relative-error bounds (‖x − ref‖ / ‖ref‖) for bf16 operands against an fp32 reference.
# bf16 keeps 8 significant bits (unit roundoff 2^-9 ≈ 2e-3); a correct flash/ring result lands near
# 1e-3..5e-3 (measured 1.2e-3 for ring CP=2 outputs), while a CP bypass is off by 0.5 or more.
# Gradients pass through one more bf16 rounding and the ring's cross-rank merge, hence the looser bound.
OUTPUT_REL_ERR_BOUND = 1e-2
GRAD_REL_ERR_BOUND = 2e-2

# nccl-tests' bus-bandwidth factors (nccl-tests doc/PERFORMANCE.md): busbw = algbw × factor(n).
_BUSBW_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "sendrecv": lambda n: 1.0,
    "broadcast": lambda n: 1.0,
}


def padded_length(seq_len: int, cp: int) -> int:
    """The sequence length the ring needs: a multiple of 2·cp when cp > 1.

    torch's load-balanced (head-tail) sharding cuts the sequence into 2·cp equal chunks and, on
    torch 2.11, fails with a bare AssertionError otherwise. Padding at the END is exact for causal
    attention: no real token attends to a later (padded) one, and padded positions get zero gradient.
    """
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    if cp < 1:
        raise ValueError(f"cp must be >= 1, got {cp}")
    if cp == 1:
        return seq_len
    multiple = 2 * cp
    return -(-seq_len // multiple) * multiple


def busbw_factor(op: str, world: int) -> float:
    if world < 1:
        raise ValueError(f"world must be >= 1, got {world}")
    try:
        return _BUSBW_FACTORS[op](world)
    except KeyError:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(sorted(_BUSBW_FACTORS))}") from None


def bandwidth_gbps(op: str, nbytes: int, seconds: float, world: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes), as nccl-tests reports them.

    `nbytes` is nccl-tests' "size": the buffer of all_reduce, the whole gathered output of all_gather,
    the message of sendrecv.
    """
    if seconds <= 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * busbw_factor(op, world)


@dataclass(frozen=True)
class GateResult:
    name: str
    status: str  # "pass" | "fail"
    value: float
    bound: float
    detail: str

    def line(self) -> str:
        return format_check(self.name, self.status, self.value, self.bound, self.detail)


def gate(name: str, rel_err: float, bound: float, detail: str = "") -> GateResult:
    """Pass when the relative error is finite and within the bound. NaN never passes."""
    ok = not math.isnan(rel_err) and rel_err <= bound
    return GateResult(name, "pass" if ok else "fail", rel_err, bound, detail)


def dispatch_gate(*, patched: bool, ring_calls: int | None) -> GateResult:
    """Did ring attention really run? Catches the silent bypass.

    `patched`: the SDPA the model called was the one context_parallel installed (a reference bound
    before entering the context is not). `ring_calls`: how many times torch's ring kernel ran during
    the check (None when torch's private hook point is missing: then only `patched` decides).
    """
    ran = ring_calls is None or ring_calls > 0
    ok = patched and ran
    calls = "not observable" if ring_calls is None else str(ring_calls)
    detail = (
        f"the attention call {'went through' if patched else 'BYPASSED'} context_parallel's SDPA; "
        f"ring attention calls: {calls}"
    )
    return GateResult("cp_ring_attention_ran", "pass" if ok else "fail", float(ring_calls or 0), 1.0, detail)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def format_check(name: str, status: str, value: float, bound: float, detail: str = "") -> str:
    if status not in ("pass", "fail", "warn", "unknown"):
        raise ValueError(f"bad status {status!r}")
    return f"cpverify-check name={name} status={status} value={value:.6g} bound={bound:.6g} detail={_quote(detail)}"


def format_busbw(op: str, nbytes: int, busbw: float, algbw: float) -> str:
    return f"cpverify-busbw op={op} bytes={nbytes} busbw_gbps={busbw:.2f} algbw_gbps={algbw:.2f}"


def format_layout(rank: int, world: int, cp: int) -> str:
    if cp < 1 or world % cp:
        raise ValueError(f"world {world} is not divisible by cp {cp}")
    return f"cpverify-layout rank={rank} world={world} tp=1 pp=1 cp={cp} dp={world // cp}"


def perf_metrics(*, step_s: float, compute_s: float, tokens: int, cp: int) -> dict[str, float]:
    """The dict a slime-format `perf N:` line carries.

    'perf/actor_train_time' is attention forward + backward; 'perf/step_time' (= 'perf/train_time')
    adds sharding the batch (CP only) — both timed identically in both arms. `tokens` is the real
    (unpadded) tokens of one data-parallel rank's batch; each GPU of a CP group handles tokens/cp.
    """
    return {
        "perf/actor_train_time": round(compute_s, 6),
        "perf/train_time": round(step_s, 6),
        "perf/step_time": round(step_s, 6),
        "perf/tokens_per_gpu_per_sec": round(tokens / cp / step_s, 1),
    }


@dataclass(frozen=True)
class Spread:
    median: float
    q1: float
    q3: float
    n: int

    @property
    def iqr_over_median(self) -> float:
        return (self.q3 - self.q1) / self.median if self.median else float("nan")


def spread(values: list[float]) -> Spread:
    if not values:
        raise ValueError("no values")
    if len(values) == 1:
        return Spread(values[0], values[0], values[0], 1)
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return Spread(statistics.median(values), q1, q3, len(values))
