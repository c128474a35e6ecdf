"""Version strings as tools print them ("2.28.9+cuda12.9", "580.159.04"), compared with packaging;
and the oldest of each part of the stack a CP run needs (seed 001), which the doctor checks on the
host, the verdict in the logs and the fixes name."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

MIN_COMPUTE_CAPABILITY = Version("8.0")  # Ampere: bf16 and the flash-attention kernels slime uses
MIN_DRIVER = Version("550")
MIN_CUDA = Version("12.1")  # FA3 needs CUDA >= 12.1
MIN_NCCL = Version("2.18")


def parse_version(text: str | None) -> Version | None:
    """`2.28.9+cuda12.9` -> Version('2.28.9'); None for missing or unparseable text."""
    if not text:
        return None
    try:
        return Version(str(text).split("+")[0])
    except InvalidVersion:
        return None


# NCCL_DEBUG=INFO's `NCCL INFO NCCL version 2.27.5+cuda12.9`, the bare `NCCL version 2.19.3+cuda12.3`,
# and the version as a tuple, `NCCL version (2, 19, 3)`.
_NCCL_VERSION = re.compile(r"NCCL version[: ]+\(?(\d+)[.,] ?(\d+)[.,] ?(\d+)\)?(?:\+cuda([\d.]+))?")


def nccl_version(line: str) -> tuple[str, str | None] | None:
    """(version, the CUDA it was built for) a line of NCCL's states: `NCCL version 2.27.5+cuda12.9`
    -> ("2.27.5", "12.9"); None for a line that states none. The parse's and the doctor's one reading."""
    m = _NCCL_VERSION.search(line)
    return (".".join(m.group(1, 2, 3)), m.group(4)) if m else None
