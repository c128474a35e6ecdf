"""Print the parallel layout each training rank really runs with.

slime's logs never state the effective CP size, and slime drops misspelled flags silently
(`--context_parallel_size 2` runs CP=1). slime calls `--custom-megatron-init-path`'s function
as `fn(args)` in every train actor right after Megatron's initialize_model_parallel
(slime/backends/megatron_utils/initialize.py, `custom_init(args)`, at slime 624b824a), so the
process groups it reads are the ones training uses. cpverify's log parser turns the line into
the `layout` of `cpverify parse --json`; the verdict refuses a CP=2 arm that ran at cp=1.

Line format (CONTRACT with cpverify.parse; one per rank, flushed):
  cpverify-layout rank=<global rank> world=<w> tp=<t> pp=<p> cp=<c> dp=<d>
`dp` is the data-parallel size without CP, as Megatron's get_data_parallel_world_size() gives it.
"""

from __future__ import annotations

import sys

PREFIX = "cpverify-layout"


def log_layout(args) -> None:
    """slime's custom Megatron init hook: print this rank's layout line. Never raises."""
    try:
        line = layout_line(args)
    except Exception as exc:  # a log line must never take the training down
        line = f"{PREFIX} unavailable: {type(exc).__name__}: {exc}"
    print(line, file=sys.stdout, flush=True)


def layout_line(args) -> str:
    from megatron.core import parallel_state as mpu

    rank, world = _rank_and_world(args)
    return (
        f"{PREFIX} rank={rank} world={world}"
        f" tp={mpu.get_tensor_model_parallel_world_size()}"
        f" pp={mpu.get_pipeline_model_parallel_world_size()}"
        f" cp={mpu.get_context_parallel_world_size()}"
        f" dp={mpu.get_data_parallel_world_size()}"
    )


def _rank_and_world(args) -> tuple[int, int]:
    """From torch.distributed when it is up (the truth), else from slime's args."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return int(args.rank), int(args.world_size)
