"""`cpverify verdict --baseline A.log --candidate B.log`: a verdict from logs you already have.

Each log is taken once (given_logs.bundle_logs), so a log still being written is judged as one
snapshot, and parsed from the text the bundle's copy of it is written from: the copy, its digest and
the verdict describe the same text (the logs are parsed side by side where CPUs are spare). The copy
is capped (a gzip bomb, a runaway line); a copy cut short says so in itself, in env.json and in a
row of the verdict.

Each of --baseline and --candidate may be repeated: one log per round (one process) of the arm,
in the order they ran; the bundle names them as `cpverify run` does (logs/cp1.log, logs/cp1.r2.log)."""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cpverify import __version__
from cpverify.artifacts import RunDir
from cpverify.errors import EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_OK, EXIT_USAGE, ArtifactWriteError, InputError
from cpverify.fixes import FIX_INCOMPLETE
from cpverify.forked import Children
from cpverify.given_logs import bundle_logs, check_out_apart
from cpverify.inputs import shown_command, shown_name
from cpverify.model import WORKLOADS, CheckStatus, round_name
from cpverify.parse import records_kept
from cpverify.plan.build import arm_name
from cpverify.redact import Redactor
from cpverify.verdict import FAIL, INCONCLUSIVE, PASS, ArmEvidence, Check, Thresholds, decide
from cpverify.verdict.evidence import timing_records

if TYPE_CHECKING:
    from cpverify.report.plot_process import PlotProcess

# What `cpverify verdict` can exit with. Logs alone never make a verdict BLOCKED (an arm that could not
# start leaves no log to judge), so 4 is only the environment refusing the bundle (ArtifactWriteError).
EXIT_CODES = {EXIT_OK: PASS, EXIT_FAIL: FAIL, EXIT_USAGE: "bad input", EXIT_INCONCLUSIVE: INCONCLUSIVE,
              ArtifactWriteError.exit_code: "the bundle could not be written (--out)"}


def register(subparsers) -> None:
    codes = ", ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items())
    parser = subparsers.add_parser(
        "verdict", help="decide PASS/FAIL from a CP=1 and a CP=2 log you already have",
        description="Compare a baseline (CP=1) and a candidate (CP=2) slime log and write verdict.md, "
                    "verdict.json, env.json and commands.sh. The ratio is always the larger CP's against the "
                    f"smaller CP's, whichever log is given first. Exit code: {codes}. Logs alone never make a "
                    "verdict BLOCKED: that status is `cpverify run`'s, for an arm that could not start.")
    parser.add_argument("--baseline", required=True, action="append", metavar="LOG",
                        help="log of the baseline arm (CP=1); repeat it for each round (one process each, in the "
                             "order they ran): the interval then includes the spread between rounds")
    parser.add_argument("--candidate", required=True, action="append", metavar="LOG",
                        help="log of the candidate arm (CP=2); repeat it for each round, as --baseline")
    parser.add_argument("--out", metavar="DIR", help="artifact directory (default: artifacts/<run-id>/)")
    parser.add_argument("--baseline-cp", type=int, metavar="N",
                        help="CP requested in the baseline (default: 1, or the CP its log states: see below)")
    parser.add_argument("--candidate-cp", type=int, metavar="N",
                        help="CP requested in the candidate (default: 2, or the CP its log states). Given neither, "
                             "two logs that state two different CPs (the layout hook's line or Megatron's argument "
                             "dump) are judged at those CPs, whichever was given first")
    parser.add_argument("--pass-ratio", type=float, default=Thresholds.pass_ratio, metavar="R",
                        help="PASS when the CI's upper bound of candidate/baseline is <= R, for the ratio of "
                             "medians and the ratio of means alike (1.3)")
    parser.add_argument("--warmup", type=int, default=Thresholds.warmup, metavar="N",
                        help="rollouts with id < N are not counted (default: each log's warm-up is found in its "
                             "data: the leading steps far above the log's median)")
    parser.add_argument("--min-steps", type=int, default=Thresholds.min_counted_steps, metavar="N",
                        help="counted steps needed in every round of each arm (6); fewer than a 95%% interval needs (6) "
                             "is refused")
    parser.add_argument("--expected-rollouts", type=int, metavar="N",
                        help="rollouts each arm was started with (slime's --num-rollout): an arm whose log lacks "
                             "one of rollouts warmup..N-1 did not finish and cannot pass (default: not checked)")
    parser.add_argument("--workload", choices=WORKLOADS, default="slime",
                        help="what wrote the logs, for the advice in the fixes (slime)")
    parser.add_argument("--deterministic", action="store_true",
                        help="the runs were deterministic: gate first-step numerics")
    parser.add_argument("--json", action="store_true", help="print verdict.json to stdout instead of the summary")
    parser.set_defaults(func=run_verdict_command)


