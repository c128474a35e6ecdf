"""Local test images with python3 inside, built without any registry.

No registry is reachable from CI, so the images are made from scratch:
  cpverify-test-python:bookworm   a Debian minbase rootfs (debootstrap) with python3 + pip,
                                  fed to `docker import`;
  cpverify-test-slimebase:<digest>  the above + tests/fake_slime at /root/slime: the stand-in
                                  for slime's published image (slime itself needs GPUs).
Built once per engine; later calls find them by tag. The cpverify image built on them
(cpverify-slime:test-<pid>) is a session's own and goes when the session ends (`removed_after`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

PYTHON_BASE = "cpverify-test-python:bookworm"
TESTS = Path(__file__).resolve().parents[1]


def _fake_slime_digest() -> str:
    """A digest of tests/fake_slime: the stand-in image is tagged with it, so an image built from an
    older stand-in (images outlive a checkout on CI machines) is never taken for the current one."""
    digest = hashlib.sha256()
    for path in sorted((TESTS / "fake_slime").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(TESTS).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


SLIME_BASE = f"cpverify-test-slimebase:{_fake_slime_digest()}"
# docker/Dockerfile on SLIME_BASE (conftest's cpverify_image): this test session's own tag, removed
# when the session ends, so no session untags (and leaves behind) or removes another's image.
CPVERIFY_IMAGE = f"cpverify-slime:test-{os.getpid()}"
MIRROR = os.environ.get("CPVERIFY_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def _has_image(client, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def ensure_python_base(client) -> str:
    if _has_image(client, PYTHON_BASE):
        return PYTHON_BASE
    if not shutil.which("debootstrap"):
        raise RuntimeError("debootstrap is missing: `apt-get install -y debootstrap` (CI's .ci/run installs it)")
    with tempfile.TemporaryDirectory(prefix="cpverify-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        subprocess.run(
            ["debootstrap", "--variant=minbase", "--include=python3,python3-pip,python3-venv",
             "bookworm", str(rootfs), MIRROR],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        tarball = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
        subprocess.run(["docker", "import", "--change", "ENV PIP_BREAK_SYSTEM_PACKAGES=1",
                        "--change", 'CMD ["python3"]', str(tarball), PYTHON_BASE],
                       check=True, stdout=subprocess.DEVNULL)
    return PYTHON_BASE


def ensure_slime_base(client) -> str:
    """The python base + the fake slime at /root/slime (what slimerl/slime would provide)."""
    if _has_image(client, SLIME_BASE):
        return SLIME_BASE
    ensure_python_base(client)
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        dockerfile = (f"FROM {PYTHON_BASE}\nCOPY fake_slime /root/slime\nWORKDIR /root/slime\n").encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        tar.add(TESTS / "fake_slime", arcname="fake_slime",
                filter=lambda t: None if "__pycache__" in t.name else t)
    context.seek(0)
    client.images.build(fileobj=context, custom_context=True, tag=SLIME_BASE, rm=True, network_mode="none")
    return SLIME_BASE


def container_wheels(target: Path) -> Path:
    """The pure-Python wheels the cpverify image installs, fetched on the host (build containers
    cannot use this host's TLS set-up)."""
    target.mkdir(parents=True, exist_ok=True)
    from cpverify.image import CONTAINER_REQUIREMENTS, read_lock

    if not any(target.glob("hyperscan-*.whl")):
        subprocess.run(["python3", "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(target),
                        *CONTAINER_REQUIREMENTS, read_lock()["HYPERSCAN_PIP_SPEC"]], check=True)
    return target


@contextlib.contextmanager
def removed_after(client, tag: str):
    """Yield `tag`; then remove the containers left on it and the image, with the untagged layers
    the build made below it (the daemon deletes a removed image's parents no other image needs)."""
    import docker.errors

    try:
        yield tag
    finally:
        for container in client.containers.list(all=True, filters={"ancestor": tag}):
            container.remove(force=True)
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(tag)
