"""`cpverify plan`: the arms of a profile and proof that each compared pair differs only in CP."""

from __future__ import annotations

import argparse
import json

from cpverify.cli._options import add_run_arguments, plan_from_args
from cpverify.plan import arm_diff


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plan", help="summarize each arm and what differs between arms (--sh: the exact commands)",
        description="Print a summary of the profile's arms and prove that each compared pair differs only "
                    "in the CP size; --sh prints the exact commands, --json the whole plan. It takes every option "
                    "of `cpverify run` and reads them as the run does: given a run's options, --sh prints the "
                    "commands.sh that run writes, paths included. Runs nothing; exit 2 when a pair would "
                    "differ in more than CP.")
    add_run_arguments(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the plan as JSON")
    out.add_argument("--sh", action="store_true", help="print commands.sh")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    if args.json:
        print(json.dumps(plan.to_json(), indent=2))
        return 0
    if args.sh:
        print(plan.commands_sh(), end="")
        return 0
    from tabulate import tabulate  # heavy: only for the summary

    p = plan.profile
    print(f"plan {plan.run_id}: profile {p.name} ({p.kind}) on GPUs {','.join(map(str, plan.gpus))}")
    print(f"  {p.description}")
    rows = [[a.name, a.cp, a.seq_len or "", a.workdir, len(a.argv)] for a in plan.arms]
    print(tabulate(rows, headers=["arm", "cp", "seq_len", "workdir", "argv words"]))
    for baseline, candidate in plan.comparisons:
        print(f"\n{baseline} -> {candidate} differ only in:")
        for line in arm_diff(plan.arm(baseline), plan.arm(candidate)):
            print(f"  {line}")
    print("\nExact commands: cpverify plan --sh (the same script a run writes as commands.sh)")
    return 0
