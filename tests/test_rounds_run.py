"""Rounds in `cpverify run`: the design (--rounds, --max-rounds, --budget), the interleaved order,
when the rounds stop and why, and a run continued after an interruption (cpverify.plan.rounds,
cpverify.course, the pipeline's arm steps). End to end through tests/fake_slime with the local runner."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_pipeline import PROFILE, ROOT, plan_env, run_cpverify, verdict_of

from cpverify.errors import InputError
from cpverify.model import Arm, ArmResult, round_name
from cpverify.plan import build_plan
from cpverify.plan import rounds as rp
from cpverify.profiles import get_profile
from cpverify.run_state import ArmRecord, RunRecord
from helpers.hfcache import make_model_cache

ARMS = build_plan(get_profile("smoke"), run_id="r").arms  # cp1, cp2


@pytest.fixture
def workspace(tmp_path):
    make_model_cache(tmp_path / "cache" / "hf", PROFILE.model_repo, PROFILE.model_revision)
    return tmp_path


def state_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "state.json").read_text())


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- the design as options give it ------------------------------------------------------------

@given(st.integers(0, 30), st.integers(0, 59), st.integers(0, 59))
def test_a_duration_is_hours_minutes_and_seconds(h, m, s):
    text = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s else "")
    if not text:
        with pytest.raises(InputError):
            rp.parse_duration("0s")
        return
    assert rp.parse_duration(text) == h * 3600 + m * 60 + s


@pytest.mark.parametrize("text", ["20", "", "20 minutes", "1d", "-5m", "m", "0m", "1h-30m"])
def test_a_budget_that_is_not_a_duration_is_bad_input_naming_the_units(text):
    with pytest.raises(InputError) as caught:
        rp.parse_duration(text)
    assert "--budget" in caught.value.problem and "20m" in caught.value.fix


def test_the_default_design_is_sequential_and_a_count_fixes_it():
    auto = rp.Design.of("auto")
    assert auto.sequential and (auto.min_rounds, auto.max_rounds, auto.budget_s) == (2, rp.MAX_ROUNDS, None)
    fixed = rp.Design.of("3", budget="1h30m")
    assert not fixed.sequential and fixed.rounds == 3 and fixed.budget_s == 5400
    assert rp.Design.of(None, max_rounds=4).max_rounds == 4
    assert rp.Design.from_json(fixed.to_json()) == fixed and rp.Design.from_json(auto.to_json()) == auto


@pytest.mark.parametrize(("rounds", "max_rounds", "named"), [
    ("0", None, "--rounds 0"), ("101", None, "--rounds 101"), ("three", None, "--rounds 'three'"),
    ("3", 5, "--max-rounds 5"), ("auto", 1, "--max-rounds 1"), ("auto", 500, "--max-rounds 500")])
def test_a_design_that_cannot_run_is_bad_input(rounds, max_rounds, named):
    with pytest.raises(InputError) as caught:
        rp.Design.of(rounds, max_rounds=max_rounds)
    assert named in caught.value.problem and caught.value.fix


# -- the order: drift falls on every arm alike -----------------------------------------------------

@given(st.lists(st.sampled_from([1, 2, 4]), min_size=2, max_size=6), st.integers(1, 20))
def test_rounds_alternate_their_order_so_every_arm_runs_first_as_often(cps, pairs):
    arms = [Arm(f"a{i}", cp, (), (), "/") for i, cp in enumerate([1, *cps])]
    orders = [rp.round_order(arms, 1, k) for k in range(1, 2 * pairs + 1)]
    for k, order in enumerate(orders, start=1):
        assert sorted(a.name for a in order) == sorted(a.name for a in arms)
        if k > 1:
            assert order == orders[k - 2][::-1]  # ABBA: each round the reverse of the one before
    positions = {a.name: sum(order.index(a) for order in orders) for a in arms}
    assert len(set(positions.values())) == 1  # over whole pairs of rounds, every arm's mean position is the same
    assert all(rp.is_baseline(a, 1) for a in orders[0][: sum(a.cp == 1 for a in arms)])  # round 1: cp1 step first


def test_a_round_is_the_arms_command_under_its_own_name():
    cp1 = ARMS[0]
    assert [cp1.as_round(k).name for k in (1, 2, 3)] == ["cp1", "cp1.r2", "cp1.r3"] == [round_name("cp1", k)
                                                                                          for k in (1, 2, 3)]
    second = cp1.as_round(2)
    assert second.round == 2 and (second.argv, second.env, second.cp) == (cp1.argv, cp1.env, cp1.cp)
    with pytest.raises(ValueError):
        second.as_round(3)


# -- when to stop -----------------------------------------------------------------------------------

def test_stop_reasons_in_the_order_they_apply():
    spent = {"cp1": [60.0, 60.0], "cp2": [70.0, 70.0]}
    fixed, auto = rp.Design.of("2"), rp.Design.of("auto", max_rounds=3)
    assert rp.stop_before(fixed, completed=1, durations=spent) is None
    assert rp.stop_before(fixed, completed=2, durations=spent).reason == rp.FIXED
    assert rp.stop_before(auto, completed=2, durations=spent, failed="round 2 of cp2 ended fatal").reason == rp.ARM_FAILED
    assert rp.stop_before(auto, completed=2, durations=spent, decided=True).reason == rp.DECIDED
    assert rp.stop_before(auto, completed=2, durations=spent) is None
    assert rp.stop_before(auto, completed=3, durations=spent).reason == rp.MAX


@given(st.lists(st.floats(1, 600), min_size=1, max_size=6), st.lists(st.floats(1, 600), min_size=1, max_size=6),
       st.floats(1, 7200))
def test_no_round_starts_that_the_rounds_so_far_say_would_pass_the_budget(cp1, cp2, budget):
    spent = {"cp1": cp1, "cp2": cp2}
    design = rp.Design(None, rp.MOST_ROUNDS, budget)
    stop = rp.stop_before(design, completed=min(len(cp1), len(cp2)), durations=spent)
    estimate = sum(cp1) / len(cp1) + sum(cp2) / len(cp2)
    assert (stop is not None and stop.reason == rp.BUDGET) == (sum(cp1) + sum(cp2) + estimate > budget)


def test_a_round_record_says_which_arm_and_round_it_is_and_old_records_are_round_1():
    result = ArmResult("cp1.r2", "ok", 0, Path("logs/cp1.r2.log"), 12.0)
    record = RunRecord(arms={"cp1.r2": ArmRecord(result, "logs/cp1.r2.log", "ab", 3, arm="cp1", round=2)})
    back = RunRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert back.rounds_of("cp1")[0].round == 2 and back.arms["cp1.r2"].arm == "cp1"
    old = {k: v for k, v in record.to_json()["arms"]["cp1.r2"].items() if k not in ("planned_arm", "round")}
    legacy = ArmRecord.from_json({**old, "arm": "cp1"})
    assert (legacy.arm, legacy.round) == ("cp1", 1)


# -- end to end ---------------------------------------------------------------------------------------

STEPS = ("--only", "fetch,cp1,cp2,verdict")


def test_fixed_rounds_run_interleaved_each_with_its_own_log(workspace):
    proc, run_dir = run_cpverify(workspace, *STEPS, "--rounds", "3")
    assert proc.returncode == 0, proc.stderr
    course = state_of(run_dir)["rounds"]
    assert course["order"] == ["cp1", "cp2", "cp2.r2", "cp1.r2", "cp1.r3", "cp2.r3"]
    assert course["design"]["mode"] == "fixed" and course["looks"] == []
    assert course["stopped"]["reason"] == rp.FIXED and course["stopped"]["rounds"] == 3
    arms = state_of(run_dir)["arms"]
    for name in course["order"]:
        record = arms[name]
        assert record["outcome"] == "ok" and record["log_path"] == f"logs/{name}.log"
        assert record["log_sha256"] == digest(run_dir / "logs" / f"{name}.log")
        assert (record["planned_arm"], record["round"]) == (name.split(".")[0], int(name.partition(".r")[2] or 1))
    assert course["stopped"]["arm_seconds"] == pytest.approx(sum(a["duration_s"] for a in arms.values()))


def test_sequential_rounds_stop_at_the_first_look_that_decides(workspace):
    """The stand-in's rounds are alike: the interval narrows as rounds add up, until it clears."""
    proc, run_dir = run_cpverify(workspace, *STEPS)
    assert proc.returncode == 0, proc.stderr
    course = state_of(run_dir)["rounds"]
    looks, stopped = course["looks"], course["stopped"]
    assert stopped["reason"] == rp.DECIDED and stopped["rounds"] == len(looks) + 1
    assert [look["look"] for look in looks] == list(range(1, len(looks) + 1))
    assert [look["rounds"] for look in looks] == list(range(2, len(looks) + 2))
    assert [look["decided"] for look in looks] == [False] * (len(looks) - 1) + [True]
    for look in looks:  # every look spends its share of the error rate: alpha / (k (k + 1))
        assert look["confidence"] == pytest.approx(1 - 0.05 / (look["look"] * (look["look"] + 1)))
    assert len(course["order"]) == 2 * stopped["rounds"]


