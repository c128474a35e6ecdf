"""Drive `cpverify run` as users do (a child process), with faults injected into the stand-in slime,
and check what every fault test must show: the exit code, the verdict's status and reason,
nothing left running, and every line the workload emitted before the fault on disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cpverify.workspace import CONTAINER_WORK
from cpverify.profiles import SLIME_ENV, get_profile
from helpers.hfcache import make_model_cache
from helpers.runner_util import pid_alive, wait_for

ROOT = Path(__file__).resolve().parents[2]
FAKE_SLIME = ROOT / "tests" / "fake_slime"
PROFILE = get_profile("smoke")
RUNNERS = ("local", "docker")
# Short limits keep every fault under a few seconds; the stand-in's rollouts take 10 ms.
FAST_LIMITS = {"hang_s": 3.0, "stall_s": 3.0, "deadline_s": 120.0}
ONE_ARM = "lint,cp1,verdict"  # a fault in the baseline decides the verdict; cp2 would only repeat it


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    run_dir: Path

    def verdict(self) -> dict:
        return json.loads((self.run_dir / "verdict.json").read_text())

    def state(self) -> dict:
        return json.loads((self.run_dir / "state.json").read_text())

    def runner_check(self, arm: str = "cp1") -> dict:
        """The verdict's check of how the runner saw the arm end (outcome, exit code, reason)."""
        return next(c for c in self.verdict()["checks"] if c["name"] == "runner" and c["arm"] == arm)

    def files(self) -> list[Path]:
        return sorted(p for p in self.run_dir.rglob("*") if p.is_file())


