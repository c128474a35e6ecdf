"""cpverify.verdict: the decision rule, on synthetic slime logs.

slime cannot run here (no GPUs), so the arms are synthetic logs written by
tests/helpers/slime_log.py in slime's exact line formats with seeded +/-5% jitter.
Every scenario runs twice: on the builder's ground-truth ParsedLog (the verdict alone)
and end to end through the real parser, cpverify.parse.parse_file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from cpverify import fixes
from cpverify import verdict as v
from cpverify.errors import EXIT_BLOCKED, EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_OK, EXIT_USAGE, InputError
from cpverify.fixes import (
    FIX_COLLECT,
    FIX_CP_NOT_APPLIED,
    FIX_DAMAGED_TIMINGS,
    FIX_INCOMPLETE,
    FIX_MORE_ROUNDS,
    FIX_OLD_STACK,
    FIX_SOCKETS_SEEN,
    FIX_TRANSPORT,
    NO_LAYOUT,
    PER_PHASE,
    fix_more_steps,
    fix_slow_cp,
)
from cpverify.model import ArmResult
from cpverify.parse import ErrorRecord, ParsedLog, parse_file
from helpers.slime_log import ERROR_LINES, SlimeLog, synthetic_arm

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "cpverify" / "data" / "verdict.schema.json").read_text())


# Rounds per arm (separate processes) that let the between-round interval decide a 5% effect against
# 1.3, as `cpverify run` gives them; one round alone shows no spread between processes, and its
# interval (the recorded prior's) is too wide to decide that (test_rounds_run, test_rounds).
ROUNDS = 4


@pytest.fixture(params=["truth", "parsed"])
def make_arm(request, tmp_path):
    """make_arm(name, cp, factor, ...) -> the arm's rounds (ArmEvidence each), from ground truth or
    through the real parser: `rounds` logs of the arm, each with its own seed (the same log each
    round when `log` is given)."""

    def make(name, cp, factor, *, seed, result=None, log=None, rounds=ROUNDS, **kwargs):
        found = []
        for k in range(1, rounds + 1):
            text = log or synthetic_arm(cp=cp, actor_train_time=factor, seed=seed + 1000 * (k - 1), **kwargs)
            round_name = name if k == 1 else f"{name}.r{k}"
            if request.param == "truth":
                parsed = text.expected()
            else:
                parsed = parse_file(text.write(tmp_path / f"{round_name}.log"))
            found.append(v.ArmEvidence(round_name, cp, parsed, result, arm=name, round=k))
        return found

    make.source = request.param
    return make


def decide(*arms, comparisons=(("cp1", "cp2"),), workload="slime", **thresholds):
    """The verdict over the arms given (each an ArmEvidence or a list of its rounds)."""
    evidence = [ev for arm in arms for ev in (arm if isinstance(arm, list) else [arm])]
    verdict = v.decide(evidence, comparisons=list(comparisons), thresholds=v.Thresholds(**thresholds),
                       workload=workload)
    jsonschema.validate(json.loads(json.dumps(verdict.to_json())), SCHEMA)  # every verdict fits the contract
    assert_headline_counts_every_failed_check(verdict)
    return verdict


def assert_headline_counts_every_failed_check(verdict):
    """The headline tells one failed check and counts all the others, by the status each forces."""
    failed = [c for c in verdict.checks if c.effect]
    assert (verdict.status == v.PASS) == (not failed)
    more = re.search(r" \(\+(\d+) more failed checks?: ([^;]+); see checks\)", verdict.headline)
    assert (int(more.group(1)) if more else 0) == max(0, len(failed) - 1), verdict.headline
    if more:
        told = dict(reversed(part.split(" ")) for part in more.group(2).split(", "))
        assert sum(map(int, told.values())) == len(failed) - 1
        assert set(told) <= {c.effect for c in failed}


def replicated(name, cp, parsed, result=None, rounds=ROUNDS):
    """`rounds` rounds of one arm that all printed `parsed` (rounds with no spread between them)."""
    return [v.ArmEvidence(name if k == 1 else f"{name}.r{k}", cp, parsed, result, arm=name, round=k)
            for k in range(1, rounds + 1)]


def arm_named(verdict, name):
    return next(a for a in verdict.arms if a.name == name)


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
    assert verdict.told is None and data["thresholds"]["pass_ratio"] == 1.3
    assert [a["counted_steps"] for a in data["arms"]] == [7] * (2 * ROUNDS)  # every round's steps count
    assert all(c.status in ("pass", "skip") for c in verdict.checks)
    cp2 = next(arm for arm in data["arms"] if arm["name"] == "cp2")
    values = cp2["values"][v.PRIMARY_METRIC]
    assert len(values) == 7 and min(values) > 0.9 and cp2["counted_rollouts"] == list(range(1, 8))
    assert data["rounds"]["per_arm"] == {"cp1": ROUNDS, "cp2": ROUNDS} and data["rounds"]["measured"]


def test_twice_as_slow_fails_with_the_troubleshooting_fix(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 2.0, seed=2))
    assert verdict.status == v.FAIL and verdict.exit_code == EXIT_FAIL
    assert 1.3 < verdict.to_json()["ratio_ci"][0] and 1.8 < verdict.to_json()["ratio"]
    speed = check(verdict, "speed:cp2 vs cp1")
    assert speed.status == "fail" and speed.effect == v.FAIL
    assert PER_PHASE["slime"] in speed.fix  # what to read next (the transport's advice: the tests below)
    assert verdict.told is speed and verdict.to_json()["decided_by"]["ci"][0] > 1.3  # the whole interval is above


def test_nccl_watchdog_timeout_fails_naming_the_class_and_line(make_arm):
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2)
    line = log.nccl_watchdog_timeout()
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2, log=log))
    assert verdict.status == v.FAIL
    error = check(verdict, "error:nccl_timeout", "cp2")
    assert error.effect == v.FAIL and error.fix == fixes.for_error("nccl_timeout") and verdict.told is error
    assert {"arm": "cp2", "class": "nccl_timeout", "line": line}.items() <= verdict.to_json()["errors"][0].items()


def test_two_counted_steps_are_inconclusive(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, rollouts=3), make_arm("cp2", 2, 1.0, seed=2, rollouts=3))
    assert verdict.status == v.INCONCLUSIVE and verdict.exit_code == EXIT_INCONCLUSIVE
    steps = check(verdict, "counted_steps", "cp2")
    assert steps.effect == v.INCONCLUSIVE and fix_more_steps("slime") in steps.fix
    assert arm_named(verdict, "cp2").counted_rollouts == [1, 2]
    assert verdict.to_json()["ratio_ci"] is None
    assert verdict.told.name == "counted_steps"


def test_cp_that_did_not_take_effect_fails(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2, layout_cp=1))
    assert verdict.status == v.FAIL
    cp = check(verdict, "cp_effective", "cp2")
    assert cp.effect == v.FAIL and cp.fix == FIX_CP_NOT_APPLIED and verdict.told is cp
    assert verdict.to_json()["arms"][1]["cp_effective"] == 1


def test_blocked_arm_is_blocked_with_its_fix(make_arm):
    blocked = ArmResult("cp2", "blocked", None, Path("cp2.log"), 0.0, reason="no NVIDIA container runtime",
                        fix="install nvidia-container-toolkit and restart Docker")
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, result=ok_result("cp1")),
                     v.ArmEvidence("cp2", 2, ParsedLog(), blocked))
    assert verdict.status == v.BLOCKED and verdict.exit_code == EXIT_BLOCKED
    runner = check(verdict, "runner", "cp2")
    assert runner.effect == v.BLOCKED and runner.fix == "install nvidia-container-toolkit and restart Docker"
    assert verdict.told is runner
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
    assert runner.effect == v.FAIL and arm_named(verdict, "cp2").outcome == outcome
    assert runner.fix == fixes.for_outcome(outcome) and verdict.told is runner


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
    assert verdict.told is check(verdict, "error:cuda_oom") and verdict.told.fix == fixes.for_error("cuda_oom")


# -- effective CP ------------------------------------------------------------------------------

def test_unconfirmed_cp_never_passes(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2, layout_cp=None))
    assert verdict.status == v.INCONCLUSIVE
    cp = check(verdict, "cp_effective", "cp2")
    assert cp.effect == v.INCONCLUSIVE and cp.fix == NO_LAYOUT["slime"]
    assert arm_named(verdict, "cp2").to_json()["cp_effective"] == "unconfirmed"


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
    speed = check(verdict, "speed:cp2 vs cp1")
    assert verdict.told is speed and speed.effect == v.INCONCLUSIVE and speed.fix == FIX_MORE_ROUNDS


def test_warmup_rollouts_are_not_counted(make_arm):
    # rollout 0 is 3x slower (compile + NCCL init) in both arms, but 10x in the candidate: excluded, it cannot matter
    cp1 = make_arm("cp1", 1, 1.0, seed=1)
    cp2 = make_arm("cp2", 2, 1.0, seed=2, warmup_factor=10.0)
    verdict = decide(cp1, cp2)
    assert verdict.status == v.PASS
    assert arm_named(verdict, "cp2").counted_rollouts == list(range(1, 8))
    with_warmup = decide(cp1, cp2, warmup=0)
    assert arm_named(with_warmup, "cp2").metrics[v.PRIMARY_METRIC].n == 8
    assert arm_named(with_warmup, "cp2").metrics[v.PRIMARY_METRIC].max > 5


def test_a_rollout_printed_twice_alike_counts_once(make_arm):
    plain = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2))
    duplicated = decide(make_arm("cp1", 1, 1.0, seed=1, duplicate_pids=(32168,)),
                        make_arm("cp2", 2, 1.0, seed=2, duplicate_pids=(32168, 32169)))
    for arm_plain, arm_dup in zip(plain.arms, duplicated.arms, strict=True):
        assert arm_dup.metrics[v.PRIMARY_METRIC] == arm_plain.metrics[v.PRIMARY_METRIC]
    assert duplicated.to_json()["ratio_ci"] == plain.to_json()["ratio_ci"]
    assert duplicated.status == v.PASS and not [c for c in duplicated.checks if c.name == "consistent"]


def test_secondary_metrics_are_compared_and_warn_only(make_arm):
    # actor_train about equal, log_probs and ref_log_probs twice as slow: a warning, never the decision
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.05, seed=2, secondary=2.0))
    comparison = verdict.to_json()["comparisons"][0]
    assert set(comparison["metrics"]) == set(v.TIMING_METRICS)
    for metric in ("perf/log_probs_time", "perf/ref_log_probs_time"):
        assert comparison["metrics"][metric]["ci"][0] > 1.3 and comparison["metrics"][metric]["ratio"] > 1.8
        warned = check(verdict, f"speed:{v.short_metric(metric)}:cp2 vs cp1")
        assert warned.status == "warn" and warned.effect is None and PER_PHASE["slime"] in warned.fix
    assert verdict.status == v.PASS
    assert check(verdict, "speed:cp2 vs cp1").status == "pass"


# -- NCCL --------------------------------------------------------------------------------------

def test_tcp_socket_transport_warns_with_the_transport_fix(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.05, seed=2, transport="NET/Socket/0"))
    assert verdict.status == v.PASS  # a warning explains, it does not decide
    transport = check(verdict, "nccl_transport", "cp2")
    assert transport.status == "warn"
    assert transport.fix == FIX_SOCKETS_SEEN
    assert check(verdict, "nccl_transport", "cp1").status == "pass"


def test_old_or_different_nccl_versions_warn(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, nccl_version="2.28.9"),
                     make_arm("cp2", 2, 1.0, seed=2, nccl_version="2.17.1"))
    assert check(verdict, "nccl_version", "cp2").status == "warn"
    assert check(verdict, "nccl_version", "cp2").fix == FIX_OLD_STACK
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
    assert check(strict, "numerics:cp2 vs cp1").effect == v.FAIL and strict.told.name == "numerics:cp2 vs cp1"
    assert {r["metric"] for r in strict.numerics if not r["within_tolerance"]} == {"train/grad_norm"}
    same = decide(cp1, make_arm("cp2", 2, 1.0, seed=2), deterministic=True)
    assert same.status == v.PASS and check(same, "numerics:cp2 vs cp1").status == "pass"


# -- several arms and comparisons --------------------------------------------------------------

def test_sweep_takes_the_worst_comparison_but_reports_the_primary_ratio(make_arm):
    cp1 = make_arm("cp1", 1, 1.0, seed=1, dp=4)  # four GPUs each: DP absorbs CP
    cp2 = make_arm("cp2", 2, 1.05, seed=2, dp=2)
    cp4 = make_arm("cp4", 4, 2.5, seed=4, dp=1)
    verdict = decide(cp1, cp2, cp4, comparisons=[("cp1", "cp2"), ("cp1", "cp4")])
    assert [c.status for c in verdict.comparisons] == [v.PASS, v.FAIL]
    assert verdict.status == v.FAIL
    assert verdict.headline.startswith("FAIL — CP=4 actor_train ")
    assert verdict.told is check(verdict, "speed:cp4 vs cp1")  # the worst comparison's story
    data = verdict.to_json()
    assert data["primary_comparison"] == {"baseline": "cp1", "candidate": "cp2", "metric": v.PRIMARY_METRIC}
    assert data["ratio"] < 1.2  # the primary comparison's number
    assert [c.status for c in verdict.checks if c.name.startswith("same_gpus")] == ["pass", "pass"]  # 4 GPUs each


# -- the arms must run the same job but for CP: else the ratio says nothing, PASS least of all ----------

ARGS = {"seq_length": 4096, "rollout_max_response_len": 1024, "max_tokens_per_gpu": 1088, "num_layers": 24,
        "tensor_model_parallel_size": 1, "load": "/ckpt/qwen", "seed": 1234, "wandb_project": "cp"}


def test_arms_on_different_numbers_of_gpus_are_not_compared(make_arm):
    """CP=2 on four GPUs against CP=1 on two looks cheap: that is no CP comparison."""
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, dp=2), make_arm("cp2", 2, 0.5, seed=2, dp=2))
    assert verdict.status == v.INCONCLUSIVE
    assert check(verdict, "same_gpus:cp2 vs cp1").effect == v.INCONCLUSIVE
    assert check(verdict, "speed:cp2 vs cp1").status == "skip"
    assert verdict.told is check(verdict, "same_gpus:cp2 vs cp1")
    assert [a.layout["cp"] * a.layout["dp"] for a in verdict.per_arm()] == [2, 4]  # GPUs (tp = pp = 1)


@pytest.mark.parametrize(("changed", "value"), [("rollout_max_response_len", 32768), ("max_tokens_per_gpu", 32832),
                                               ("num_layers", 2), ("seq_length", 32768)])
@pytest.mark.parametrize("factor", [0.3, 1.0, 3.0])
def test_arms_that_ran_different_jobs_are_inconclusive_whatever_the_ratio(make_arm, changed, value, factor):
    cp1 = make_arm("cp1", 1, 1.0, seed=1, arguments=ARGS)
    cp2 = make_arm("cp2", 2, factor, seed=2, arguments={**ARGS, changed: value})
    verdict = decide(cp1, cp2)
    assert verdict.status == v.INCONCLUSIVE
    same = check(verdict, "same_workload:cp2 vs cp1")
    assert same.effect == v.INCONCLUSIVE and verdict.told is same and check(verdict, "speed:cp2 vs cp1").status == "skip"
    # no structured field names the differing argument: the row's text is where the reader finds it
    assert f"{changed} {ARGS[changed]} vs {value}" in same.detail


def test_arms_that_differ_only_in_cp_and_its_bookkeeping_are_the_same_job(make_arm):
    handoff = "/w/grad-norm-{role}-{rollout_id}-{step_id}.pt"
    cp1 = make_arm("cp1", 1, 1.0, seed=1, arguments={**ARGS, "ci_save_grad_norm": handoff, "ci_load_grad_norm": None})
    cp2 = make_arm("cp2", 2, 1.0, seed=2, arguments={**ARGS, "ci_save_grad_norm": None, "ci_load_grad_norm": handoff,
                                                     "cp_comm_type": "a2a"})
    verdict = decide(cp1, cp2)
    assert verdict.status == v.PASS and check(verdict, "same_workload:cp2 vs cp1").status == "pass"


def test_arms_that_differ_in_paths_seed_or_logging_are_compared_with_a_warning(make_arm):
    cp1 = make_arm("cp1", 1, 1.0, seed=1, arguments=ARGS)
    cp2 = make_arm("cp2", 2, 1.0, seed=2, arguments={**ARGS, "load": "/other/qwen", "seed": 42, "wandb_project": "x"})
    verdict = decide(cp1, cp2)
    same = check(verdict, "same_workload:cp2 vs cp1")
    assert verdict.status == v.PASS and same.status == "warn" and same.effect is None
    # no structured field names the differing argument: the row's text is where the reader finds it
    assert "load /ckpt/qwen vs /other/qwen" in same.detail


def test_a_secret_argument_is_never_compared_or_shown(make_arm):
    cp1 = make_arm("cp1", 1, 1.0, seed=1, arguments={**ARGS, "wandb_key": "k-one-1234567"})
    cp2 = make_arm("cp2", 2, 1.0, seed=2, arguments={**ARGS, "wandb_key": "k-two-7654321"})
    verdict = decide(cp1, cp2)
    assert verdict.status == v.PASS
    assert "k-one" not in json.dumps(verdict.to_json()) and "k-two" not in json.dumps(verdict.to_json())


def test_logs_without_the_argument_dump_are_judged_on_their_work_per_step(make_arm):
    one_dump = decide(make_arm("cp1", 1, 1.0, seed=1, arguments=ARGS), make_arm("cp2", 2, 1.0, seed=2))
    neither = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2))
    for verdict in (one_dump, neither):
        same = check(verdict, "same_workload:cp2 vs cp1")
        # that the work per step was compared (no dump to compare) only the row's text says
        assert verdict.status == v.PASS and same.status == "pass" and "tokens per step" in same.detail


def test_probe_arms_with_the_same_cp_are_labelled_by_name(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("probe-a", 2, 1.0, seed=2),
                     make_arm("probe-b", 2, 1.0, seed=3), comparisons=[("cp1", "probe-a"), ("cp1", "probe-b")])
    assert {name: verdict.labels[name] for name in ("cp1", "probe-a", "probe-b")} == {
        "cp1": "CP=1", "probe-a": "probe-a", "probe-b": "probe-b"}
    assert verdict.labels["probe-a.r2"] == "probe-a round 2"
    assert verdict.status == v.PASS and verdict.told is None


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
    assert [(e["class"], e["line"]) for e in verdict.to_json()["errors"]] == [("nccl_cuda_failure", 7)]
    assert check(verdict, "error:nccl_cuda_failure").fix == fixes.for_error("nccl_cuda_failure")
    assert verdict.status == v.FAIL


def test_benign_error_lines_warn_and_restarted_runs_are_inconclusive():
    cp1 = replicated("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected())
    noisy = _with_errors(synthetic_arm(cp=2, actor_train_time=1.0, seed=2),
                         ErrorRecord("sglang_http_500", 3, '"POST /generate HTTP/1.1" 500 Internal Server Error'),
                         ErrorRecord("python_traceback", 9, "Traceback (most recent call last):"))
    verdict = decide(cp1, replicated("cp2", 2, noisy))
    assert verdict.status == v.PASS
    assert check(verdict, "error:sglang_http_500").status == "warn"
    assert all(e["fatal"] is False for e in verdict.to_json()["errors"])
    restarted = _with_errors(synthetic_arm(cp=2, actor_train_time=1.0, seed=2),
                             ErrorRecord("run_restarted", 50, "step 0 after step 7"))
    assert decide(cp1, replicated("cp2", 2, restarted)).status == v.INCONCLUSIVE


def test_unknown_error_class_fails_with_a_generic_fix():
    cp2 = _with_errors(synthetic_arm(cp=2, actor_train_time=1.0, seed=2), ErrorRecord("brand_new_failure", 4, "boom"))
    verdict = decide(v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()),
                     v.ArmEvidence("cp2", 2, cp2))
    assert verdict.status == v.FAIL
    assert check(verdict, "error:brand_new_failure").fix == fixes.FIX_ERROR_DEFAULT


def test_empty_logs_are_inconclusive_not_pass():
    verdict = decide(v.ArmEvidence("cp1", 1, ParsedLog()), v.ArmEvidence("cp2", 2, ParsedLog()))
    assert verdict.status == v.INCONCLUSIVE
    assert verdict.to_json()["ratio"] is None


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0, -1.0])
def test_a_timing_that_is_not_a_duration_is_left_out_and_never_passes(bad):
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2)
    parsed = log.expected()
    train = [p for p in parsed.perf if p.side == "train"]
    train[3].metrics["perf/actor_train_time"] = bad
    verdict = decide(v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()),
                     v.ArmEvidence("cp2", 2, parsed))
    assert verdict.arms[1].metrics[v.PRIMARY_METRIC].n == 6
    assert 3 not in verdict.arms[1].counted_rollouts
    assert verdict.status == v.INCONCLUSIVE
    timings = check(verdict, "timings", "cp2")
    assert timings.effect == v.INCONCLUSIVE and timings.fix == FIX_DAMAGED_TIMINGS and verdict.told is timings


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
    rule = v.decision_rule(v.Thresholds(pass_ratio=1.25, min_counted_steps=7, warmup=2, confidence=0.9))
    for text in ("1.25", "at least 7 counted steps", "rollouts >= 2", "90%", "perf/actor_train_time",
                 "FAIL > BLOCKED > INCONCLUSIVE > PASS"):
        assert text in rule


# -- the `cpverify verdict` command ------------------------------------------------------------

def _rounds(tmp_path, stem, *, cp, factor, rounds=ROUNDS, seed=1, **kwargs) -> list[str]:
    """One arm's rounds, each its own log (its own seed), as `cpverify verdict` takes them."""
    return [str(synthetic_arm(cp=cp, actor_train_time=factor, seed=seed + 1000 * k, **kwargs)
                .write(tmp_path / f"{stem}-r{k + 1}.log")) for k in range(rounds)]