def test_a_budget_stops_before_a_round_that_would_pass_it(workspace):
    proc, run_dir = run_cpverify(workspace, *STEPS, "--budget", "2s", fake={"FAKE_SLIME_STEP_S": "0.05"})
    assert proc.returncode in (0, 3), proc.stderr
    stopped = state_of(run_dir)["rounds"]["stopped"]
    assert stopped["reason"] == rp.BUDGET and stopped["rounds"] == 1
    assert not list((run_dir / "logs").glob("*.r2.log"))


def test_a_round_that_fails_stops_the_rounds(workspace):
    proc, run_dir = run_cpverify(workspace, *STEPS, fake={"FAKE_SLIME_FAULT": "oom"})
    assert proc.returncode == 1, proc.stderr
    stopped = state_of(run_dir)["rounds"]["stopped"]
    assert stopped["reason"] == rp.ARM_FAILED and stopped["rounds"] == 1 and "round 1 of cp1 ended " in stopped["detail"]
    assert not list((run_dir / "logs").glob("*.r2.log"))


def test_a_continued_run_keeps_its_recorded_rounds(workspace):
    """Running the same run again runs what is missing only: a recorded round is evidence, and a
    second attempt at it would replace a crash with a success."""
    proc, run_dir = run_cpverify(workspace, *STEPS, "--rounds", "2")
    assert proc.returncode in (0, 3), proc.stderr  # two alike rounds: 1.05 may be undecided yet
    before = {p.name: digest(p) for p in (run_dir / "logs").glob("cp*.log")}
    proc, _ = run_cpverify(workspace, *STEPS, "--rounds", "3")
    assert proc.returncode == 0, proc.stderr
    assert "cp1: recorded by an earlier attempt of this run; kept" in proc.stderr
    after = {p.name: digest(p) for p in (run_dir / "logs").glob("cp*.log")}
    assert {name: after[name] for name in before} == before
    assert set(after) - set(before) == {"cp1.r3.log", "cp2.r3.log"}
    assert state_of(run_dir)["rounds"]["order"][-2:] == ["cp1.r3", "cp2.r3"]


