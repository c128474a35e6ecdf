"""Options several commands share: the profile (--profile, --config, --set), what a run is given
(--runner, --slime-dir, --cache, ...), and a plan from them."""

from __future__ import annotations

import argparse
from pathlib import Path

from cpverify import config
from cpverify.artifacts import LATEST, latest_run_id, new_run_id
from cpverify.config import RUNNERS
from cpverify.fetch import cache_root
from cpverify.overrides import resolve_profile
from cpverify.plan import Plan, parse_gpus
from cpverify.profiles import PROFILES
from cpverify.runners import runner_class
from cpverify.workspace import Workspace


def add_profile_arguments(parser: argparse.ArgumentParser) -> None:
    """--profile, --config TOML, --set KEY=VALUE: shared by plan, lint and run."""
    parser.add_argument("--profile", default="smoke", help=f"profile name: {', '.join(PROFILES)} (default: %(default)s)")
    parser.add_argument("--config", metavar="TOML", help="TOML file of profile field overrides")
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE",
                        help="override one profile field, e.g. --set pass_ratio=1.5 (repeatable)")


def add_workspace_arguments(parser: argparse.ArgumentParser) -> None:
    """What a run is given and where it runs: shared by run and plan, so that `cpverify plan --sh` with a
    run's options prints the commands.sh that run writes (cpverify.workspace)."""
    parser.add_argument("--runner", choices=RUNNERS, default=config.runner(),
                        help="where arms run: docker (GPU containers), local (subprocesses here), ray (Ray Jobs) "
                             "(default: %(default)s; CPVERIFY_RUNNER sets it)")
    parser.add_argument("--python", metavar="PYTHON",
                        help="the interpreter that runs the arms with the local runner (default: CPVERIFY_PYTHON, "
                             "else the first python3/python on PATH that imports torch, and slime for slime "
                             "profiles; the run is BLOCKED when it cannot import them)")
    parser.add_argument("--run-id", default=config.run_id(),
                        help="resume or name a run (CPVERIFY_RUN_ID); 'latest' continues the run <out>/latest "
                             "points at. Every run updates <out>/latest")
    parser.add_argument("--out", default=config.artifacts(),
                        help="artifacts root (default: %(default)s; CPVERIFY_ARTIFACTS sets it)")
    parser.add_argument("--cache", default=config.cache(),
                        help="model and data cache, mounted read-only into the arms (default: %(default)s; "
                             "CPVERIFY_CACHE sets it)")
    parser.add_argument("--model-dir", help="use this local model directory instead of fetching (offline hosts, "
                                            "your own checkpoint); verified the same way and checked against MODEL_ARGS")
    parser.add_argument("--slime-dir", default=config.slime_dir(),
                        help="your slime checkout: mounted read-only (docker) or run in place (local)")


def plan_from_args(args: argparse.Namespace) -> Plan:
    """The plan `cpverify run` would make from the same options (a command without the workspace's
    options plans as the default runner does: the image's paths)."""
    profile = resolve_profile(args.profile, toml=args.config, assignments=args.assignments)
    gpus = parse_gpus(args.gpus) if getattr(args, "gpus", None) else None
    out = getattr(args, "out", None) or config.artifacts()
    run_id = getattr(args, "run_id", None) or new_run_id()
    run_id = latest_run_id(out) if run_id == LATEST else run_id
    workspace = Workspace(profile, runner_class(getattr(args, "runner", None) or config.DEFAULT_RUNNER),
                          cache_root(getattr(args, "cache", None)).resolve(), (Path(out) / run_id).resolve() / "work",
                          model_dir=getattr(args, "model_dir", None), slime_dir=getattr(args, "slime_dir", None))
    python = workspace.find_python(getattr(args, "python", None)).path if workspace.arms_here else "python3"
    return workspace.plan(run_id=run_id, gpus=gpus, python=python)
