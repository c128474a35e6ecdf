"""Which Python runs a local workload (its `python3`): the one asked for (--python, CPVERIFY_PYTHON),
else the first on PATH that imports what the workload needs; and what it lacks, found by asking it
in a subprocess. The pipeline, the doctor and the probe choose it; the local runner runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from cpverify import config
from cpverify.config import PYTHON_ENV
from cpverify.errors import InputError

IMPORT_TIMEOUT_S = 90.0  # importing torch cold from a network filesystem can take a minute


# The extra that installs torch, all the probe profile needs besides cpverify (pyproject.toml).
PROBE_EXTRA = "pip install 'cpverify[probe]'"


@dataclass(frozen=True)
class WorkloadPython:
    """The interpreter a local workload runs with (its `python3`), why it was chosen, and which of
    the modules the workload needs it cannot import (module -> error; empty when it has them all)."""

    path: str
    chosen_by: str
    needs: tuple[str, ...]
    missing: dict[str, str] = field(default_factory=dict)
    tried: tuple[str, ...] = ()  # every interpreter looked at, when none was given

    @property
    def ok(self) -> bool:
        return not self.missing

    def problem(self) -> str:
        first = next(iter(self.missing.values()), "")
        return f"the workload's Python {self.path} ({self.chosen_by}) cannot import {', '.join(self.missing)}: {first}"

    def fix(self) -> str:
        hints = []
        if "slime" in self.missing:
            hints.append("point --slime-dir at a slime checkout (its slime/ package beside train.py)")
        if any(m.startswith("cpverify") for m in self.missing):
            hints.append(f"run from the cpverify checkout, or `{self.path} -m pip install -e <cpverify checkout>`")
        hints.append(f"pass --python (or export {PYTHON_ENV}) with the interpreter of the environment that has "
                     f"{', '.join(m for m in self.needs if not m.startswith('cpverify'))}, "
                     "e.g. --python /opt/conda/bin/python3; or run in the image: cpverify run --runner docker")
        if self.tried and "torch" in self.missing and "slime" not in self.needs:  # the probe: torch is all it lacks
            hints.append(f"install torch into cpverify's own environment: {PROBE_EXTRA} (with nox: "
                         "CPVERIFY_TOOL_EXTRAS=ray,plot,probe)")
        looked = f"none of {', '.join(self.tried)} imports {' and '.join(self.needs)}: " if len(self.tried) > 1 else ""
        return looked + "; or ".join(hints)

    def to_json(self) -> dict:
        return {"path": self.path, "chosen_by": self.chosen_by, "needs": list(self.needs), "missing": self.missing,
                "tried": list(self.tried)}

    @classmethod
    def from_json(cls, data: dict) -> WorkloadPython:
        return cls(data["path"], data["chosen_by"], tuple(data["needs"]), dict(data["missing"]), tuple(data["tried"]))


_IMPORTS = """\
import importlib, json, sys
missing = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as exc:
        missing[name] = f"{type(exc).__name__}: {exc}"
print("CPVERIFY-IMPORTS " + json.dumps(missing))
"""


def missing_imports(python: str, needs: tuple[str, ...], *, cwd: str | os.PathLike[str] | None = None,
                    env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Which of `needs` `python` cannot import, asked the way the workload will run: in a
    subprocess, from the workload's directory, with its environment (an import that crashes
    or hangs must not take cpverify with it)."""
    try:
        proc = subprocess.run([python, "-c", _IMPORTS, *needs], cwd=cwd, env=None if env is None else dict(env),
                              capture_output=True, text=True, errors="replace", timeout=IMPORT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {needs[0]: f"importing took longer than {IMPORT_TIMEOUT_S:.0f}s"}
    except OSError as exc:
        return {needs[0]: f"cannot start {python}: {exc.strerror or exc}"}
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("CPVERIFY-IMPORTS ")), None)
    if line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        return {needs[0]: f"{python} exited {proc.returncode}" + (f": {tail[-1]}" if tail else "")}
    return json.loads(line.split(" ", 1)[1])


def _pythons_on_path(path: str) -> list[str]:
    """python3 then python, in PATH order. Directories are resolved (/bin is /usr/bin on merged-usr
    systems), the interpreters are not: a venv's python links to its base Python but is another
    environment."""
    found = [os.path.join(os.path.realpath(d), name) for name in ("python3", "python") for d in path.split(os.pathsep)
             if d and os.path.isfile(os.path.join(d, name)) and os.access(os.path.join(d, name), os.X_OK)]
    return list(dict.fromkeys(found))


def requested_python(flag: str | None) -> tuple[str | None, str]:
    """(the interpreter asked for, by whom): --python, else CPVERIFY_PYTHON; (None, ...) when neither
    names one and workload_python() looks for it."""
    return (flag, "--python") if flag else (config.python(), PYTHON_ENV)


def workload_python(explicit: str | None = None, *, chosen_by: str = "--python", needs: tuple[str, ...] = ("torch",),
                    cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> WorkloadPython:
    """The Python for local workloads: `explicit` (--python or CPVERIFY_PYTHON) when given, else the
    first python3/python on PATH that imports everything in `needs`, else this process's Python if it
    does; when none does, the first python3 on PATH, with what it lacks (the caller blocks the run).

    Not simply the `python3` first on PATH: from nox's tool environment or a tool venv that is a
    Python without torch, and every arm would fail on its first import.
    """
    env = dict(os.environ if env is None else env)
    if explicit:
        path = shutil.which(explicit, path=env.get("PATH", os.defpath))
        if path is None:
            raise InputError(f"{chosen_by} {explicit!r}: no such interpreter (not an executable, nor on PATH)",
                             f"pass the path of the Python that imports {', '.join(needs)}, e.g. "
                             f"--python /opt/conda/bin/python3, or unset {PYTHON_ENV} to let cpverify look for one")
        return WorkloadPython(path, chosen_by, needs, missing_imports(path, needs, cwd=cwd, env=env))
    on_path = _pythons_on_path(env.get("PATH", os.defpath))
    candidates = list(dict.fromkeys([*on_path, sys.executable]))
    first_missing: tuple[str, dict[str, str]] | None = None
    for python in candidates:
        missing = missing_imports(python, needs, cwd=cwd, env=env)
        if not missing:
            which = "the first Python on PATH" if python in on_path else "cpverify's own Python"
            return WorkloadPython(python, f"{which} that imports {' and '.join(needs)}", needs, {}, tuple(candidates))
        first_missing = first_missing or (python, missing)
    assert first_missing is not None  # candidates holds sys.executable at least
    python, missing = first_missing
    return WorkloadPython(python, "first on PATH; none imports " + " and ".join(needs), needs, missing,
                          tuple(candidates))