def run_verdict_command(args: argparse.Namespace) -> int:
    """Snapshot the logs into the bundle, decide on the snapshots, write the bundle, print the
    headline; returns the status's exit code."""
    with records_kept():  # the logs' records live until the verdict is written
        return _run_verdict(args)


def _run_verdict(args: argparse.Namespace) -> int:
    thresholds = Thresholds(pass_ratio=args.pass_ratio, warmup=args.warmup, min_counted_steps=args.min_steps,
                            deterministic=args.deterministic)
    claimed = args.baseline_cp is not None or args.candidate_cp is not None
    requested = {"baseline": 1 if args.baseline_cp is None else args.baseline_cp,
                 "candidate": 2 if args.candidate_cp is None else args.candidate_cp}
    paths = {"baseline": [Path(p) for p in args.baseline], "candidate": [Path(p) for p in args.candidate]}
    for option, given in paths.items():
        for path in given:
            if not path.is_file():
                raise InputError(f"--{option} {shown_name(str(path))} is not a readable file",
                                 "pass the path of a saved slime log (stdout and stderr of train.py / ray job logs)")
        if requested[option] < 1:
            raise InputError(f"--{option}-cp {requested[option]} must be >= 1",
                             f"pass the CP size the run was started with, e.g. --{option}-cp 2")
    if requested["baseline"] == requested["candidate"]:
        raise InputError(f"--baseline-cp and --candidate-cp are both {requested['baseline']}: a CP verification "
                         "compares two CP sizes", "pass the CP each log was run with, e.g. --baseline-cp 1 --candidate-cp 2")
    if args.expected_rollouts is not None and args.expected_rollouts <= (args.warmup or 0):
        raise InputError(f"--expected-rollouts {args.expected_rollouts} leaves no rollout after the warm-up "
                         f"({args.warmup})", "pass the --num-rollout the arms were started with, e.g. 8")

    if args.out is not None:  # the bundle must not land on the logs it is made from
        check_out_apart(args.out, {f"--{option} #{k}": path for option, given in paths.items()
                                   for k, path in enumerate(given, start=1)})
    made = _missing_dirs(Path(args.out) if args.out is not None else None)
    run_dir = RunDir.create(args.out)
    copies: list[Path] = []
    from cpverify.report.plot_process import PlotProcess  # imports tabulate: not at `cpverify --help`

    try:
        with Children() as children:  # the plots' process: it imports matplotlib while the logs are read
            return _judge(args, paths, requested, claimed, thresholds, run_dir, copies, PlotProcess(children))
    except InputError:
        # Refused after the logs were taken: the copies this command wrote go, the folders it made too
        # (a refused verdict leaves the --out it was given as it found it, but for logs it replaced).
        for path in copies:
            path.unlink(missing_ok=True)
        for folder in (run_dir.logs_dir, run_dir.root):
            if folder in made or (folder == run_dir.logs_dir and run_dir.root in made):
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only if empty: nothing of anyone else's is removed
        raise


def _deciding_imports() -> None:
    """What deciding imports, imported while the logs' children parse: numpy takes 0.4 s in a GPU
    host's torch environment (benchmarks/verdict_throughput.md), where this process would otherwise
    only wait."""
    import numpy  # noqa: F401


def _missing_dirs(out: Path | None) -> set[Path]:
    """The run folders `RunDir.create` is about to make (None: a new base/<run-id>, made whole)."""
    if out is None:
        return set()
    return {folder for folder in (out, out / "logs") if not folder.exists()}


