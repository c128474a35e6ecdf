"""The image lock and build arguments (no engine needed; the build itself is in test_containers)."""

from __future__ import annotations

import re

import pytest

from cpverify.errors import EXIT_USAGE, InputError
from cpverify.image import DOCKER_DIR, LOCK_FILE, build_args, compare_expected, read_lock

DOCKERFILE = DOCKER_DIR / "Dockerfile"


def test_the_shipped_lock_pins_the_base_and_the_expected_versions():
    lock = read_lock()
    _repo, _, tag = lock["BASE_IMAGE"].rpartition(":")
    assert tag and "/" not in tag and tag != "latest", "a base without a fixed tag is not pinned"
    # a bare `docker build docker/` builds the locked base too
    assert re.search(rf"^ARG BASE_IMAGE={re.escape(lock['BASE_IMAGE'])}$", DOCKERFILE.read_text(), re.M)
    assert re.fullmatch(r"[0-9a-f]{40}", lock["EXPECT_MEGATRON_COMMIT"])  # what `git rev-parse HEAD` prints
    assert re.fullmatch(r"hyperscan==[\d.]+", lock["HYPERSCAN_PIP_SPEC"])  # the parser's scan, pinned
    args = build_args(lock, {"SLIME_COMMIT": ""})
    assert not any(key.startswith("EXPECT_") for key in args)  # expectations are checked, not built
    assert args["SLIME_COMMIT"] == ""


def test_a_digest_in_the_lock_pins_the_base_by_digest(tmp_path):
    lock = tmp_path / "versions.lock"
    lock.write_text(LOCK_FILE.read_text().replace("BASE_IMAGE_DIGEST=", "BASE_IMAGE_DIGEST=sha256:" + "a" * 64))
    assert build_args(read_lock(lock))["BASE_IMAGE"] == "slimerl/slime@sha256:" + "a" * 64


def test_every_expected_version_in_the_lock_is_compared():
    """An image that holds what the lock expects has no difference; each EXPECT_* it misses is named."""
    lock = read_lock()
    expected = {key: value for key, value in lock.items() if key.startswith("EXPECT_")}
    assert expected and all(expected.values())
    holds = {key[len("EXPECT_"):].lower(): value for key, value in expected.items()}
    holds["torch"] += "+cu129"  # the local version label is not part of the expectation
    assert compare_expected(lock, holds) == []
    for key in expected:
        name = key[len("EXPECT_"):].lower()
        assert compare_expected(lock, {**holds, name: "other"}) == [f"{name}: expected {lock[key]}, image has other"]


def test_differences_from_the_lock_are_named():
    lock = read_lock()
    found = {"cuda": "12.9", "torch": "2.11.0+cu129", "nccl": "2.27.5", "sglang": "0.5.15.post1",
             "transformer_engine": "2.16.1", "megatron_commit": lock["EXPECT_MEGATRON_COMMIT"]}
    assert compare_expected(lock, found) == ["nccl: expected 2.28.9, image has 2.27.5"]


def test_a_broken_lock_line_names_the_line(tmp_path):
    lock = tmp_path / "versions.lock"
    lock.write_text("BASE_IMAGE=x\nthis is not a pair\n")
    with pytest.raises(InputError, match=r"versions.lock:2: not a KEY=VALUE line"):
        read_lock(lock)


def test_image_lock_outside_a_checkout_names_the_fix(tmp_path):
    """An installed cpverify has no docker/ folder: the image step must say so, not traceback."""
    with pytest.raises(InputError) as err:
        read_lock(tmp_path / "versions.lock")
    assert err.value.exit_code == EXIT_USAGE and "--image TAG" in err.value.fix  # the option that needs no lock


def _dependency_names(specs) -> set[str]:
    from packaging.requirements import Requirement
    return {Requirement(spec).name.lower() for spec in specs}


def test_the_image_installs_every_dependency_the_steps_inside_it_import():
    """Every step of `docker compose up` runs cpverify inside the image, the verdict included: each
    runtime dependency is installed by the Dockerfile's line, or the lock explains why not."""
    import tomllib

    from cpverify.image import CONTAINER_REQUIREMENTS, NOT_INSTALLED_IN_IMAGE

    dependencies = _dependency_names(tomllib.loads((DOCKER_DIR.parent / "pyproject.toml").read_text())
                                     ["project"]["dependencies"])
    installed = re.search(r"--find-links /tmp/cpverify-wheels ((?:[\w-]+ )+)\\", DOCKERFILE.read_text())
    assert installed, "the Dockerfile's requirements line"
    assert installed.group(1).split() == list(CONTAINER_REQUIREMENTS)
    assert dependencies - set(CONTAINER_REQUIREMENTS) == set(NOT_INSTALLED_IN_IMAGE)
