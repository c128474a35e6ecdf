"""NCCL bus bandwidth between the GPUs CP will use: all_reduce, all_gather, send/recv.

    python -m torch.distributed.run --standalone --nproc-per-node N -m cpverify.probe.bandwidth \\
        [--sizes 1M,16M,256M] [--iters 20] [--warmup 5] [--ops all_reduce,all_gather,sendrecv]

Prints on rank 0, per op and size, nccl-tests' numbers (algbw = size / time; busbw = algbw × the
op's factor: AllReduce 2(n−1)/n, AllGather (n−1)/n, SendRecv 1):

    cpverify-busbw op=all_reduce bytes=268435456 busbw_gbps=310.20 algbw_gbps=155.10

`bytes` is nccl-tests' size: the all_reduce buffer, the whole all_gather output, one send/recv
message. Time per op is the mean over --iters back-to-back launches between two synchronizes
(as nccl-tests does), taking the slowest rank. Run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,NET
to have NCCL log which transport each channel uses (`via P2P/CUMEM`, `via SHM/direct/direct`,
`via NET/Socket/0`, ...).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

from cpverify.probe import rules

OPS = ("all_reduce", "all_gather", "sendrecv")
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_size(text: str) -> int:
    """'256M' -> 268435456 (binary units, like nccl-tests' -b/-e)."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"bad size {text!r}; use a byte count such as 1048576, 1M, 256M or 1G")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def _sizes(text: str) -> list[int]:
    return [parse_size(part) for part in text.split(",") if part.strip()]


def _ops(text: str) -> list[str]:
    ops = [part.strip() for part in text.split(",") if part.strip()]
    unknown = sorted(set(ops) - set(OPS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown op(s) {', '.join(unknown)}; choose from {', '.join(OPS)}")
    return ops


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m torch.distributed.run --standalone --nproc-per-node N -m cpverify.probe.bandwidth",
        description="NCCL all_reduce / all_gather / send-recv bus bandwidth, nccl-tests formulas.",
    )
    p.add_argument("--sizes", type=_sizes, default=_sizes("1M,16M,256M"), help="comma-separated sizes (default 1M,16M,256M)")
    p.add_argument("--ops", type=_ops, default=list(OPS), help=f"comma-separated, from {','.join(OPS)}")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if world < 2:
        print("cpverify probe: error: bandwidth needs 2 or more processes; launch --nproc-per-node 2 or more",
              file=sys.stderr)
        return 2
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    try:
        for op in args.ops:
            for nbytes in args.sizes:
                run, nbytes = _prepare(torch, dist, op, nbytes, rank, world, device)
                for _ in range(args.warmup):
                    run()
                dist.barrier(device_ids=[local_rank])
                torch.cuda.synchronize(device)
                start = time.perf_counter()
                for _ in range(args.iters):
                    run()
                torch.cuda.synchronize(device)
                per_op = torch.tensor([(time.perf_counter() - start) / args.iters], dtype=torch.float64, device=device)
                dist.all_reduce(per_op, op=dist.ReduceOp.MAX)
                if rank == 0:
                    algbw, busbw = rules.bandwidth_gbps(op, nbytes, per_op.item(), world)
                    sys.stdout.write(rules.format_busbw(op, nbytes, busbw, algbw) + "\n")
                    sys.stdout.flush()
    finally:
        dist.destroy_process_group()
    return 0


def _prepare(torch, dist, op: str, nbytes: int, rank: int, world: int, device):
    """(a closure launching one `op`, its nccl-tests size in bytes): fp32 elements, about `nbytes`."""
    count = max(1, nbytes // 4)
    if op == "all_reduce":
        buf = torch.ones(count, dtype=torch.float32, device=device)
        return (lambda: dist.all_reduce(buf)), buf.numel() * 4
    if op == "all_gather":
        out = torch.empty(max(1, count // world) * world, dtype=torch.float32, device=device)
        shard = torch.ones(out.numel() // world, dtype=torch.float32, device=device)
        return (lambda: dist.all_gather_into_tensor(out, shard)), out.numel() * 4
    if op == "sendrecv":  # a ring, as nccl-tests' sendrecv: send to rank+1 while receiving from rank-1
        send = torch.ones(count, dtype=torch.float32, device=device)
        recv = torch.empty_like(send)
        peers = ((rank + 1) % world, (rank - 1) % world)

        def run():
            ops = [dist.P2POp(dist.isend, send, peers[0]), dist.P2POp(dist.irecv, recv, peers[1])]
            for work in dist.batch_isend_irecv(ops):
                work.wait()

        return run, send.numel() * 4
    raise ValueError(f"unknown op {op!r}")


if __name__ == "__main__":
    sys.exit(main())
