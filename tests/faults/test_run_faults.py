"""Faults during a run, under the local runner (real subprocesses) and the Docker runner (real
containers): the verdict says what happened, the exit code says it too, nothing is left
running, and the log on disk holds every line the workload printed before the fault.

The workload is the stand-in slime (tests/fake_slime/train.py; slime needs GPUs); the faults
are real where they can be: a real invalid memory read, a real SIGKILL from outside (what the
OOM killer does), real signals to cpverify, a real second cpverify on the same GPUs.
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from cpverify.parse.native import signal_detail
from cpverify.profiles import SMOKE_TRAIN_ARGS
from faults.harness import ROOT, wait_until_dead
from helpers.runner_util import wait_for

# Where silent_hang stops: 4 start-up lines and the 12 of the argument dump, then 5 lines per
# rollout for rollouts 0 and 1.
LINES_BEFORE_THE_HANG = 26
PARKED = {"fake_env": {"FAKE_SLIME_FAULT": "silent_hang"}, "hang_s": 120.0}  # sits still until we act


def assert_ended(ws, outcome, rid, *, code, status):
    """The four things every fault test checks, the log last (it needs the run to be over)."""
    assert outcome.code == code, outcome.stderr[-3000:]
    if status is not None:
        assert outcome.verdict()["status"] == status
    ws.assert_nothing_left(rid)
    return ws.assert_log_holds_every_emitted_line(outcome)


def test_killed_from_outside_like_the_oom_killer(ws, rid):
    """SIGKILL to the workload from outside its process tree, as the kernel's OOM killer sends it."""
    proc = ws.start(rid, **PARKED)
    ws.wait_for_emitted(rid, LINES_BEFORE_THE_HANG)
    os.kill(ws.workload_pid(rid), signal.SIGKILL)
    outcome = ws.finish(proc, rid)
    assert_ended(ws, outcome, rid, code=1, status="FAIL")
    arm = outcome.state()["arms"]["cp1"]
    assert (arm["outcome"], arm["exit_code"]) == ("failed", 128 + signal.SIGKILL)
    assert signal_detail(signal.SIGKILL)["cause"] in arm["reason"]  # what the signal means, in the one wording
    assert "exit code 137" in outcome.verdict()["headline"]


def test_segfault(ws, rid):
    outcome = ws.run(rid, fake_env={"FAKE_SLIME_FAULT": "segfault"})
    emitted = assert_ended(ws, outcome, rid, code=1, status="FAIL")
    arm = outcome.state()["arms"]["cp1"]
    assert (arm["outcome"], arm["exit_code"]) == ("failed", 128 + signal.SIGSEGV)
    assert signal_detail(signal.SIGSEGV)["cause"] in arm["reason"]
    assert len(emitted) == LINES_BEFORE_THE_HANG + 2  # rollout 2 got as far as its `Timer actor_train start`


def test_exit_without_any_training_step(ws, rid):
    """Exit 0 without one step: not a pass, and the verdict says why (both arms, or cp2 is just 'not run')."""
    outcome = ws.run(rid, fake_env={"FAKE_SLIME_FAULT": "no_steps"}, only="lint,cp1,cp2,verdict")
    assert_ended(ws, outcome, rid, code=3, status="INCONCLUSIVE")
    assert "printed no training step at all and exited with code 0" in outcome.verdict()["headline"]
    assert outcome.runner_check()["detail"] == "runner outcome 'ok', exit code 0"


def test_nccl_hang_without_any_output(ws, rid):
    outcome = ws.run(rid, fake_env={"FAKE_SLIME_FAULT": "silent_hang"})
    emitted = assert_ended(ws, outcome, rid, code=1, status="FAIL")
    assert len(emitted) == LINES_BEFORE_THE_HANG
    detail = outcome.runner_check()["detail"]
    assert "runner outcome 'hang'" in detail
    assert f"no output for 3s; last line {LINES_BEFORE_THE_HANG}:" in detail and "perf 1:" in detail
    assert outcome.state()["arms"]["cp1"]["outcome"] == "hang"


def test_hang_with_output_but_no_training_step(ws, rid):
    """A stuck collective behind a chatty health-check loop: lines keep coming, steps do not."""
    outcome = ws.run(rid, fake_env={"FAKE_SLIME_FAULT": "hang"})
    emitted = assert_ended(ws, outcome, rid, code=1, status="FAIL")
    assert len(emitted) > LINES_BEFORE_THE_HANG + 5  # the chatter went on for the whole stall limit
    detail = outcome.runner_check()["detail"]
    assert "runner outcome 'stalled'" in detail
    assert "output kept coming but no training step for 3s (last: step 1)" in detail


