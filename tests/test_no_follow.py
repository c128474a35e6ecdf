"""No file cpverify writes is written through a link planted at its name.

An artifacts directory or /tmp may be shared with other users, and cpverify may run as root: a
symbolic link (or a hard link, or a FIFO) planted at a name cpverify is known to write must never
carry the write to the file it points at. Each test plants such a thing at every name one writer
uses and shows the file behind it untouched (same bytes, same mode, nothing created beside it).
"""

from __future__ import annotations

import errno
import os
import stat
import string
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpverify import artifacts, probe
from cpverify.artifacts import RunDir, atomic_write_bytes, atomic_write_json, atomic_write_text, open_in_place
from cpverify.cli import main
from cpverify.errors import EXIT_BLOCKED, EXIT_OK, ArtifactWriteError, InputError
from cpverify.locks import GpuLock, RunDirLock, lock_path
from cpverify.model import Limits
from cpverify.runners.watch import LogWatcher
from helpers.slime_log import synthetic_arm


class Victims:
    """Files outside the directory under attack, which planted links point at; `untouched()`
    says whether every one still holds what it held, with its mode, and nothing was added."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir()
        self.count = 0

    def target(self, *, dangling: bool = False) -> Path:
        self.count += 1
        path = self.folder / f"victim-{self.count}"
        if not dangling:
            path.write_bytes(f"victim {self.count}: must stay as it is\n".encode())
            path.chmod(0o600)
        return path

    def state(self) -> dict[str, tuple[bytes, int]]:
        return {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in sorted(self.folder.iterdir())}


def plant(at: Path, victims: Victims, *, dangling: bool = False) -> None:
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(victims.target(dangling=dangling))


# -- cpverify verdict: every name its bundle writes ------------------------------------------------

# CP=2's time against CP=1's in the logs judged here: one log (one round) per arm decides it PASS (its
# interval is the recorded prior's, x/÷ about 1.57), so EXIT_OK says the whole bundle was written
CP2_PASSING = 0.6

# The names `cpverify verdict --out DIR` writes or wrote (the snapshots had a fixed name).
BUNDLE_NAMES = ("logs/.baseline.log.snapshot", "logs/.candidate.log.snapshot", "logs/baseline.log",
                "logs/candidate.log", "logs/cp1.log", "logs/cp2.log", "verdict.md", "verdict.json", "env.json",
                "commands.sh", "plot.png", ".lock", "logs/.cp1.log.tmp", ".verdict.md.tmp")


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
def test_verdict_writes_through_no_link_planted_in_its_out_directory(tmp_path, dangling):
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "in" / "a.log")
    cand = synthetic_arm(cp=2, actor_train_time=CP2_PASSING, seed=2).write(tmp_path / "in" / "b.log")
    victims, out = Victims(tmp_path / "victims"), tmp_path / "out"
    for name in BUNDLE_NAMES:
        plant(out / name, victims, dangling=dangling)
    before = victims.state()
    code = main(["verdict", "--baseline", str(base), "--candidate", str(cand), "--out", str(out)])
    assert code == EXIT_OK
    assert victims.state() == before
    for name in ("logs/cp1.log", "logs/cp2.log", "verdict.md", "verdict.json", "env.json", "commands.sh"):
        assert not (out / name).is_symlink() and (out / name).is_file(), name


@pytest.mark.parametrize("where", ["out/logs", "base/run-1", "base/run-1/logs"])
def test_a_link_in_place_of_a_directory_cpverify_makes_is_refused(tmp_path, where):
    """--out is the user's to name (a link there is followed); base/<run-id> and logs/ are cpverify's."""
    victims = Victims(tmp_path / "victims")
    (tmp_path / where).parent.mkdir(parents=True)
    (tmp_path / where).symlink_to(victims.folder)
    with pytest.raises(ArtifactWriteError) as raised:
        RunDir.create(tmp_path / "out") if where.startswith("out") else RunDir.create(base=tmp_path / "base",
                                                                                      run_id="run-1")
    assert raised.value.exit_code == EXIT_BLOCKED and f"remove {tmp_path / where}" in raised.value.fix
    assert list(victims.folder.iterdir()) == []


def test_a_link_the_user_names_as_out_is_followed(tmp_path):
    (tmp_path / "disk").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "disk")
    assert RunDir.create(tmp_path / "out").logs_dir.is_dir() and (tmp_path / "disk" / "logs").is_dir()


def test_a_link_planted_among_the_logs_never_reaches_the_archive(tmp_path):
    """The archive (cpverify-<run-id>.zip, made to be attached to an issue) takes the run's logs: a
    link planted in logs/ must not carry the file it points at into it."""
    import zipfile

    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "in" / "a.log")
    cand = synthetic_arm(cp=2, actor_train_time=CP2_PASSING, seed=2).write(tmp_path / "in" / "b.log")
    secret = tmp_path / "private" / "notes.txt"
    secret.parent.mkdir()
    secret.write_text("root:$6$saltsalt$hashedpassword:19000:0:99999:7:::\n")
    out = tmp_path / "out"
    (out / "logs").mkdir(parents=True)
    (out / "logs" / "zz-planted.log").symlink_to(secret)
    assert main(["verdict", "--baseline", str(base), "--candidate", str(cand), "--out", str(out)]) == EXIT_OK
    archives = list(out.glob("*.zip"))
    assert len(archives) == 1
    with zipfile.ZipFile(archives[0]) as zf:
        assert "logs/zz-planted.log" not in zf.namelist() and {"logs/cp1.log", "logs/cp2.log"} <= set(zf.namelist())
        assert not any(b"hashedpassword" in zf.read(name) for name in zf.namelist())


# -- the atomic writers ----------------------------------------------------------------------------

NAMES = st.text(string.ascii_letters + string.digits + "._-", min_size=1, max_size=20).filter(
    lambda name: name not in (".", ".."))


@settings(max_examples=40, deadline=None)
@given(name=NAMES, dangling=st.booleans(), kind=st.sampled_from(["text", "json", "bytes"]))
def test_an_atomic_write_replaces_a_planted_link_and_never_writes_through_it(name, dangling, kind):
    with tempfile.TemporaryDirectory() as tmp:
        folder, victims = Path(tmp) / "out", Victims(Path(tmp) / "victims")
        # at the name itself and at the names a temporary of it could be guessed to have
        for planted in (name, f".{name}.tmp", f".{name}.snapshot", f"{name}.tmp"):
            plant(folder / planted, victims, dangling=dangling)
        before = victims.state()
        write = {"text": lambda p: atomic_write_text(p, "new\n"), "json": lambda p: atomic_write_json(p, {"a": 1}),
                 "bytes": lambda p: atomic_write_bytes(p, b"new\n")}[kind]
        write(folder / name)
        assert victims.state() == before
        assert (folder / name).is_file() and not (folder / name).is_symlink()
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o644


def test_latest_is_pointed_whatever_sits_at_a_name_it_could_be_guessed_to_use(tmp_path):
    run_dir = RunDir.create(base=tmp_path, run_id="run-1")
    for guess in (f".latest.{os.getpid()}.tmp", ".latest.tmp"):
        (tmp_path / guess).mkdir()  # a directory cannot be unlinked or replaced by a symlink
    link = artifacts.point_latest(run_dir)
    assert os.readlink(link) == "run-1"


# -- files written in place: open_in_place, and every writer that uses it ---------------------------

def _plant_kind(at: Path, victims: Victims, kind: str) -> Path:
    """Plant `kind` at `at`; returns the victim behind it (a FIFO has none: returns the FIFO)."""
    at.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(at)
        return at
    victim = victims.target(dangling=kind == "dangling")
    if kind == "hardlink":
        os.link(victim, at)
    else:
        at.symlink_to(victim)
    return victim


IN_PLACE = ["symlink", "dangling", "hardlink", "fifo"]


@pytest.mark.parametrize("kind", IN_PLACE)
@pytest.mark.parametrize("flags", [os.O_WRONLY | os.O_CREAT | os.O_TRUNC, os.O_RDWR | os.O_APPEND | os.O_CREAT,
                                   os.O_RDONLY], ids=["write", "append", "read"])
def test_open_in_place_refuses_anything_but_a_regular_file_of_one_name(tmp_path, kind, flags):
    victims = Victims(tmp_path / "victims")
    _plant_kind(tmp_path / "file", victims, kind)
    before = victims.state()
    with pytest.raises(OSError) as raised:
        os.close(open_in_place(tmp_path / "file", flags))
    assert raised.value.errno == errno.ELOOP
    assert victims.state() == before


def test_open_in_place_truncates_and_appends_a_regular_file(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"old\n")
    fd = open_in_place(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    os.write(fd, b"more\n")
    os.close(fd)
    assert path.read_bytes() == b"old\nmore\n"
    os.close(open_in_place(path, os.O_WRONLY | os.O_TRUNC))
    assert path.read_bytes() == b""


@pytest.mark.parametrize("kind", IN_PLACE)
def test_a_gpu_lock_file_that_is_not_cpverifys_is_refused_and_left_alone(tmp_path, kind):
    victims = Victims(tmp_path / "victims")
    _plant_kind(lock_path(0, tmp_path / "locks"), victims, kind)
    before = victims.state()
    with pytest.raises(InputError) as raised:
        GpuLock([0], run_id="r", directory=tmp_path / "locks").acquire()
    assert str(lock_path(0, tmp_path / "locks")) in raised.value.fix
    assert victims.state() == before


def test_a_link_at_a_run_directorys_lock_is_refused_and_left_alone(tmp_path):
    victims = Victims(tmp_path / "victims")
    plant(tmp_path / "run" / ".lock", victims)
    before = victims.state()
    with pytest.raises(ArtifactWriteError) as raised:
        RunDirLock(tmp_path / "run", run_id="r", new_run_id="r2").acquire()
    assert raised.value.exit_code == EXIT_BLOCKED and "remove" in raised.value.fix
    assert victims.state() == before


@pytest.mark.parametrize("kind", ["symlink", "dangling", "hardlink"])
def test_an_arm_log_is_never_written_through_a_planted_link(tmp_path, kind):
    victims = Victims(tmp_path / "victims")
    log = tmp_path / "run" / "logs" / "cp1.log"
    _plant_kind(log, victims, kind)
    before = victims.state()
    watcher = LogWatcher(log, Limits(deadline_s=10, hang_s=5, stall_s=5))
    with pytest.raises(ArtifactWriteError) as raised:
        watcher.watch(iter([b"step 1\n"]), stop=lambda: None, poll_exit=lambda: 0)
    assert "remove" in raised.value.fix
    assert victims.state() == before


def test_an_arm_log_that_exists_is_appended_to_and_its_lines_counted(tmp_path):
    log = tmp_path / "cp1.log"
    log.write_bytes(b"one\ntwo\n")
    watcher = LogWatcher(log, Limits(deadline_s=10, hang_s=5, stall_s=5))
    watcher.watch(iter([b"three\n"]), stop=lambda: None, poll_exit=lambda: 0)
    assert log.read_bytes() == b"one\ntwo\nthree\n"
    assert watcher._line_base == 2


def test_a_tool_log_replaces_a_planted_link(tmp_path):
    from cpverify.model import Arm
    from cpverify.runners.local import LocalRunner

    victims = Victims(tmp_path / "victims")
    log = tmp_path / "logs" / "compileall.log"
    plant(log, victims)
    before = victims.state()
    tool = Arm("compileall", 1, (sys.executable, "-c", "print('compiled')"), (), str(tmp_path))
    code, output = LocalRunner().run_tool(tool, log_path=log, timeout_s=60)
    assert code == 0 and "compiled" in output
    assert victims.state() == before
    assert not log.is_symlink() and "compiled" in log.read_text()


def test_a_probe_arm_log_is_never_written_through_a_planted_link(tmp_path):
    victims = Victims(tmp_path / "victims")
    log = tmp_path / "probe-cp1.log"
    plant(log, victims)
    before = victims.state()
    result = probe.run_arm(probe.probe_arm("probe-cp1", 1, [sys.executable, "-c", "print('probe says hi')"]), log)
    assert result["returncode"] == 0
    assert victims.state() == before
    assert not log.is_symlink() and "probe says hi" in log.read_text()


def test_the_image_build_log_is_never_written_through_a_planted_link(tmp_path):
    from cpverify import image

    class NoEngine:  # the build never starts: the log is opened first
        class api:  # noqa: N801
            @staticmethod
            def build(**_):
                return iter(())

    victims = Victims(tmp_path / "victims")
    plant(tmp_path / "image-build.log", victims)
    before = victims.state()
    with pytest.raises(OSError) as raised:
        image.build_image(tag="t", args={}, client=NoEngine(), log_path=tmp_path / "image-build.log")
    assert raised.value.errno == errno.ELOOP
    assert victims.state() == before