def _each(option: str, paths: list[str]) -> list[str]:
    return [word for path in paths for word in (option, path)]


def _cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "cpverify", "verdict", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("factor", "rollouts", "status", "code"), [
    (1.05, 8, "PASS", EXIT_OK), (2.0, 8, "FAIL", EXIT_FAIL), (1.0, 3, "INCONCLUSIVE", EXIT_INCONCLUSIVE)])
def test_cli_writes_a_valid_bundle_and_exits_with_the_status(tmp_path, factor, rollouts, status, code):
    base = _rounds(tmp_path, "a", cp=1, factor=1.0, seed=1, rollouts=rollouts)
    cand = _rounds(tmp_path, "b", cp=2, factor=factor, seed=2, rollouts=rollouts)
    out = tmp_path / "bundle"
    proc = _cli(*_each("--baseline", base), *_each("--candidate", cand), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.startswith(f"{status} — ")
    logs = [f"logs/{arm}{'' if k == 1 else f'.r{k}'}.log" for arm in ("cp1", "cp2") for k in range(1, ROUNDS + 1)]
    for name in ("verdict.md", "verdict.json", "env.json", "commands.sh", *logs):
        assert (out / name).is_file(), name
    data = json.loads((out / "verdict.json").read_text())
    jsonschema.validate(data, SCHEMA)
    assert data["status"] == status
    assert f"**{status}** — " in (out / "verdict.md").read_text()
    assert os.access(out / "commands.sh", os.X_OK)
    env = json.loads((out / "env.json").read_text())
    assert len(env["inputs"]["baseline"]["sha256"]) == 64


def test_cli_reproduces_its_verdict_from_the_bundle(tmp_path):
    base = _rounds(tmp_path, "a", cp=1, factor=1.0, seed=1, rounds=2)
    cand = _rounds(tmp_path, "b", cp=2, factor=1.05, seed=2, rounds=2)
    out = tmp_path / "bundle"
    first = _cli(*_each("--baseline", base), *_each("--candidate", cand), "--out", str(out), cwd=tmp_path)
    assert first.returncode in (EXIT_OK, EXIT_INCONCLUSIVE), first.stderr
    commands = (out / "commands.sh").read_text()
    bundled = ("--baseline logs/cp1.log --baseline logs/cp1.r2.log --candidate logs/cp2.log "
               "--candidate logs/cp2.r2.log")
    assert f"cpverify verdict {bundled}" in commands
    replay = _cli(*bundled.split(), "--out", "reproduced", cwd=out)
    assert replay.returncode == first.returncode
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


@pytest.mark.parametrize(("name", "cls", "line"), [
    ("20_openrlhf-issue624-ray-prefixed-nccl-watchdog-timeout.log", "nccl_timeout", 2),
    ("09_slime-issue1951-oom-compute-log-probs.log", "cuda_oom", 1),
    ("24_slime-pr419-actordied-rolloutmanager-init.log", "ray_actor_died", 1),
    ("31_pai-megatron-patch-issue21-argparse-unrecognized-arguments.log", "argparse_unrecognized_arguments", 1),
])
def test_real_failure_logs_fail_naming_class_and_line(name, cls, line):
    verdict = _against_real(name)
    assert verdict.status == v.FAIL
    found = check(verdict, f"error:{cls}", "cp2")
    assert found.fix == fixes.for_error(cls) and verdict.told is found
    assert {"arm": "cp2", "class": cls, "line": line}.items() <= verdict.to_json()["errors"][0].items()


def test_real_log_with_steps_but_no_perf_is_inconclusive_and_says_why():
    verdict = _against_real("02_slime-issue1136-cp-step11-train-metrics.log")
    assert verdict.status == v.INCONCLUSIVE
    assert check(verdict, "counted_steps", "cp2").effect == v.INCONCLUSIVE
    parsed = parse_file(REAL / "02_slime-issue1136-cp-step11-train-metrics.log")
    assert parsed.steps and not parsed.perf  # the case the row explains (its wording: tests/golden/wording)


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
    assert verdict.status == v.PASS  # update_weights_time is equal in both arms
    assert verdict.to_json()["ratio"] == pytest.approx(1.0)
    assert verdict.to_json()["primary_comparison"]["metric"] == "perf/update_weights_time"
    # the gate is on the chosen metric: update_weights 2x slower FAILs while actor_train is equal
    slower = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2, update_weights_time=0.66),
                    primary_metric="perf/update_weights_time")
    assert slower.status == v.FAIL and slower.to_json()["ratio"] == pytest.approx(2.0)
    assert slower.told is check(slower, "speed:cp2 vs cp1")  # the gate that failed is the chosen metric's
    assert slower.comparisons[0].metrics[v.PRIMARY_METRIC].ci[1] < 1.3  # actor_train alone would PASS


