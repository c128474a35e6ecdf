"""Real permission errors where the tests run as root (CI, containers): root reads and writes
through any mode bits, so a test that needs EACCES runs its code in a child as `nobody`.

    as_nobody(setup, code)  runs `setup` (the imports, while the checkout is still readable) as this
                            user, then drops to uid/gid 65534 when this user is root, then runs `code`
    public_dir()            a temporary directory `nobody` can enter (pytest's are root-only)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

NOBODY = 65534
CHECKOUT = Path(__file__).resolve().parents[2]
DROP = f"if os.geteuid() == 0:\n    os.setgroups([]); os.setgid({NOBODY}); os.setuid({NOBODY})\n"


def as_nobody(setup: str, code: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`args` are the child's sys.argv[1:]; `env` replaces this environment (PYTHONPATH: this checkout)."""
    program = f"import os\n{setup}\n{DROP}{code}\n"
    return subprocess.run([sys.executable, "-c", program, *args], capture_output=True, text=True, timeout=timeout,
                          env={**(os.environ if env is None else env), "PYTHONPATH": str(CHECKOUT)}, cwd=cwd)


@contextmanager
def public_dir(prefix: str = "cpverify-nobody-") -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        path.chmod(0o777)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