def test_ctrl_c_once_stops_gracefully_and_writes_a_verdict(ws, rid):
    proc = ws.start(rid, **PARKED)
    ws.wait_for_emitted(rid, LINES_BEFORE_THE_HANG)
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends its foreground job
    outcome = ws.finish(proc, rid)
    assert_ended(ws, outcome, rid, code=130, status="INCONCLUSIVE")
    assert "interrupted; logs written so far are kept" in outcome.stderr
    assert "runner outcome 'interrupted'" in outcome.runner_check()["detail"]
    assert "interrupted (Ctrl-C)" in outcome.verdict()["headline"]
    assert outcome.state()["arms"]["cp1"]["outcome"] == "interrupted"


def test_ctrl_c_on_a_terminal_stops_the_live_display_and_gives_the_terminal_back(local_ws, rid):
    """On a terminal (a real pseudo-terminal here) the arms show as a live display that hides the
    cursor while it redraws; Ctrl-C stops it (the cursor is shown again, what follows prints below
    it) and the signal behaviour is the same as off a terminal: exit 130, INCONCLUSIVE, nothing left."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(local_ws.argv(rid, **PARKED), stdin=terminal, stdout=terminal, stderr=terminal,
                            env=local_ws.env({"TERM": "xterm-256color", "COLUMNS": "160"}), cwd=ROOT,
                            start_new_session=True)
    os.close(terminal)
    shown = bytearray()

    def read_screen() -> None:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the last process holding the terminal is gone
                return
            if not chunk:
                return
            shown.extend(chunk)

    reader = threading.Thread(target=read_screen, daemon=True)
    reader.start()
    try:
        local_ws.wait_for_emitted(rid, LINES_BEFORE_THE_HANG)
        assert wait_for(lambda: b"step 2 of 16" in shown, 30), bytes(shown[-3000:])  # the display drew the arm
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(120)
    finally:
        reader.join(10)
        os.close(controller)
    screen = shown.decode("utf-8", "replace")
    assert code == 130, screen[-3000:]
    hidden, back = screen.rfind("\x1b[?25l"), screen.rfind("\x1b[?25h")
    assert 0 <= hidden < back, "the cursor was left hidden"
    after = screen[back:]
    assert "interrupted (Ctrl-C)" in after and "\x1b[?25l" not in after  # no display redrawn over what follows
    assert "phase actor_train" in screen[:back]
    local_ws.assert_nothing_left(rid)
    verdict = json.loads((local_ws.out / rid / "verdict.json").read_text())
    assert verdict["status"] == "INCONCLUSIVE" and "interrupted (Ctrl-C)" in verdict["headline"]


def test_ctrl_c_twice_stops_at_once(ws, rid):
    """The workload ignores SIGTERM: the first Ctrl-C would wait out the local runner's 10 s grace
    period; the second must end it now. (Docker's stop is a SIGKILL already.)"""
    proc = ws.start(rid, fake_env={"FAKE_SLIME_FAULT": "silent_hang", "FAKE_SLIME_IGNORE_TERM": "1"}, hang_s=120.0)
    ws.wait_for_emitted(rid, LINES_BEFORE_THE_HANG)
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.5)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    outcome = ws.finish(proc, rid)
    assert time.monotonic() - started < 8, "the second Ctrl-C did not cut the grace period short"
    assert_ended(ws, outcome, rid, code=130, status=None)
    assert outcome.state()["arms"]["cp1"]["outcome"] == "interrupted"
    if ws.runner == "local":  # a second Ctrl-C that came during the verdict's writing may skip it
        assert "stopped at once by a second interrupt" in outcome.state()["arms"]["cp1"]["reason"]


def test_cpverify_killed_keeps_the_log_and_the_next_run_cleans_up(ws, rid):
    """kill -9 of cpverify: no cleanup code runs. The log is already on disk, line by line; the
    workload runs on (a container, or a process in its own session) until the next run sweeps it."""
    proc = ws.start(rid, **PARKED)
    ws.wait_for_emitted(rid, LINES_BEFORE_THE_HANG)
    workload = ws.workload_pid(rid)
    os.kill(proc.pid, signal.SIGKILL)
    outcome = ws.finish(proc, rid)
    assert outcome.code == -signal.SIGKILL
    assert ws.assert_log_holds_every_emitted_line(outcome) and ws.leftovers(rid), "the premise: it was left"

    rid_next = f"{rid}-next"
    after = ws.run(rid_next, fake_env={"FAKE_SLIME_FAULT": "no_steps"}, only="cp1")
    assert after.code == 0, after.stderr[-3000:]
    said = "removed leftover container cpverify-" + rid if ws.runner == "docker" else f"killed leftover process pid {workload}"
    assert said in after.stderr and "of an earlier, interrupted run" in after.stderr
    assert wait_until_dead(workload)
    ws.assert_nothing_left(rid)
    ws.assert_nothing_left(rid_next)