class Workspace:
    """One test's cache (a pinned model snapshot), artifacts root, lock directory and runner."""

    def __init__(self, root: Path, runner: str, *, image: str | None = None, docker_client=None) -> None:
        self.root = root
        self.runner = runner
        self.image = image
        self.client = docker_client
        self.cache = root / "cache"
        self.out = root / "artifacts"
        make_model_cache(self.cache / "hf", PROFILE.model_repo, PROFILE.model_revision)

    # -- running cpverify ------------------------------------------------------------------

    def ledger_dir(self, run_id: str) -> Path:
        # A container writes it into the run's work directory, its only writable mount; a local
        # workload writes it beside the artifacts, so that a full artifacts disk cannot touch it.
        if self.runner == "docker":
            return self.out / run_id / "work" / "ledger"
        return self.root / "ledgers" / run_id

    def arm_env(self, run_id: str, fake_env: dict[str, str]) -> dict[str, str]:
        """The arms' environment: the profile's, the stand-in's fault switches and its ledger
        (the Docker runner passes only the plan's environment to containers)."""
        ledger = self.ledger_dir(run_id)
        ledger.mkdir(parents=True, exist_ok=True)
        seen = f"{CONTAINER_WORK}/ledger" if self.runner == "docker" else str(ledger)
        return {**dict(SLIME_ENV), "FAKE_SLIME_STEP_S": "0.01", "FAKE_SLIME_LEDGER": seen, **fake_env}

    def config(self, run_id: str, fake_env: dict[str, str], **fields) -> Path:
        """A profile override file: short limits, and the arms' environment in its [env]."""
        env = self.arm_env(run_id, fake_env)
        lines = [f"{key} = {json.dumps(value)}" for key, value in {**FAST_LIMITS, **fields}.items()]
        lines += ["", "[env]"] + [f"{key} = {json.dumps(str(value))}" for key, value in env.items()]
        path = self.root / f"{run_id}.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    def argv(self, run_id: str, *extra: str, only: str = ONE_ARM, fake_env: dict | None = None,
             set_env: dict | None = None, **fields) -> list[str]:
        """`set_env`: variables to give by `--set env=...` too (which replaces the config's [env],
        so it carries that environment as well)."""
        argv = [sys.executable, "-m", "cpverify", "run", "--runner", self.runner, "--gpus", "none",
                "--slime-dir", str(FAKE_SLIME), "--cache", str(self.cache), "--out", str(self.out),
                "--run-id", run_id, "--config", str(self.config(run_id, fake_env or {}, **fields))]
        if set_env:
            merged = {**self.arm_env(run_id, fake_env or {}), **set_env}
            argv += ["--set", "env=" + ",".join(f"{key}={value}" for key, value in merged.items())]
        if only:
            argv += ["--only", only]
        if self.runner == "docker":
            argv += ["--image", self.image, "--no-ulimits"]
        return argv + list(extra)

    def env(self, extra: dict | None = None) -> dict[str, str]:
        return {**os.environ, "HF_HUB_OFFLINE": "1", "CPVERIFY_LOCK_DIR": str(self.root), **(extra or {})}

    # A whole run in containers (two rounds per arm, the lint's and compileall's containers) on a loaded
    # 2-core host with vfs storage takes minutes: the limit only stops a run that would never end.
    def run(self, run_id: str, *extra: str, env: dict | None = None, timeout: float = 900, **options) -> Outcome:
        proc = subprocess.run(self.argv(run_id, *extra, **options), capture_output=True, text=True,
                              env=self.env(env), cwd=ROOT, timeout=timeout, check=False)
        return Outcome(proc.returncode, proc.stdout, proc.stderr, self.out / run_id)

    def start(self, run_id: str, *extra: str, env: dict | None = None, **options) -> subprocess.Popen:
        """cpverify in its own session, as a terminal's foreground job: signal it with os.killpg."""
        return subprocess.Popen(self.argv(run_id, *extra, **options), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env(env), cwd=ROOT,
                                start_new_session=True)

    def finish(self, proc: subprocess.Popen, run_id: str, timeout: float = 120) -> Outcome:
        stdout, stderr = proc.communicate(timeout=timeout)
        return Outcome(proc.returncode, stdout, stderr, self.out / run_id)

    # -- what the stand-in emitted, and what is left of it -----------------------------------

    def emitted(self, run_id: str, cp: int = 1, round: int = 1) -> list[str]:
        """The lines the workload printed in round `round` of its CP, in order, from its ledger: every
        round of a CP appends to it, each process numbering its lines 1..N, no gap."""
        path = self.ledger_dir(run_id) / f"cp{cp}.ledger"
        if not path.exists():
            return []
        processes: list[list[tuple[int, str]]] = []
        for line in path.read_text().splitlines():
            n, text = line.split("\t", 1)
            if int(n) == 1 or not processes:
                processes.append([])
            processes[-1].append((int(n), text))
        for entries in processes:
            assert [n for n, _ in entries] == list(range(1, len(entries) + 1)), "ledger numbering has a gap"
        return [text for _, text in processes[round - 1]] if round <= len(processes) else []

    def wait_for_emitted(self, run_id: str, count: int, cp: int = 1, timeout: float = 120) -> list[str]:
        lines = wait_for(lambda: len(self.emitted(run_id, cp)) >= count and self.emitted(run_id, cp), timeout)
        assert lines, f"the workload never printed {count} lines"
        return lines

    def assert_log_holds_every_emitted_line(self, outcome: Outcome, arm: str = "cp1", cp: int = 1) -> list[str]:
        emitted = self.emitted(outcome.run_dir.name, cp)
        assert emitted, "the workload emitted nothing: the fault fired too early to test anything"
        log = (outcome.run_dir / "logs" / f"{arm}.log").read_text().splitlines()
        assert log[: len(emitted)] == emitted, "a line the workload printed is missing from the log on disk"
        return emitted

    def leftovers(self, run_id: str) -> list[str]:
        """What still runs of this run: containers by label, or processes carrying its ledger path."""
        if self.runner == "docker":
            found = self.client.containers.list(all=True, filters={"label": f"cpverify.run={run_id}"})
            return [c.name for c in found]
        marker = f"FAKE_SLIME_LEDGER={self.ledger_dir(run_id)}".encode()
        return [pid for pid in _pids() if marker in _environ(pid) and pid_alive(pid)]

    def assert_nothing_left(self, run_id: str) -> None:
        # A killed process can take a moment to leave /proc; a container is removed synchronously.
        assert wait_for(lambda: not self.leftovers(run_id), 10), f"left running after the run: {self.leftovers(run_id)}"

    def workload_pid(self, run_id: str) -> int:
        """The workload's pid as this host sees it (for a container: its PID 1, from Docker)."""
        if self.runner == "docker":
            container = wait_for(lambda: self.client.containers.list(filters={"label": f"cpverify.run={run_id}"}), 60)
            assert container, "no running container"
            return container[0].attrs["State"]["Pid"]
        pids = self.leftovers(run_id)
        assert len(pids) == 1, pids
        return pids[0]


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def wait_until_dead(pid: int, timeout: float = 10) -> bool:
    give_up = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > give_up:
            return False
        time.sleep(0.05)
    return True
