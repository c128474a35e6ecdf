"""The one place that maps a runner's name to its class (ARCHITECTURE.md, "Runners").

Kept import-light: a runner's module is imported only when that runner is asked for, and
docker-py and ray only when it runs, so `cpverify --help` works without either.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from cpverify.errors import InputError

if TYPE_CHECKING:
    from cpverify.runners.base import BaseRunner, RunSetup

# name -> "module:class" (the names are cpverify.config.RUNNERS, the CLI's choices; a test checks)
RUNNERS = {
    "docker": "cpverify.runners.docker:DockerRunner",
    "local": "cpverify.runners.local:LocalRunner",
    "ray": "cpverify.runners.ray:RayRunner",
}


def runner_class(name: str) -> type[BaseRunner]:
    """The class of the runner called `name` (its module imported now)."""
    target = RUNNERS.get(name)
    if target is None:
        raise InputError(f"unknown runner {name!r}", fix=f"choose one of: {', '.join(RUNNERS)}")
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)


def make_runner(name: str, setup: RunSetup) -> BaseRunner:
    """The runner called `name`, built for the run `setup` describes."""
    return runner_class(name).for_run(setup)
