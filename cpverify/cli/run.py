"""`cpverify run`: the whole verification, or the steps --only names (cpverify.pipeline)."""

from __future__ import annotations

import argparse

from cpverify import config
from cpverify.cli._options import add_profile_arguments, add_workspace_arguments
from cpverify.pipeline import STEPS
from cpverify.pipeline import run as run_pipeline
from cpverify.plan.rounds import MAX_ROUNDS
from cpverify.runners.watch import terminate_as_interrupt


def run(args: argparse.Namespace) -> int:
    # One signal policy for the whole process: SIGTERM and SIGHUP (nox, systemd, a closed ssh
    # session) are a Ctrl-C, in whatever step they arrive.
    with terminate_as_interrupt():
        return run_pipeline(args)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="the whole verification (or --only some steps): doctor, image, fetch, compileall, lint, cp1, cp2, verdict",
        description="Run the verification: doctor, image, fetch, compileall, lint, cp1, cp2, verdict (or the "
                    "steps --only names), and write artifacts/<run-id>/verdict.md, verdict.json, env.json and "
                    "commands.sh. No GPU is held before the lint has passed. Exit code: 0 PASS, 1 FAIL (or lint "
                    "errors), 2 bad input, 3 INCONCLUSIVE, 4 BLOCKED, 130 interrupted.")
    add_profile_arguments(p)
    add_workspace_arguments(p)
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
    p.set_defaults(func=run)