# -- no wrong PASS: a verdict that could not measure CP never passes ----------------------------------

@pytest.mark.parametrize("arm", ["cp1", "cp2"])
@pytest.mark.parametrize("timing", [-1.0, 0.0, float("nan"), float("inf")])
def test_timings_that_are_not_durations_never_pass_in_either_arm(make_arm, arm, timing):
    """A negated or zero actor_train gives no ratio: the arm's timings row decides INCONCLUSIVE."""
    times = [timing] * 8
    arms = {name: make_arm(name, cp, 1.0, seed=cp, **({"times": times} if name == arm else {}))
            for name, cp in (("cp1", 1), ("cp2", 2))}
    verdict = decide(arms["cp1"], arms["cp2"])
    assert verdict.status == v.INCONCLUSIVE and verdict.to_json()["ratio"] is None
    assert check(verdict, "timings", arm).effect == v.INCONCLUSIVE
    assert verdict.told.name == "timings" and verdict.told.arm.split(".")[0] == arm


def test_a_swapped_pair_is_judged_as_the_larger_cp_against_the_smaller(make_arm):
    """(cp2, cp1) is judged as (cp1, cp2): a CP=2 twice as slow FAILs whichever order the pair is given in."""
    cp1, cp2 = make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 2.0, seed=2)
    swapped = decide(cp2, cp1, comparisons=[("cp2", "cp1")])
    straight = decide(cp1, cp2)
    assert swapped.status == straight.status == v.FAIL
    assert swapped.to_json()["ratio"] == straight.to_json()["ratio"] > 1.8
    assert swapped.to_json()["primary_comparison"] == {"baseline": "cp1", "candidate": "cp2",
                                                       "metric": v.PRIMARY_METRIC}
    assert swapped.headline.startswith("FAIL — CP=2 actor_train 2.")


