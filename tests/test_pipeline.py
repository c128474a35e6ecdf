"""`cpverify run` end to end with the local runner: real subprocesses, real files, real verdicts.

slime cannot run here (it needs GPUs, Megatron and SGLang), so the workload is
tests/fake_slime/train.py, a stand-in that prints slime's real log formats and injects faults
on request (FAKE_SLIME_* variables). Everything else is cpverify as users run it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cpverify.errors import DatasetError, InputError
from cpverify.profiles import get_profile
from helpers.hfcache import make_model_cache

ROOT = Path(__file__).resolve().parent.parent
FAKE_SLIME = ROOT / "tests" / "fake_slime"
PROFILE = get_profile("smoke")


@pytest.fixture
def workspace(tmp_path):
    cache = tmp_path / "cache"
    make_model_cache(cache / "hf", PROFILE.model_repo, PROFILE.model_revision)
    return tmp_path


def plan_env(**fake: str) -> tuple[str, str]:
    """`--set env=...`: the profile's env plus the stand-in's knobs. The arms get an allow-listed
    environment, not this process's, so a FAKE_SLIME_* variable reaches them only through the plan."""
    pairs = (*PROFILE.env, ("FAKE_SLIME_STEP_S", "0.01"), *fake.items())
    return "--set", "env=" + ",".join(f"{k}={v}" for k, v in pairs)


def run_cpverify(workspace: Path, *extra: str, fake: dict | None = None, run_id: str = "t1", timeout: float = 120,
                 env: dict | None = None):
    if not any(word.startswith("env=") for word in extra):
        extra = (*extra, *plan_env(**(fake or {})))
    cmd = [sys.executable, "-m", "cpverify", "run", "--runner", "local", "--gpus", "none",
           "--slime-dir", str(FAKE_SLIME), "--cache", str(workspace / "cache"), "--out", str(workspace / "artifacts"),
           "--run-id", run_id, *extra]
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "CPVERIFY_LOCK_DIR": str(workspace), **(env or {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout, cwd=ROOT)
    return proc, workspace / "artifacts" / run_id


STEPS = ("--only", "fetch,compileall,lint,cp1,cp2,verdict")


def verdict_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "verdict.json").read_text())


def test_pass_when_cp2_costs_about_the_same(workspace):
    proc, run_dir = run_cpverify(workspace, *STEPS)
    assert proc.returncode == 0, proc.stderr
    verdict = verdict_of(run_dir)
    assert verdict["status"] == "PASS"
    assert 1.0 < verdict["ratio"] < 1.12  # the stand-in makes CP=2 5% slower
    assert {arm["arm"]: arm["cp_effective"] for arm in verdict["arms"]} == {"cp1": 1, "cp2": 2}
    rounds = verdict["rounds"]["per_arm"]
    assert rounds["cp1"] == rounds["cp2"] >= 2 and verdict["rounds"]["stopped"]["reason"] == "decided"
    for name in ("verdict.md", "env.json", "commands.sh", "logs/cp1.log", "logs/cp2.log"):
        assert (run_dir / name).is_file(), name
    assert "--context-parallel-size 2" in (run_dir / "commands.sh").read_text()
    assert verdict["headline"].split(" — ", 1)[1] in (run_dir / "verdict.md").read_text()


def test_fail_when_cp2_takes_twice_as_long(workspace):
    proc, run_dir = run_cpverify(workspace, *STEPS, fake={"FAKE_SLIME_CP_FACTOR": "2.0"})
    assert proc.returncode == 1, proc.stderr
    verdict = verdict_of(run_dir)
    assert verdict["status"] == "FAIL"
    assert verdict["ratio_ci"][0] > 1.3


def test_fail_when_cp_silently_did_not_take_effect(workspace):
    """slime ignores a misspelled CP flag and runs CP=1: the layout hook's line exposes it."""
    proc, run_dir = run_cpverify(workspace, *STEPS, fake={"FAKE_SLIME_IGNORE_CP": "1"})
    assert proc.returncode == 1
    verdict = verdict_of(run_dir)
    assert verdict["status"] == "FAIL"
    cp_checks = [c for c in verdict["checks"] if c["name"] == "cp_effective" and c["arm"] == "cp2"]
    assert cp_checks and cp_checks[0]["status"] == "fail"


def test_nccl_watchdog_stops_the_arm_early_and_fails_the_verdict(workspace):
    proc, run_dir = run_cpverify(workspace, *STEPS, fake={"FAKE_SLIME_FAULT": "nccl_timeout"}, timeout=90)
    assert proc.returncode == 1
    verdict = verdict_of(run_dir)
    assert verdict["status"] == "FAIL"
    assert any(e["class"] == "nccl_timeout" for e in verdict["errors"])
    state = json.loads((run_dir / "state.json").read_text())
    assert state["arms"]["cp1"]["outcome"] == "fatal"  # stopped early, not after the 1 h sleep
    assert "Watchdog caught collective operation timeout" in (run_dir / "logs" / "cp1.log").read_text()