def test_a_second_run_on_the_same_gpus_is_refused(ws, rid):
    """The second run stops at the GPU lock, naming the first; the first's measurement is untouched
    (its container or process is not swept as a leftover either: its owner is alive)."""
    first = ws.start(rid, **PARKED)
    ws.wait_for_emitted(rid, LINES_BEFORE_THE_HANG)
    rid_second = f"{rid}-second"
    second = ws.run(rid_second, fake_env={"FAKE_SLIME_FAULT": "no_steps"})
    assert second.code == 4, second.stderr[-3000:]
    assert f"GPU 0 is in use by cpverify run {rid} (pid {first.pid}" in second.stderr
    assert "wait for that run to finish" in second.stderr and "choose other GPUs" in second.stderr
    assert not (second.run_dir / "logs" / "cp1.log").exists() and not ws.emitted(rid_second)
    assert ws.leftovers(rid), "the first run's workload must still be running"
    ws.assert_nothing_left(rid_second)

    os.killpg(first.pid, signal.SIGINT)
    outcome = ws.finish(first, rid)
    emitted = assert_ended(ws, outcome, rid, code=130, status="INCONCLUSIVE")
    log = (outcome.run_dir / "logs" / "cp1.log").read_text().splitlines()
    assert log == emitted, "the first run's log holds exactly its own lines"


def test_log_that_cannot_be_written_stops_the_workload(local_ws, rid, small_fs):
    """The artifacts disk fills while the log streams: the workload is stopped at once (a run
    nobody can read only holds the GPUs), the error names the file and the fix, and nothing else
    is half-written. Local runner only: the log is written on the host whatever the runner."""
    out = small_fs("full", "64k")
    local_ws.out = out
    long_run = [a if prev != "--num-rollout" else "400" for prev, a in zip(("", *SMOKE_TRAIN_ARGS), SMOKE_TRAIN_ARGS)]
    outcome = local_ws.run(rid, train_args=long_run, only="lint,cp1,cp2,verdict")  # ~500 KB of log
    assert outcome.code == 4, outcome.stderr[-3000:]
    assert f"could not write the log {out / rid / 'logs' / 'cp1.log'}: No space left on device" in outcome.stderr
    assert "the workload was stopped" in outcome.stderr and "free disk space" in outcome.stderr
    local_ws.assert_nothing_left(rid)
    on_disk = (out / rid / "logs" / "cp1.log").read_bytes()
    complete = on_disk[: on_disk.rfind(b"\n") + 1].decode().splitlines()
    emitted = local_ws.emitted(rid)
    assert len(complete) > LINES_BEFORE_THE_HANG and complete == emitted[: len(complete)]
    assert f"({len(complete)} lines are on disk)" in outcome.stderr
    names = {p.name for p in (out / rid).rglob("*")}
    assert not names & {"verdict.md", "verdict.json", "env.json", "commands.sh", "cp2.log"}
    assert not [n for n in names if n.endswith(".tmp")], names


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_termination_by_a_supervisor_is_an_interrupt(local_ws, rid, sig):
    """nox, systemd and `docker stop` send SIGTERM, a closed ssh session SIGHUP: same as Ctrl-C."""
    proc = local_ws.start(rid, **PARKED)
    local_ws.wait_for_emitted(rid, LINES_BEFORE_THE_HANG)
    os.kill(proc.pid, sig)
    outcome = local_ws.finish(proc, rid)
    assert_ended(local_ws, outcome, rid, code=130, status="INCONCLUSIVE")
    assert f"terminated ({signal.Signals(sig).name})" in outcome.runner_check()["detail"]


def test_a_second_run_with_the_same_run_id_is_refused(local_ws, rid):
    """Run B with run A's id (other GPUs) stops at A's run directory, naming A: before, B renamed
    A's live log and A's verdict read B's. A's log holds exactly A's lines."""
    first = local_ws.start(rid, **PARKED)
    local_ws.wait_for_emitted(rid, LINES_BEFORE_THE_HANG)
    argv = local_ws.argv(rid, fake_env={"FAKE_SLIME_FAULT": "no_steps"})
    argv[argv.index("--gpus") + 1] = "2,3"
    second = subprocess.run(argv, capture_output=True, text=True, env=local_ws.env(), cwd=ROOT, timeout=60,
                            check=False)
    assert second.returncode == 4, second.stderr[-3000:]
    assert f"run directory {local_ws.out / rid} is in use by cpverify run {rid} (pid {first.pid}" in second.stderr
    assert f"kill {first.pid}" in second.stderr and "or start another run: --run-id 20" in second.stderr
    assert not list((local_ws.out / rid / "logs").glob("cp1.before-*")), "B moved A's live log"
    assert local_ws.leftovers(rid), "A's workload must still be running"

    os.killpg(first.pid, signal.SIGINT)
    outcome = local_ws.finish(first, rid)
    emitted = assert_ended(local_ws, outcome, rid, code=130, status="INCONCLUSIVE")
    assert (outcome.run_dir / "logs" / "cp1.log").read_text().splitlines() == emitted