def test_a_pair_of_equal_cps_verifies_nothing():
    """Two arms at one CP compare no CP: an input error, before any verdict."""
    arm = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()
    with pytest.raises(InputError, match="both arms requested CP=1") as raised:
        v.decide([v.ArmEvidence("a", 1, arm), v.ArmEvidence("b", 1, arm)], comparisons=[("a", "b")])
    assert raised.value.exit_code == EXIT_USAGE and "--candidate-cp 2" in raised.value.fix  # the fix to type


def test_an_arm_cut_mid_step_is_not_clean(make_arm):
    """A CP=2 log ending after `Timer actor_train start` is unfinished: INCONCLUSIVE, whatever its steps."""
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, rollouts=7)
    line = log.cut_mid_step(7)
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2, log=log))
    assert verdict.status == v.INCONCLUSIVE
    complete = check(verdict, "complete", "cp2")
    assert complete.effect == v.INCONCLUSIVE and complete.fix == FIX_INCOMPLETE and verdict.told is complete
    assert ("actor_train", line) in log.expected().timers_open  # the open step the row names
    # slime leaves train_wait open at the end of every complete log: that is not a cut
    assert check(verdict, "complete", "cp1").status == "pass"


def test_an_arm_short_of_its_planned_rollouts_is_not_clean(make_arm):
    cp1 = make_arm("cp1", 1, 1.0, seed=1)
    cp2 = make_arm("cp2", 2, 1.0, seed=2, rollouts=7)  # 6 counted steps: enough for an interval
    assert decide(cp1, cp2).status == v.PASS  # nobody said how many were planned
    for ev in cp1 + cp2:
        ev.expected_rollouts = 8
    verdict = decide(cp1, cp2)
    assert verdict.status == v.INCONCLUSIVE
    complete = check(verdict, "complete", "cp2")
    assert complete.effect == v.INCONCLUSIVE and complete.fix == FIX_INCOMPLETE
    assert 7 not in arm_named(verdict, "cp2").counted_rollouts  # the planned rollout with no record
    assert check(verdict, "complete", "cp1").status == "pass"


