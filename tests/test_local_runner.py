"""LocalRunner with real subprocesses: tests/images/workload.sh printing slime/NCCL lines.

Each lifecycle ends with the same check: the workload and the grandchild it started
are gone (by pid, read from /proc: zombies count as gone).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from cpverify import fixes
from cpverify.model import Limits, Outcome
from cpverify.parse import parse_file
from cpverify.runners.local import LocalRunner, group_members
from helpers.runner_util import TESTS, WORKLOAD, arm, pid_alive, pids_in_log, wait_for

LIMITS = Limits(deadline_s=20, hang_s=5, stall_s=5)


def workload(name: str, *args: str, **kw):
    return arm(name, "sh", str(WORKLOAD), *args, **kw)


def run(tmp_path, the_arm, limits=LIMITS, **runner_options):
    runner = LocalRunner(term_grace_s=runner_options.pop("term_grace_s", 2), **runner_options)
    log_path = tmp_path / f"{the_arm.name}.log"
    return runner.run_arm(the_arm, log_path=log_path, limits=limits), log_path


def assert_all_gone(log_path):
    pids = pids_in_log(log_path)
    assert "workload" in pids, "the workload did not print its pid"
    # The group (pgid = the workload's pid) must be empty, and each known pid dead.
    assert not group_members(pids["workload"])
    for role, pid in pids.items():
        assert not pid_alive(pid), f"{role} pid {pid} survived"


def test_output_streams_to_the_log_while_the_workload_runs(tmp_path):
    log_path = tmp_path / "live.log"
    box = {}
    runner = LocalRunner()
    thread = threading.Thread(
        target=lambda: box.update(result=runner.run_arm(
            workload("live", "train", "8", "0.25"), log_path=log_path, limits=LIMITS)),
    )
    thread.start()
    two_steps = wait_for(lambda: log_path.exists() and log_path.read_text().count(" - step ") >= 2, 10)
    pid = pids_in_log(log_path).get("workload")
    running_mid_read = thread.is_alive() and pid is not None and pid_alive(pid)
    thread.join(30)
    assert two_steps and running_mid_read, "lines must reach the file while the workload still runs"
    result = box["result"]
    assert result.outcome == Outcome.OK and result.exit_code == 0
    assert [s.step for s in parse_file(result.log_path).steps] == list(range(8))
    assert result.lines == log_path.read_text().count("\n")


def test_exit_code_is_returned(tmp_path):
    result, _ = run(tmp_path, workload("fails", "train", "2", "0", "3"))
    assert result.outcome == Outcome.FAILED and result.exit_code == 3
    assert len(parse_file(result.log_path).steps) == 2


def test_deadline_kills_the_whole_group(tmp_path):
    t0 = time.monotonic()
    result, log_path = run(tmp_path, workload("deadline", "forever", "0.1"), Limits(deadline_s=1.5, hang_s=5, stall_s=5))
    assert 1.5 <= time.monotonic() - t0 < 6
    assert result.outcome == Outcome.DEADLINE and result.exit_code == 128 + signal.SIGTERM
    assert_all_gone(log_path)


def test_hang(tmp_path):
    result, log_path = run(tmp_path, workload("hang", "hang", "2"), Limits(deadline_s=20, hang_s=1, stall_s=20))
    assert result.outcome == Outcome.HANG and result.fix == fixes.for_outcome(Outcome.HANG)
    assert_all_gone(log_path)


def test_stall(tmp_path):
    result, log_path = run(tmp_path, workload("stall", "stall", "0.1"), Limits(deadline_s=20, hang_s=5, stall_s=1))
    assert result.outcome == Outcome.STALLED and result.lines > 5
    assert_all_gone(log_path)


def test_nccl_watchdog_timeout_stops_the_run_early(tmp_path):
    t0 = time.monotonic()
    result, log_path = run(tmp_path, workload("nccl", "nccl_timeout"))
    assert time.monotonic() - t0 < 4, "a fatal signature must not wait for the deadline"
    assert result.outcome == Outcome.FATAL and result.error_class == "nccl_timeout"
    assert "ProcessGroupNCCL" in log_path.read_text()  # what it printed is kept
    assert_all_gone(log_path)


def test_a_workload_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    t0 = time.monotonic()
    result, log_path = run(
        tmp_path, workload("stubborn", "stubborn", "0.1"), Limits(deadline_s=1, hang_s=5, stall_s=5), term_grace_s=1
    )
    elapsed = time.monotonic() - t0
    assert result.outcome == Outcome.DEADLINE and result.exit_code == 128 + signal.SIGKILL
    assert 2 <= elapsed < 6  # 1 s deadline + 1 s grace before SIGKILL
    assert_all_gone(log_path)


def test_background_children_are_not_left_behind_after_a_clean_exit(tmp_path):
    pidfile = tmp_path / "bg.pid"
    result, _ = run(tmp_path, arm("bg", "sh", "-c", f"sleep 300 & echo $! > {pidfile}; echo done"))
    assert result.outcome == Outcome.OK
    assert not pid_alive(int(pidfile.read_text()))


@pytest.mark.parametrize("sig, reason", [
    (signal.SIGINT, "interrupted (Ctrl-C)"),  # Ctrl-C in a terminal
    (signal.SIGTERM, "terminated (SIGTERM)"),  # nox, systemd, `docker stop` of cpverify's container
    (signal.SIGHUP, "terminated (SIGHUP)"),  # the ssh session closed
])
def test_ctrl_c_or_termination_stops_the_workload_and_keeps_the_partial_log(tmp_path, sig, reason):
    log_path = tmp_path / "child.log"
    child = subprocess.Popen(
        [sys.executable, str(TESTS / "helpers" / "runner_util.py"), "local", str(log_path), "--",
         "sh", str(WORKLOAD), "forever", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(TESTS.parent)},
    )
    try:
        assert wait_for(lambda: log_path.exists() and log_path.read_text().count(" - step ") >= 3, 15)
        pids = pids_in_log(log_path)
        assert pid_alive(pids["workload"]) and pid_alive(pids["grandchild"])
        child.send_signal(sig)
        out, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    partial = json.loads(out.split("INTERRUPTED ", 1)[1])
    assert partial["outcome"] == Outcome.INTERRUPTED and partial["reason"] == reason
    assert log_path.read_text().count(" - step ") >= 3
    assert_all_gone(log_path)


def test_missing_executable_is_blocked_with_a_fix(tmp_path):
    result, log_path = run(tmp_path, arm("missing", "no-such-slime-launcher", "--flag"))
    assert result.outcome == Outcome.BLOCKED and result.exit_code is None
    assert "no-such-slime-launcher" in result.reason and "PATH" in result.reason
    assert "install" in result.fix


def test_missing_workdir_and_non_executable_path_are_blocked(tmp_path):
    result, _ = run(tmp_path, arm("nowd", "true", workdir=tmp_path / "absent"))
    assert result.outcome == Outcome.BLOCKED and "absent" in result.reason and result.fix
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    result, _ = run(tmp_path, arm("noexec", "./train.sh", workdir=tmp_path))
    assert result.outcome == Outcome.BLOCKED and "chmod +x" in result.fix


def test_the_workload_gets_the_plans_env_and_an_allow_list_of_this_machines(tmp_path, monkeypatch):
    """From this machine: what the stack needs (NCCL_*, PATH, ...), never a credential, nothing else.
    From the plan: everything, a secret the user set on purpose included -- which the log never shows."""
    monkeypatch.setenv("WANDB_API_KEY", "wandb-secret-value")  # secret-named
    monkeypatch.setenv("RAY_ADDRESS", "http://admin:ray-pw-6a2f81@head:8265")  # allowed name, secret value
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example.internal")  # the fetch step's, never the workload's
    monkeypatch.setenv("CPVERIFY_TEST_HOST_VAR", "from-host")  # not on the allow-list
    monkeypatch.setenv("NCCL_TEST_HOST_VAR", "from-host")  # NCCL's: on it
    the_arm = arm(
        "env", "sh", "-c",
        'echo "cmc=$CUDA_DEVICE_MAX_CONNECTIONS nccl=${NCCL_TEST_HOST_VAR:-unset} host=${CPVERIFY_TEST_HOST_VAR:-unset} '
        'wandb=${WANDB_API_KEY:-unset} ray=${RAY_ADDRESS:-unset} endpoint=${HF_ENDPOINT:-unset} '
        'path=${PATH:+set}"; echo "planned=$GITHUB_PAT"',
        env={"CUDA_DEVICE_MAX_CONNECTIONS": "1", "GITHUB_PAT": "0f9e8d7c6b5a4f3e2d1c"},
    )
    result, log_path = run(tmp_path, the_arm)
    assert result.outcome == Outcome.OK
    assert log_path.read_text().splitlines() == [
        "cmc=1 nccl=from-host host=unset wandb=unset ray=unset endpoint=unset path=set",
        "planned=<redacted:secret>"]  # it arrived (the line says so), its value did not reach the disk


def test_a_workload_that_closes_its_output_early_is_still_awaited(tmp_path):
    result, log_path = run(tmp_path, arm("closes", "sh", "-c", "echo bye; exec >&- 2>&-; sleep 1; exit 4"))
    assert result.outcome == Outcome.FAILED and result.exit_code == 4
    assert log_path.read_text() == "bye\n"


def test_the_plans_gpus_reach_the_workload_not_cpverify(tmp_path, monkeypatch):
    """--gpus pins a local workload to the plan's GPUs through its own environment: cpverify's
    environment (which later steps and other threads read) stays as it was."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    before = dict(os.environ)
    runner = LocalRunner(gpus=(2, 3))
    printer = arm("gpus", sys.executable, "-c", "import os; print('seen', os.environ['CUDA_VISIBLE_DEVICES'])")
    result = runner.run_arm(printer, log_path=tmp_path / "gpus.log", limits=Limits(deadline_s=30, hang_s=30, stall_s=30))
    assert result.outcome == Outcome.OK, result.reason
    assert "seen 2,3" in (tmp_path / "gpus.log").read_text()
    assert dict(os.environ) == before


