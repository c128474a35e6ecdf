"""Helpers for the runner tests, and a child-process entry point for the Ctrl-C tests.

    python tests/helpers/runner_util.py local|docker LOG [--image IMG --run-id ID] -- ARGV...

runs one arm with the chosen runner, prints `RESULT <json>` and exits 0; on Ctrl-C it
prints `INTERRUPTED <json>` (the partial ArmResult) and exits 130, as cpverify does.
"""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
WORKLOAD = TESTS / "images" / "workload.sh"


def arm(name: str, *argv: str, env: dict | None = None, workdir: str | Path = "/tmp", cp: int = 1):
    """An arm as cpverify.plan makes it (any object with these attributes will do)."""
    return types.SimpleNamespace(name=name, cp=cp, argv=tuple(argv), env=dict(env or {}), workdir=str(workdir))


def pid_alive(pid: int) -> bool:
    """Is `pid` a live process? Zombies count as dead: where PID 1 does not reap orphans
    (as in many containers), a killed process lingers as a zombie that can do nothing."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def wait_for(predicate, timeout: float, interval: float = 0.05):
    """Poll `predicate` until it returns something truthy; return that, or None on timeout."""
    give_up = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > give_up:
            return value
        time.sleep(interval)


def pids_in_log(path: Path) -> dict[str, int]:
    """The `pid=N` / `grandchild pid=N` lines workload.sh prints first."""
    found = {}
    if not path.exists():
        return found
    for line in path.read_text(errors="replace").splitlines()[:5]:
        if line.startswith("workload mode="):
            found["workload"] = int(line.rsplit("pid=", 1)[1])
        elif line.startswith("grandchild pid="):
            found["grandchild"] = int(line.split("=", 1)[1])
    return found


def _main(argv: list[str]) -> int:
    from cpverify.model import ArmInterrupted, Limits

    kind, log_path, *rest = argv
    split = rest.index("--")
    options, command = rest[:split], rest[split + 1 :]
    opts = dict(zip(options[::2], options[1::2]))
    if kind == "local":
        from cpverify.runners.local import LocalRunner

        runner = LocalRunner(term_grace_s=2)
        workdir = "/tmp"
    else:
        from cpverify.runners.docker import DockerRunner

        runner = DockerRunner(image=opts["--image"], run_id=opts["--run-id"], gpus=None, ulimits={})
        workdir = "/work"
    limits = Limits(deadline_s=60, hang_s=30, stall_s=30)
    try:
        result = runner.run_arm(arm("child", *command, workdir=workdir), log_path=Path(log_path), limits=limits)
    except ArmInterrupted as interrupted:
        print("INTERRUPTED " + json.dumps(interrupted.result.to_json()), flush=True)
        return 130
    print("RESULT " + json.dumps(result.to_json()), flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(TESTS.parent))  # the checkout's cpverify
    raise SystemExit(_main(sys.argv[1:]))
