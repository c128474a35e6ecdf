"""Torch-native context-parallel probe: Qwen2.5-0.5B-shaped causal attention at CP=1 or CP=N.

Launch (one process per GPU):

    python -m torch.distributed.run --standalone --nproc-per-node N -m cpverify.probe.workload \\
        --cp {cp} --seq-len {L} --steps {steps} --warmup {warmup}

  --cp 1   every GPU attends over its own sequence of L tokens (data parallel);
  --cp N   one sequence of L tokens is split across N GPUs and PyTorch's ring attention
           (torch.distributed.tensor.experimental.context_parallel over SDPA) computes it.

Attention only (14 query heads, 2 KV heads, head_dim 64, bf16, causal): that is where CP acts;
the rest of a transformer block is per-token work that CP divides evenly.

Before timing, a correctness gate compares the output and the input gradients at --check-seq-len
with an fp32 single-GPU reference, and checks that ring attention really ran (a reference to
F.scaled_dot_product_attention bound before entering the CP context bypasses CP silently:
--bypass-cp does exactly that on purpose, and the gate must fail). A failed gate ends the run with
exit code 1 before any timing, so a wrong CP can never look fast.

Timing, the same in both arms: each step starts after a barrier and a device synchronize; fresh
full-length buffers are re-sharded each step (CP only); the step ends after a synchronize.
'perf/actor_train_time' is attention forward + backward, 'perf/step_time' adds the sharding.
Rank 0 prints, per measured step, the slowest rank's times in slime's `perf N: {dict}` format.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator

from cpverify.probe import rules

LOG = logging.getLogger("cpverify.probe.workload")
CHECK_SEED = 1234


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m torch.distributed.run --standalone --nproc-per-node N -m cpverify.probe.workload",
        description="Causal attention at CP=1 (data parallel) or CP=N (torch ring attention), fwd+bwd, timed.",
    )
    p.add_argument("--cp", type=int, required=True, help="context-parallel size; must divide the world size")
    p.add_argument("--seq-len", type=int, required=True, help="tokens per sequence (padded to a multiple of 2*cp)")
    p.add_argument("--steps", type=int, default=20, help="measured steps (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="unmeasured steps first (default 5)")
    p.add_argument("--check-seq-len", type=int, default=4099,
                   help="length of the correctness gate against the fp32 reference (default 4099: exercises padding)")
    p.add_argument("--heads", type=int, default=rules.QWEN25_05B_HEADS)
    p.add_argument("--kv-heads", type=int, default=rules.QWEN25_05B_KV_HEADS)
    p.add_argument("--head-dim", type=int, default=rules.QWEN25_05B_HEAD_DIM)
    p.add_argument("--batch", type=int, default=1, help="sequences per data-parallel rank (default 1)")
    p.add_argument("--gqa", choices=("native", "repeat"), default="native",
                   help="native (default): SDPA enable_gqa=True, so the ring passes 2 KV heads as Megatron's CP "
                        "does; repeat: expand KV to 14 heads first (HF's repeat_kv), 7x the KV traffic")
    p.add_argument("--sdpa-backend", choices=("flash", "efficient", "cudnn"), default="flash",
                   help="the one SDPA kernel both arms use (ring attention supports these three)")
    p.add_argument("--rotate", choices=("allgather", "alltoall"), default="allgather",
                   help="how the ring passes KV shards (torch.set_rotate_method)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: gloo, for debugging the harness only (torch's ring attention needs CUDA)")
    p.add_argument("--bypass-cp", action="store_true",
                   help="DEBUG: bind SDPA before entering the CP context (the silent bypass); the gate must fail")
    return p


def _validate(args: argparse.Namespace, world: int) -> str | None:
    if args.cp < 1 or world % args.cp:
        return f"--cp {args.cp} does not divide the world size {world}; launch --nproc-per-node a multiple of --cp"
    if args.heads % args.kv_heads:
        return f"--heads {args.heads} is not a multiple of --kv-heads {args.kv_heads}"
    for name in ("seq_len", "check_seq_len", "steps", "batch"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be >= 1"
    if args.warmup < 0:
        return "--warmup must be >= 0"
    return None


def _setup_logging() -> None:
    # slime's logger format, so cpverify's log parser reads the probe like a slime run.
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(filename)s:%(lineno)d - %(message)s",
                                           datefmt="%Y-%m-%d %H:%M:%S"))
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False


def log_perf(step: int, metrics: dict[str, float]) -> None:
    """slime's `perf N: {dict}` line; the dict repr is what slime prints and cpverify parses."""
    LOG.info(f"perf {step}: {metrics}")


