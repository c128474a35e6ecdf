"""Shared pytest fixtures and hooks.

Engines (Docker, Ray) are real in these tests. A test that needs one carries a marker
(`@pytest.mark.docker`, `@pytest.mark.ray`); when the engine does not answer the test
is skipped with the reason, unless CPVERIFY_REQUIRE_<ENGINE>=1 (CI), where it FAILS:
CI must never go green by skipping what it was meant to check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# ------------------------------------------------------------------ engines behind markers


def _docker_problem() -> str | None:
    """None when a Docker engine answers, else why not (with the fix)."""
    try:
        from cpverify.runners.docker import connect

        connect(timeout=10)
    except Exception as exc:  # any failure means "no engine here"; the text says which
        return str(exc)
    return None


def _ray_problem() -> str | None:
    """None when Ray with its Jobs API and `ray` CLI is installed (the tests start their own head)."""
    import shutil

    try:
        import ray.job_submission  # noqa: F401  (the dashboard's Jobs SDK: ray[default])
        import ray.util.state  # noqa: F401
    except ImportError as exc:
        return f"Ray's Jobs SDK is not importable ({exc}); fix: pip install 'ray[default]'"
    if shutil.which("ray") is None:
        return "the `ray` command is not on PATH; fix: pip install 'ray[default]' into this environment"
    return None


# marker -> (environment variable that makes it required, probe returning a problem or None).
# Add an engine by adding a line here (and its marker in pyproject.toml).
ENGINES: dict[str, tuple[str, Callable[[], str | None]]] = {
    "docker": ("CPVERIFY_REQUIRE_DOCKER", _docker_problem),
    "ray": ("CPVERIFY_REQUIRE_RAY", _ray_problem),
}
_probed: dict[str, str | None] = {}


def engine_problem(marker: str) -> str | None:
    if marker not in _probed:
        _probed[marker] = ENGINES[marker][1]()
    return _probed[marker]


def pytest_report_header(config) -> list[str]:
    lines = []
    for marker, (required_by, _) in ENGINES.items():
        problem = engine_problem(marker)
        required = os.environ.get(required_by) == "1"
        state = "available" if problem is None else f"UNAVAILABLE ({problem.splitlines()[0]})"
        policy = "required" if required else f"optional: its tests skip when it is missing ({required_by}=1 to require)"
        lines.append(f"{marker}: {state}; {policy}")
    return lines


def pytest_runtest_setup(item) -> None:
    for marker, (required_by, _) in ENGINES.items():
        if item.get_closest_marker(marker) is None:
            continue
        problem = engine_problem(marker)
        if problem is None:
            continue
        if os.environ.get(required_by) == "1":
            pytest.fail(f"{marker} is required ({required_by}=1) but unavailable: {problem}", pytrace=False)
        pytest.skip(f"{marker} unavailable: {problem}")


# ------------------------------------------------------------------ a GPU host, recorded


@pytest.fixture
def two_gpu_host(tmp_path) -> dict[str, str]:
    """PATH with a stand-in `nvidia-smi` answering as the recorded 2x H200 host (tests/data/doctor/, from
    benchmarks/run_probe_device.sh on nvidia-h200-x2): the doctor's GPU checks pass on this GPU-less machine."""
    data = ROOT / "tests" / "data" / "doctor"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\ncase \"$*\" in\n"
                      f"  *--query-gpu*) cat '{data / 'h200x2-query-gpu.csv'}' ;;\n"
                      f"  *) cat '{data / 'h200x2-nvidia-smi.txt'}' ;;\nesac\n")
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


# ------------------------------------------------------------------ Docker fixtures


@pytest.fixture(scope="session")
def docker_client():
    """A docker-py client of the real engine (tests using it must be marked `docker`)."""
    from cpverify.runners.docker import connect

    client = connect(timeout=60)
    yield client
    _remove_test_containers(client)  # whatever a failed test left behind
    client.close()


@pytest.fixture(scope="session")
def test_image(docker_client) -> str:
    """The busybox test image (tests/helpers/docker_env.py), imported once per engine."""
    from helpers.docker_env import ensure_test_image

    return ensure_test_image(docker_client)


@pytest.fixture(scope="session")
def cpverify_image(docker_client, tmp_path_factory):
    """docker/Dockerfile built by `cpverify run --only image` on the stand-in slime base, once per
    session: (tag, the image facts the run recorded); the image and its layers are removed when the
    session ends. Tests using it must be marked `docker`."""
    from helpers import pyimage

    base = pyimage.ensure_slime_base(docker_client)
    wheels = pyimage.container_wheels(tmp_path_factory.mktemp("wheels"))
    out = tmp_path_factory.mktemp("image-run")
    with pyimage.removed_after(docker_client, pyimage.CPVERIFY_IMAGE) as tag:
        proc = subprocess.run(
            [sys.executable, "-m", "cpverify", "run", "--runner", "docker", "--gpus", "none", "--only", "image",
             "--image", tag, "--build", "--base-image", base, "--slime-commit", "",
             "--wheel-dir", str(wheels), "--out", str(out), "--run-id", "image"],
            capture_output=True, text=True, cwd=ROOT, timeout=900, check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        state = json.loads((out / "image" / "state.json").read_text())
        yield tag, state["image"]


TEST_RUN_PREFIX = "pytest-"


@pytest.fixture
def run_id(request) -> str:
    """A fresh cpverify run id; containers labelled with it are removed after the test."""
    rid = f"{TEST_RUN_PREFIX}{uuid.uuid4().hex[:10]}"
    yield rid
    if "docker_client" in request.fixturenames:
        _remove_test_containers(request.getfixturevalue("docker_client"), rid)


def _remove_test_containers(client, rid: str | None = None) -> None:
    from cpverify.runners.docker import LABEL_MANAGED, LABEL_RUN

    for container in client.containers.list(all=True, filters={"label": f"{LABEL_MANAGED}=1"}):
        run = container.labels.get(LABEL_RUN, "")
        if (rid is None and run.startswith(TEST_RUN_PREFIX)) or run == rid:
            container.remove(force=True)
