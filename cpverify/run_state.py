"""What a run has planned and done: artifacts/<run-id>/plan.json and state.json, typed.

`cpverify run` runs its steps in one process, or one process per step (`nox -s cp1`, then
`nox -s cp2`, ...). These two files are how a step hands on to the next:

  plan.json   written once, by the first step of the run: everything that decides what the arms
              run (the plan's commands and environments, the profile's thresholds and limits, the
              runner, what the containers mount, the image asked for). Every later process of the
              run builds its plan once from its own arguments and is refused (exit 2) if it
              differs, so `--only cp2 --set env=...` cannot give cp2 an environment cp1 did not
              have. It is checked, not loaded: it holds secret values as ${NAME}.
  state.json  a RunRecord: facts for env.json (doctor, image, model, compileall, lint), each
              round of each arm with its result and the sha256 of the log it wrote (the verdict
              reads exactly those bytes), the rounds' design, looks and why they stopped, and why
              the run was blocked or interrupted. A run continued later runs only what is missing.

Both go through artifacts.atomic_write_json, the one writer of JSON in the run directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cpverify.artifacts import atomic_write_json
from cpverify.errors import EnvironmentBlocked, InputError
from cpverify.model import ArmResult, Outcome

SCHEMA_VERSION = 1


@dataclass
class ArmRecord:
    """One round of an arm: its result as its runner returned it (`result.arm` is the round's own
    name, cp1 or cp1.r2), the log it wrote (path relative to the run directory, sha256 and size
    taken when it ended), and which planned arm and round it is."""

    result: ArmResult
    log: str
    log_sha256: str
    log_bytes: int
    arm: str = ""  # the planned arm (cp1); "" -> result.arm
    round: int = 1

    def __post_init__(self) -> None:
        self.arm = self.arm or self.result.arm

    @property
    def counts(self) -> bool:
        """Whether this round stands as measured: it ran and ended (ok or not). An interrupted or
        blocked round never ran to its end and is run again when the run continues; a failed one
        stands (a crash in round 3 is a crash, and a rerun must not hide it)."""
        return self.result.outcome not in (Outcome.INTERRUPTED, Outcome.BLOCKED)

    def to_json(self) -> dict:
        return {**self.result.to_json(), "log_path": self.log, "log_sha256": self.log_sha256,
                "log_bytes": self.log_bytes, "planned_arm": self.arm, "round": self.round}

    @classmethod
    def from_json(cls, data: dict) -> ArmRecord:
        names = {f.name for f in dataclasses.fields(ArmResult)}
        result = ArmResult(**{k: v for k, v in data.items() if k in names})
        return cls(result, data["log_path"], data["log_sha256"], data["log_bytes"],
                   arm=data.get("planned_arm", ""), round=int(data.get("round", 1)))


@dataclass
class Interrupted:
    """Ctrl-C or a termination signal stopped the run during `step` (an arm or any other step)."""

    step: str
    why: str  # "interrupted (Ctrl-C)", "terminated (SIGTERM)"


@dataclass
class RunRecord:
    doctor: dict | None = None
    workload_python: dict | None = None  # the local runner's interpreter for the arms
    image: dict | None = None
    model: dict | None = None
    data: str | None = None
    rollouts: list | None = None  # train-only: what the fetch step wrote
    compileall: dict | None = None
    lint: list | None = None
    deep_lint: Any = None  # slime's own parser on every arm (cpverify.lint.deep)
    arms: dict[str, ArmRecord] = field(default_factory=dict)  # by round name: cp1, cp1.r2, ...
    # The rounds' design and its course (cpverify.plan.rounds): {"design": ..., "looks": [...],
    # "stopped": {"reason": ..., ...} or None}
    rounds: dict | None = None
    blocked: EnvironmentBlocked | None = None  # what blocked the run (state.json: its reason and fix)
    interrupted: Interrupted | None = None

    def rounds_of(self, arm: str) -> list[ArmRecord]:
        """The recorded rounds of planned arm `arm`, in round order."""
        return sorted((r for r in self.arms.values() if r.arm == arm), key=lambda r: r.round)

    def to_json(self) -> dict:
        data = {"schema_version": SCHEMA_VERSION}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "arms":
                value = {name: arm.to_json() for name, arm in value.items()}
            elif isinstance(value, EnvironmentBlocked):
                value = {"reason": value.problem, "fix": value.fix}
            elif isinstance(value, Interrupted):
                value = dataclasses.asdict(value)
            data[f.name] = value
        return data

    @classmethod
    def from_json(cls, data: dict) -> RunRecord:
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"schema_version {data.get('schema_version') if isinstance(data, dict) else None!r}, "
                             f"expected {SCHEMA_VERSION}")
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["arms"] = {name: ArmRecord.from_json(arm) for name, arm in (values.get("arms") or {}).items()}
        if values.get("blocked") is not None:
            values["blocked"] = EnvironmentBlocked(values["blocked"]["reason"], values["blocked"]["fix"])
        if values.get("interrupted") is not None:
            values["interrupted"] = Interrupted(**values["interrupted"])
        return cls(**values)

    @classmethod
    def load(cls, path: Path, *, new_run_id: str) -> RunRecord:
        """The record at `path` (a fresh one when there is none). A file this version cannot
        read is bad input: its run is continued by the cpverify that started it, or not at all."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read {path}: {exc}", f"start a new run: --run-id {new_run_id}") from None
        try:
            return cls.from_json(json.loads(text))
        except (ValueError, TypeError, KeyError) as exc:
            raise InputError(f"{path} is not a run record this cpverify can continue ({exc})",
                             f"start a new run: --run-id {new_run_id}") from None

    def save(self, path: Path, *, scrub=lambda obj: obj) -> None:
        atomic_write_json(path, scrub(self.to_json()))


