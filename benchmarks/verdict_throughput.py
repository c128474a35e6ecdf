"""`cpverify verdict` as a user runs it, on two slime logs of N rollouts each: the whole process.

    python3 benchmarks/verdict_throughput.py [--rollouts 1000 5000 10000] [--reps 5] [--dir /tmp]
                                             [--tree DIR --tree-rollouts 1000]

Writes a CP=1 and a CP=2 log of N rollouts each in slime's line format (tests/helpers/slime_log.py:
per rollout the RolloutManager's perf line, the Timer lines, Memory-Usage, the step and the train-side
perf dicts, 17 lines, ~3 KB), then runs `python -m cpverify verdict --baseline A --candidate B --out
DIR` --reps times per N, the sizes interleaved (the machine's load falls on all of them alike), and
reports the medians of wall time, CPU time (user + system of that process, from wait4) and peak RSS.
Then, in this process, where the time goes, stage by stage as the command runs them (CPU seconds of
this process and its children, and wall seconds; medians): the plots' child forked
(report.plot_process), the bundle (given_logs.bundle_logs: the redacted copies, the logs parsed side
by side), the decision (cpverify.verdict.decide), the report (verdict.md, verdict.json, the archive;
the plots drawn by the child meanwhile); and two references: both logs parsed one after the other
here, and the plots drawn here.

--tree DIR runs the same command against another checkout's package (PYTHONPATH=DIR, e.g. a `git
archive` of an older commit) at --tree-rollouts, for a before/after. The logs are deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def write_arms(where: Path, rollouts: int) -> tuple[Path, Path]:
    from helpers.slime_log import synthetic_arm

    base = synthetic_arm(cp=1, actor_train_time=1.0, rollouts=rollouts, seed=1).write(where / f"cp1-{rollouts}.log")
    cand = synthetic_arm(cp=2, actor_train_time=1.05, rollouts=rollouts, seed=2).write(where / f"cp2-{rollouts}.log")
    return base, cand


def whole_process(base: Path, cand: Path, out: Path, pythonpath: Path) -> dict:
    """One `python -m cpverify verdict`: wall seconds, CPU seconds and peak RSS of that process alone."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "cpverify", "verdict", "--baseline", str(base), "--candidate",
                             str(cand), "--out", str(out)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=out.parent)  # not the repository: `-m` imports from cwd
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1, 3):  # PASS, FAIL, INCONCLUSIVE: each a verdict written (these logs, one round each: 3)
        raise SystemExit(f"cpverify verdict exited {code} on {base.name}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024}


def stages(base: Path, cand: Path, out: Path) -> dict:
    """Each stage of `cpverify verdict` as it runs them, in this process: (CPU seconds, this process's
    and its children's, wall seconds). Two references first: both logs parsed one after the other
    (what the bundle's parsing would cost in one process), and the plots drawn in this process."""
    from cpverify import report
    from cpverify.artifacts import RunDir
    from cpverify.forked import Children
    from cpverify.given_logs import bundle_logs
    from cpverify.parse import parse_file
    from cpverify.redact import Redactor
    from cpverify.report import plots
    from cpverify.report.plot_process import PlotProcess
    from cpverify.verdict import ArmEvidence, decide

    shutil.rmtree(out, ignore_errors=True)
    run_dir, scrub, seconds = RunDir.create(str(out)), Redactor(), {}

    def now() -> tuple[float, float]:
        t = os.times()  # children's time: those waited for (every child of the stage is)
        return t.user + t.system + t.children_user + t.children_system, time.perf_counter()

    clock = now()

    def lap(name: str) -> None:
        nonlocal clock
        cpu, wall = now()
        seconds[name], clock = (cpu - clock[0], wall - clock[1]), now()

    for path in (base, cand):
        parse_file(path)
    lap("reference: both logs parsed one after the other here")
    with Children() as children:
        drawer = PlotProcess(children)  # as the command does: forked first, it imports matplotlib meanwhile
        lap("the plots' child forked")
        parsed = [log for _, log in bundle_logs([(base, run_dir.log_path("cp1")), (cand, run_dir.log_path("cp2"))],
                                                scrub, [])]
        lap("bundle (redacted copies; the logs parsed side by side)")
        verdict = decide([ArmEvidence("cp1", 1, parsed[0]), ArmEvidence("cp2", 2, parsed[1])],
                         comparisons=[("cp1", "cp2")])
        lap("decide (statistics)")
        report.write_report(run_dir, verdict, env={}, commands_sh="", redactor=scrub, draw=drawer.start)
        lap("report (md, json, archive; the plots drawn by the child meanwhile)")
    plots.render(verdict, scrub=scrub)
    lap("reference: the plots drawn here")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=int, nargs="+", default=[1000, 5000, 10000])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--tree", type=Path, help="another checkout's package root, for a before/after")
    ap.add_argument("--tree-rollouts", type=int, nargs="+", default=[1000])
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="cpverify-verdict-bench-", dir=args.dir))
    try:
        logs = {n: write_arms(work, n) for n in sorted(set(args.rollouts) | set(args.tree_rollouts if args.tree else []))}
        runs: dict[tuple[str, int], list[dict]] = {}
        plan = [("this tree", REPO, n) for n in args.rollouts]
        plan += [("--tree", args.tree, n) for n in args.tree_rollouts] if args.tree else []
        for _ in range(args.reps):  # interleaved: rep 1 of every size, then rep 2, ...
            for label, tree, n in plan:
                runs.setdefault((label, n), []).append(whole_process(*logs[n], work / "out", tree))
        print(json.dumps({
            "machine": {"python": platform.python_version(), "platform": platform.platform(),
                        "cpus": os.cpu_count(), "load_average": os.getloadavg()},
            "log_mib": {n: round(sum(p.stat().st_size for p in logs[n]) / 2**20 / 2, 1) for n in logs},
            "whole_process": [{"tree": label, "rollouts_per_arm": n,
                               **{k: round(statistics.median(r[k] for r in reps), 3) for k in reps[0]}}
                              for (label, n), reps in runs.items()]}, indent=2), flush=True)
        breakdown = {n: [stages(*logs[n], work / "stages") for _ in range(args.reps)] for n in args.rollouts}
        print(json.dumps({f"stages_{kind}_s": {n: {stage: round(statistics.median(r[stage][i] for r in reps), 3)
                                                   for stage in reps[0]} for n, reps in breakdown.items()}
                          for i, kind in enumerate(("cpu", "wall"))}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
