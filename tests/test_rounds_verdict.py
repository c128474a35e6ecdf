"""Rounds in the verdict (cpverify.verdict.decide, .across): every round's log is checked, later rounds
must be the job of their round 1, the ratio and its interval come from the rounds, one round per arm
says what it cannot show, the A/A reading, a look's confidence, and an A/B of two revisions at one CP."""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpverify import verdict as v
from cpverify.errors import EXIT_USAGE, InputError
from cpverify.fixes import FIX_SLOWER_AT_ONE_CP
from cpverify.model import BASE, CANDIDATE
from cpverify.verdict import across, pair_checks
from cpverify.verdict.rounds import PRIOR_SD, ratio_across_rounds, sequential_interval, spent_alpha, warmup_end
from helpers.slime_log import synthetic_arm

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "cpverify" / "data" / "verdict.schema.json").read_text())
ARGS = {"rollout_max_response_len": 1024, "seq_length": 4096, "lr": 1e-6}


def rounds(name, cp, factor, n, *, seed=1, logs=None, role=None, **kwargs):
    """`n` rounds of one arm, each its own synthetic log (its own seed), or the logs given."""
    logs = logs or [synthetic_arm(cp=cp, actor_train_time=factor, seed=seed + 100 * k, **kwargs) for k in range(n)]
    return [v.ArmEvidence(name if k == 1 else f"{name}.r{k}", cp, log.expected(), arm=name, round=k, role=role)
            for k, log in enumerate(logs, start=1)]


def decide(*arms, comparisons=(("cp1", "cp2"),), look=None, **thresholds):
    verdict = v.decide([ev for arm in arms for ev in arm], comparisons=list(comparisons),
                       thresholds=v.Thresholds(**thresholds), look=look)
    jsonschema.validate(json.loads(json.dumps(verdict.to_json())), SCHEMA)
    return verdict


def rows(verdict, name):
    return [c for c in verdict.checks if c.name == name]


# -- every round is evidence --------------------------------------------------------------------------

def test_a_crash_in_a_later_round_fails_the_verdict_naming_that_round():
    crashed = synthetic_arm(cp=2, actor_train_time=1.0, seed=301)
    crashed.cuda_oom()
    cand = rounds("cp2", 2, 1.0, 3, seed=2)
    cand[2] = v.ArmEvidence("cp2.r3", 2, crashed.expected(), arm="cp2", round=3)
    verdict = decide(rounds("cp1", 1, 1.0, 3), cand)
    assert verdict.status == v.FAIL
    assert [(c.arm, c.effect) for c in rows(verdict, "error:cuda_oom")] == [("cp2.r3", v.FAIL)]
    assert verdict.comparisons[0].status == v.FAIL


def test_a_later_round_that_ran_another_job_is_no_round_of_its_arm():
    base = rounds("cp1", 1, 1.0, 3, arguments=ARGS)
    other = synthetic_arm(cp=2, actor_train_time=1.0, seed=9, arguments={**ARGS, "rollout_max_response_len": 8192})
    cand = rounds("cp2", 2, 1.0, 3, seed=2, arguments=ARGS)
    cand[1] = v.ArmEvidence("cp2.r2", 2, other.expected(), arm="cp2", round=2)
    verdict = decide(base, cand)
    assert verdict.status == v.INCONCLUSIVE
    found = {c.arm: c for c in rows(verdict, "same_round")}
    assert set(found) == {"cp1.r2", "cp1.r3", "cp2.r2", "cp2.r3"}
    assert found["cp2.r2"].effect == v.INCONCLUSIVE
    # no structured field names the differing argument: the row's text is where the reader finds it
    assert "rollout_max_response_len 1024 vs 8192" in found["cp2.r2"].detail
    assert all(found[arm].status == "pass" for arm in ("cp1.r2", "cp1.r3", "cp2.r3"))


