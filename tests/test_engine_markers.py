"""The conftest policy for engine-marked tests: skip when the engine is missing, but FAIL
when CPVERIFY_REQUIRE_<ENGINE>=1 (CI must not go green by skipping)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("required, expected, returncode", [("0", "1 skipped", 0), ("1", "1 error", 1)])
def test_missing_docker_skips_or_fails_as_required(tmp_path, required, expected, returncode):
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_needs_docker.py").write_text(
        "import pytest\n\n@pytest.mark.docker\ndef test_x():\n    pass\n"
    )
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "DOCKER_HOST": "unix:///nonexistent/docker.sock",
           "CPVERIFY_REQUIRE_DOCKER": required}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rsf", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestUnknownMarkWarning", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )
    assert expected in out.stdout and out.returncode == returncode, out.stdout + out.stderr
    assert "no Docker engine answers" in out.stdout  # the reason is printed, with the fix
    assert "dockerd" in out.stdout