# -- every row says what it means for the status ---------------------------------------------------

def test_a_failed_row_always_names_the_status_it_forces():
    with pytest.raises(ValueError):
        v.Check("x", "fail", "detail", "fix")  # a "fail" that forces nothing
    with pytest.raises(ValueError):
        v.Check("x", "warn", "detail", "fix", effect=v.FAIL)  # a "warn" that forces FAIL
    assert v.Check("x", "fail", "d", "f", effect=v.INCONCLUSIVE).meaning == v.INCONCLUSIVE
    assert v.Check("x", "warn", "d", "f").meaning == "warning"


def test_an_inconclusive_speed_row_says_inconclusive(make_arm, tmp_path):
    from cpverify import report

    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, jitter=0.2), make_arm("cp2", 2, 1.3, seed=2, jitter=0.2))
    assert verdict.status == v.INCONCLUSIVE
    md = report.render_markdown(verdict)
    row = next(line for line in md.splitlines() if "`speed:cp2 vs cp1`" in line)
    assert row.startswith("- ❔ ") and "❌" not in md
    assert check(verdict, "speed:cp2 vs cp1").meaning == v.INCONCLUSIVE  # the summary's wording: golden/wording


@pytest.mark.parametrize("workload", ["slime", "probe"])
def test_a_blocked_verdict_lists_no_fail_row_and_no_workload_advice_for_a_host_without_gpus(workload):
    """Nothing ran: the rows say BLOCKED or 'not judged', and no fix talks about rollouts or hooks."""
    blocked = [v.ArmEvidence(name, cp, ParsedLog(), ArmResult(name, "blocked", None, Path(f"{name}.log"), 0.0,
                                                              reason="no NVIDIA GPU on this host",
                                                              fix="run on a host with NVIDIA GPUs"))
               for name, cp in (("cp1", 1), ("cp2", 2))]
    verdict = decide(*blocked, workload=workload)
    assert verdict.status == v.BLOCKED
    assert {c.meaning for c in verdict.checks} <= {v.BLOCKED, "not judged"}
    assert check(verdict, "speed:cp2 vs cp1").meaning == "not judged"
    from cpverify import report

    text = report.render_summary(verdict) + report.render_markdown(verdict)
    for slime_advice in ("--num-rollout", "--custom-megatron-init-path", "perf N:"):
        assert slime_advice not in text
    # the rule line may name FAIL; no check row (a line that starts with its status) may say it
    assert not [line for line in report.render_summary(verdict).splitlines() if line.lstrip().startswith("FAIL ")]


def test_probe_arms_get_probe_advice():
    short = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, rollouts=3, layout_cp=None).expected()
    verdict = decide(v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()),
                     v.ArmEvidence("cp2", 2, short), workload="probe")
    fixes = " ".join(c.fix for c in verdict.checks)
    assert fix_more_steps("probe") in check(verdict, "counted_steps", "cp2").fix
    assert check(verdict, "cp_effective", "cp2").fix == NO_LAYOUT["probe"]
    assert "--num-rollout" not in fixes and "--custom-megatron-init-path" not in fixes
    assert verdict.to_json()["workload"] == "probe"


def test_the_headline_counts_every_other_failed_check(make_arm):
    """The headline tells one failed check and counts every other, in every comparison and none."""
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, rollouts=3, layout_cp=None)
    log.cuda_oom()
    cp4 = synthetic_arm(cp=4, actor_train_time=1.0, seed=4, rollouts=3)
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1, rounds=1), make_arm("cp2", 2, 1.0, seed=2, log=log, rounds=1),
                     make_arm("cp4", 4, 1.0, seed=4, log=cp4, rounds=1))
    # cp2: cuda_oom (FAIL), unconfirmed CP and 2 counted steps (INCONCLUSIVE); cp4 (in no comparison): 2 steps
    assert verdict.status == v.FAIL and (verdict.told.name, verdict.told.arm) == ("error:cuda_oom", "cp2")
    # decide() checks the headline's count against these (assert_headline_counts_every_failed_check)
    assert [c.effect for c in verdict.checks if c.effect and c is not verdict.told] == [v.INCONCLUSIVE] * 3


