"""`cpverify probe`: PyTorch's own context parallelism on these GPUs, without slime.

Runs the attention workload (cpverify.probe.workload) twice through torchrun on the same GPUs —
CP=1 (each GPU its own sequence) and CP=N (one sequence split over N GPUs) — and prints the
median step times, their ratio and the correctness checks. The full pipeline
(`cpverify run --profile probe`) runs the same argv through the shared runners and verdict; this
command is the quick, standalone way. `--dry-run` only prints the commands.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cpverify.errors import EXIT_FAIL, EXIT_OK, EnvironmentBlocked, InputError
from cpverify.probe import _logic

__all__ = ["arm_commands", "arm_name", "bandwidth_argv", "main", "register", "workload_argv"]


def arm_name(cp: int, seq_len: int) -> str:
    """'cp2-s16k' for cp=2, seq_len=16384 (the probe profile's arm names)."""
    length = f"{seq_len // 1024}k" if seq_len % 1024 == 0 else str(seq_len)
    return f"cp{cp}-s{length}"


def _torchrun(nproc: int, python: str) -> list[str]:
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]


def workload_argv(*, cp: int, seq_len: int, steps: int, warmup: int, nproc: int,
                  python: str = sys.executable, extra: tuple[str, ...] = ()) -> list[str]:
    return [*_torchrun(nproc, python), "-m", "cpverify.probe.workload", "--cp", str(cp),
            "--seq-len", str(seq_len), "--steps", str(steps), "--warmup", str(warmup), *extra]


def bandwidth_argv(*, nproc: int, python: str = sys.executable, extra: tuple[str, ...] = ()) -> list[str]:
    return [*_torchrun(nproc, python), "-m", "cpverify.probe.bandwidth", *extra]


def arm_commands(*, cp: int, seq_len: int, steps: int, warmup: int, nproc: int | None = None,
                 python: str = sys.executable, bypass_cp: bool = False) -> dict[str, list[str]]:
    """The two arms on the same `nproc` GPUs: CP=1 (data parallel) and CP=cp."""
    if cp < 2:
        raise InputError(f"--cp {cp} compares nothing", "use --cp 2 (or 4, 8: a divisor of the GPU count)")
    nproc = nproc or cp
    if nproc % cp:
        raise InputError(f"--nproc {nproc} is not a multiple of --cp {cp}", f"use --nproc {cp} or a multiple of it")
    common: dict[str, Any] = {"seq_len": seq_len, "steps": steps, "warmup": warmup, "nproc": nproc, "python": python}
    return {
        arm_name(1, seq_len): workload_argv(cp=1, **common),
        arm_name(cp, seq_len): workload_argv(cp=cp, extra=("--bypass-cp",) if bypass_cp else (), **common),
    }