def test_arms_that_exit_0_inside_a_step_are_not_clean(workspace):
    """A workload that dies mid-step but exits 0: its runner outcome is ok, only the log can tell.
    Rollouts 0-4 finished: counted steps enough for an interval, far fewer than the plan asked for."""
    proc, run_dir = run_cpverify(workspace, *STEPS, fake={"FAKE_SLIME_FAULT": "exit0_mid_step"})
    assert proc.returncode == 3, proc.stderr
    verdict = verdict_of(run_dir)
    assert verdict["status"] == "INCONCLUSIVE"
    assert [a["outcome"] for a in verdict["arms"]] == ["ok", "ok"]  # one round each: it decides, no more are run
    for arm in ("cp1", "cp2"):
        complete = next(c for c in verdict["checks"] if c["name"] == "complete" and c["arm"] == arm)
        assert complete["effect"] == "INCONCLUSIVE"
        assert "Timer actor_train started at line" in complete["detail"]
        planned = PROFILE.planned_rollouts
        assert f"plan asked for {planned} rollouts" in complete["detail"]
        assert f"(rollouts 5-{planned - 1})" in complete["detail"]
    md = (run_dir / "verdict.md").read_text()
    # one story for both arms (they failed alike), the evidence the first arm's end of log
    assert md.count("**Why it failed:**") == 1 and "cp1, the last " in md and "cp2 (end of log)" in md


def test_a_baseline_that_is_not_the_smallest_cp_is_refused_before_anything_runs(workspace):
    """`--set baseline_cp=2` would judge CP=1 against CP=2 (a 2x slowdown read as `0.50x`): bad input, exit 2."""
    proc, run_dir = run_cpverify(workspace, *STEPS, "--set", "baseline_cp=2", fake={"FAKE_SLIME_CP_FACTOR": "2.0"})
    assert proc.returncode == 2
    assert "baseline_cp 2 must be the smallest of cp_sizes (1, 2)" in proc.stderr
    assert "leave baseline_cp=1" in proc.stderr
    assert not (run_dir / "logs" / "cp1.log").exists() and not (run_dir / "verdict.json").exists()


def test_fewer_counted_steps_than_an_interval_needs_are_refused_before_anything_runs(workspace):
    proc, run_dir = run_cpverify(workspace, *STEPS, "--set", "min_counted_steps=2")
    assert proc.returncode == 2
    assert "min_counted_steps=6" in proc.stderr
    assert not (run_dir / "logs" / "cp1.log").exists() and not (run_dir / "verdict.json").exists()


def test_lint_error_stops_before_any_arm_runs(workspace):
    proc, run_dir = run_cpverify(workspace, "--only", "lint,cp1,cp2,verdict",
                                 "--set", "train_args=--rollout-num 8")
    assert proc.returncode == 1
    assert "--num-rollout" in proc.stderr
    assert not (run_dir / "logs" / "cp1.log").exists()


def test_steps_resume_the_same_run(workspace):
    """`nox -s cp1` then `nox -s cp2` then `nox -s verdict`: one run directory carries the state."""
    for step in ("fetch", "cp1", "cp2"):
        proc, run_dir = run_cpverify(workspace, "--only", step)
        assert proc.returncode == 0, proc.stderr
    proc, run_dir = run_cpverify(workspace, "--only", "verdict")
    assert proc.returncode == 0, proc.stderr
    assert verdict_of(run_dir)["status"] == "PASS"


def test_verdict_without_arms_is_blocked_and_says_what_to_run(workspace):
    proc, run_dir = run_cpverify(workspace, "--only", "verdict")
    assert proc.returncode == 4
    verdict = verdict_of(run_dir)
    assert verdict["status"] == "BLOCKED"
    assert any("cpverify run --only cp1" in c["fix"] for c in verdict["checks"])


def test_unknown_step_is_a_usage_error(workspace):
    proc, _ = run_cpverify(workspace, "--only", "cp3")
    assert proc.returncode == 2
    assert "unknown step 'cp3'" in proc.stderr and "choose from" in proc.stderr