def test_rounds_of_one_arm_must_be_numbered_once_and_run_one_cp():
    twice = synthetic_arm(cp=2, actor_train_time=1.0, seed=5).expected()
    with pytest.raises(InputError):  # two logs both called round 1 of cp2
        decide(rounds("cp1", 1, 1.0, 2), [*rounds("cp2", 2, 1.0, 1), v.ArmEvidence("cp2.again", 2, twice, arm="cp2")])
    with pytest.raises(InputError):  # round 2 of cp2 asked for CP=4
        decide(rounds("cp1", 1, 1.0, 2), [*rounds("cp2", 2, 1.0, 1), v.ArmEvidence("cp2.r2", 4, twice, arm="cp2",
                                                                                     round=2)])


# -- the interval comes from the rounds ----------------------------------------------------------------

def test_one_round_per_arm_says_the_spread_was_not_measured_and_uses_the_prior():
    verdict = decide(rounds("cp1", 1, 1.0, 1), rounds("cp2", 2, 1.05, 1))
    section = verdict.to_json()["rounds"]
    assert section["per_arm"] == {"cp1": 1, "cp2": 1} and section["measured"] is False
    assert str(PRIOR_SD) in section["note"]  # the prior the interval stands on instead, named
    est = verdict.primary.metrics[v.PRIMARY_METRIC]
    assert [e.statistic for e in est.estimates] == list(across.STATISTICS)
    assert all(e.interval.sd == pytest.approx(PRIOR_SD) and e.between_sd is None for e in est.estimates)
    assert not est.measured and est.note == across.SINGLE_ROUND
    # a 5% effect is not decidable from one process per arm: honest INCONCLUSIVE, never PASS
    assert verdict.status == v.INCONCLUSIVE and check_effect(verdict, "speed:cp2 vs cp1") == v.INCONCLUSIVE


def check_effect(verdict, name):
    return next(c.effect for c in verdict.checks if c.name == name)


def test_the_ratios_across_rounds_are_each_statistics_and_the_worse_decides_with_each_rounds_ratio():
    base, cand = rounds("cp1", 1, 1.0, 3), rounds("cp2", 2, 1.1, 3, seed=2)
    verdict = decide(base, cand)
    est = verdict.primary.metrics[v.PRIMARY_METRIC]
    b = [[s for s in a.samples[v.PRIMARY_METRIC]] for a in verdict.rounds_of("cp1")]
    c = [[s for s in a.samples[v.PRIMARY_METRIC]] for a in verdict.rounds_of("cp2")]
    for statistic in across.STATISTICS:
        b_stat = [across.round_statistic(x, statistic) for x in b]
        c_stat = [across.round_statistic(x, statistic) for x in c]
        e = est.of(statistic)
        assert e.interval == ratio_across_rounds(b_stat, c_stat)
        assert (e.ratio, e.ci) == (e.interval.ratio, (e.interval.low, e.interval.high))
        assert e.round_ratios == tuple(ci / bi for bi, ci in zip(b_stat, c_stat, strict=True))
    # one shape for one round and many: the median's is `ratio`/`ci`, the decision reads the worse
    assert (est.ratio, est.ci) == (est.of(across.MEDIAN).ratio, est.of(across.MEDIAN).ci)
    chosen = verdict.primary.decided_by
    assert chosen is est.against(1.3) and chosen is pair_checks.decisive(est, verdict.thresholds)
    data = verdict.to_json()
    assert data["decided_by"]["statistic"] == chosen.statistic
    assert data["decided_by"]["round_ratios"] == list(chosen.round_ratios)
    row = data["rounds"]["comparisons"][0]
    assert (row["statistic"], row["round_ratios"]) == (chosen.statistic, list(chosen.round_ratios))


def test_an_arm_with_two_rounds_reads_this_hosts_noise_floor():
    verdict = decide(rounds("cp1", 1, 1.0, 4), rounds("cp2", 2, 1.0, 1, seed=2))
    aa = verdict.to_json()["rounds"]["aa"]
    assert [reading["arm"] for reading in aa] == ["cp1"]  # cp2 has one round: no A/A of it
    assert aa[0]["rounds"] == {"odd": 2, "even": 2} and aa[0]["ci"][0] <= 1.0 <= aa[0]["ci"][1] and aa[0]["covers_1"]