def register(subparsers) -> None:
    p = subparsers.add_parser("probe", help="torch-native CP check: ring attention CP=1 vs CP=N on these GPUs",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cp", type=int, default=2, help="CP size of the second arm (default 2)")
    p.add_argument("--nproc", type=int, default=None, help="GPUs for both arms (default: --cp)")
    p.add_argument("--seq-len", type=int, default=16384, help="tokens per sequence (default 16384)")
    p.add_argument("--steps", type=int, default=20, help="measured steps per arm (default 20)")
    p.add_argument("--warmup", type=int, default=5,
                   help="unmeasured steps first: compilation, NCCL set-up (default 5)")
    p.add_argument("--bandwidth", action="store_true", help="also measure NCCL bus bandwidth first")
    p.add_argument("--bypass-cp", action="store_true", help="DEBUG: break CP on purpose; the check must fail")
    p.add_argument("--out", type=Path, default=None, help="where logs go (default artifacts/probe-<time>)")
    p.add_argument("--dry-run", action="store_true", help="print the torchrun commands and exit")
    p.add_argument("--python", default=None,
                   help="the interpreter that runs torchrun (default: CPVERIFY_PYTHON, else the first python3/python "
                        "on PATH that imports torch)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpverify.runners.local import requested_python, workload_python

    explicit, chosen_by = requested_python(args.python)
    python = workload_python(explicit, chosen_by=chosen_by, needs=("torch", "cpverify.probe.workload"))
    arms = arm_commands(cp=args.cp, seq_len=args.seq_len, steps=args.steps, warmup=args.warmup,
                        nproc=args.nproc, python=python.path, bypass_cp=args.bypass_cp)
    if args.bandwidth:
        arms = {"bandwidth": bandwidth_argv(nproc=args.nproc or args.cp, python=python.path), **arms}
    if args.dry_run:
        for name, argv in arms.items():
            print(f"# {name}\n{subprocess.list2cmdline(argv)}")
        return EXIT_OK
    if not python.ok:
        raise EnvironmentBlocked(python.problem(), python.fix())
    print(f"python: {python.path} ({python.chosen_by})", file=sys.stderr)
    out = args.out or Path("artifacts") / time.strftime("probe-%Y%m%d-%H%M%S")
    (out / "logs").mkdir(parents=True, exist_ok=True)
    results = {name: _run_arm(argv, out / "logs" / f"{name}.log") for name, argv in arms.items()}
    summary = summarize(results, cp=args.cp)
    _write_json(out / "probe-summary.json", summary)
    print(render(summary))
    print(f"logs: {out / 'logs'}")
    return EXIT_OK if summary["ok"] else EXIT_FAIL


def _run_arm(argv: list[str], log_path: Path) -> dict:
    """Run one arm, streaming its output to the terminal and, line by line, to its log."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    lines = []
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(f"# {subprocess.list2cmdline(argv)}\n")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", env=env)
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            log.flush()
            sys.stdout.write(line)
            if "cpverify-" in line or " - perf " in line:
                lines.append(line)
        returncode = proc.wait()
    return {"returncode": returncode, "lines": lines, "log": str(log_path)}


def summarize(results: dict[str, dict], *, cp: int) -> dict:
    """Medians per arm, the CP/baseline ratio, every check; `ok` when all arms ran and all checks passed."""
    arms, checks, busbw = {}, [], []
    for name, result in results.items():
        train = [m["perf/actor_train_time"] for _, m in filter(None, map(_logic.parse_perf, result["lines"]))]
        step = [m["perf/step_time"] for _, m in filter(None, map(_logic.parse_perf, result["lines"]))]
        arms[name] = {"returncode": result["returncode"], "log": result["log"], "steps": len(train),
                      "actor_train_time_median_s": _logic.spread(train).median if train else None,
                      "step_time_median_s": _logic.spread(step).median if step else None}
        checks += [{"arm": name, **c} for c in filter(None, map(_logic.parse_check, result["lines"]))]
        busbw += [{"arm": name, **b} for b in filter(None, map(_logic.parse_busbw, result["lines"]))]
    medians = [(n, a["actor_train_time_median_s"]) for n, a in arms.items() if n.startswith("cp")]
    base = next((m for n, m in medians if n.startswith("cp1-")), None)
    cand = next((m for n, m in medians if n.startswith(f"cp{cp}-")), None)
    ratio = cand / base if base and cand else None
    ok = all(a["returncode"] == 0 for a in arms.values()) and all(c["status"] == "pass" for c in checks)
    return {"cp": cp, "arms": arms, "ratio_actor_train_time": ratio, "checks": checks, "busbw": busbw, "ok": ok}


def render(summary: dict) -> str:
    from tabulate import tabulate

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


def main(argv: list[str] | None = None) -> int:
    """`python -m cpverify.probe`: this command alone, without the rest of the CLI."""
    parser = argparse.ArgumentParser(prog="cpverify")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["probe", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except (EnvironmentBlocked, InputError) as exc:
        print(f"cpverify: error: {exc}", file=sys.stderr)
        return exc.exit_code


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f} ms"


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