# -- signals outside an arm: one policy for the whole `cpverify run` process ---------------------

def _assert_interrupted_outside_an_arm(outcome, *, step: str, why: str) -> None:
    """Exit 130, and an INCONCLUSIVE verdict whose headline says which step was interrupted and how."""
    assert outcome.code == 130, outcome.stderr[-3000:]
    assert "Traceback" not in outcome.stderr and "interrupted; logs written so far are kept" in outcome.stderr
    verdict = outcome.verdict()
    said = f"the run was {why} during the {step} step"
    assert verdict["status"] == "INCONCLUSIVE" and said in verdict["headline"], verdict["headline"]
    assert any(c["name"] == "interrupted" and c["detail"] == said for c in verdict["checks"])
    assert outcome.state()["interrupted"] == {"step": step, "why": why}


def _shim(bin_dir, name: str, body: str) -> dict[str, str]:
    """A stand-in `name` first on PATH (the real programs stay behind it)."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_sigterm_during_compileall(local_ws, rid):
    """`python3 -m compileall` of the slime under test hangs (a slow disk, say): SIGTERM from a
    supervisor stops it and still leaves the verdict, instead of dying silently."""
    started = local_ws.root / "compileall-started"
    env = _shim(local_ws.root / "bin", "python3", f'if [ "$2" = compileall ]; then touch {started}; exec sleep 300; fi\n'
                                                  f'exec {sys.executable} "$@"\n')
    proc = local_ws.start(rid, env=env, only="compileall,lint,cp1,cp2,verdict")
    assert wait_for(started.exists, 60), "compileall never started"
    os.kill(proc.pid, signal.SIGTERM)
    outcome = local_ws.finish(proc, rid)
    _assert_interrupted_outside_an_arm(outcome, step="compileall", why="terminated (SIGTERM)")
    assert "not run: the run was terminated (SIGTERM) during the compileall step" in outcome.runner_check()["detail"]
    assert not local_ws.emitted(rid) and not (outcome.run_dir / "logs" / "cp1.log").exists()


def test_sigterm_during_fetch(local_ws, rid):
    """The hub accepts the connection and never answers: SIGTERM mid-download ends with a verdict."""
    shutil.rmtree(local_ws.cache / "hf")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        hub = {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{server.getsockname()[1]}",
               "HF_HUB_ETAG_TIMEOUT": "300", "HF_HUB_DOWNLOAD_TIMEOUT": "300"}
        proc = local_ws.start(rid, env=hub, only="fetch,lint,cp1,cp2,verdict")
        server.settimeout(60)
        connection, _ = server.accept()  # cpverify is in the fetch step, waiting for the hub
        with connection:
            os.kill(proc.pid, signal.SIGTERM)
            outcome = local_ws.finish(proc, rid)
    _assert_interrupted_outside_an_arm(outcome, step="fetch", why="terminated (SIGTERM)")
    assert not local_ws.emitted(rid)


def test_ctrl_c_during_the_verdict_step(local_ws, rid):
    """Ctrl-C while the verdict step reads the arms' logs: exit 130 with the promised INCONCLUSIVE
    verdict (the measurements stand; the run did not end as planned). The pause is real: cp1's log
    is swapped for a FIFO holding the same bytes, so reading it waits until the test writes them."""
    done = local_ws.run(rid, only="lint,cp1,cp2")
    assert done.code == 0, done.stderr[-3000:]
    log = done.run_dir / "logs" / "cp1.log"
    content = log.read_bytes()
    log.unlink()
    os.mkfifo(log)
    proc = local_ws.start(rid, only="verdict")
    writer = wait_for(lambda: _open_writer(log), 60)  # the verdict step opened the log: it waits on it
    assert writer, "the verdict step never read cp1's log"
    os.killpg(proc.pid, signal.SIGINT)  # the step waits in read(): Ctrl-C interrupts it there
    said = []
    while not said or "writing an INCONCLUSIVE verdict" not in said[-1]:
        said.append(proc.stderr.readline())
        assert said[-1], "cpverify ended without writing a verdict after the interruption"
    os.close(writer)
    writer = wait_for(lambda: _open_writer(log), 60)  # the verdict, written again, reads the log anew
    os.write(writer, content)
    os.close(writer)
    outcome = local_ws.finish(proc, rid)
    _assert_interrupted_outside_an_arm(outcome, step="verdict", why="interrupted (Ctrl-C)")
    assert "[primary CP=2 vs CP=1: PASS" in outcome.verdict()["headline"]  # what was measured is shown


def _open_writer(fifo) -> int | None:
    """A write end of `fifo` once a reader has it open (ENXIO until then)."""
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return None