def test_a_look_of_the_sequential_design_widens_the_interval_to_its_share_of_the_error_rate():
    base, cand = rounds("cp1", 1, 1.0, 3), rounds("cp2", 2, 1.05, 3, seed=2)
    plain, third = decide(base, cand), decide(base, cand, look=3)
    assert third.to_json()["rounds"]["look"] == 3
    assert third.to_json()["rounds"]["confidence"] == pytest.approx(1 - spent_alpha(0.05, 3))
    low, high = plain.primary.metrics[v.PRIMARY_METRIC].ci
    wider_low, wider_high = third.primary.metrics[v.PRIMARY_METRIC].ci
    assert wider_low < low and high < wider_high


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 6), look=st.integers(1, 8), log_ratio=st.floats(-0.5, 0.8))
def test_the_verdicts_interval_is_the_one_whose_error_rate_is_tested(seed, k, look, log_ratio):
    """across.estimate at look k is rounds.sequential_interval of the round statistics: the interval
    the coverage and repeated-look tests (test_rounds) hold to their error rates."""
    rng = np.random.default_rng(seed)
    base = [list(np.exp(rng.normal(0, 0.1)) * np.exp(rng.normal(0, 0.1, size=12))) for _ in range(k)]
    cand = [list(math.exp(log_ratio) * np.exp(rng.normal(0, 0.1)) * np.exp(rng.normal(0, 0.1, size=12)))
            for _ in range(k)]
    est = across.estimate(base, cand, confidence=across.confidence_at(v.Thresholds(), look))
    for statistic in across.STATISTICS:
        expected = sequential_interval([across.round_statistic(r, statistic) for r in base],
                                       [across.round_statistic(r, statistic) for r in cand], look=look)
        assert est.of(statistic).interval == expected
        assert est.of(statistic).ci == (expected.low, expected.high)


# -- warm-up found in each round ------------------------------------------------------------------------

def test_each_rounds_warmup_is_found_in_its_own_data_unless_a_count_is_given():
    slow_start = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, times=[6.0, 3.0, *[1.0 + 0.01 * i for i in range(10)]])
    verdict = decide(rounds("cp1", 1, 1.0, 2), [*rounds("cp2", 2, 1.0, 1, seed=3), *[
        v.ArmEvidence("cp2.r2", 2, slow_start.expected(), arm="cp2", round=2)]])
    found = {a.name: a for a in verdict.arms}
    assert found["cp2.r2"].warmup == 2 == warmup_end([6.0, 3.0, *[1.0 + 0.01 * i for i in range(10)]])
    assert found["cp2.r2"].counted_rollouts == list(range(2, 12))
    assert found["cp1"].warmup == 1  # synthetic_arm: rollout 0 is 3x the rest
    given = decide(rounds("cp1", 1, 1.0, 2), rounds("cp2", 2, 1.0, 2, seed=3), warmup=3)
    assert {a.warmup for a in given.arms} == {3} and given.thresholds.to_json()["warmup"] == 3


# -- an A/B of two revisions at one CP (one GPU) -------------------------------------------------------

def test_two_revisions_at_one_cp_are_compared_candidate_against_base():
    # 6 rounds per arm: with the recorded prior, what it takes to see 15 % (3 are not enough)
    base = rounds("base-cp1", 1, 1.0, 6, role=BASE)
    cand = rounds("cand-cp1", 1, 1.15, 6, seed=2, role=CANDIDATE)
    verdict = decide(cand, base, comparisons=[("cand-cp1", "base-cp1")])
    comp = verdict.primary
    assert (comp.baseline, comp.candidate) == ("base-cp1", "cand-cp1")
    est = comp.metrics[v.PRIMARY_METRIC]
    assert 1.1 < est.ratio < 1.2 and est.ci[0] > 1.0  # the candidate's 15 % is seen
    with pytest.raises(InputError):  # two arms of one CP and no revisions: nothing to compare
        decide(rounds("a", 1, 1.0, 1), rounds("b", 1, 1.0, 1, seed=2), comparisons=[("a", "b")])


