"""`cpverify run`'s command line, read once: a frozen, typed `RunSpec` (cpverify.pipeline runs it).

`run_spec(args)` is the one place that reads the argparse Namespace of `cpverify run`: every
default, every "none" and every check of an option's value happens here, before the run directory
is touched; the steps (cpverify.steps) read the spec, never the Namespace.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from cpverify import config, fetch
from cpverify.config import RUNNERS
from cpverify.errors import InputError
from cpverify.overrides import resolve_profile
from cpverify.plan import parse_gpus
from cpverify.plan.rounds import Design
from cpverify.profiles import Profile
from cpverify.runners import runner_class
from cpverify.runners.base import RunSetup
from cpverify.verdict import Thresholds

STEPS = ("doctor", "image", "fetch", "compileall", "lint", "cp1", "cp2", "verdict")
ALIASES = {"arms": ("cp1", "cp2"), "all": STEPS}


@dataclass(frozen=True)
class ImageRequest:
    """What --image, --build, --base-image, --slime-commit, --nccl and --wheel-dir ask of the image
    (the docker runner's; cpverify.image)."""

    image: str | None = None  # a tag to build, or without `build` to use as it is
    build: bool = False
    base_image: str | None = None
    slime_commit: str | None = None  # "" keeps the base image's slime
    nccl: str | None = None  # a pip spec
    wheel_dir: str | None = None


@dataclass(frozen=True)
class RunSpec:
    """One `cpverify run` as the user asked for it."""

    profile: Profile  # resolved: --profile, --config, --set, --cp, --seq-len
    runner: str
    steps: tuple[str, ...]  # --only, in STEPS order
    design: Design  # --rounds, --max-rounds, --budget
    run_id: str  # as given: an id, or artifacts.LATEST
    out: str
    cache: Path  # resolved
    gpus: tuple[int, ...] | None = None  # --gpus as indices; None: not given (the profile's count from 0), or "none"
    gpu_less: bool = False  # --gpus none: no GPU request at all (pipeline tests)
    python: str | None = None  # --python: the local runner's interpreter asked for
    model_dir: str | None = None
    slime_dir: str | None = None
    slime_ref: str | None = None
    slime_ref_candidate: str | None = None
    slime_dir_candidate: str | None = None
    image: ImageRequest = ImageRequest()
    ray_address: str | None = None
    ulimits: bool = True  # raise memlock/stack in containers (--no-ulimits: not)
    redact_identity: bool = True  # --no-redact: credentials only

    @property
    def gpus_pinned(self) -> bool:
        """The user named the GPUs (--gpus), so the runner uses exactly these."""
        return self.gpus is not None


def run_spec(args: argparse.Namespace) -> RunSpec:
    """`cpverify run`'s arguments as a RunSpec; InputError for any value the run would refuse later."""
    if args.seq_len:
        # judged on the profile before --seq-len becomes its seq_lens, whose own check names no option
        base = resolve_profile(args.profile, toml=args.config, assignments=list(args.assignments))
        if not (base.kind == "probe" or base.train_only):
            raise InputError(f"--seq-len applies to the probe and train-only profiles, not {base.name!r}",
                             "use --profile train-only (slime's trainer at the response lengths you give), or --profile "
                             "long, or --set train_args=... with --rollout-max-response-len")
    profile = resolve_profile(args.profile, toml=args.config, assignments=[*args.assignments, *matrix_assignments(args)])
    Thresholds.of(profile)  # thresholds the verdict would refuse (too few steps for an interval) are bad input now
    if args.runner not in RUNNERS:  # argparse checks choices on the command line, not a default from the environment
        raise InputError(f"CPVERIFY_RUNNER={args.runner!r} is not a runner",
                         f"set it to one of {', '.join(RUNNERS)} (or pass --runner)")
    runner_class(args.runner).check(RunSetup(ray_address=args.ray_address))  # what it would refuse later
    config.progress_s()  # a bad CPVERIFY_PROGRESS_S is bad input now, not after the lint
    design = Design.of(args.rounds, max_rounds=args.max_rounds, budget=args.budget)
    steps = tuple(selected_steps(args.only))
    gpus = parse_gpus(args.gpus) if args.gpus and args.gpus != "none" else None
    image = ImageRequest(image=args.image, build=args.build, base_image=args.base_image,
                         slime_commit=args.slime_commit, nccl=args.nccl, wheel_dir=args.wheel_dir)
    return RunSpec(profile=profile, runner=args.runner, steps=steps, design=design, run_id=args.run_id, out=args.out,
                   cache=fetch.cache_root(args.cache).resolve(), gpus=gpus, gpu_less=args.gpus == "none",
                   python=args.python, model_dir=args.model_dir, slime_dir=args.slime_dir,
                   slime_ref=args.slime_ref, slime_ref_candidate=args.slime_ref_candidate,
                   slime_dir_candidate=args.slime_dir_candidate, image=image, ray_address=args.ray_address,
                   ulimits=not args.no_ulimits, redact_identity=not args.no_redact)


def selected_steps(only: str | None) -> list[str]:
    if not only:
        return list(STEPS)
    chosen: list[str] = []
    for word in only.split(","):
        word = word.strip()
        names = ALIASES.get(word, (word,))
        for name in names:
            if name not in STEPS:
                raise InputError(f"unknown step {word!r}", f"choose from {', '.join(STEPS)} (or arms, all)")
            if name not in chosen:
                chosen.append(name)
    return sorted(chosen, key=STEPS.index)


def matrix_assignments(args) -> list[str]:
    """--cp 1,2,4 and --seq-len 8K,32K,128K as profile overrides (after --set, so they win)."""
    out = []
    for flag, field_name, text in (("--cp", "cp_sizes", args.cp), ("--seq-len", "seq_lens", args.seq_len)):
        if not text:
            continue
        try:
            sizes = [int(w[:-1]) * 1024 if w[-1] in "kK" else int(w) for w in text.replace(",", " ").split()]
        except ValueError:
            raise InputError(f"{flag} {text!r} is not a list of whole numbers",
                             f"write e.g. {flag} {'1,2,4' if flag == '--cp' else '8K,32K,128K'}") from None
        out.append(f"{field_name}={','.join(map(str, sizes))}")
    return out
