"""`cpverify probe`: PyTorch's own ring attention at CP=1 and CP=N on these GPUs, without slime
(cpverify.probe). `python -m cpverify.probe` runs this command alone."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from cpverify import probe
from cpverify.artifacts import DEFAULT_BASE, atomic_write_json, new_run_id
from cpverify.errors import EXIT_FAIL, EXIT_OK, EnvironmentBlocked
from cpverify.probe import arm_commands, bandwidth_argv, probe_arm, run_arm, summarize
from cpverify.profiles import get_profile
from cpverify.progress import ArmsDisplay
from cpverify.runners.local import LocalRunner
from cpverify.runners.workload_env import workload_env
from cpverify.workload_python import requested_python, workload_python


def register(subparsers) -> None:
    p = subparsers.add_parser("probe", help="torch-native CP check: ring attention CP=1 vs CP=N on these GPUs",
                              description=probe.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cp", type=int, default=2, help="CP size of the second arm (default 2)")
    p.add_argument("--nproc", type=int, default=None, help="GPUs for both arms (default: --cp)")
    p.add_argument("--seq-len", type=int, default=16384, help="tokens per sequence (default 16384)")
    # The probe profile's numbers: `cpverify probe` measures what `cpverify run --profile probe` does.
    profile = get_profile("probe")
    p.add_argument("--steps", type=int, default=profile.steps,
                   help=f"measured steps per arm (default {profile.steps}, as the probe profile)")
    p.add_argument("--warmup", type=int, default=profile.warmup_steps,
                   help=f"unmeasured steps first: compilation, NCCL set-up (default {profile.warmup_steps}, "
                        "as the probe profile)")
    p.add_argument("--bandwidth", action="store_true", help="also measure NCCL bus bandwidth first")
    p.add_argument("--bypass-cp", action="store_true", help="DEBUG: break CP on purpose; the check must fail")
    p.add_argument("--out", type=Path, default=None, help="where logs go (default artifacts/probe-<time>)")
    p.add_argument("--dry-run", action="store_true", help="print the torchrun commands and exit")
    p.add_argument("--python", default=None,
                   help="the interpreter that runs torchrun (default: CPVERIFY_PYTHON, else the first python3/python "
                        "on PATH that imports torch)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    explicit, chosen_by = requested_python(args.python)
    # asked the way the arms will run: with the environment the local runner gives them
    env, _dropped = workload_env(get_profile("probe").env, base=os.environ)
    python = workload_python(explicit, chosen_by=chosen_by, needs=("torch", "cpverify.probe.workload"), env=env)
    arms = arm_commands(cp=args.cp, seq_len=args.seq_len, steps=args.steps, warmup=args.warmup,
                        nproc=args.nproc, python=python.path, bypass_cp=args.bypass_cp)
    if args.bandwidth:
        arms = (probe_arm("bandwidth", 0, bandwidth_argv(nproc=args.nproc or args.cp, python=python.path)), *arms)
    if args.dry_run:
        for arm in arms:
            print(f"# {arm.name}\n{subprocess.list2cmdline(arm.argv)}")
        return EXIT_OK
    if not python.ok:
        raise EnvironmentBlocked(python.problem(), python.fix())
    print(f"python: {python.path} ({python.chosen_by})", file=sys.stderr)
    out = args.out or DEFAULT_BASE / f"probe-{new_run_id()}"  # the run ids cpverify run makes
    (out / "logs").mkdir(parents=True, exist_ok=True)
    for what in LocalRunner().sweep_leftovers():  # GPUs held by the workload of a cpverify killed outright
        print(f"{what} of an earlier, interrupted run", file=sys.stderr)
    results = {}
    with ArmsDisplay([arm.name for arm in arms], args.warmup + args.steps, prefix="[cpverify probe] ") as display:
        for arm in arms:
            print(f"{arm.name}: {subprocess.list2cmdline(arm.argv)}", file=sys.stderr)
            results[arm.name] = result = run_arm(arm, out / "logs" / f"{arm.name}.log", on_progress=display.update)
            display.finish(arm.name, f"{result['outcome']} (exit {result['returncode']})")
    summary = summarize(results, cp=args.cp)
    atomic_write_json(out / "probe-summary.json", summary)
    print(render(summary))
    print(f"logs: {out / 'logs'}")
    return EXIT_OK if summary["ok"] else EXIT_FAIL


def render(summary: dict) -> str:
    from tabulate import tabulate  # heavy: only for the summary

    rows = [[name, a["returncode"], a["steps"], _ms(a["actor_train_time_median_s"]), _ms(a["step_time_median_s"])]
            for name, a in summary["arms"].items() if name != "bandwidth"]
    parts = [tabulate(rows, headers=["arm", "rc", "steps", "attention fwd+bwd (median)", "step (median)"],
                      tablefmt="github")]
    if summary["ratio_actor_train_time"] is not None:
        parts.append(f"CP={summary['cp']} / CP=1 per-GPU time (attention fwd+bwd): "
                     f"{summary['ratio_actor_train_time']:.3f} (ideal for one long sequence: {1 / summary['cp']:.3f})")
    if summary["checks"]:
        parts.append(tabulate([[c["arm"], c["name"], c["status"], c["value"], c["bound"]] for c in summary["checks"]],
                              headers=["arm", "check", "status", "value", "bound"], tablefmt="github"))
    if summary["busbw"]:
        parts.append(tabulate([[b["op"], b["bytes"], b["busbw_gbps"], b["algbw_gbps"]] for b in summary["busbw"]],
                              headers=["op", "bytes", "busbw GB/s", "algbw GB/s"], tablefmt="github"))
    return "\n\n".join(parts)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f} ms"