def test_a_slower_revision_at_one_cp_is_sent_to_the_revisions_not_to_the_interconnect():
    ab = decide(rounds("cand-cp1", 1, 3.0, 3, seed=2, role=CANDIDATE), rounds("base-cp1", 1, 1.0, 3, role=BASE),
                comparisons=[("cand-cp1", "base-cp1")])
    cp = decide(rounds("cp1", 1, 1.0, 3), rounds("cp2", 2, 3.0, 3, seed=2))
    assert ab.status == cp.status == v.FAIL
    assert ab.told.fix == FIX_SLOWER_AT_ONE_CP and cp.told.fix != FIX_SLOWER_AT_ONE_CP


def test_the_reading_puts_a_cost_on_cp_only_where_the_arms_cp_differs():
    """Forward-only passes that grow with actor_train put the cost in every forward pass; what CP adds
    there (the ring exchange) is named only where the arms' CP differs, not for two revisions at one CP."""
    from cpverify.report.story import reading

    def per_pass(verdict) -> bool:
        return any("(for CP:" in said for said in reading(verdict, verdict.primary))

    ab = decide(rounds("cand-cp1", 1, 1.6, 3, seed=2, role=CANDIDATE), rounds("base-cp1", 1, 1.0, 3, role=BASE),
                comparisons=[("cand-cp1", "base-cp1")])
    cp = decide(rounds("cp1", 1, 1.0, 3), rounds("cp2", 2, 1.6, 3, seed=2))
    assert (per_pass(ab), per_pass(cp)) == (False, True)


# -- cpverify verdict: rounds given as logs --------------------------------------------------------------

def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "cpverify", "verdict", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_cli_refuses_a_log_given_twice_as_two_rounds(tmp_path):
    one = str(synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "a.log"))
    copy = tmp_path / "copy.log"
    copy.write_bytes(Path(one).read_bytes())
    two = str(synthetic_arm(cp=2, actor_train_time=1.0, seed=2).write(tmp_path / "b.log"))
    proc = _cli("--baseline", one, "--baseline", str(copy), "--candidate", two, "--out", str(tmp_path / "o"),
                cwd=tmp_path)
    problem, fix = proc.stderr.split("fix:", 1)
    assert proc.returncode == EXIT_USAGE and "copy.log" in problem and fix.strip()
    assert not (tmp_path / "o").exists()  # nothing judged, nothing left


