"""cpverify.verdict: the decision rule, on synthetic slime logs.

slime cannot run here (no GPUs), so the arms are synthetic logs written by
tests/helpers/slime_log.py in slime's exact line formats with seeded +/-5% jitter.
Every scenario runs twice: on the builder's ground-truth ParsedLog (the verdict alone)
and end to end through the real parser, cpverify.logs.parse_file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from cpverify import verdict as v
from cpverify.errors import EXIT_BLOCKED, EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_OK, EXIT_USAGE, InputError
from cpverify.logs import ErrorRecord, ParsedLog, parse_file
from cpverify.runners.base import ArmResult
from helpers.slime_log import ERROR_LINES, synthetic_arm

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "cpverify" / "data" / "verdict.schema.json").read_text())


@pytest.fixture(params=["truth", "parsed"])
def make_arm(request, tmp_path):
    """make_arm(name, cp, factor, ...) -> ArmEvidence, from ground truth or through the real parser."""

    def make(name, cp, factor, *, seed, result=None, log=None, **kwargs):
        log = log or synthetic_arm(cp=cp, actor_train_time=factor, seed=seed, **kwargs)
        if request.param == "truth":
            parsed = log.expected()
        else:
            parsed = parse_file(log.write(tmp_path / f"{name}.log"))
        return v.ArmEvidence(name, cp, parsed, result)

    make.source = request.param
    return make


def decide(*arms, comparisons=(("cp1", "cp2"),), **thresholds):
    verdict = v.decide(list(arms), comparisons=list(comparisons), thresholds=v.Thresholds(**thresholds))
    jsonschema.validate(json.loads(json.dumps(verdict.to_json())), SCHEMA)  # every verdict fits the contract
    return verdict


def check(verdict, name, arm=None):
    found = [c for c in verdict.checks if c.name == name and (arm is None or c.arm == arm)]
    assert found, f"no check {name!r} (arm {arm}) in {[c.name for c in verdict.checks]}"
    return found[0]


def ok_result(name):
    return ArmResult(name, "ok", 0, Path(f"{name}.log"), 100.0)


# -- the done-when scenarios of the issue ------------------------------------------------------

def test_similar_speed_passes(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, result=ok_result("cp1")),
                     make_arm("cp2", 2, 1.05, seed=2, result=ok_result("cp2")))
    assert verdict.status == v.PASS and verdict.exit_code == EXIT_OK
    data = verdict.to_json()
    assert 0.95 < data["ratio"] < 1.15
    lo, hi = data["ratio_ci"]
    assert lo <= data["ratio"] <= hi <= 1.3
    assert verdict.headline.startswith("PASS — CP=2 actor_train ")
    assert "7 steps each" in verdict.headline and "threshold ≤ 1.30" in verdict.headline
    assert all(c.status in ("pass", "skip") for c in verdict.checks)
    values = data["arms"][1]["values"][v.PRIMARY_METRIC]
    assert len(values) == 7 and min(values) > 0.9 and data["arms"][1]["counted_rollouts"] == list(range(1, 8))


def test_twice_as_slow_fails_with_the_troubleshooting_fix(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 2.0, seed=2))
    assert verdict.status == v.FAIL and verdict.exit_code == EXIT_FAIL
    assert 1.8 < verdict.to_json()["ratio_ci"][0]
    speed = check(verdict, "speed:cp2 vs cp1")
    assert speed.status == "fail" and speed.effect == v.FAIL
    for hint in ("NCCL_P2P_DISABLE", "--attention-backend torch", "NCCL_DEBUG=INFO", "MIG"):
        assert hint in speed.fix
    assert "whole interval is above the threshold" in verdict.headline


def test_nccl_watchdog_timeout_fails_naming_the_class_and_line(make_arm):
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2)
    line = log.nccl_watchdog_timeout()
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2, log=log))
    assert verdict.status == v.FAIL
    error = check(verdict, "error:nccl_timeout", "cp2")
    assert error.effect == v.FAIL and f"line {line}" in error.detail and "Watchdog caught" in error.detail
    assert "NCCL_DEBUG=INFO" in error.fix and "CUDA_DEVICE_MAX_CONNECTIONS" in error.fix
    assert "nccl_timeout" in verdict.headline and "cp2" in verdict.headline
    assert {"arm": "cp2", "class": "nccl_timeout", "line": line}.items() <= verdict.to_json()["errors"][0].items()


def test_two_counted_steps_are_inconclusive(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, rollouts=3), make_arm("cp2", 2, 1.0, seed=2, rollouts=3))
    assert verdict.status == v.INCONCLUSIVE and verdict.exit_code == EXIT_INCONCLUSIVE
    steps = check(verdict, "counted_steps", "cp2")
    assert steps.effect == v.INCONCLUSIVE and "2 counted" in steps.detail and "--num-rollout" in steps.fix
    assert verdict.to_json()["ratio_ci"] is None
    assert "need >= 3" in verdict.headline


def test_cp_that_did_not_take_effect_fails(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2, layout_cp=1))
    assert verdict.status == v.FAIL
    cp = check(verdict, "cp_effective", "cp2")
    assert cp.effect == v.FAIL and "CP did not take effect" in cp.detail and "--context-parallel-size" in cp.fix
    assert "CP did not take effect" in verdict.headline
    assert verdict.to_json()["arms"][1]["cp_effective"] == 1


def test_blocked_arm_is_blocked_with_its_fix(make_arm):
    blocked = ArmResult("cp2", "blocked", None, Path("cp2.log"), 0.0, reason="no NVIDIA container runtime",
                        fix="install nvidia-container-toolkit and restart Docker")
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, result=ok_result("cp1")),
                     v.ArmEvidence("cp2", 2, ParsedLog(), blocked))
    assert verdict.status == v.BLOCKED and verdict.exit_code == EXIT_BLOCKED
    runner = check(verdict, "runner", "cp2")
    assert runner.effect == v.BLOCKED and runner.fix == "install nvidia-container-toolkit and restart Docker"
    assert "no NVIDIA container runtime" in verdict.headline
    # nothing ran in a blocked arm: no further checks pretend to judge its (empty) log
    assert [c.name for c in verdict.checks if c.arm == "cp2"] == ["runner"]


# -- runner outcomes ---------------------------------------------------------------------------

@pytest.mark.parametrize("outcome", ["hang", "stalled", "deadline", "fatal", "failed"])
def test_runner_failures_fail_naming_the_outcome(make_arm, outcome):
    result = ArmResult("cp2", outcome, 1 if outcome == "failed" else None, Path("cp2.log"), 600.0,
                       reason="no new log line for 600 s" if outcome == "hang" else "")
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2, result=result))
    assert verdict.status == v.FAIL
    runner = check(verdict, "runner", "cp2")
    assert runner.effect == v.FAIL and repr(outcome) in runner.detail and runner.fix
    assert outcome in verdict.headline


def test_interrupted_run_is_inconclusive(make_arm):
    result = ArmResult("cp2", "interrupted", None, Path("cp2.log"), 10.0)
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2, result=result))
    assert verdict.status == v.INCONCLUSIVE


def test_fail_outranks_blocked(make_arm):
    blocked = ArmResult("cp2", "blocked", None, Path("cp2.log"), 0.0, reason="daemon down", fix="start docker")
    log = synthetic_arm(cp=1, actor_train_time=1.0, seed=1)
    log.cuda_oom()
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, log=log), v.ArmEvidence("cp2", 2, ParsedLog(), blocked))
    assert verdict.status == v.FAIL
    assert "cuda_oom" in verdict.headline and "--max-tokens-per-gpu" in check(verdict, "error:cuda_oom").fix


# -- effective CP ------------------------------------------------------------------------------

def test_unconfirmed_cp_never_passes(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2, layout_cp=None))
    assert verdict.status == v.INCONCLUSIVE
    cp = check(verdict, "cp_effective", "cp2")
    assert cp.effect == v.INCONCLUSIVE and "could not confirm CP=2" in cp.detail
    assert "--custom-megatron-init-path" in cp.fix
    assert verdict.to_json()["arms"][1]["cp_effective"] == "unconfirmed"


def test_unconfirmed_cp1_baseline_only_warns(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, layout_cp=None), make_arm("cp2", 2, 1.0, seed=2))
    assert verdict.status == v.PASS
    assert check(verdict, "cp_effective", "cp1").status == "warn"


# -- statistics inputs -------------------------------------------------------------------------

def test_interval_straddling_the_threshold_is_inconclusive(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, jitter=0.2), make_arm("cp2", 2, 1.3, seed=2, jitter=0.2))
    lo, hi = verdict.to_json()["ratio_ci"]
    assert lo <= 1.3 < hi
    assert verdict.status == v.INCONCLUSIVE
    assert "straddles" in verdict.headline


def test_warmup_rollouts_are_not_counted(make_arm):
    # rollout 0 is 3x slower (compile + NCCL init) in both arms, but 10x in the candidate: excluded, it cannot matter
    cp1 = make_arm("cp1", 1, 1.0, seed=1)
    cp2 = make_arm("cp2", 2, 1.0, seed=2, warmup_factor=10.0)
    verdict = decide(cp1, cp2)
    assert verdict.status == v.PASS
    assert verdict.arms[1].counted_rollouts == list(range(1, 8))
    with_warmup = decide(cp1, cp2, warmup=0)
    assert with_warmup.arms[1].metrics[v.PRIMARY_METRIC].n == 8
    assert with_warmup.arms[1].metrics[v.PRIMARY_METRIC].max > 5


def test_rollouts_printed_by_several_ranks_count_once(make_arm):
    plain = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2))
    duplicated = decide(make_arm("cp1", 1, 1.0, seed=1, duplicate_pids=(32168,)),
                        make_arm("cp2", 2, 1.0, seed=2, duplicate_pids=(32168, 32169)))
    for arm_plain, arm_dup in zip(plain.arms, duplicated.arms, strict=True):
        assert arm_dup.metrics[v.PRIMARY_METRIC] == arm_plain.metrics[v.PRIMARY_METRIC]  # first print kept
    assert duplicated.to_json()["ratio_ci"] == plain.to_json()["ratio_ci"]


def test_secondary_metrics_are_compared_and_warn_only(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.05, seed=2))
    comparison = verdict.to_json()["comparisons"][0]
    assert set(comparison["metrics"]) == set(v.TIMING_METRICS)
    for metric in ("perf/log_probs_time", "perf/ref_log_probs_time"):
        assert 0.9 < comparison["metrics"][metric]["ratio"] < 1.2


# -- NCCL --------------------------------------------------------------------------------------

def test_tcp_socket_transport_warns_with_the_transport_fix(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.05, seed=2, transport="NET/Socket/0"))
    assert verdict.status == v.PASS  # a warning explains, it does not decide
    transport = check(verdict, "nccl_transport", "cp2")
    assert transport.status == "warn"
    for hint in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "/dev/infiniband"):
        assert hint in transport.fix
    assert check(verdict, "nccl_transport", "cp1").status == "pass"


def test_old_or_different_nccl_versions_warn(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, nccl_version="2.28.9"),
                     make_arm("cp2", 2, 1.0, seed=2, nccl_version="2.17.1"))
    assert check(verdict, "nccl_version", "cp2").status == "warn"
    assert "NCCL >= 2.18" in check(verdict, "nccl_version", "cp2").fix
    assert check(verdict, "nccl_same_version:cp2 vs cp1").status == "warn"


# -- numerics ----------------------------------------------------------------------------------

def test_numerics_are_reported_and_gated_only_when_deterministic(make_arm):
    cp1 = make_arm("cp1", 1, 1.0, seed=1)
    cp2 = make_arm("cp2", 2, 1.0, seed=2, step_metrics={"train/grad_norm": 0.09})
    relaxed = decide(cp1, cp2)
    assert relaxed.status == v.PASS
    row = next(r for r in relaxed.numerics if r["metric"] == "train/grad_norm")
    assert row["step"] == 0 and row["abs_diff"] == pytest.approx(0.09 - 0.07986056034213801)
    assert row["rel_diff"] == pytest.approx((0.09 - 0.07986056034213801) / 0.07986056034213801)
    assert row["within_tolerance"] is False  # rel 12.7 % > 1 % and abs 0.010 > 0.01
    assert check(relaxed, "numerics:cp2 vs cp1").status == "skip"
    strict = decide(cp1, cp2, deterministic=True)
    assert strict.status == v.FAIL
    assert "train/grad_norm" in check(strict, "numerics:cp2 vs cp1").detail
    same = decide(cp1, make_arm("cp2", 2, 1.0, seed=2), deterministic=True)
    assert same.status == v.PASS and check(same, "numerics:cp2 vs cp1").status == "pass"


# -- several arms and comparisons --------------------------------------------------------------

def test_sweep_takes_the_worst_comparison_but_reports_the_primary_ratio(make_arm):
    cp1 = make_arm("cp1", 1, 1.0, seed=1)
    cp2 = make_arm("cp2", 2, 1.05, seed=2)
    cp4 = make_arm("cp4", 4, 2.5, seed=4, dp=1)
    verdict = decide(cp1, cp2, cp4, comparisons=[("cp1", "cp2"), ("cp1", "cp4")])
    assert [c.status for c in verdict.comparisons] == [v.PASS, v.FAIL]
    assert verdict.status == v.FAIL
    assert verdict.headline.startswith("FAIL — CP=4 actor_train ")
    assert "[primary CP=2 vs CP=1: PASS, actor_train 1.0" in verdict.headline
    data = verdict.to_json()
    assert data["primary_comparison"] == {"baseline": "cp1", "candidate": "cp2", "metric": v.PRIMARY_METRIC}
    assert data["ratio"] < 1.2  # the primary comparison's number
    assert check(verdict, "same_gpus:cp4 vs cp1").status == "warn"  # cp4 x dp1 = 4 GPUs, cp1 x dp2 = 2


def test_probe_arms_with_the_same_cp_are_labelled_by_name(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("probe-a", 2, 1.0, seed=2),
                     make_arm("probe-b", 2, 1.0, seed=3), comparisons=[("cp1", "probe-a"), ("cp1", "probe-b")])
    assert verdict.labels == {"cp1": "CP=1", "probe-a": "probe-a", "probe-b": "probe-b"}
    assert verdict.status == v.PASS and "probe-a actor_train" in verdict.headline


def test_an_arm_outside_every_comparison_still_counts(make_arm):
    log = synthetic_arm(cp=4, actor_train_time=1.0, seed=4)
    log.cuda_oom()
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2),
                     make_arm("cp4", 4, 1.0, seed=4, log=log))
    assert verdict.comparisons[0].status == v.PASS
    assert verdict.status == v.FAIL and "cp4" in verdict.headline


# -- error classes (on hand-built ParsedLogs: the classes come from the parser's vocabulary) ----

def _with_errors(log, *errors):
    parsed = log.expected()
    parsed.errors.extend(errors)
    return parsed


def test_fine_class_and_its_coarse_twin_make_one_check():
    cp2 = _with_errors(synthetic_arm(cp=2, actor_train_time=1.0, seed=2),
                       ErrorRecord("nccl_cuda_failure", 7, "NCCL WARN Cuda failure 'named symbol not found'",
                                   coarse="nccl_error"),
                       ErrorRecord("nccl_error", 7, "NCCL WARN Cuda failure 'named symbol not found'"))
    verdict = decide(v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()),
                     v.ArmEvidence("cp2", 2, cp2))
    names = [c.name for c in verdict.checks if c.name.startswith("error:")]
    assert names == ["error:nccl_cuda_failure"]
    assert "nccl_cuda_failure (nccl_error) at line 7" in check(verdict, "error:nccl_cuda_failure").detail
    assert verdict.status == v.FAIL


def test_benign_error_lines_warn_and_restarted_runs_are_inconclusive():
    cp1 = v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected())
    noisy = _with_errors(synthetic_arm(cp=2, actor_train_time=1.0, seed=2),
                         ErrorRecord("sglang_http_500", 3, '"POST /generate HTTP/1.1" 500 Internal Server Error'),
                         ErrorRecord("python_traceback", 9, "Traceback (most recent call last):"))
    verdict = decide(cp1, v.ArmEvidence("cp2", 2, noisy))
    assert verdict.status == v.PASS
    assert check(verdict, "error:sglang_http_500").status == "warn"
    assert all(e["fatal"] is False for e in verdict.to_json()["errors"])
    restarted = _with_errors(synthetic_arm(cp=2, actor_train_time=1.0, seed=2),
                             ErrorRecord("run_restarted", 50, "step 0 after step 7"))
    assert decide(cp1, v.ArmEvidence("cp2", 2, restarted)).status == v.INCONCLUSIVE


def test_unknown_error_class_fails_with_a_generic_fix():
    cp2 = _with_errors(synthetic_arm(cp=2, actor_train_time=1.0, seed=2), ErrorRecord("brand_new_failure", 4, "boom"))
    verdict = decide(v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()),
                     v.ArmEvidence("cp2", 2, cp2))
    assert verdict.status == v.FAIL
    assert "NCCL_DEBUG=INFO" in check(verdict, "error:brand_new_failure").fix


def test_empty_logs_are_inconclusive_not_pass():
    verdict = decide(v.ArmEvidence("cp1", 1, ParsedLog()), v.ArmEvidence("cp2", 2, ParsedLog()))
    assert verdict.status == v.INCONCLUSIVE
    assert verdict.to_json()["ratio"] is None


def test_nan_timings_are_ignored():
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2)
    parsed = log.expected()
    train = [p for p in parsed.perf if p.side == "train"]
    train[3].metrics["perf/actor_train_time"] = float("nan")
    verdict = decide(v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()),
                     v.ArmEvidence("cp2", 2, parsed))
    assert verdict.arms[1].metrics[v.PRIMARY_METRIC].n == 6
    assert 3 not in verdict.arms[1].counted_rollouts


# -- input validation --------------------------------------------------------------------------

def test_bad_comparisons_and_thresholds_are_input_errors():
    arm = v.ArmEvidence("cp1", 1, ParsedLog())
    with pytest.raises(InputError, match="unknown arm"):
        v.decide([arm], comparisons=[("cp1", "cp9")])
    with pytest.raises(InputError, match="share a name"):
        v.decide([arm, v.ArmEvidence("cp1", 2, ParsedLog())], comparisons=[("cp1", "cp1")])
    with pytest.raises(InputError, match="no comparison"):
        v.decide([arm], comparisons=[])
    with pytest.raises(InputError, match="pass ratio"):
        v.Thresholds(pass_ratio=0)
    with pytest.raises(InputError, match="confidence"):
        v.Thresholds(confidence=1.5)


def test_rule_states_the_thresholds():
    rule = v.decision_rule(v.Thresholds(pass_ratio=1.25, min_counted_steps=4, warmup=2, confidence=0.9))
    for text in ("1.25", "at least 4 counted steps", "rollouts >= 2", "90%", "perf/actor_train_time",
                 "FAIL > BLOCKED > INCONCLUSIVE > PASS"):
        assert text in rule


# -- the `cpverify verdict` command ------------------------------------------------------------

def _cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "cpverify", "verdict", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("factor", "rollouts", "status", "code"), [
    (1.05, 8, "PASS", EXIT_OK), (2.0, 8, "FAIL", EXIT_FAIL), (1.0, 3, "INCONCLUSIVE", EXIT_INCONCLUSIVE)])
def test_cli_writes_a_valid_bundle_and_exits_with_the_status(tmp_path, factor, rollouts, status, code):
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1, rollouts=rollouts).write(tmp_path / "a.log")
    cand = synthetic_arm(cp=2, actor_train_time=factor, seed=2, rollouts=rollouts).write(tmp_path / "b.log")
    out = tmp_path / "bundle"
    proc = _cli("--baseline", str(base), "--candidate", str(cand), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.startswith(f"{status} — ")
    for name in ("verdict.md", "verdict.json", "env.json", "commands.sh", "logs/cp1.log", "logs/cp2.log"):
        assert (out / name).is_file(), name
    data = json.loads((out / "verdict.json").read_text())
    jsonschema.validate(data, SCHEMA)
    assert data["status"] == status
    assert f"**{status}** — " in (out / "verdict.md").read_text()
    assert os.access(out / "commands.sh", os.X_OK)
    env = json.loads((out / "env.json").read_text())
    assert len(env["inputs"]["baseline"]["sha256"]) == 64


def test_cli_reproduces_its_verdict_from_the_bundle(tmp_path):
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "a.log")
    cand = synthetic_arm(cp=2, actor_train_time=1.05, seed=2).write(tmp_path / "b.log")
    out = tmp_path / "bundle"
    assert _cli("--baseline", str(base), "--candidate", str(cand), "--out", str(out), cwd=tmp_path).returncode == 0
    commands = (out / "commands.sh").read_text()
    assert "cpverify verdict --baseline logs/cp1.log --candidate logs/cp2.log" in commands
    replay = _cli("--baseline", "logs/cp1.log", "--candidate", "logs/cp2.log", "--out", "reproduced", cwd=out)
    assert replay.returncode == 0
    assert (json.loads((out / "reproduced" / "verdict.json").read_text())["ratio"]
            == json.loads((out / "verdict.json").read_text())["ratio"])


def test_cli_json_flag_and_unconfirmed_cp(tmp_path):
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1, layout_cp=None).write(tmp_path / "a.log")
    cand = synthetic_arm(cp=4, actor_train_time=1.0, seed=2, layout_cp=None).write(tmp_path / "b.log")
    proc = _cli("--baseline", str(base), "--candidate", str(cand), "--candidate-cp", "4", "--json",
                "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == EXIT_INCONCLUSIVE
    data = json.loads(proc.stdout)
    assert [(a["name"], a["cp_requested"], a["cp_effective"]) for a in data["arms"]] == [
        ("cp1", 1, "unconfirmed"), ("cp4", 4, "unconfirmed")]


def test_cli_missing_log_is_a_usage_error_with_a_fix(tmp_path):
    proc = _cli("--baseline", str(tmp_path / "nope.log"), "--candidate", str(tmp_path / "nope.log"),
                "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == EXIT_USAGE
    assert "nope.log" in proc.stderr and "fix:" in proc.stderr
    assert not (tmp_path / "o").exists()


# -- real logs from public issues (tests/data/real-logs): the verdict on what users actually paste --

REAL = ROOT / "tests" / "data" / "real-logs"


def _against_real(name):
    baseline = v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected())
    return decide(baseline, v.ArmEvidence("cp2", 2, parse_file(REAL / name)))


@pytest.mark.parametrize(("name", "cls", "line", "fix_hint"), [
    ("20_openrlhf-issue624-ray-prefixed-nccl-watchdog-timeout.log", "nccl_timeout", 2, "NCCL_DEBUG=INFO"),
    ("09_slime-issue1951-oom-compute-log-probs.log", "cuda_oom", 1, "--max-tokens-per-gpu"),
    ("24_slime-pr419-actordied-rolloutmanager-init.log", "ray_actor_died", 1, "first error above"),
    ("31_pai-megatron-patch-issue21-argparse-unrecognized-arguments.log", "argparse_unrecognized_arguments", 1,
     "cpverify lint"),
])
def test_real_failure_logs_fail_naming_class_and_line(name, cls, line, fix_hint):
    verdict = _against_real(name)
    assert verdict.status == v.FAIL
    found = check(verdict, f"error:{cls}", "cp2")
    assert f"at line {line}" in found.detail and fix_hint in found.fix
    assert cls in verdict.headline


def test_real_log_with_steps_but_no_perf_is_inconclusive_and_says_why():
    verdict = _against_real("02_slime-issue1136-cp-step11-train-metrics.log")
    assert verdict.status == v.INCONCLUSIVE
    assert "step lines but no train-side perf lines" in check(verdict, "counted_steps", "cp2").detail


def test_real_nccl_logs_feed_the_transport_and_version_checks():
    ib = _against_real("14_nccl-issue1189-h20-net-ib-gdrdma-and-p2p-cumem.log")
    assert check(ib, "nccl_transport", "cp2").status == "pass"  # IB with GDRDMA and P2P: no TCP fallback
    socket_only = _against_real("12_nccl-issue1267-debug-info-net-socket.log")
    # "Using network Socket" without channel lines is not evidence of a TCP fallback
    assert check(socket_only, "nccl_transport", "cp2").status == "skip"
    assert check(socket_only, "nccl_same_version:cp2 vs cp1").status == "warn"  # 2.19.3 vs the baseline's 2.28.9


@pytest.mark.parametrize("cls", sorted(ERROR_LINES))
def test_builder_error_lines_are_classified_as_the_builder_says(tmp_path, cls):
    """The helper's failure lines (used by other tests) carry the class the real parser gives them."""
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2)
    line = log.error(cls)
    parsed = parse_file(log.write(tmp_path / "cp2.log"))
    assert (cls, line) in {(e.cls, e.line) for e in parsed.errors}
    verdict = decide(v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()),
                     v.ArmEvidence("cp2", 2, parsed))
    assert verdict.status == v.FAIL and check(verdict, f"error:{cls}", "cp2").fix


def test_a_custom_primary_metric_is_summarised_and_gated(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2),
                     primary_metric="perf/update_weights_time")
    assert verdict.status == v.PASS  # the builder's update_weights_time is equal in both arms
    assert verdict.to_json()["ratio"] == pytest.approx(1.0)
    assert "update_weights 1.00×" in verdict.headline
