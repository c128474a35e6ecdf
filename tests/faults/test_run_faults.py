"""Faults during a run, under the local runner (real subprocesses) and the Docker runner (real
containers): the verdict says what happened, the exit code says it too, nothing is left
running, and the log on disk holds every line the workload printed before the fault.

The workload is the stand-in slime (tests/fake_slime/train.py; slime needs GPUs); the faults
are real where they can be: a real invalid memory read, a real SIGKILL from outside (what the
OOM killer does), real signals to cpverify, a real second cpverify on the same GPUs.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from cpverify.profiles import SMOKE_TRAIN_ARGS
from faults.harness import wait_until_dead

# Where silent_hang stops: 4 start-up lines, then 5 lines per rollout for rollouts 0 and 1.
LINES_BEFORE_THE_HANG = 14
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
    check = outcome.runner_check()
    assert "runner outcome 'failed', exit code 137" in check["detail"]
    assert "killed by SIGKILL" in check["detail"] and "OOM killer" in check["detail"]
    assert "exit code 137" in outcome.verdict()["headline"]


def test_segfault(ws, rid):
    outcome = ws.run(rid, fake_env={"FAKE_SLIME_FAULT": "segfault"})
    emitted = assert_ended(ws, outcome, rid, code=1, status="FAIL")
    detail = outcome.runner_check()["detail"]
    assert "exit code 139" in detail and "killed by SIGSEGV: a crash in native code" in detail
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