def _judge(args, paths, requested, claimed, thresholds, run_dir: RunDir, copies: list[Path],
           plots: PlotProcess) -> int:
    """The verdict on the given logs, bundled in `run_dir` (`plots` draws its plots); every log copy it
    writes is added to `copies`."""
    from cpverify import report  # imports tabulate: not at `cpverify --help`

    scrub = Redactor()  # one for the bundle: a host is the same host-N in its logs and in verdict.md
    # Judge what the bundle keeps: one snapshot of a log that grows while it is read, parsed as
    # its redacted copy is written, so that the copy, its sha256 and the verdict describe the
    # same text, and commands.sh replays it (exactly, unless the copy had to be cut short).
    jobs = [(option, path, run_dir.log_path(round_name(option, k))) for option, given in paths.items()
            for k, path in enumerate(given, start=1)]
    taken = bundle_logs([(path, copy) for _, path, copy in jobs], scrub, copies, meanwhile=_deciding_imports)
    inputs: dict[str, list[dict]] = {option: [] for option in paths}
    parsed: dict[str, list] = {option: [] for option in paths}
    for (option, _, _), (record, log) in zip(jobs, taken, strict=True):
        inputs[option].append(record)
        parsed[option].append(log)
    for option, given in paths.items():
        repeats = _repeats(inputs[option], parsed[option])
        twice = [shown_name(path.name) for path, again in zip(given, repeats, strict=True) if again]
        if twice:
            # one process counted as two rounds would show no spread between them: a narrower interval than the data
            raise InputError(f"--{option} gives one log twice ({', '.join(twice)} holds the same bytes, or the same "
                             f"timing records at every step, as an earlier --{option}): each --{option} is one round, one "
                             "process of the arm (a copy re-saved, with other line endings or compressed, is the same "
                             "process)",
                             f"give every round's own log once, in the order they ran: --{option} r1.log --{option} r2.log")
    # Without a claim, two options whose logs state two different CPs are judged at those: a CP=2 log
    # given as --baseline is not "CP=1 that did not take effect". A log whose CP did not take effect
    # states the same CP as the other (cp=1 twice), so the defaults stand and cp_effective fails.
    stated = {option: _stated_cp(option, paths[option], logs) for option, logs in parsed.items()}
    if not claimed and None not in stated.values() and stated["baseline"] != stated["candidate"]:
        if stated != requested:
            print(f"note: the --baseline {_logs_state(paths['baseline'])} CP={stated['baseline']} and the --candidate "
                  f"{'log' if len(paths['candidate']) == 1 else 'logs'} CP={stated['candidate']}: judging them at "
                  "those CPs (--baseline-cp/--candidate-cp say otherwise)", file=sys.stderr)
        requested = {option: int(cp) for option, cp in stated.items() if cp is not None}
    # The baseline is the smaller CP, whichever order the logs came in (see decide()).
    b_option, c_option = sorted(paths, key=lambda option: requested[option])
    if b_option != "baseline" and claimed:
        print(f"note: --baseline-cp {requested['baseline']} > --candidate-cp {requested['candidate']}: judging "
              f"CP={requested[c_option]} ({shown_name(str(paths[c_option][0]))}) against CP={requested[b_option]} "
              f"({shown_name(str(paths[b_option][0]))})", file=sys.stderr)
    b_cp, c_cp = requested[b_option], requested[c_option]
    arms = {arm_name(b_cp): b_option, arm_name(c_cp): c_option}
    evidence, cut = [], []
    for name, option in arms.items():
        for k, log in enumerate(parsed[option], start=1):
            bundled = run_dir.log_path(round_name(name, k))
            run_dir.log_path(round_name(option, k)).replace(bundled)  # logs/<arm>.log, as every bundle names its logs
            copies.append(bundled)
            inputs[option][k - 1] = {**inputs[option][k - 1], "bundled": f"logs/{bundled.name}",
                                     "cp": requested[option], "round": k}
            cut += _shortened(round_name(name, k), inputs[option][k - 1])
            evidence.append(ArmEvidence(round_name(name, k), requested[option], log,
                                        expected_rollouts=args.expected_rollouts, log_path=bundled, arm=name,
                                        round=k))
    # env.json: the baseline is the smaller CP; an option's first round as before, and every round under "rounds"
    shown = {"baseline": inputs[b_option], "candidate": inputs[c_option]}
    shown_inputs = {option: {**rounds[0], **({"rounds": rounds} if len(rounds) > 1 else {})}
                    for option, rounds in shown.items()}
    names = list(arms)
    verdict = decide(evidence, comparisons=[(names[0], names[1])], thresholds=thresholds, workload=args.workload,
                     run_checks=cut)

    reproduce = ["cpverify", "verdict"]
    for flag, name, option in (("--baseline", names[0], b_option), ("--candidate", names[1], c_option)):
        for k in range(1, len(paths[option]) + 1):
            reproduce += [flag, f"logs/{round_name(name, k)}.log"]
    reproduce += ["--baseline-cp", str(b_cp), "--candidate-cp", str(c_cp), "--pass-ratio", f"{args.pass_ratio:g}",
                  *(["--warmup", str(args.warmup)] if args.warmup is not None else []),
                  "--min-steps", str(args.min_steps), "--workload", args.workload,
                  "--out", "reproduced"]
    reproduce += ["--expected-rollouts", str(args.expected_rollouts)] if args.expected_rollouts is not None else []
    reproduce += ["--deterministic"] if args.deterministic else []
    commands = ("#!/usr/bin/env bash\n"
                "# Reproduce this verdict from the logs in this bundle (run it from this directory).\n"
                "# The slime commands behind the logs were not recorded: the logs were given to cpverify.\n"
                + "".join(f"# {check.detail}: this replay judges the copy, not the whole log.\n"
                          for check in cut if check.name == "bundled_log")
                + "set -euo pipefail\n" + shlex.join(reproduce) + "\n")
    logs_state = {"baseline": _stated(parsed[b_option][0]), "candidate": _stated(parsed[c_option][0])}
    written = report.write_report(run_dir, verdict, env=_basic_env(shown_inputs, logs_state), commands_sh=commands,
                                  redactor=scrub, command=shown_command(["cpverify", "verdict", *sys.argv[2:]])
                                  if sys.argv[1:2] == ["verdict"] else shlex.join(reproduce[:-2]), draw=plots.start)

    if args.json:
        print(json.dumps(json.loads(written["verdict.json"].read_text(encoding="utf-8")), indent=2))
    else:
        print(report.render_summary(verdict))
    print(f"artifacts: {shown_name(str(run_dir.root))}", file=sys.stderr)
    print(report.share_lines(written), file=sys.stderr)
    return verdict.exit_code


