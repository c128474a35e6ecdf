"""One `cpverify run` process: its RunSpec, the run directory, what the run has recorded
(state.json) and what is derived from them once: the workspace, the interpreter, the plan."""

from __future__ import annotations

import dataclasses
import functools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cpverify.artifacts import LATEST, RunDir, latest_run_id, run_root
from cpverify.errors import InputError
from cpverify.model import Arm
from cpverify.plan import Plan
from cpverify.profiles import Profile
from cpverify.redact import Pseudonyms, Redactor
from cpverify.revisions import revisions
from cpverify.run_spec import RunSpec
from cpverify.run_state import RunRecord
from cpverify.runners import make_runner, runner_class
from cpverify.runners.base import BaseRunner, RunSetup
from cpverify.runners.workload_env import secret_values
from cpverify.workload_python import WorkloadPython, requested_python
from cpverify.workspace import Workspace


@dataclass
class Context:
    """A run as this process works on it: the spec it was given, the run directory and its record."""

    spec: RunSpec
    run_dir: RunDir
    record: RunRecord = field(default_factory=RunRecord)
    rechecked: set[str] = field(default_factory=set)  # what this process has checked again itself (not from state)
    planning_only: bool = False  # `cpverify plan`: the run's plan, with nothing exported, recorded or written

    @classmethod
    def planning(cls, spec: RunSpec) -> Context:
        """The Context a `cpverify run` of `spec` would have, for its plan alone (cpverify plan): the
        same run directory, workspace, revisions and interpreter, so the same plan; nothing is written."""
        run_id = latest_run_id(spec.out) if spec.run_id == LATEST else spec.run_id
        return cls(spec=spec, run_dir=RunDir(run_root(spec.out, run_id)), planning_only=True)

    @property
    def profile(self) -> Profile:
        return self.spec.profile

    @property
    def kind(self) -> str:
        return self.profile.kind

    @property
    def runner(self) -> str:
        return self.spec.runner

    @property
    def site(self) -> type[BaseRunner]:
        """Where the arms run, as the runner's class says it: `isolated` (in containers of the image),
        `remote` (on a cluster), or neither (here, with this machine's environment)."""
        return runner_class(self.spec.runner)

    @property
    def arms_here(self) -> bool:
        """The arms run on this machine, in this machine's environment (the local runner)."""
        return not (self.site.isolated or self.site.remote)

    @property
    def host_work_dir(self) -> Path:
        """The run's writable work directory on this machine (mounted at CONTAINER_WORK in containers)."""
        return self.run_dir.root.resolve() / "work"

    @functools.cached_property
    def revisions(self):
        """(base, candidate or None) slime revisions from --slime-ref/--slime-ref-candidate/--slime-dir-candidate,
        or None when the run uses --slime-dir (or the image's slime) as it is. Refs are exported once per run."""
        s = self.spec
        return revisions(slime_dir=s.slime_dir, slime_ref=s.slime_ref, slime_ref_candidate=s.slime_ref_candidate,
                         slime_dir_candidate=s.slime_dir_candidate, export_root=self.run_dir.root / "slime",
                         local=not self.site.remote, export=not self.planning_only)

    @functools.cached_property
    def workspace(self) -> Workspace:
        """What the user named for this run and where the workload sees it (cpverify.workspace)."""
        return Workspace(self.profile, self.site, self.spec.cache, self.host_work_dir, model_dir=self.spec.model_dir,
                         slime_dir=self.spec.slime_dir, revisions=self.revisions)

    @functools.cached_property
    def interpreter(self) -> str:
        """The arms' interpreter as the plan writes it: the local runner's choice, else python3 (the
        image's or the cluster's)."""
        python = self.workload_python()
        return python.path if python is not None else "python3"

    @functools.cached_property
    def plan(self) -> Plan:
        """Every arm's argv and environment, built once per process (plan.json records it; see
        cpverify.run_state.check_plan for why a later process builds it again and compares)."""
        return self.workspace.plan(run_id=self.run_dir.run_id, gpus=self.spec.gpus, python=self.interpreter)

    def workload_python(self, *, refresh: bool = False) -> WorkloadPython | None:
        """The interpreter the local runner runs the arms with (None for docker and ray: there the arms'
        python3 is the image's or the cluster's). Chosen once and recorded in the run's state; the doctor
        and the arm steps choose again, since a new attempt re-checks what could have changed, and
        refuse a choice that is not the plan's."""
        if not self.arms_here:
            return None
        if self.planning_only:
            return self.workspace.find_python(self.spec.python)
        explicit, _chosen_by = requested_python(self.spec.python)
        recorded = self.record.workload_python
        fresh_enough = not refresh or "workload_python" in self.rechecked
        if (recorded and fresh_enough and recorded.get("requested") == explicit
                and tuple(recorded["needs"]) == self.workspace.python_needs()):
            return WorkloadPython.from_json(recorded)
        python = self.workspace.find_python(self.spec.python)
        planned = self.__dict__.get("interpreter")  # chosen already by this process (the plan's)
        if planned is not None and python.path != planned:
            raise InputError(f"run {self.run_dir.run_id} was planned with the workload Python {planned}; "
                             f"it would now be {python.path}",
                             f"pass --python {planned}, or start a new run (a fresh --run-id)")
        self.record.workload_python = {**python.to_json(), "requested": explicit}
        self.rechecked.add("workload_python")
        self.save()
        self.say(f"workload python: {python.path} ({python.chosen_by})"
                 + ("" if python.ok else f"; it cannot import {', '.join(python.missing)}"))
        return python

    @functools.cached_property
    def redactor(self) -> Redactor:
        """The run's redaction: credentials always; identity unless --no-redact, with placeholders
        (host-1, ip-1) that every step and every file of this run share (logs/placeholders.json)."""
        p = self.profile
        secrets = secret_values(p.env, [*p.train_args, *p.probe_args])
        return Redactor(secrets, identity=self.spec.redact_identity,
                        pseudonyms=Pseudonyms(self.run_dir.logs_dir / "placeholders.json"))

    @property
    def credentials_only(self) -> Redactor:
        """The run's credential rules without the identity ones: for what the run directory keeps
        for itself (state.json, plan.json, the deep lint's request), whose paths later steps read back."""
        return Redactor(self.redactor.literals, identity=False)

    def save(self) -> None:
        self.record.save(self.run_dir.state_json, scrub=self.credentials_only.json)

    def say(self, text: str) -> None:
        print(f"[cpverify {self.run_dir.run_id}] {text}", file=sys.stderr, flush=True)

    def isolated_mounts(self):
        """The containers' mounts (cpverify.workspace), with the run's work directory made."""
        self.host_work_dir.mkdir(parents=True, exist_ok=True)
        return self.workspace.mounts()

    def run_setup(self, *, progress=None) -> RunSetup:
        """What this run tells its runner (cpverify.runners.base.RunSetup): every runner takes what it needs."""
        s = self.spec
        gpus = None if s.gpu_less else self.plan.gpus
        return RunSetup(run_id=self.run_dir.run_id, gpus=gpus, pin_gpus=s.gpus_pinned and gpus is not None,
                        reserve_gpus=self.kind != "slime", mounts=tuple(self.isolated_mounts()) if self.site.isolated else (),
                        image=(self.record.image or {}).get("image") or s.image.image, ulimits=s.ulimits,
                        ray_address=s.ray_address, on_progress=progress)

    def run_tool(self, name: str, argv: list[str], *, env=(), timeout_s: float = 900) -> tuple[int, str]:
        """Run a GPU-less command where the arms run, in the slime checkout: a throwaway container of the
        image with the arms' mounts (docker), else a subprocess in this environment (local; Ray: the
        checkout as the user points at it), with no GPU visible. Returns (exit code, output); the output
        is also kept as logs/<name>.log. Raises EnvironmentBlocked when it cannot start at all."""
        runner = make_runner(self.runner, self.run_setup())
        tool = Arm(name, 0, tuple(argv), tuple(env), self.workspace.paths()["slime_dir"])
        return runner.run_tool(tool, log_path=self.run_dir.logs_dir / f"{name}.log", timeout_s=timeout_s)

    def plan_definition(self) -> dict:
        """Everything that decides what the arms run, as plan.json records it (cpverify.run_state): the
        plan (argv and env of every arm, secrets masked), the profile's other fields (thresholds,
        limits, model), the runner and, for Docker, the mounts and the image asked for (inside a
        container the plan's paths are the same whichever checkout is mounted there)."""
        arm_fields = ("about", "train_args", "model_args", "env", "probe_args")  # in the arms (masked), or words
        definition: dict[str, Any] = {"runner": self.runner,
                      "profile": {k: v for k, v in dataclasses.asdict(self.profile).items() if k not in arm_fields},
                      "plan": self.plan.to_json()}
        if self.site.isolated:
            i = self.spec.image
            definition["mounts"] = [[str(m.source), m.target, m.read_only] for m in self.isolated_mounts()]
            definition["image"] = {"image": i.image, "base_image": i.base_image, "slime_commit": i.slime_commit,
                                   "nccl": i.nccl}
        if self.site.remote:
            definition["ray_address"] = self.spec.ray_address
        return definition