@pytest.mark.parametrize("copied", ["a line added", "crlf", "gzip"])
def test_cli_refuses_one_process_given_as_two_rounds_whatever_its_bytes(tmp_path, copied):
    """Two rounds with the same timing records at every step are one process's log (no two processes
    time every step alike): refused as bad input, with nothing judged, however the copy's bytes differ."""
    one = synthetic_arm(cp=2, actor_train_time=1.0, seed=2).write(tmp_path / "b.log")
    text = one.read_bytes()
    copy = tmp_path / ("b.log.gz" if copied == "gzip" else "copy.log")
    copy.write_bytes({"a line added": text + b"saved again\n", "crlf": text.replace(b"\n", b"\r\n"),
                      "gzip": gzip.compress(text)}[copied])
    base = [arg for k in (1, 3) for arg in
            ("--baseline", str(synthetic_arm(cp=1, actor_train_time=1.0, seed=k).write(tmp_path / f"a{k}.log")))]
    (tmp_path / "o").mkdir()  # an --out the user made: kept, empty, as it was given
    proc = _cli(*base, "--candidate", str(one), "--candidate", str(copy), "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == EXIT_USAGE
    assert [p.name for p in (tmp_path / "o").iterdir()] == []


def test_cli_refuses_rounds_of_one_option_that_state_two_cps(tmp_path):
    one = str(synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(tmp_path / "a.log"))
    other = str(synthetic_arm(cp=2, actor_train_time=1.0, seed=3).write(tmp_path / "c.log"))
    two = str(synthetic_arm(cp=2, actor_train_time=1.0, seed=2).write(tmp_path / "b.log"))
    proc = _cli("--baseline", one, "--baseline", other, "--candidate", two, "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == EXIT_USAGE and "c.log" in proc.stderr  # the round that states another CP
    assert not (tmp_path / "o").exists()  # nothing judged, nothing left


def test_the_readmes_example_is_what_three_real_rounds_per_arm_give(tmp_path):
    """README "What a verdict looks like": three real runs per arm (tests/data/real-logs), as rounds."""
    real = ROOT / "tests" / "data" / "real-logs" / "slime-train-only-h200x2"
    runs = [real / "aa-24rollouts", real / "kit-check-12rollouts", real]
    for k, folder in enumerate(runs, start=1):
        for cp, name in ((1, "slime-cp1a.log" if k == 1 else "slime-cp1.log"), (2, "slime-cp2.log")):
            (tmp_path / f"cp{cp}-r{k}.log").write_bytes((folder / name).read_bytes())
    proc = _cli(*[w for k in (1, 2, 3) for w in ("--baseline", f"cp1-r{k}.log")],
                *[w for k in (1, 2, 3) for w in ("--candidate", f"cp2-r{k}.log")], "--out", "out", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    shown = (tmp_path / "out" / "verdict.md").read_text().split("\n**What failed**")[0].strip()
    readme = (ROOT / "README.md").read_text()
    example = readme.split("```markdown\n", 1)[1].split("\n```", 1)[0].strip()
    assert example == shown


@pytest.mark.parametrize("stated", [(False, False), (True, False), (False, True)], ids=["neither", "round1", "later"])
def test_a_later_round_on_other_gpus_is_no_round_of_its_arm_where_a_log_states_no_layout(stated):
    """Without a layout the work per GPU tells a round's GPUs: a CP=1 round on one GPU where its round 1
    ran on two (twice as slow, the arm's geometric mean moved) is another job, never a round of it."""
    def round_of(k, gpus, layout):
        return synthetic_arm(cp=1, actor_train_time=2.0 / gpus, dp=gpus, seed=k, layout_cp="same" if layout else None)

    base = rounds("cp1", 1, 1.0, 6, logs=[round_of(1, 2, stated[0])] + [round_of(k, 1, stated[1]) for k in range(2, 7)])
    verdict = decide(base, rounds("cp2", 2, 1.1, 6, seed=50))
    found = {c.arm: c for c in rows(verdict, "same_round") if c.arm.startswith("cp1")}
    assert set(found) == {f"cp1.r{k}" for k in range(2, 7)}
    assert all((c.status, c.effect) == ("fail", v.INCONCLUSIVE) for c in found.values())
    assert verdict.status == v.INCONCLUSIVE


def test_a_later_round_whose_gpus_no_log_shows_is_not_the_job_of_its_round_1():
    """A round whose log states no layout and no work per GPU (tokens alone: slime's TFLOPS key left
    out) cannot show it ran on the GPUs of its round 1: its same_round row is no PASS."""
    logs = [synthetic_arm(cp=1, actor_train_time=1.0, seed=k, layout_cp=None) for k in range(1, 4)]
    base = rounds("cp1", 1, 1.0, 3, logs=logs)
    for ev in base[1:]:
        for record in ev.parsed.perf:
            record.metrics.pop("perf/actor_train_tflops", None)
    verdict = decide(base, rounds("cp2", 2, 1.0, 3, seed=50))
    assert [(c.arm, c.status, c.effect) for c in rows(verdict, "same_round") if c.arm.startswith("cp1")] == [
        ("cp1.r2", "fail", v.INCONCLUSIVE), ("cp1.r3", "fail", v.INCONCLUSIVE)]
    assert verdict.status == v.INCONCLUSIVE


@pytest.mark.parametrize("course, option", [
    ({}, "--baseline"),  # logs given to cpverify verdict: each round's log
    ({"order": ["cp1", "cp2"], "stopped": {"reason": "fixed_rounds", "detail": "1 round per arm"}}, "--rounds"),
    ({"order": ["cp1", "cp2"], "stopped": {"reason": "budget", "detail": "another round would pass it"}}, "--budget"),
])
def test_one_round_per_arm_names_what_gives_it_a_second_by_why_it_has_one(course, option):
    from cpverify.report.story import rounds_line

    verdict = decide(rounds("cp1", 1, 1.0, 1), rounds("cp2", 2, 1.05, 1))
    verdict.rounds.update(course)
    named = set(re.findall(r"--[a-z-]+", rounds_line(verdict))) & {"--baseline", "--rounds", "--budget"}
    assert named == {option}
