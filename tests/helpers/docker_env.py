"""The local test image for the Docker runner tests, built without any registry.

No registry is reachable from CI, so the image is assembled from the host's static
busybox (Debian package `busybox-static`) and tests/images/workload.sh, packed with
tarfile and fed to `docker import`. That takes about a second and needs no network.

The tag carries a hash of its inputs, so a changed workload script or busybox gives a
new image, and an unchanged one is never rebuilt.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
from pathlib import Path

IMAGES_DIR = Path(__file__).resolve().parents[1] / "images"
WORKLOAD = IMAGES_DIR / "workload.sh"
BUSYBOX = Path("/bin/busybox")
REPOSITORY = "cpverify-test-busybox"
BUILD_RECIPE = "2"  # bump when the image layout below changes
# Where things sit inside the image.
IMAGE_WORKLOAD = "/workload.sh"
IMAGE_WORKDIR = "/work"


class ImageBuildError(RuntimeError):
    """The test image cannot be built here; the message says how to fix that."""


def image_tag() -> str:
    digest = hashlib.sha256(BUILD_RECIPE.encode())
    for path in (_busybox(), WORKLOAD):
        digest.update(path.read_bytes())
    return f"{REPOSITORY}:{digest.hexdigest()[:12]}"


def ensure_test_image(client) -> str:
    """Return the tag of the test image, importing it first if this engine lacks it."""
    import docker.errors

    tag = image_tag()
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    repository, version = tag.split(":")
    client.api.import_image_from_data(
        _rootfs_tar(),
        repository=repository,
        tag=version,
        changes=["ENV PATH=/bin", f"WORKDIR {IMAGE_WORKDIR}", 'CMD ["/bin/sh"]'],
    )
    _check_runs(client, tag)
    return tag


def _busybox() -> Path:
    if not BUSYBOX.is_file():
        raise ImageBuildError(
            f"{BUSYBOX} is missing: `apt-get install -y busybox-static` (.ci/run installs it)"
        )
    return BUSYBOX


def _applets() -> list[str]:
    out = subprocess.run([str(_busybox()), "--list"], capture_output=True, text=True, check=True)
    return [name for name in out.stdout.split() if name and "/" not in name and name != "busybox"]


def _rootfs_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for directory in ("bin", "tmp", IMAGE_WORKDIR.strip("/")):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        _add_file(tar, _busybox(), "bin/busybox", 0o755)
        _add_file(tar, WORKLOAD, IMAGE_WORKLOAD.strip("/"), 0o755)
        for applet in _applets():
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
    return buf.getvalue()


def _add_file(tar: tarfile.TarFile, source: Path, name: str, mode: int) -> None:
    data = source.read_bytes()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def run_once(client, image: str, argv: list[str], **options) -> bytes:
    """Run a throwaway container to its end and return its output; the container is removed
    whatever happens. (docker-py's `containers.run(remove=True)` removes it only once it ran: a
    container the daemon refuses to start stays behind, `Created`.) A refused start raises the
    daemon's APIError."""
    container = client.containers.create(image, argv, network_mode="none", **options)
    try:
        container.start()
        container.wait(timeout=60)
        return container.logs()
    finally:
        container.remove(force=True)


def _check_runs(client, tag: str) -> None:
    """A dynamically linked busybox imports fine and fails only at run time: check now."""
    import docker.errors

    try:
        out = run_once(client, tag, ["echo", "image-ok"])
    except docker.errors.DockerException as exc:
        client.images.remove(tag, force=True)
        raise ImageBuildError(
            f"the imported test image {tag} does not run ({exc}); {BUSYBOX} must be the static "
            "build: `apt-get install -y busybox-static`"
        ) from exc
    if b"image-ok" not in out:
        raise ImageBuildError(f"the test image {tag} printed {out!r} instead of 'image-ok'")
