"""Options several commands share: the profile (--profile, --config, --set) and a plan from them."""

from __future__ import annotations

import argparse

from cpverify.artifacts import new_run_id
from cpverify.plan import DEFAULT_MODEL_DIR, DEFAULT_SLIME_DIR, Plan, build_plan, parse_gpus
from cpverify.profiles import PROFILES, resolve_profile


def add_profile_arguments(parser: argparse.ArgumentParser) -> None:
    """--profile, --config TOML, --set KEY=VALUE: shared by plan, lint and run."""
    parser.add_argument("--profile", default="smoke", help=f"profile name: {', '.join(PROFILES)} (default: %(default)s)")
    parser.add_argument("--config", metavar="TOML", help="TOML file of profile field overrides")
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE",
                        help="override one profile field, e.g. --set pass_ratio=1.5 (repeatable)")


def plan_from_args(args: argparse.Namespace) -> Plan:
    profile = resolve_profile(args.profile, toml=args.config, assignments=args.assignments)
    gpus = parse_gpus(args.gpus) if getattr(args, "gpus", None) else None
    return build_plan(
        profile,
        run_id=getattr(args, "run_id", None) or new_run_id(),
        gpus=gpus,
        model_dir=getattr(args, "model_dir", None) or DEFAULT_MODEL_DIR,
        data_path=getattr(args, "data", None),
        slime_dir=getattr(args, "slime_dir", None) or DEFAULT_SLIME_DIR,
    )