def test_an_interrupted_run_continues_at_the_round_it_was_in(workspace):
    cmd = [sys.executable, "-m", "cpverify", "run", "--runner", "local", "--gpus", "none", "--slime-dir",
           str(ROOT / "tests" / "fake_slime"), "--cache", str(workspace / "cache"), "--out", str(workspace / "artifacts"),
           "--run-id", "t1", *STEPS, "--rounds", "3", *plan_env(FAKE_SLIME_STEP_S="0.1")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CPVERIFY_LOCK_DIR": str(workspace)}
    run_dir = workspace / "artifacts" / "t1"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while not (run_dir / "logs" / "cp1.r2.log").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # inside round 2 of cp1 (round 2 runs cp2.r2, then cp1.r2)
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    first = state_of(run_dir)
    assert first["arms"]["cp1.r2"]["outcome"] == "interrupted" and first["arms"]["cp2.r2"]["outcome"] == "ok"
    assert verdict_of(run_dir)["status"] == "INCONCLUSIVE"
    kept = {name: digest(run_dir / "logs" / f"{name}.log") for name in ("cp1", "cp2", "cp2.r2")}

    proc, _ = run_cpverify(workspace, *STEPS, "--rounds", "3", fake={"FAKE_SLIME_STEP_S": "0.1"})
    assert proc.returncode == 0, proc.stderr
    assert {name: digest(run_dir / "logs" / f"{name}.log") for name in kept} == kept
    assert "cp1.r2: the earlier attempt's log is kept as cp1.r2.before-" in proc.stderr
    course = state_of(run_dir)["rounds"]
    assert course["order"] == ["cp1", "cp2", "cp2.r2", "cp1.r2", "cp1.r3", "cp2.r3"]
    assert course["stopped"]["reason"] == rp.FIXED
    assert all(a["outcome"] == "ok" for a in state_of(run_dir)["arms"].values())


@pytest.mark.parametrize(("extra", "said"), [(("--rounds", "0"), "--rounds 0"),
                                             (("--budget", "20"), "--budget '20' is not a duration")])
def test_a_design_that_cannot_run_stops_the_run_before_anything_runs(workspace, extra, said):
    proc, run_dir = run_cpverify(workspace, *STEPS, *extra)
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr
    assert not (run_dir / "logs" / "cp1.log").exists()


def test_one_gpu_runs_an_ab_of_two_revisions_at_one_cp(workspace, tmp_path):
    """`--cp 1` on one GPU with a second slime checkout: each revision's arm in rounds, the candidate's
    against the base's; the rounds show the spread and the A/A reading of each arm."""
    candidate = tmp_path / "slime-candidate"
    shutil.copytree(ROOT / "tests" / "fake_slime", candidate, ignore=shutil.ignore_patterns("__pycache__"))
    train = candidate / "train.py"
    default = '"FAKE_SLIME_BASE_S", "1.0"'
    assert default in train.read_text()
    train.write_text(train.read_text().replace(default, '"FAKE_SLIME_BASE_S", "1.5"'))  # 50 % slower at every CP
    proc, run_dir = run_cpverify(workspace, *STEPS, "--cp", "1", "--set", "gpus=1", "--slime-dir-candidate",
                                 str(candidate), "--rounds", "3")
    assert proc.returncode in (1, 3), proc.stderr  # 1.5x: above 1.3, or undecided by three rounds
    verdict = verdict_of(run_dir)
    assert [(c["baseline"], c["candidate"]) for c in verdict["comparisons"]] == [("base-cp1", "cand-cp1")]
    est = verdict["comparisons"][0]["metrics"]["perf/actor_train_time"]
    assert est["ratio"] == pytest.approx(1.5, rel=0.05) and est["ci"][0] > 1.0  # the change is seen
    assert verdict["rounds"]["per_arm"] == {"base-cp1": 3, "cand-cp1": 3}
    assert {reading["arm"] for reading in verdict["rounds"]["aa"]} == {"base-cp1", "cand-cp1"}
    assert state_of(run_dir)["rounds"]["order"] == ["base-cp1", "cand-cp1", "cand-cp1.r2", "base-cp1.r2",
                                                    "base-cp1.r3", "cand-cp1.r3"]


def test_one_cp_size_without_a_second_revision_is_refused(workspace):
    proc, run_dir = run_cpverify(workspace, *STEPS, "--cp", "1", "--set", "gpus=1")
    assert proc.returncode == 2 and "one CP size" in proc.stderr and "--slime-dir-candidate" in proc.stderr
    assert not (run_dir / "logs" / "cp1.log").exists()
