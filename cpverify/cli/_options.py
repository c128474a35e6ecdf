"""Options several commands share: the profile (--profile, --config, --set), what a run is given
(--runner, --slime-dir, --cache, ...), every option of a run, and the run's plan from them."""

from __future__ import annotations

import argparse

from cpverify import config
from cpverify.config import RUNNERS
from cpverify.plan import Plan
from cpverify.plan.rounds import MAX_ROUNDS
from cpverify.profiles import PROFILES
from cpverify.run_spec import STEPS


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


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option of `cpverify run`. `cpverify plan` takes them all too, and both read them through
    one RunSpec (cpverify.run_spec), so that a plan can never read an option otherwise than the run."""
    add_profile_arguments(parser)
    add_workspace_arguments(parser)
    p = parser
    p.add_argument("--gpus", help="GPU indices (0,1) or a count (2); both arms use the same GPUs. "
                                  "'none' runs without a GPU request (pipeline tests only)")
    p.add_argument("--only", metavar="STEPS", help=f"comma-separated steps: {', '.join(STEPS)}, arms, all")
    p.add_argument("--cp", metavar="SIZES", help="CP sizes, e.g. 1,2,4: every size runs on the same GPUs and is "
                                                 "compared with the profile's baseline (CP=1)")
    p.add_argument("--seq-len", metavar="LENGTHS", help="probe sequence lengths or train-only response lengths, "
                                                        "e.g. 8K,32K,128K (one arm per CP and length)")
    p.add_argument("--rounds", default="auto", metavar="N|auto",
                   help="rounds per arm, each a process of its own, interleaved (CP1 CP2 CP2 CP1 ...): N runs every "
                        "arm N times; auto (the default) runs 2, then one more of every arm while the ratio's "
                        "interval straddles the threshold, up to --max-rounds")
    p.add_argument("--max-rounds", type=int, metavar="N",
                   help=f"with --rounds auto: at most N rounds per arm (default {MAX_ROUNDS})")
    p.add_argument("--budget", metavar="DURATION",
                   help="GPU time the arms may take, e.g. 90s, 20m, 1h30m: no round starts that would go past it "
                        "(estimated from the rounds so far); default: no limit but the rounds'")
    p.add_argument("--slime-ref", metavar="REF", help="run this commit of the --slime-dir clone (exported with git "
                                                      "archive); with --slime-ref-candidate, the A/B base")
    p.add_argument("--slime-ref-candidate", metavar="REF",
                   help="A/B: the candidate commit of the --slime-dir clone (e.g. HEAD); both revisions run at every CP")
    p.add_argument("--slime-dir-candidate", metavar="DIR",
                   help="A/B: a second slime checkout (e.g. your patched clone) against --slime-dir")
    p.add_argument("--image", help="image tag to build or (without --build) to use as it is")
    p.add_argument("--build", action="store_true", help="with --image: build it even though a tag is given")
    p.add_argument("--base-image", help="override BASE_IMAGE of docker/versions.lock")
    p.add_argument("--slime-commit", help="override SLIME_COMMIT ('' keeps the base image's slime)")
    p.add_argument("--nccl", metavar="PIP_SPEC", help="install this NCCL in the image, e.g. nvidia-nccl-cu12==2.29.3")
    p.add_argument("--wheel-dir", help="pre-downloaded wheels for the image build (offline hosts)")
    p.add_argument("--ray-address", default=config.ray_address(), help="Ray dashboard, e.g. http://HEAD:8265")
    p.add_argument("--no-ulimits", action="store_true",
                   help="do not raise memlock/stack in the containers (rootless Docker, sandboxes; "
                        "NCCL over RDMA needs them)")
    p.add_argument("--no-redact", action="store_true",
                   help="keep host names, paths and IPs in the artifacts and the terminal (credentials go always)")


def run_arguments(**given) -> argparse.Namespace:
    """`cpverify run`'s options at their defaults, with `given` in their place (for a command that
    takes only some of them: the lint of a profile)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_run_arguments(parser)
    return argparse.Namespace(**{**vars(parser.parse_args([])), **given})


def plan_from_args(args: argparse.Namespace) -> Plan:
    """The plan `cpverify run` makes from the same options: `args` read by run_spec, planned by the
    run's own Context (cpverify.steps.context), with nothing exported, recorded or written."""
    from cpverify.run_spec import run_spec  # the driver: only for the commands that plan
    from cpverify.steps.context import Context

    return Context.planning(run_spec(args)).plan