def test_compile_error_in_the_slime_under_test_stops_the_run(workspace, tmp_path):
    broken = tmp_path / "slime-broken"
    subprocess.run(["cp", "-r", str(FAKE_SLIME), str(broken)], check=True)
    (broken / "slime" / "backends" / "megatron_utils" / "cp_utils.py").write_text("def f(:\n    pass\n")
    proc = subprocess.run(
        [sys.executable, "-m", "cpverify", "run", "--runner", "local", "--gpus", "none", "--slime-dir", str(broken),
         "--cache", str(workspace / "cache"), "--out", str(workspace / "artifacts"), "--run-id", "c1",
         "--only", "compileall"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert "cp_utils.py" in proc.stderr and "nothing was run on a GPU" in proc.stderr


def test_a_new_attempt_rechecks_what_blocked_the_last_one(workspace):
    cmd = [sys.executable, "-m", "cpverify", "run", "--runner", "local", "--gpus", "0,1", "--slime-dir", str(FAKE_SLIME),
           "--cache", str(workspace / "cache"), "--out", str(workspace / "artifacts"), "--run-id", "t1", "--only", "doctor", *plan_env()]
    blocked = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert blocked.returncode == 4, blocked.stderr  # this host has no GPU
    state = json.loads((workspace / "artifacts" / "t1" / "state.json").read_text())
    assert "GPU" in state["blocked"]["reason"]
    proc, run_dir = run_cpverify(workspace, "--only", "fetch,cp1,cp2,verdict")
    assert proc.returncode == 0, proc.stderr
    assert verdict_of(run_dir)["status"] == "PASS"


# -- one run, one plan, its own logs -----------------------------------------------------------

def test_a_later_step_that_would_change_the_plan_is_refused(workspace):
    """cp1 ran without NCCL_P2P_DISABLE: cp2 may not get it, or the arms would differ in more than
    CP while commands.sh claimed both had it. Nor may the verdict's threshold move after the fact."""
    proc, run_dir = run_cpverify(workspace, "--only", "fetch,cp1")
    assert proc.returncode == 0, proc.stderr
    plan = (run_dir / "plan.json").read_text()
    drifts = [(("--only", "cp2,verdict", *plan_env(NCCL_P2P_DISABLE="1")), 'plan.arms[0].env.NCCL_P2P_DISABLE: "(absent)" -> "1"'),
              (("--only", "verdict", "--set", "pass_ratio=3"), "profile.pass_ratio: 1.3 -> 3.0")]
    for extra, changed in drifts:
        refused, _ = run_cpverify(workspace, *extra)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert "run t1 was planned with other arguments; these would change it: " in refused.stderr
        assert changed in refused.stderr, refused.stderr
        assert "fix: give every step of a run the same arguments" in refused.stderr and "--run-id 20" in refused.stderr
    assert not (run_dir / "logs" / "cp2.log").exists() and not (run_dir / "verdict.json").exists()
    assert (run_dir / "plan.json").read_text() == plan
    proc, _ = run_cpverify(workspace, "--only", "cp2,verdict")  # the run's own arguments continue it
    assert proc.returncode == 0, proc.stderr
    assert "NCCL_P2P_DISABLE" not in (run_dir / "commands.sh").read_text()


def test_the_verdict_judges_only_the_logs_its_own_arms_wrote(workspace):
    """A log no arm of this run wrote is not evidence, and a log changed after its arm ended is
    refused: before, the verdict read whatever file lay at logs/<arm>.log."""
    proc, other = run_cpverify(workspace, "--only", "fetch,cp1,cp2", run_id="other")
    assert proc.returncode == 0, proc.stderr
    proc, run_dir = run_cpverify(workspace, "--only", "cp1", run_id="mine")
    assert proc.returncode == 0, proc.stderr
    (run_dir / "logs" / "cp2.log").write_bytes((other / "logs" / "cp2.log").read_bytes())  # another run's
    proc, _ = run_cpverify(workspace, "--only", "verdict", run_id="mine")
    assert proc.returncode == 4, proc.stderr
    verdict = verdict_of(run_dir)
    assert verdict["status"] == "BLOCKED" and "the arm was never run" in verdict["headline"]
    cp1, cp2 = verdict["arms"]
    assert cp1["counted_steps"] > 0 and cp2["counted_steps"] == 0 and cp2["log_lines"] == 0

    log = other / "logs" / "cp2.log"
    log.write_bytes(log.read_bytes() + b"a line written after the arm ended\n")
    proc, _ = run_cpverify(workspace, "--only", "verdict", run_id="other")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{log} is not the log arm cp2 wrote" in proc.stderr and "fix: start a new run" in proc.stderr
    assert not (other / "verdict.json").exists()


def test_the_run_record_is_typed_and_an_unreadable_one_is_bad_input(workspace):
    proc, run_dir = run_cpverify(workspace, "--only", "fetch,cp1")
    assert proc.returncode == 0, proc.stderr
    state = json.loads((run_dir / "state.json").read_text())
    assert state["schema_version"] == 1 and state["blocked"] is None and state["interrupted"] is None
    cp1 = state["arms"]["cp1"]
    assert cp1["outcome"] == "ok" and cp1["log_path"] == "logs/cp1.log"
    assert cp1["log_sha256"] == hashlib.sha256((run_dir / "logs" / "cp1.log").read_bytes()).hexdigest()
    (run_dir / "state.json").write_text('{"arms": {"cp1": "done"}}')
    proc, _ = run_cpverify(workspace, "--only", "verdict")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "state.json is not a run record this cpverify can continue" in proc.stderr and "--run-id" in proc.stderr


def test_progress_off_a_terminal_is_plain_lines_every_n_seconds_not_one_a_step(workspace):
    """stderr is a pipe here, as in CI. Each arm says how far it is (step k of the plan's n), the
    ETA and its phase: when it starts, when it enters a phase it had not been in, and every
    CPVERIFY_PROGRESS_S seconds, not once a step (the issue: `step 11, 13s elapsed, 1516 lines` x N)."""
    proc, run_dir = run_cpverify(workspace, "--only", "cp1,cp2", "--rounds", "1", fake={"FAKE_SLIME_STEP_S": "0.25"},
                                 env={"CPVERIFY_PROGRESS_S": "1.5"})
    assert proc.returncode == 0, proc.stderr
    planned = PROFILE.planned_rollouts
    pattern = re.compile(rf"\[cpverify t1\] (cp[12]): step (\d+) of {planned}, (\d+)s elapsed, ETA (\?|[\dmhs]+), "
                         r"phase (.+)")
    for arm in ("cp1", "cp2"):
        lines = [line for line in proc.stderr.splitlines() if line.startswith(f"[cpverify t1] {arm}: step ")]
        shown = [pattern.fullmatch(line) for line in lines]
        assert all(shown), lines
        steps, elapsed = [int(m[2]) for m in shown], [int(m[3]) for m in shown]
        # 16 steps of >= 0.25 s: a line at the start, one each 1.5 s after it, and one or two at new phases
        assert 3 <= len(lines) <= elapsed[-1] / 1.5 + 3 and len(lines) < planned, lines
        assert steps == sorted(steps) and steps[-1] > steps[0] and elapsed == sorted(elapsed)
        assert shown[-1][4] != "?", lines  # after two steps, an ETA
        assert "actor_train" in {m[5] for m in shown}
        state = json.loads((run_dir / "state.json").read_text())["arms"][arm]
        assert f"{arm}: ok (exit 0)" in proc.stderr and state["outcome"] == "ok"
    assert "\x1b" not in proc.stderr  # no cursor or colour codes in a CI log


def test_a_progress_interval_that_is_not_seconds_is_bad_input_before_anything_runs(workspace):
    proc, run_dir = run_cpverify(workspace, *STEPS, env={"CPVERIFY_PROGRESS_S": "often"})
    assert proc.returncode == 2
    assert "CPVERIFY_PROGRESS_S='often' is not a positive number of seconds" in proc.stderr
    assert "set it to e.g. 10" in proc.stderr
    assert not (run_dir / "logs" / "cp1.log").exists()


# -- what the user named is checked before the first step ------------------------------------

@pytest.mark.parametrize("runner", ["local", "docker"])
@pytest.mark.parametrize("named, error", [
    ("--slime-dir", InputError),
    ("--model-dir", InputError),
    ("dataset", DatasetError),
])
def test_what_the_user_named_is_checked_before_the_first_step(workspace, runner, named, error):
    """A missing checkout, model directory or a broken prompt file is bad input naming it before
    the doctor (on a GPU host the doctor, the image build and the download would run first)."""
    from cpverify.cli import build_parser
    from cpverify.pipeline import run

    bad = workspace / "nowhere"
    given = {"--slime-dir": ["--slime-dir", str(bad)], "--model-dir": ["--model-dir", str(bad)],
             "dataset": ["--set", f"dataset={bad}.jsonl"]}[named]
    args = build_parser().parse_args(["run", "--runner", runner, "--gpus", "0,1", "--slime-dir", str(FAKE_SLIME),
                                      "--cache", str(workspace / "cache"), "--out", str(workspace / "artifacts"),
                                      "--run-id", "named", "--only", "doctor", *given])
    with pytest.raises(error) as raised:
        run(args)
    assert type(raised.value) is error and str(bad) in raised.value.problem
    assert not (workspace / "artifacts" / "named" / "state.json").exists()  # the doctor never ran