# -- plan.json --------------------------------------------------------------------------------

def plan_document(definition: dict) -> dict:
    """plan.json's content: the definition and its fingerprint (sha256 of its canonical JSON),
    which is what later steps compare (readable values may be redacted on disk; the hash is not)."""
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return {"schema_version": SCHEMA_VERSION, "fingerprint": hashlib.sha256(canonical.encode()).hexdigest(),
            **definition}


def check_plan(path: Path, definition: dict, *, run_id: str, new_run_id: str) -> bool:
    """Write plan.json if this is the run's first step (True); else refuse, naming what differs
    and a fresh run id, unless `definition` is the one recorded (False)."""
    document = json.loads(json.dumps(plan_document(definition)))  # as it reads back: tuples are lists
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        atomic_write_json(path, document)
        return True
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path}: {exc}", f"start a new run: --run-id {new_run_id}") from None
    if recorded.get("fingerprint") == document["fingerprint"]:
        return False
    shown = differences(recorded, document)
    raise InputError(
        f"run {run_id} was planned with other arguments; these would change it: "
        + ("; ".join(shown[:4]) + (f" (+{len(shown) - 4} more)" if len(shown) > 4 else "")
           if shown else "a value that is not shown (a secret or a redacted path)"),
        f"give every step of a run the same arguments (plan.json records them), or start a new run: "
        f"--run-id {new_run_id} (or a fresh CPVERIFY_RUN_ID)")


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """`path: old -> new` for every leaf that differs between two JSON values (fingerprints aside)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in [*old, *(k for k in new if k not in old)]:
            if key not in ("fingerprint", "schema_version"):
                out += differences(old.get(key, "(absent)"), new.get(key, "(absent)"), f"{where}.{key}" if where else key)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [line for i, (a, b) in enumerate(zip(old, new, strict=True)) for line in differences(a, b, f"{where}[{i}]")]
    return [] if old == new else [f"{where}: {_short(old)} -> {_short(new)}"]


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
