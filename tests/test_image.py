"""The image lock and build arguments (no engine needed; the build itself is in test_containers)."""

from __future__ import annotations

import pytest

from cpverify.errors import InputError
from cpverify.image import LOCK_FILE, build_args, compare_expected, read_lock


def test_the_shipped_lock_pins_the_base_and_the_expected_versions():
    lock = read_lock()
    assert lock["BASE_IMAGE"] == "slimerl/slime:nightly-dev-20260810a-cu129"
    assert lock["EXPECT_NCCL"] == "2.28.9" and len(lock["EXPECT_MEGATRON_COMMIT"]) == 40
    args = build_args(lock, {"SLIME_COMMIT": ""})
    assert not any(key.startswith("EXPECT_") for key in args)  # expectations are checked, not built
    assert args["SLIME_COMMIT"] == ""


def test_a_digest_in_the_lock_pins_the_base_by_digest(tmp_path):
    lock = tmp_path / "versions.lock"
    lock.write_text(LOCK_FILE.read_text().replace("BASE_IMAGE_DIGEST=", "BASE_IMAGE_DIGEST=sha256:" + "a" * 64))
    assert build_args(read_lock(lock))["BASE_IMAGE"] == "slimerl/slime@sha256:" + "a" * 64


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
    assert "needs a cpverify checkout" in err.value.problem and "--image TAG" in err.value.fix