def _logs_state(paths: list[Path]) -> str:
    return "log states" if len(paths) == 1 else "logs state"


def _repeats(found: list[dict], logs: list) -> list[bool]:
    """For each log taken, whether an earlier one is the same process's: the same bytes, or the same
    timing records (evidence.timing_records: the same log with other bytes)."""
    if len(logs) < 2:  # one round repeats nothing (and a long log's records take a while to compare)
        return [False] * len(logs)
    seen: set = set()
    out = []
    for item, log in zip(found, logs, strict=True):
        keys = {item["sha256"]} | ({records} if (records := timing_records(log)) else set())
        out.append(bool(keys & seen))
        seen |= keys
    return out


def _stated_cp(option: str, paths: list[Path], logs: list) -> int | None:
    """The CP an option's logs state (the layout hook's line or Megatron's argument dump); None when none
    states one. Rounds of one arm run one CP: logs that state two are bad input."""
    stated = {path: log.layout.cp for path, log in zip(paths, logs, strict=True) if log.layout is not None}
    if len(set(stated.values())) > 1:
        listed = ", ".join(f"{shown_name(path.name)} CP={cp}" for path, cp in stated.items())
        raise InputError(f"the --{option} logs state different CPs ({listed}): every --{option} log is a round of one "
                         "arm, one CP", "give each CP's logs to its own option: --baseline the CP=1 rounds, "
                         "--candidate the CP=2 rounds")
    return next(iter(stated.values()), None)


def _shortened(arm: str, record: dict) -> list[Check]:
    """The rows saying that an arm's log, or the bundle's copy of it, stops before it should: a
    compressed log that breaks off is not a whole log (INCONCLUSIVE, as a log that ends mid-step);
    a copy cut short still let the verdict read every line (a warning: the replay reads less)."""
    rows = []
    if record["stored"].get("cut"):
        rows.append(Check("log_cut", CheckStatus.FAIL, f"the log given is not whole: {record['stored']['cut']}",
                          f"check it with `gzip -t`; {FIX_INCOMPLETE}", arm, INCONCLUSIVE))
    copy = record.get("copy", {"complete": True})
    if not copy["complete"]:
        rows.append(Check("bundled_log", CheckStatus.WARN,
                          f"{record['bundled']} holds lines 1-{copy['lines']} of {copy['of_lines']} ({copy['bytes']} "
                          f"of {copy['of_bytes']} bytes of text; a copy stops at {copy['max_bytes']}); the verdict read "
                          f"every line of the log given: {record['bytes']} bytes, sha256 {record['sha256']}",
                          "attach the log itself where the whole of it is needed (its sha256 is above)", arm))
    return rows


# Megatron-LM's argument dump, for the setup line: what each run was started with.
_STATED_ARGUMENTS = {"response_length": "rollout_max_response_len", "num_rollout": "num_rollout",
                     "seq_length": "seq_length", "world_size": "world_size"}


def _stated(log) -> dict:
    """What a log itself says about the run: NCCL (and the CUDA it was built for), the layout, a few
    of Megatron-LM's arguments. The rest of the GPU host is unknown to `cpverify verdict`."""
    state = {"nccl": log.nccl.version, "cuda": log.nccl.cuda,
             "layout": None if log.layout is None else {"cp": log.layout.cp, "dp": log.layout.dp, "tp": log.layout.tp,
                                                        "pp": log.layout.pp, "world": log.layout.world}}
    state.update({key: log.arguments.get(name) for key, name in _STATED_ARGUMENTS.items()})
    return {key: value for key, value in state.items() if value is not None}


def _basic_env(inputs: dict, logs_state: dict) -> dict:
    """What can be said about the run from here: what its logs state, and the inputs' fingerprints. The
    machine that computed the verdict is named as such: it is not the GPU host the logs came from."""
    return {"source": "cpverify verdict (existing logs)", "cpverify": __version__, "logs_state": logs_state,
            "inputs": inputs, "verdict_computed_on": {"python": platform.python_version(),
                                                      "platform": platform.platform()}}