def _say(line: str) -> None:
    # One write per line: print() writes text and newline separately, and the ranks share one pipe,
    # so their lines interleaved mid-line on 4 GPUs ("...dp=2cpverify-layout rank=3 ...").
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------- torch


class _Torch:
    """The distributed state, built once; torch is imported here, never at module import."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend

        self.torch, self.dist, self.F = torch, dist, F
        self.args = args
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.cuda = args.device == "cuda"
        if self.cuda:
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(self.device)
            dist.init_process_group("nccl", device_id=self.device)
        else:
            self.device = torch.device("cpu")
            dist.init_process_group("gloo")
        self.backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                        "cudnn": SDPBackend.CUDNN_ATTENTION}[args.sdpa_backend]
        # Captured before any CP context exists: the un-patched SDPA.
        self.original_sdpa = F.scaled_dot_product_attention
        self.cp_mesh = None
        self.dp_rank = self.rank
        self.last_call_patched = False  # did the last step call context_parallel's SDPA?
        if args.cp > 1:
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.tensor.experimental._attention import (
                set_rotate_method,
            )

            mesh = init_device_mesh(self.device.type, (self.world // args.cp, args.cp), mesh_dim_names=("dp", "cp"))
            self.cp_mesh = mesh["cp"]
            self.dp_rank = mesh.get_local_rank("dp")
            set_rotate_method(args.rotate)

    def barrier(self) -> None:
        self.dist.barrier(device_ids=[self.local_rank] if self.cuda else None)

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def peak_memory_gib(self) -> float:
        return self.torch.cuda.max_memory_allocated(self.device) / 2**30 if self.cuda else float("nan")

    def full_inputs(self, seq_len: int, seed: int):
        """q, k, v, grad_out at the padded length; identical on the ranks of one CP group."""
        torch, a = self.torch, self.args
        padded = rules.padded_length(seq_len, a.cp)
        gen = torch.Generator(device=self.device).manual_seed(seed)

        def randn(heads: int):
            return torch.randn(a.batch, heads, padded, a.head_dim, device=self.device,
                               dtype=torch.bfloat16, generator=gen)

        q, k, v, grad_out = randn(a.heads), randn(a.kv_heads), randn(a.kv_heads), randn(a.heads)
        grad_out[:, :, seq_len:] = 0  # padded queries must not feed gradients back into real K/V
        return q, k, v, grad_out

    def attend(self, q, k, v, sdpa: Callable):
        from torch.nn.attention import sdpa_kernel

        groups = q.size(1) // k.size(1)
        with sdpa_kernel(self.backend):
            if groups > 1 and self.args.gqa == "native":
                return sdpa(q, k, v, is_causal=True, enable_gqa=True)
            if groups > 1:  # HF repeat_kv: [B, kv, S, D] -> [B, kv*groups, S, D]
                k = k.repeat_interleave(groups, dim=1)
                v = v.repeat_interleave(groups, dim=1)
            return sdpa(q, k, v, is_causal=True)

    def _sdpa_now(self) -> Callable:
        """The SDPA to call. Looked up at call time (inside the CP context: the ring version),
        unless --bypass-cp asked for the reference bound before entering the context."""
        return self.original_sdpa if self.args.bypass_cp else self.F.scaled_dot_product_attention

    def step(self, full) -> tuple[float, float, tuple]:
        """One forward+backward over `full` (never modified). Returns (step_s, compute_s, results):
        results are this rank's (out, dq, dk, dv) shards, in CP's load-balanced order when cp > 1."""
        buffers = [t.clone() for t in full]  # context_parallel shards its buffers in place
        self.barrier()
        self.sync()
        t0 = time.perf_counter()
        with self._cp_context(buffers):
            self.sync()
            t1 = time.perf_counter()
            # Buffers may not require grad when they are sharded; the leaves are made here, inside.
            q, k, v = (b.detach().requires_grad_(True) for b in buffers[:3])
            sdpa = self._sdpa_now()
            self.last_call_patched = sdpa is not self.original_sdpa
            out = self.attend(q, k, v, sdpa)
            out.backward(buffers[3])
            self.sync()
            t2 = time.perf_counter()
        return t2 - t0, t2 - t1, (out.detach(), q.grad, k.grad, v.grad)

    @contextlib.contextmanager
    def _cp_context(self, buffers) -> Iterator[None]:
        if self.cp_mesh is None:
            yield
            return
        from torch.distributed.tensor.experimental import context_parallel

        with context_parallel(self.cp_mesh, buffers=buffers, buffer_seq_dims=[2] * len(buffers),
                              no_restore_buffers=set(buffers)):
            yield

    def slowest(self, *values: float) -> list[float]:
        """Each value's maximum over all ranks (a step is as slow as its slowest rank)."""
        t = self.torch.tensor(values, dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return t.tolist()

    def all_agree(self, ok: bool) -> bool:
        t = self.torch.tensor([0 if ok else 1], device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return int(t.item()) == 0


@contextlib.contextmanager
def _count_ring_calls() -> Iterator[list[int] | None]:
    """Count torch's ring-attention kernel calls (forward and backward) while the block runs.

    Hooks torch's private module globals (the ring SDPA handlers look `_templated_ring_attention`
    up at call time). Yields None where this torch has no such hook point: the gate then relies on
    the SDPA identity check and the numbers alone.
    """
    from torch.distributed.tensor.experimental import context_parallel

    scope = inspect.unwrap(context_parallel).__globals__
    names = [n for n in ("_templated_ring_attention", "_templated_ring_attention_backward") if n in scope]
    if not names:
        yield None
        return
    counter = [0]
    originals = {n: scope[n] for n in names}

    def counting(fn):
        def wrapper(*args, **kwargs):
            counter[0] += 1
            return fn(*args, **kwargs)
        return wrapper

    scope.update({n: counting(fn) for n, fn in originals.items()})
    try:
        yield counter
    finally:
        scope.update(originals)


def _unshard(tt: _Torch, shards) -> list:
    if tt.cp_mesh is None:
        return list(shards)
    from torch.distributed.tensor.experimental._attention import (
        context_parallel_unshard,
    )

    return context_parallel_unshard(tt.cp_mesh, list(shards), [2] * len(shards))


def _rel_err(x, ref) -> float:
    x, ref = x.double(), ref.double()
    return float((x - ref).norm() / ref.norm())


def _reference(tt: _Torch, full, seq_len: int, *, fp32: bool):
    """Single-GPU full attention over the first seq_len tokens (no padding, no CP)."""
    torch = tt.torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dtype = torch.float32 if fp32 else torch.bfloat16
    q, k, v, grad_out = (t[:, :, :seq_len].to(dtype).detach().clone() for t in full)
    for t in (q, k, v):
        t.requires_grad_(True)
    groups = q.size(1) // k.size(1)
    backend = SDPBackend.MATH if fp32 else tt.backend
    with sdpa_kernel(backend):
        out = tt.original_sdpa(q, k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1), is_causal=True)
    out.backward(grad_out)
    return out.detach(), q.grad, k.grad, v.grad


def correctness_gate(tt: _Torch) -> bool:
    """Run the CP path once at --check-seq-len and compare with the fp32 reference on rank 0."""
    a = tt.args
    seq_len = a.check_seq_len
    full = tt.full_inputs(seq_len, CHECK_SEED + tt.dp_rank)
    ring_calls = None
    results = []
    error = None
    try:
        with _count_ring_calls() as counter:
            _, _, shards = tt.step(full)
            ring_calls = None if counter is None else counter[0]
        results = [t[:, :, :seq_len] for t in _unshard(tt, shards)]
    except Exception as exc:  # noqa: BLE001 - reported as a failed gate on every rank, then stop
        error = f"{type(exc).__name__}: {exc}"

    gates = []
    if tt.rank == 0:
        if error:
            gates.append(rules.gate("cp_output_vs_reference", float("nan"), rules.OUTPUT_REL_ERR_BOUND,
                                     f"the CP attention step raised {error}"))
        else:
            ref = _reference(tt, full, seq_len, fp32=True)
            base = _reference(tt, full, seq_len, fp32=False)
            names = ("out", "dq", "dk", "dv")
            base_err = {n: _rel_err(b, r) for n, b, r in zip(names, base, ref, strict=True)}
            err = {n: _rel_err(x, r) for n, x, r in zip(names, results, ref, strict=True)}
            how = (f"cp={a.cp} seq_len={seq_len} padded={rules.padded_length(seq_len, a.cp)} "
                   f"gqa={a.gqa} sdpa={a.sdpa_backend}; fp32 reference on one GPU")
            gates.append(rules.gate("cp_output_vs_reference", err["out"], rules.OUTPUT_REL_ERR_BOUND,
                                     f"{how}; single-GPU bf16 {a.sdpa_backend} error {base_err['out']:.2e}"))
            worst = max(("dq", "dk", "dv"), key=lambda n: err[n] if err[n] == err[n] else float("inf"))
            gates.append(rules.gate(
                "cp_input_grads_vs_reference", err[worst], rules.GRAD_REL_ERR_BOUND,
                f"{how}; worst of dq/dk/dv ({worst}); errors dq={err['dq']:.2e} dk={err['dk']:.2e} "
                f"dv={err['dv']:.2e}; single-GPU bf16 dq={base_err['dq']:.2e} dk={base_err['dk']:.2e} "
                f"dv={base_err['dv']:.2e}"))
            if tt.cp_mesh is not None:
                gates.append(rules.dispatch_gate(patched=tt.last_call_patched, ring_calls=ring_calls))
        for g in gates:
            _say(g.line())
    elif error:
        _say(f"cpverify-probe rank={tt.rank} check raised {error}")
    return tt.all_agree(error is None and all(g.status == "pass" for g in gates))


def timed_run(tt: _Torch) -> None:
    a = tt.args
    full = tt.full_inputs(a.seq_len, a.seed * 1000 + tt.dp_rank)
    if tt.cuda:
        tt.torch.cuda.reset_peak_memory_stats(tt.device)
    steps, computes = [], []
    for i in range(a.warmup + a.steps):
        step_s, compute_s, _ = tt.step(full)
        step_s, compute_s = tt.slowest(step_s, compute_s)
        if i < a.warmup:
            continue
        steps.append(step_s)
        computes.append(compute_s)
        if tt.rank == 0:
            metrics = rules.perf_metrics(step_s=step_s, compute_s=compute_s, tokens=a.batch * a.seq_len,
                                           cp=a.cp)
            log_perf(i, metrics)
    peak_gib = tt.slowest(tt.peak_memory_gib())[0]
    if tt.rank == 0:
        s, c = rules.spread(steps), rules.spread(computes)
        _say(f"cpverify-probe-summary cp={a.cp} world={tt.world} seq_len={a.seq_len} "
             f"padded={rules.padded_length(a.seq_len, a.cp)} steps={s.n} "
             f"step_median_s={s.median:.6f} step_q1_s={s.q1:.6f} step_q3_s={s.q3:.6f} "
             f"compute_median_s={c.median:.6f} compute_q1_s={c.q1:.6f} compute_q3_s={c.q3:.6f} "
             f"peak_mem_gib={peak_gib:.2f} gqa={a.gqa} sdpa={a.sdpa_backend} rotate={a.rotate} "
             f"bypass={int(a.bypass_cp)}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    problem = _validate(args, world)
    if problem:
        print(f"cpverify probe: error: {problem}", file=sys.stderr)
        return 2
    tt = _Torch(args)
    try:
        _say(rules.format_layout(tt.rank, tt.world, args.cp))
        if tt.rank == 0:
            import torch

            where = (f"cuda={torch.version.cuda} nccl={'.'.join(map(str, torch.cuda.nccl.version()))} "
                     f"gpu={torch.cuda.get_device_name()!r}" if tt.cuda else "device=cpu")
            _say(f"cpverify-probe torch={torch.__version__} {where} cp={args.cp} seq_len={args.seq_len} "
                 f"gqa={args.gqa} sdpa={args.sdpa_backend} bypass_cp={int(args.bypass_cp)}")
        if not correctness_gate(tt):
            if tt.rank == 0:
                print("cpverify probe: error: the CP correctness gate failed (see the cpverify-check lines); "
                      "not timing a wrong computation.\n  fix: call F.scaled_dot_product_attention inside the "
                      "context_parallel block (never a reference bound before it) and use flash/efficient/cudnn "
                      "SDPA with is_causal=True", file=sys.stderr, flush=True)
            return 1
        timed_run(tt)
        return 0
    finally:
        tt.dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
