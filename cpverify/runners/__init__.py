"""Runners turn one planned arm into one log file plus an ArmResult (see base.py).

    runner = get_runner("docker", image=..., run_id=..., gpus=(0, 1))
    result = runner.run_arm(arm, log_path=..., limits=Limits(...))

Kept import-light: a runner's module (and docker-py or ray with it) is imported only
when that runner is asked for, so `cpverify --help` works without either installed.
"""

from __future__ import annotations

import importlib

from cpverify.errors import InputError
from cpverify.model import ArmInterrupted, ArmResult, Limits
from cpverify.runners.base import Runner

# name -> "module:class"
RUNNERS = {
    "local": "cpverify.runners.local:LocalRunner",
    "docker": "cpverify.runners.docker:DockerRunner",
    "ray": "cpverify.runners.ray:RayRunner",
}

__all__ = ["RUNNERS", "ArmInterrupted", "ArmResult", "Limits", "Runner", "get_runner"]


def get_runner(name: str, **options) -> Runner:
    """The runner called `name`, built with keyword `options` (its constructor's arguments)."""
    target = RUNNERS.get(name)
    if target is None:
        raise InputError(f"unknown runner {name!r}", fix=f"choose one of: {', '.join(RUNNERS)}")
    module_name, class_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise InputError(f"the {name} runner is not part of this cpverify", fix=f"use one of: {', '.join(n for n in RUNNERS if n != name)}") from exc
        raise InputError(
            f"the {name} runner needs the Python package {exc.name!r}, which is not installed",
            fix=f"pip install {exc.name}" + (" (or: pip install 'cpverify[ray]')" if name == "ray" else ""),
        ) from exc
    try:
        return getattr(module, class_name)(**options)
    except TypeError as exc:  # a misspelled option: say which runner and what it takes
        raise InputError(f"bad option for the {name} runner: {exc}", fix=f"see help({class_name})") from exc