# -- a failed arm shows its evidence ---------------------------------------------------------------

def test_a_failed_arm_shows_the_lines_before_its_error_redacted(tmp_path):
    from cpverify import report

    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, rollouts=4)
    log.raw("(MegatronTrainRayActor pid=1) loading /home/alice/ckpt with HF_TOKEN=hf_" + "a1B2" * 9)
    line = log.nccl_watchdog_timeout()
    log.raw("(MegatronTrainRayActor pid=1) a line after the error")
    path = log.write(tmp_path / "cp2.log")
    result = ArmResult("cp2", "fatal", None, path, 30.0, reason="nccl_timeout")
    verdict = decide(v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()),
                     v.ArmEvidence("cp2", 2, parse_file(path), result))
    assert verdict.arms[1].failure["line"] == line and verdict.arms[1].failure["class"] == "nccl_timeout"
    md = report.write_report(tmp_path / "out", verdict, env={}, commands_sh=None, plot=False)["verdict.md"].read_text()
    assert f"**Root cause:** `nccl_timeout` in cp2 line {line}: " in md
    block = md[md.index(f"cp2, lines {line - 29}–{line} (▶ the root cause):"):]
    block = block[:block.index("\n```\n")]
    assert re.search(rf"^▶ +{line} \| .*Watchdog caught collective operation timeout", block, re.M)
    assert "Timer actor_train end" in block and "a line after the error" not in md
    assert "alice" not in md and "hf_a1B2" not in md and "~/ckpt" in block and "<redacted:token>" in block
    assert md.count("Root cause") == 1  # a clean arm has none


def test_an_arm_that_failed_without_an_error_line_shows_the_end_of_its_log(tmp_path):
    from cpverify import report

    path = tmp_path / "cp2.log"
    path.write_text("".join(f"launcher line {i}\n" for i in range(50))
                    + "/usr/bin/python3: No module named torch\n", encoding="utf-8")
    result = ArmResult("cp2", "failed", 1, path, 1.0, reason="exited with code 1",
                       fix="read the last lines of the log: the workload's own error is usually there")
    verdict = decide(v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()),
                     v.ArmEvidence("cp2", 2, parse_file(path), result), workload="probe")
    assert verdict.status == v.FAIL
    md = report.write_report(tmp_path / "out", verdict, env={}, commands_sh=None, plot=False)["verdict.md"].read_text()
    assert "**Why it failed:** runner outcome 'failed'" in md
    assert "cp2, the last 30 lines of its log (from line 22):" in md
    assert "No module named torch" in md and "launcher line 21\n" in md and "launcher line 20\n" not in md
    assert "--num-rollout" not in md and "--custom-megatron-init-path" not in md


# -- `cpverify verdict`: swapped options, equal CPs, expected rollouts, a log that grows -------------

def _bundle(out):
    data = json.loads((out / "verdict.json").read_text())
    return data["status"], data["ratio"], data["ratio_ci"], [(a["name"], a["log_lines"]) for a in data["arms"]]


def _effect(out, name, arm=None):
    """The effect of verdict.json's check `name` (of arm `arm`), as `cpverify verdict` wrote it."""
    data = json.loads((out / "verdict.json").read_text())
    return next(c["effect"] for c in data["checks"] if c["name"] == name and (arm is None or c["arm"] == arm))


def test_cli_judges_the_larger_cp_against_the_smaller_whatever_the_order(tmp_path):
    # 4x: one round per arm decides it (a single round's interval is the recorded prior's, x/÷ 1.6)
    cp1 = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "one.log")
    cp2 = synthetic_arm(cp=2, actor_train_time=4.0, seed=2).write(tmp_path / "two.log")
    straight = _cli("--baseline", str(cp1), "--candidate", str(cp2), "--out", str(tmp_path / "a"), cwd=tmp_path)
    swapped = _cli("--candidate-cp", "1", "--candidate", str(cp1), "--baseline", str(cp2), "--baseline-cp", "2",
                   "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert straight.returncode == swapped.returncode == EXIT_FAIL, swapped.stderr
    assert swapped.stdout.startswith("FAIL — CP=2 actor_train 4.")
    env = json.loads((tmp_path / "b" / "env.json").read_text())["inputs"]
    assert (env["baseline"]["cp"], env["candidate"]["cp"]) == (1, 2)  # the larger CP is judged as the candidate
    assert _bundle(tmp_path / "a") == _bundle(tmp_path / "b")
    assert (tmp_path / "a" / "commands.sh").read_text() == (tmp_path / "b" / "commands.sh").read_text()


def test_cli_orients_two_logs_by_the_cp_they_state_when_no_cp_is_claimed(tmp_path):
    """A CP=2 log given as --baseline (no --*-cp claimed) is judged at the CP each log states: the
    verdict of the straight order, never a CP=1 arm whose CP did not take effect."""
    cp1 = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "one.log")
    cp2 = synthetic_arm(cp=2, actor_train_time=4.0, seed=2).write(tmp_path / "two.log")
    straight = _cli("--baseline", str(cp1), "--candidate", str(cp2), "--out", str(tmp_path / "a"), cwd=tmp_path)
    swapped = _cli("--baseline", str(cp2), "--candidate", str(cp1), "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert straight.returncode == swapped.returncode == EXIT_FAIL, swapped.stderr
    assert swapped.stdout.startswith("FAIL — CP=2 actor_train 4."), swapped.stdout
    # the swap is told on stderr (what the user gave is not what is judged); the words are the notice itself
    assert "the --baseline log states CP=2 and the --candidate log CP=1" in swapped.stderr
    assert _bundle(tmp_path / "a") == _bundle(tmp_path / "b")
    env = json.loads((tmp_path / "b" / "env.json").read_text())["inputs"]
    assert (env["baseline"]["file"], env["baseline"]["bundled"], env["baseline"]["cp"]) == ("one.log", "logs/cp1.log", 1)
    assert sorted(p.name for p in (tmp_path / "b" / "logs").iterdir()) == ["cp1.log", "cp2.log"]


@pytest.mark.parametrize("claim", [("--baseline-cp", "1"), ("--candidate-cp", "2")])
def test_cli_a_claimed_cp_is_checked_against_the_log_not_replaced(tmp_path, claim):
    cp1 = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "one.log")
    cp2 = synthetic_arm(cp=2, actor_train_time=2.0, seed=2).write(tmp_path / "two.log")
    proc = _cli("--baseline", str(cp2), "--candidate", str(cp1), *claim, "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == EXIT_FAIL and _effect(tmp_path / "o", "cp_effective", "cp2") == v.FAIL


def test_cli_two_logs_stating_the_same_cp_keep_the_default_claim(tmp_path):
    """A CP=2 run whose flag slime ignored states cp=1 like the baseline: that is the failure to report."""
    cp1 = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "one.log")
    ignored = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, layout_cp=1).write(tmp_path / "two.log")
    proc = _cli("--baseline", str(cp1), "--candidate", str(ignored), "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == EXIT_FAIL and _effect(tmp_path / "o", "cp_effective", "cp2") == v.FAIL
    arms = json.loads((tmp_path / "o" / "verdict.json").read_text())["arms"]
    assert [(a["cp_requested"], a["cp_effective"]) for a in arms] == [(1, 1), (2, 1)]


def test_cli_refuses_equal_cps_before_writing_anything(tmp_path):
    log = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "one.log")
    proc = _cli("--baseline", str(log), "--candidate", str(log), "--baseline-cp", "1", "--candidate-cp", "1",
                "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == EXIT_USAGE and "--candidate-cp 2" in proc.stderr  # the fix to type
    assert not (tmp_path / "o").exists()


def test_cli_expected_rollouts_and_a_cut_candidate(tmp_path):
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "a.log")
    short = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, rollouts=7)
    cand = short.write(tmp_path / "b.log")
    more = _rounds(tmp_path, "more", cp=1, factor=1.0, rounds=3, seed=11), _rounds(tmp_path, "short", cp=2, factor=1.0,
                                                                             rounds=3, rollouts=7, seed=12)
    assert _cli("--baseline", str(base), *_each("--baseline", more[0]), "--candidate", str(cand),
                *_each("--candidate", more[1]), "--out", str(tmp_path / "o1"), cwd=tmp_path).returncode == EXIT_OK
    proc = _cli("--baseline", str(base), "--candidate", str(cand), "--expected-rollouts", "9",
                "--out", str(tmp_path / "o2"), cwd=tmp_path)
    assert proc.returncode == EXIT_INCONCLUSIVE and _effect(tmp_path / "o2", "complete", "cp2") == v.INCONCLUSIVE
    arms = json.loads((tmp_path / "o2" / "verdict.json").read_text())["arms"]
    assert arms[1]["counted_rollouts"] == [1, 2, 3, 4, 5, 6]  # rollouts 7 and 8 of the 9 have no record
    assert "--expected-rollouts 9" in (tmp_path / "o2" / "commands.sh").read_text()
    short.cut_mid_step(7)
    proc = _cli("--baseline", str(base), "--candidate", str(short.write(tmp_path / "c.log")),
                "--out", str(tmp_path / "o3"), cwd=tmp_path)
    assert proc.returncode == EXIT_INCONCLUSIVE and _effect(tmp_path / "o3", "complete", "cp2") == v.INCONCLUSIVE