def test_a_tool_that_times_out_keeps_what_it_printed_as_text(tmp_path):
    """subprocess's TimeoutExpired carries bytes even with text=True: the tool's log must hold the
    words it printed, not a Python bytes repr."""
    script = "import sys, time; print('compiling slime/backends', flush=True); time.sleep(30)"
    tool = arm("compileall", sys.executable, "-c", script, workdir=str(tmp_path))
    code, output = LocalRunner().run_tool(tool, log_path=tmp_path / "compileall.log", timeout_s=2)
    assert code == -1
    assert output.startswith("compiling slime/backends\n") and "b'" not in output
    assert "compileall: no result after 2s" in output
    assert (tmp_path / "compileall.log").read_text() == output


def test_the_leftover_sweep_kills_orphans_of_its_own_pid_namespace_only():
    """A cpverify in a container (a compose step) tags its workload with a pid of the container's
    namespace: seen from the host that owner looks gone, but the workload is alive and not ours (a
    host run's sweep killed a compose cp2 mid-run). An orphan of this namespace still goes."""
    import shutil
    import uuid

    from cpverify.config import WORKLOAD_OWNER_ENV
    from cpverify.runners.local import sweep_leftovers

    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to make a PID namespace")
    tag = f"{WORKLOAD_OWNER_ENV}=1:{uuid.uuid4().hex}"  # pid 1, a start time no process has: a dead owner
    here = subprocess.Popen(["env", tag, "sleep", "30"])
    there = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "env", tag, "sleep", "30"], stderr=subprocess.PIPE)

    def tagged() -> set[int]:
        found = set()
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and tag.encode() in open(f"/proc/{entry}/environ", "rb").read().split(b"\0"):
                    found.add(int(entry))
            except OSError:
                continue
        return found

    try:
        if wait_for(lambda: len(tagged()) == 2 or there.poll() is not None, 10) and there.poll() is not None:
            pytest.skip(f"unshare --pid needs privileges here: {there.stderr.read().decode().strip()}")
        in_container = tagged() - {here.pid}
        killed = {int(line.split()[1]) for line in sweep_leftovers()}
        assert here.pid in killed and wait_for(lambda: here.poll() is not None, 5)
        assert in_container and in_container.isdisjoint(killed) and all(map(pid_alive, in_container))
    finally:
        for proc in (here, there):
            proc.kill()
            proc.wait()
