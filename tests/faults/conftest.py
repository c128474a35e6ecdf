"""Fixtures of the fault suite: a workspace per test, for the local runner and (marked `docker`)
for the Docker runner with the image tests/conftest.py builds once per session."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from faults.harness import Workspace


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def ws(request, tmp_path) -> Workspace:
    """A workspace for each runner: the same fault must end the same way under both."""
    if request.param == "docker":
        image, _facts = request.getfixturevalue("cpverify_image")
        return Workspace(tmp_path, "docker", image=image, docker_client=request.getfixturevalue("docker_client"))
    return Workspace(tmp_path, "local")


@pytest.fixture
def local_ws(tmp_path) -> Workspace:
    """For what does not depend on the runner (input checks, artifact writing, the lock)."""
    return Workspace(tmp_path, "local")


@pytest.fixture
def rid() -> str:
    """A run id whose containers the session's teardown removes should a test fail half-way."""
    return f"pytest-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def small_fs(tmp_path):
    """mount(DIR, size, read_only=False) -> DIR: a tmpfs of `size` (a full disk, a read-only
    directory), unmounted afterwards. Skips, saying why, where mounting is not permitted."""
    mounted = []

    def mount(name: str, size: str = "64k", *, read_only: bool = False):
        target = tmp_path / name
        target.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {proc.stderr.strip()}")
        mounted.append(target)
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(target)], check=True)
        return target

    yield mount
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], check=False)
