"""`cpverify parse LOG [--json]`: what one log says (the parse contract, ARCHITECTURE.md)."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from cpverify.inputs import shown_name
from cpverify.parse import ParsedLog, parse_file, parse_stream, records_kept
from cpverify.redact import print_json


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "parse",
        help="parse one slime/Megatron/SGLang/NCCL log",
        description="Parse one log file: training steps, perf, timers, Megatron iterations, errors, "
        "NCCL facts and the parallel layout. Exit 0 whenever the file was read.",
    )
    parser.add_argument("log", metavar="LOG", help="the log file ('-' reads standard input)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")
    parser.set_defaults(func=_cmd_parse)


def _cmd_parse(args: argparse.Namespace) -> int:
    with records_kept():
        parsed = parse_stream(sys.stdin.buffer) if args.log == "-" else parse_file(args.log)
        if args.json:
            print_json(parsed.to_json())
        else:
            print(render_summary(parsed, "<stdin>" if args.log == "-" else shown_name(args.log)))
    return 0


# The per-rollout timings a CP verdict is judged on (slime-notes), then the whole iteration.
_JUDGED_PERF = ("perf/actor_train_time", "perf/log_probs_time", "perf/ref_log_probs_time", "perf/step_time")


def render_summary(parsed: ParsedLog, name: str) -> str:
    """A human summary of a ParsedLog; tables by tabulate."""
    import statistics  # only for a summary, as tabulate: not in `parse --json`'s start-up

    from tabulate import tabulate

    out = [f"{name}: {parsed.lines} lines"]
    steps = [s for s in parsed.steps if s.kind == "step"]
    if steps:
        out.append(
            f"training steps: {len(steps)} (step {steps[0].step} at line {steps[0].line} .. "
            f"step {steps[-1].step} at line {steps[-1].line})"
        )
    train, rollout = parsed.perf_for("train"), parsed.perf_for("rollout")
    out.append(f"perf records: {len(train)} train-side, {len(rollout)} rollout-side")
    rows = []
    for key in _JUDGED_PERF:
        values = [p.metrics[key] for p in train if p.rollout >= 1 and math.isfinite(p.metrics.get(key, math.nan))]
        if values:
            rows.append([key, f"{statistics.median(values):.4g}", len(values)])
    if rows:
        out.append(tabulate(rows, headers=["train-side metric", "median, rollouts >= 1 (s)", "n"]))
    if parsed.timers:
        by_name: dict[str, list[float]] = {}
        for t in parsed.timers:
            by_name.setdefault(t.name, []).append(t.elapsed_s)
        out.append(
            tabulate(
                [[n, len(v), f"{statistics.median(v):.1f}"] for n, v in by_name.items()],
                headers=["timer", "count", "median s"],
            )
        )
    if parsed.timers_open:
        out.append("timers started, never ended: " + ", ".join(f"{n} (line {ln})" for n, ln in parsed.timers_open))
    if parsed.iterations:
        its = parsed.iterations
        ms = [i.elapsed_ms for i in its if i.elapsed_ms is not None]
        median = f", median {statistics.median(ms):.1f} ms per iteration" if ms else ""
        out.append(f"Megatron iterations: {len(its)} ({its[0].iteration}..{its[-1].iteration}){median}")
    nccl = parsed.nccl
    out.append(
        f"NCCL: version {nccl.version or 'not printed'} | network {nccl.network or 'not printed'} | "
        f"transports {', '.join(nccl.transports) or 'no channel lines'}"
    )
    warning = parsed.nccl_transport_warning()
    if warning:
        out.append("warning: " + warning)
    lay = parsed.layout
    out.append("layout: " + (f"cp={lay.cp} dp={lay.dp} tp={lay.tp} pp={lay.pp} ({lay.source})" if lay
                             else "not stated in the log"))
    if parsed.checks:
        out.append(
            tabulate(
                [[c.name, c.status, c.value, c.bound, c.line] for c in parsed.checks],
                headers=["check", "status", "value", "bound", "line"],
            )
        )
    if parsed.bandwidth:
        out.append(
            tabulate(
                [[b.op, b.bytes, b.busbw_gbps, b.algbw_gbps, b.line] for b in parsed.bandwidth],
                headers=["op", "bytes", "busbw GB/s", "algbw GB/s", "line"],
            )
        )
    if parsed.errors:
        out.append(
            tabulate(
                [[e.cls, e.line, e.text[:100]] for e in parsed.errors],
                headers=["error class", "line", "text"],
            )
        )
    else:
        out.append("errors: none recognised")
    return "\n\n".join(out)