def test_cli_judges_one_snapshot_of_a_log_that_grows_while_it_is_read(tmp_path):
    """The bundled log, its sha256 and the verdict describe the same bytes, and replay exactly."""
    import hashlib
    import threading

    from cpverify.cli import main

    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "a.log")
    growing = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, rollouts=4)
    cand = growing.write(tmp_path / "b.log")
    more = synthetic_arm(cp=2, actor_train_time=1.0, seed=3, rollouts=40).lines[30:]
    stop = threading.Event()

    def append():  # slime keeps printing while the user runs `cpverify verdict` on its log
        with cand.open("a", encoding="utf-8") as log:
            for line in more:
                if stop.is_set():
                    return
                log.write(line + "\n")
                log.flush()
                stop.wait(0.0005)

    writer = threading.Thread(target=append)
    writer.start()
    try:
        code = main(["verdict", "--baseline", str(base), "--candidate", str(cand), "--out", str(tmp_path / "o")])
    finally:
        stop.set()
        writer.join()
    out = tmp_path / "o"
    bundled = (out / "logs" / "cp2.log").read_bytes()
    env = json.loads((out / "env.json").read_text())["inputs"]["candidate"]
    assert env["bundled_sha256"] == hashlib.sha256(bundled).hexdigest() and env["bundled"] == "logs/cp2.log"
    data = json.loads((out / "verdict.json").read_text())
    assert data["arms"][1]["log_lines"] == bundled.count(b"\n")
    # what was read is one prefix of the (append-only) source, whole lines, named by its digest
    snapshot = cand.read_bytes()[:env["bytes"]]
    assert hashlib.sha256(snapshot).hexdigest() == env["sha256"] and snapshot.count(b"\n") == bundled.count(b"\n")
    replay = _cli("--baseline", "logs/cp1.log", "--candidate", "logs/cp2.log", "--out", "reproduced", cwd=out)
    assert replay.returncode == code
    assert _bundle(out) == _bundle(out / "reproduced")


# -- real slime logs (tests/data/real-logs/slime-train-only-h200x2): CP=2 ~1.44x CP=1 ---------------

REAL_PAIRS = [("slime-cp1.log", "slime-cp2.log", 8), ("long8k/slime-cp1.log", "long8k/slime-cp2.log", 8),
              ("kit-check-12rollouts/slime-cp1.log", "kit-check-12rollouts/slime-cp2.log", 12),
              ("aa-24rollouts/slime-cp1a.log", "aa-24rollouts/slime-cp2.log", 24),
              ("aa-24rollouts/slime-cp1b.log", "aa-24rollouts/slime-cp2.log", 24)]


@pytest.mark.parametrize(("cp1", "cp2", "rollouts"), REAL_PAIRS)
def test_real_slime_logs_never_pass_at_the_default_threshold(cp1, cp2, rollouts):
    folder = REAL / "slime-train-only-h200x2"
    verdict = decide(v.ArmEvidence("cp1", 1, parse_file(folder / cp1), expected_rollouts=rollouts),
                     v.ArmEvidence("cp2", 2, parse_file(folder / cp2), expected_rollouts=rollouts))
    assert verdict.status != v.PASS
    assert verdict.to_json()["ratio"] > 1.2
    for arm in ("cp1", "cp2"):  # complete, clean logs: only the speed decides
        for name in ("complete", "timings", "cp_effective", "errors", "counted_steps"):
            assert check(verdict, name, arm).status == "pass", (name, arm)


@pytest.mark.parametrize(("cp1", "cp2"), [(cp1, cp2) for cp1, cp2, _ in REAL_PAIRS])
def test_real_slime_arms_of_one_run_are_the_same_job(cp1, cp2):
    folder = REAL / "slime-train-only-h200x2"
    verdict = decide(v.ArmEvidence("cp1", 1, parse_file(folder / cp1)), v.ArmEvidence("cp2", 2, parse_file(folder / cp2)))
    same = check(verdict, "same_workload:cp2 vs cp1")
    dumped = len(parse_file(folder / cp1).arguments)
    # that the whole dump was compared (not the work per step) only the row's text says
    assert same.status == "pass" and dumped > 800 and f"all {dumped} arguments" in same.detail


