"""A run's inputs: whether what the user named is there, and where each is as the workload sees it.

`cpverify run` (cpverify.pipeline) and `cpverify plan` both plan through `Workspace.plan`, so the
script `cpverify plan --sh` prints is the commands.sh a run with the same options writes, paths
included. In a container (a runner whose class is `isolated`: Docker) the cache, the checkouts and
the run's work directory are mounted at fixed paths; elsewhere (local, Ray) they are this
machine's paths as given.

`Workspace.check` runs before a run's first step: a missing checkout, model directory, wheel
directory or a broken prompt file is bad input (exit 2) naming the path, not a BLOCKED or a FAIL
after the doctor, the image build and the download.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cpverify import fetch
from cpverify.errors import InputError
from cpverify.model import Mount
from cpverify.plan import build_ab_plan, build_plan
from cpverify.prompts import load_prompts
from cpverify.runners.workload_env import workload_env
from cpverify.workload_python import WorkloadPython, requested_python
from cpverify.workload_python import workload_python as find_python

if TYPE_CHECKING:
    from cpverify.plan import Plan
    from cpverify.profiles import Profile
    from cpverify.revisions import Revision
    from cpverify.runners.base import BaseRunner

CONTAINER_CACHE = "/cache"
CONTAINER_SLIME = "/slime-under-test"
CONTAINER_SLIME_CANDIDATE = "/slime-candidate"  # A/B: the second revision, mounted beside the first
CONTAINER_WORK = "/artifacts"
IMAGE_SLIME = "/root/slime"  # slime's image (and the default of a GPU host) keeps its checkout here
CLONE_FIX = "pass the top directory of a slime clone (git clone https://github.com/THUDM/slime)"


@dataclass(frozen=True)
class Workspace:
    """What the user named for one run, on this machine, and the runner that will run it."""

    profile: Profile
    site: type[BaseRunner]  # the runner's class: `isolated` (containers of the image), `remote` (a cluster)
    cache: Path  # the cpverify cache, resolved
    work_dir: Path  # the run's writable work directory (artifacts/<run-id>/work)
    model_dir: str | None = None
    slime_dir: str | None = None
    revisions: tuple[Revision, Revision | None] | None = None  # --slime-ref..., --slime-dir-candidate

    @property
    def arms_here(self) -> bool:
        """The arms run on this machine, in this machine's environment (the local runner)."""
        return not (self.site.isolated or self.site.remote)

    def paths(self) -> dict[str, str]:
        """Model, data, slime and work directories as the workload sees them (container or host)."""
        in_container = self.site.isolated
        cache = Path(CONTAINER_CACHE) if in_container else self.cache
        if self.model_dir and not in_container:
            model = Path(self.model_dir)
        elif self.model_dir:
            model = Path(CONTAINER_CACHE) / "model"
        else:
            model = fetch.snapshot_dir(cache, self.profile.model_repo, self.profile.model_revision)
        data = fetch.data_dir(cache) / self.profile.dataset_path().name
        if self.revisions:
            slime = CONTAINER_SLIME if in_container else str(self.revisions[0].host_dir)
        elif self.slime_dir:
            slime = CONTAINER_SLIME if in_container else str(Path(self.slime_dir).resolve())
        else:
            slime = IMAGE_SLIME
        work = CONTAINER_WORK if in_container else str(self.work_dir)
        return {"model_dir": str(model), "data_path": str(data), "slime_dir": slime, "work_dir": work}

    def mounts(self) -> list[Mount]:
        """For containers: the cache and the checkouts read-only; only the run's work directory is writable."""
        mounts = [Mount(self.cache, CONTAINER_CACHE)]
        if self.model_dir:
            mounts.append(Mount(Path(self.model_dir).resolve(), f"{CONTAINER_CACHE}/model"))
        if self.revisions:  # exported refs or two checkouts: each at its own path, both read-only
            mounts.append(Mount(self.revisions[0].host_dir, CONTAINER_SLIME))
            if self.revisions[1] is not None:
                mounts.append(Mount(self.revisions[1].host_dir, CONTAINER_SLIME_CANDIDATE))
        elif self.slime_dir:
            mounts.append(Mount(Path(self.slime_dir).resolve(), CONTAINER_SLIME))
        mounts.append(Mount(self.work_dir, CONTAINER_WORK, read_only=False))
        return mounts

    def plan(self, *, run_id: str, gpus=None, python: str = "python3") -> Plan:
        """Every arm's argv and environment (cpverify.plan), with the paths as the workload sees them."""
        paths = self.paths()
        base, candidate = self.revisions or (None, None)
        if base is not None and candidate is not None:
            candidate_dir = CONTAINER_SLIME_CANDIDATE if self.site.isolated else str(candidate.host_dir)
            return build_ab_plan(self.profile, run_id=run_id, gpus=gpus, model_dir=paths["model_dir"],
                                 data_path=paths["data_path"], base_dir=paths["slime_dir"], base_label=base.label,
                                 candidate_dir=candidate_dir, candidate_label=candidate.label, python=python,
                                 work_dir=paths["work_dir"])
        return build_plan(self.profile, run_id=run_id, gpus=gpus, model_dir=paths["model_dir"],
                          data_path=paths["data_path"], slime_dir=paths["slime_dir"], work_dir=paths["work_dir"],
                          slime_ref=base.label if base is not None else None, python=python)

    def python_needs(self) -> tuple[str, ...]:
        return ("torch", "slime") if self.profile.kind == "slime" else ("torch", "cpverify.probe.workload")

    def find_python(self, flag: str | None) -> WorkloadPython:
        """The local runner's interpreter: --python, else CPVERIFY_PYTHON, else the first Python that
        imports what the arms import, asked the way the arms will run (their directory, their environment)."""
        explicit, chosen_by = requested_python(flag)
        workdir = Path(self.paths()["slime_dir"]) if self.profile.kind == "slime" else Path.cwd()
        env, _dropped = workload_env(self.profile.env, base=os.environ)
        return find_python(explicit, chosen_by=chosen_by, needs=self.python_needs(),
                           cwd=workdir if workdir.is_dir() else None, env=env)

    def check(self, *, wheel_dir: str | None = None) -> None:
        """What the user named is there and usable, before the run's first step (InputError otherwise)."""
        for flag, directory in self._checkouts():
            if not directory.is_dir():
                raise InputError(f"{flag} {directory} does not exist or is not a directory", CLONE_FIX)
            if not (directory / "train.py").is_file():
                raise InputError(f"{flag} {directory} has no train.py, so it is not a slime checkout", CLONE_FIX)
        if self.profile.kind != "slime":
            return
        if self.model_dir and not Path(self.model_dir).expanduser().is_dir():
            raise InputError(f"--model-dir {self.model_dir} does not exist or is not a directory",
                             "pass the directory that holds the model's config.json and *.safetensors, or leave "
                             "--model-dir out to fetch the profile's model")
        if wheel_dir and self.site.isolated:
            from cpverify.image import wheels_in  # docker's image build: only where the arms run in its image

            wheels_in(Path(wheel_dir))
        load_prompts(self.profile.dataset_path())  # the fetch step stages it: DatasetError names the line

    def _checkouts(self) -> list[tuple[str, Path]]:
        """Every slime checkout on this machine that an arm will run. With Docker and no --slime-dir
        the image's slime runs; with Ray the paths are the cluster's, checked by the Ray runner."""
        if self.profile.kind != "slime" or self.site.remote:
            return []
        if self.revisions:
            checkouts = [("--slime-dir", self.revisions[0].host_dir)]
            if self.revisions[1] is not None:
                checkouts.append(("--slime-dir-candidate", self.revisions[1].host_dir))
            return checkouts
        if self.slime_dir:  # this machine's path (with Docker the workload sees it at /slime-under-test)
            return [("--slime-dir", Path(self.slime_dir))]
        return [("--slime-dir", Path(IMAGE_SLIME))] if self.arms_here else []