@pytest.mark.parametrize(("cp1", "cp2", "changed"), [
    ("slime-cp1.log", "long8k/slime-cp2.log", "rollout_max_response_len 1024 vs 8192"),
    ("long8k/slime-cp1.log", "slime-cp2.log", "rollout_max_response_len 8192 vs 1024"),
])
def test_real_slime_logs_of_different_lengths_are_no_cp_comparison(cp1, cp2, changed):
    """Logs of different response lengths give a ratio that says nothing about CP (a real CP=1 32K /
    CP=2 1K pair runs at 0.29x): pass_ratio=100 makes the speed alone pass here, so only the
    comparison of the arguments can stop it."""
    folder = REAL / "slime-train-only-h200x2"
    verdict = decide(v.ArmEvidence("cp1", 1, parse_file(folder / cp1)),
                     v.ArmEvidence("cp2", 2, parse_file(folder / cp2)), pass_ratio=100.0)
    assert verdict.status == v.INCONCLUSIVE
    same = check(verdict, "same_workload:cp2 vs cp1")
    assert same.effect == v.INCONCLUSIVE and verdict.told is same
    # no structured field names the differing argument: the row's text is where the reader finds it
    assert changed in same.detail


# -- a run that stopped between two rollouts: slime's own --num-rollout says it did not finish ---------

def test_an_arm_short_of_its_own_num_rollout_is_unfinished_without_a_plan(make_arm):
    """A CP=2 log killed outright between rollouts (the OOM killer: no traceback, no open timer) ends
    clean after 5 of its 8 rollouts: slime's own --num-rollout makes it unfinished, never a PASS on 5."""
    cp1 = make_arm("cp1", 1, 1.0, seed=1, arguments={**ARGS, "num_rollout": 8})
    cut = make_arm("cp2", 2, 1.0, seed=2, rollouts=5, arguments={**ARGS, "num_rollout": 8})
    verdict = decide(cp1, cut)
    assert verdict.status == v.INCONCLUSIVE
    complete = check(verdict, "complete", "cp2")
    assert complete.effect == v.INCONCLUSIVE and complete.fix == FIX_INCOMPLETE
    assert arm_named(verdict, "cp2").counted_rollouts == [1, 2, 3, 4]  # 5-7 of its --num-rollout 8 are missing
    assert check(verdict, "complete", "cp1").status == "pass"


UNCAUGHT = ["Traceback (most recent call last):",
            '  File "/root/slime/train.py", line 101, in <module>',
            "    train(args)",
            '  File "/root/slime/slime/ray/actor_group.py", line 88, in async_train',
            "    raise SomethingNoSignatureNames('the ring exchange lost a chunk')",
            "SomethingNoSignatureNames: the ring exchange lost a chunk"]


@pytest.mark.parametrize("where", ["after_the_last_record", "before_the_last_record"])
def test_a_log_that_ends_in_an_uncaught_exception_is_unfinished_without_a_count(tmp_path, where):
    """Given logs that state no --num-rollout: a CP=2 log that ends in an exception after its last
    record stopped there, whatever the exception; one handled mid-run (records after it) did not."""
    cp2 = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, rollouts=10 if where == "after_the_last_record" else 0)
    for line in UNCAUGHT:
        cp2.raw(line)
    if where == "before_the_last_record":
        for rid in range(8):
            cp2.iteration(rid, actor_train_time=1.0)
    verdict = decide(v.ArmEvidence("cp1", 1, parse_file(synthetic_arm(cp=1, actor_train_time=1.0, seed=1)
                                                         .write(tmp_path / "cp1.log"))),
                     v.ArmEvidence("cp2", 2, parse_file(cp2.write(tmp_path / "cp2.log"))), pass_ratio=3.0)
    complete = check(verdict, "complete", "cp2")
    if where == "after_the_last_record":
        assert verdict.status == v.INCONCLUSIVE and verdict.told is complete
        assert complete.effect == v.INCONCLUSIVE and complete.fix == FIX_INCOMPLETE
    else:
        assert complete.status == "pass" and verdict.status == v.PASS


def test_a_resumed_run_is_counted_from_its_first_rollout():
    log = SlimeLog()
    log.megatron_arguments({**ARGS, "num_rollout": 12, "context_parallel_size": 2, "data_parallel_size": 1})
    log.layout(cp=2, dp=1)
    log.nccl_init()
    for rid in range(4, 12):  # resumed from a checkpoint at rollout 4
        log.iteration(rid, actor_train_time=1.0)
    verdict = decide(v.ArmEvidence("cp1", 1, synthetic_arm(cp=1, actor_train_time=1.0, seed=1, rollouts=12).expected()),
                     v.ArmEvidence("cp2", 2, log.expected()))
    assert check(verdict, "complete", "cp2").status == "pass"


# -- the advice for a slow CP leaves out what the logs rule out ------------------------------------------

def test_a_slow_cp_over_nvlink_with_a_recent_nccl_is_not_sent_to_check_the_transport(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 2.0, seed=2))
    fix = check(verdict, "speed:cp2 vs cp1").fix
    assert verdict.status == v.FAIL
    assert fix == fix_slow_cp("slime", transports=("P2P/CUMEM",), slow_path=False, old_nccl=False)
    assert FIX_TRANSPORT not in fix and FIX_OLD_STACK not in fix and PER_PHASE["slime"] in fix
    assert check(verdict, "speed:log_probs:cp2 vs cp1").fix == "as for actor_train (its speed row)"


def test_a_slow_cp_over_sockets_or_an_old_nccl_is_sent_there_first(make_arm):
    sockets = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 2.0, seed=2, transport="NET/Socket/0"))
    fix = check(sockets, "speed:cp2 vs cp1").fix
    # the transport first, named as the log shows it (not 'look for' what is already seen)
    assert FIX_SOCKETS_SEEN in fix and fix.index(FIX_SOCKETS_SEEN) < fix.index(PER_PHASE["slime"])
    assert FIX_TRANSPORT not in fix
    old = decide(make_arm("cp1", 1, 1.0, seed=1, nccl_version="2.17.1"),
                 make_arm("cp2", 2, 2.0, seed=2, nccl_version="2.17.1"))
    fix = check(old, "speed:cp2 vs cp1").fix
    assert FIX_OLD_STACK in fix and FIX_TRANSPORT not in fix


def test_a_slow_cp_the_logs_say_nothing_about_gets_every_step():
    fix = fix_slow_cp("slime")
    assert FIX_TRANSPORT in fix and FIX_OLD_STACK in fix and FIX_COLLECT in fix
    assert fix.startswith("CP>1 is much slower than CP=1: ")  # nothing ruled out: no "(... not the cause)"


def test_a_slow_secondary_timing_alone_carries_the_whole_advice(make_arm):
    verdict = decide(make_arm("cp1", 1, 1.0, seed=1), make_arm("cp2", 2, 1.0, seed=2, secondary=2.0))
    assert verdict.status == v.PASS
    assert PER_PHASE["slime"] in check(verdict, "speed:log_probs:cp2 vs cp1").fix
