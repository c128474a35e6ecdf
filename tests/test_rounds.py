"""Intervals across rounds (cpverify.verdict.rounds): coverage when rounds differ, honest error
rates under sequential looks, the prior is what the recorded A/A rounds show, warm-up from data."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpverify.parse import parse_file
from cpverify.verdict import rounds
from cpverify.verdict.rounds import (
    DEFAULT_CONFIDENCE,
    MAX_FOUND_WARMUP,
    PRIOR_DF,
    PRIOR_SD,
    contrast_across_rounds,
    ratio_across_rounds,
    sequential_interval,
    spent_alpha,
    warmup_end,
)

AA = Path(__file__).parent / "data" / "aa-rounds"
# Recorded A/A groups: identical CP=1 processes of real slime on one host, one session each.
AA_GROUPS = {
    "h100x1": ["h100x1-aa-r1.log.gz", "h100x1-aa-r2.log.gz", "h100x1-aa-r3.log.gz"],
    "h100x1-s4": ["h100x1-s4-aa-1A.log.gz", "h100x1-s4-aa-2B.log.gz", "h100x1-s4-aa-3B.log.gz"],
    "h200x1": ["h200x1-aa-r1.log.gz", "h200x1-aa-r2.log.gz", "h200x1-aa-r3.log.gz"],
    "h200x2": ["h200x2-cp1a.log.gz", "h200x2-cp1b.log.gz"],
}


def actor_train(path: Path) -> list[float]:
    perf = [r for r in parse_file(path).perf if r.side == "train" and "perf/actor_train_time" in r.metrics]
    return [r.metrics["perf/actor_train_time"] for r in sorted(perf, key=lambda r: r.rollout)]


def round_mean(values: list[float]) -> float:
    return statistics.fmean(values[warmup_end(values):])


def simulate_rounds(rng: np.random.Generator, *, k: int, log_ratio: float, sd: float, steps: int = 20,
                    step_cv: float = 0.15) -> tuple[list[float], list[float]]:
    """k rounds per arm: each round's level moves by between-round noise `sd` (log scale), its steps
    scatter around that level; each round is summarised by its mean step."""
    def arm(shift: float) -> list[float]:
        levels = np.exp(shift + rng.normal(0.0, sd, size=k))
        return [float(np.mean(level * np.exp(rng.normal(0.0, step_cv, size=steps)))) for level in levels]
    return arm(0.0), arm(log_ratio)


# -- the prior is the recorded data ------------------------------------------------------------

def test_prior_is_the_pooled_spread_of_the_recorded_aa_rounds():
    squares, df = 0.0, 0
    for files in AA_GROUPS.values():
        logs = [math.log(round_mean(actor_train(AA / f))) for f in files]
        squares += sum((v - statistics.fmean(logs)) ** 2 for v in logs)
        df += len(logs) - 1
    assert df == PRIOR_DF
    assert math.sqrt(squares / df) == pytest.approx(PRIOR_SD, abs=0.005)


def test_recorded_aa_rounds_of_one_host_lie_inside_each_others_interval():
    """A/A on real slime: one round per arm, the interval must cover the truth (ratio 1)."""
    for files in AA_GROUPS.values():
        means = [round_mean(actor_train(AA / f)) for f in files]
        for i in range(len(means)):
            for j in range(len(means)):
                if i != j:
                    interval = ratio_across_rounds([means[i]], [means[j]])
                    assert interval.low < 1.0 < interval.high


# -- warm-up from the data ---------------------------------------------------------------------

@pytest.mark.parametrize("name", [f for files in AA_GROUPS.values() for f in files])
def test_warmup_of_real_rounds_ends_within_the_first_rollouts(name):
    values = actor_train(AA / name)
    cut = warmup_end(values)
    assert 1 <= cut <= MAX_FOUND_WARMUP  # rollout 0 is always warm-up; on some hosts rollout 1 too
    steady = values[cut:]
    assert values[cut - 1] > 1.5 * statistics.median(steady)  # what was cut is far above the steady state


def test_the_warmup_cap_is_what_a_recorded_real_round_needs():
    """Some recorded real round (2x H200: rollouts 0 and 1) needs every step the cap allows."""
    assert max(warmup_end(actor_train(AA / f)) for files in AA_GROUPS.values() for f in files) == MAX_FOUND_WARMUP


@given(st.lists(st.floats(0.8, 1.2), min_size=4, max_size=60), st.integers(0, 5), st.floats(3.0, 20.0))
def test_warmup_finds_leading_slow_steps_up_to_the_cap(steady, slow, factor):
    values = [factor * max(steady)] * slow + steady
    cut = warmup_end(values)
    assert cut <= min(MAX_FOUND_WARMUP, len(values) // 2)
    if slow <= len(values) // 3:  # a minority of slow steps does not move the round's median
        assert cut >= min(slow, MAX_FOUND_WARMUP)


durations = st.floats(1e-6, 1e6, allow_nan=False, allow_infinity=False)


@given(lead=st.lists(durations, max_size=30), scale=st.floats(1.0, 1e3), rest=st.lists(durations, max_size=60))
def test_the_found_warmup_is_at_most_the_cap_and_only_steps_slower_than_the_steady_median(lead, scale, rest):
    """Whatever the step times (any list; `scale` > 1 makes a slow start of any length): at most
    MAX_FOUND_WARMUP leading steps, and at most half the round, are warm-up, and each of them is
    slower than the median of the steps that are counted."""
    values = [x * scale for x in lead] + rest
    cut = warmup_end(values)
    assert 0 <= cut <= min(MAX_FOUND_WARMUP, len(values) // 2)
    if cut:
        steady = statistics.median(values[cut:])
        assert all(v > steady for v in values[:cut])


@given(st.lists(st.floats(0.9, 1.1), min_size=4, max_size=60))
def test_a_round_without_warmup_keeps_every_step(values):
    assert warmup_end(values) == 0


# -- coverage --------------------------------------------------------------------------------

@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 5), log_ratio=st.floats(-0.5, 1.0),
       sd=st.floats(0.02, PRIOR_SD))
def test_interval_covers_the_true_ratio_when_rounds_differ(seed, k, log_ratio, sd):
    rng = np.random.default_rng(seed)
    trials = 2000  # the coverage's own sampling error (0.5 %) stays far from the margin to 93 %
    covered = 0
    for _ in range(trials):
        base, cand = simulate_rounds(rng, k=k, log_ratio=log_ratio, sd=sd)
        interval = ratio_across_rounds(base, cand)
        covered += interval.low <= math.exp(log_ratio) <= interval.high
    assert covered / trials >= 0.93


def simulate_ab(rng: np.random.Generator, *, k: tuple[int, int, int, int], log_ror: float, sd: float,
                cp_cost: float = math.log(1.5)) -> list[list[float]]:
    """Four arms of an A/B (base CP=1, base CP=2, candidate CP=1, candidate CP=2), k[i] rounds each:
    the candidate changes CP=2's cost by exp(log_ror) and its CP=1 time by a CP-neutral 10 %."""
    levels = (0.0, cp_cost, math.log(1.1), math.log(1.1) + cp_cost + log_ror)
    return [[float(np.mean(math.exp(level + shift) * np.exp(rng.normal(0.0, 0.15, size=20))))
             for shift in rng.normal(0.0, sd, size=n)] for level, n in zip(levels, k, strict=True)]


def ratio_of_ratios(arms: list[list[float]]):
    base_1, base_n, cand_1, cand_n = arms
    return contrast_across_rounds([(base_1, +1), (base_n, -1), (cand_1, -1), (cand_n, +1)])


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.tuples(*[st.integers(1, 5)] * 4), log_ror=st.floats(-0.3, 0.3),
       sd=st.floats(0.02, PRIOR_SD))
def test_the_ratio_of_ratios_covers_the_true_change_of_cp_cost(seed, k, log_ror, sd):
    """The A/B's question (did the candidate change what CP costs?) on the same machinery: the
    interval of the ratio of the revisions' CP ratios covers the truth, whatever the CP-neutral change."""
    rng = np.random.default_rng(seed)
    trials, covered = 2000, 0
    for _ in range(trials):
        interval = ratio_of_ratios(simulate_ab(rng, k=k, log_ror=log_ror, sd=sd))
        covered += interval.low <= math.exp(log_ror) <= interval.high
    assert covered / trials >= 0.93


def test_a_cp_neutral_change_is_not_a_change_of_cp_cost():
    """A candidate 10 % slower at every CP (the simulation's CP-neutral change) leaves CP's cost as it
    was: the ratio of ratios excludes 1 no more often than the error rate allows."""
    rng = np.random.default_rng(11)
    trials = 2000
    found = sum(not (lambda i: i.low <= 1.0 <= i.high)(ratio_of_ratios(simulate_ab(rng, k=(3, 3, 3, 3), log_ror=0.0,
                                                                                  sd=0.05))) for _ in range(trials))
    assert found / trials <= 0.05


def test_a_ratio_is_the_contrast_of_two_arms_and_a_ratio_of_ratios_of_four():
    base, cand = [1.0, 1.2, 0.9], [2.0, 2.2]
    assert contrast_across_rounds([(base, -1), (cand, +1)]) == ratio_across_rounds(base, cand)
    ror = contrast_across_rounds([([1.0], +1), ([2.0], -1), ([1.1], -1), ([1.65], +1)])
    assert ror.ratio == pytest.approx((1.65 / 1.1) / (2.0 / 1.0))
    assert not ror.measured and ror.sd == pytest.approx(PRIOR_SD)
    # four arms of one round each: the variance of four means, twice that of one ratio's
    one = ratio_across_rounds([1.0], [2.0])
    assert math.log(ror.high / ror.ratio) == pytest.approx(math.sqrt(2) * math.log(one.high / one.ratio))


def test_many_rounds_cover_a_host_noisier_than_the_prior():
    """The prior is outweighed by the rounds' own spread as they accumulate."""
    rng = np.random.default_rng(7)
    trials, covered = 600, 0
    for _ in range(trials):
        base, cand = simulate_rounds(rng, k=20, log_ratio=0.3, sd=2 * PRIOR_SD)
        interval = ratio_across_rounds(base, cand)
        covered += interval.low <= math.exp(0.3) <= interval.high
    assert covered / trials >= 0.93


def test_a_single_round_per_arm_says_its_spread_was_not_measured():
    one = ratio_across_rounds([1.0], [1.5])
    two = ratio_across_rounds([1.0, 1.1], [1.5, 1.4])
    assert not one.measured and one.between_sd is None and one.sd == pytest.approx(PRIOR_SD)
    assert two.measured and two.df == PRIOR_DF + 2


@given(st.lists(st.floats(0.1, 10), min_size=1, max_size=8), st.lists(st.floats(0.1, 10), min_size=1, max_size=8))
def test_interval_brackets_its_estimate_and_swapping_arms_inverts_it(base, cand):
    forward = ratio_across_rounds(base, cand)
    backward = ratio_across_rounds(cand, base)
    assert forward.low <= forward.ratio <= forward.high
    assert backward.ratio == pytest.approx(1 / forward.ratio, rel=1e-9)
    assert backward.low == pytest.approx(1 / forward.high, rel=1e-9)


@settings(max_examples=60, deadline=None)  # the first example imports scipy.stats
@given(st.lists(st.floats(0.1, 10), min_size=1, max_size=12), st.lists(st.floats(0.1, 10), min_size=1, max_size=12),
       st.floats(0.5, 0.9999))
def test_interval_half_width_is_students_t_quantile_times_the_standard_error(base, cand, confidence):
    from scipy import stats as scipy_stats  # the reference: the t distribution as scipy.stats defines it

    interval = ratio_across_rounds(base, cand, confidence=confidence)
    se = interval.sd * math.sqrt(1 / len(base) + 1 / len(cand))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, interval.df)) * se
    assert interval.high == pytest.approx(interval.ratio * math.exp(half), rel=1e-12)
    assert interval.low == pytest.approx(interval.ratio * math.exp(-half), rel=1e-12)


def test_a_round_statistic_that_is_no_duration_is_refused():
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            ratio_across_rounds([1.0], [bad])


# -- sequential looks ----------------------------------------------------------------------------

def test_spent_alpha_sums_to_alpha_over_any_number_of_looks():
    assert sum(spent_alpha(0.05, k) for k in range(1, 10_000)) == pytest.approx(0.05, rel=1e-3)
    assert all(spent_alpha(0.05, k) > spent_alpha(0.05, k + 1) for k in range(1, 50))
    with pytest.raises(ValueError):
        spent_alpha(0.05, 0)


def run_sequential(rng, *, log_ratio: float, threshold: float, max_pairs: int, sd: float) -> tuple[str, int]:
    """Add one round per arm per look (after a first look at 2 per arm) until the interval clears."""
    base, cand = simulate_rounds(rng, k=2, log_ratio=log_ratio, sd=sd)
    for look in range(1, max_pairs):
        interval = sequential_interval(base, cand, look=look)
        if interval.clears(threshold):
            return ("pass" if interval.high <= threshold else "fail"), look
        more_b, more_c = simulate_rounds(rng, k=1, log_ratio=log_ratio, sd=sd)
        base, cand = base + more_b, cand + more_c
    return "undecided", max_pairs


def test_stopping_when_decided_does_not_inflate_the_wrong_pass_rate():
    """The true ratio sits exactly at the threshold: every PASS is wrong. Looking after every pair
    of rounds must not push wrong PASSes above alpha/2."""
    rng = np.random.default_rng(20261124)
    trials = 2000
    outcomes = [run_sequential(rng, log_ratio=math.log(1.3), threshold=1.3, max_pairs=12, sd=PRIOR_SD)[0]
                for _ in range(trials)]
    assert outcomes.count("pass") / trials <= 0.025


def test_a_clear_effect_is_decided_in_few_rounds():
    rng = np.random.default_rng(3)
    looks = [run_sequential(rng, log_ratio=math.log(2.0), threshold=1.3, max_pairs=12, sd=0.05) for _ in range(200)]
    assert all(outcome == "fail" for outcome, _ in looks)
    assert statistics.median(look for _, look in looks) == 1


def test_module_names_its_prior_in_json():
    data = ratio_across_rounds([1.0, 1.2], [2.0, 2.1]).to_json()
    assert data["prior"] == {"sd": rounds.PRIOR_SD, "df": rounds.PRIOR_DF}
    assert data["rounds"] == {"baseline": 2, "candidate": 2}


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 400), st.one_of(st.just(0.5 + DEFAULT_CONFIDENCE / 2), st.floats(0.5, 0.99995)))
def test_t_quantile_is_scipys_bit_for_bit(df, p):
    from scipy.special import stdtrit  # the reference: what scipy.stats.t.ppf calls

    assert rounds.t_quantile(df, p) == float(stdtrit(df, p))


def test_t_quantile_at_the_default_confidence_is_scipys_for_every_df_it_holds():
    from scipy.special import stdtrit

    held = range(rounds.PRIOR_DF, rounds.PRIOR_DF + len(rounds._T_DEFAULT))
    assert [rounds.t_quantile(df, 0.5 + DEFAULT_CONFIDENCE / 2) for df in held] == \
        [float(stdtrit(df, 0.5 + DEFAULT_CONFIDENCE / 2)) for df in held]
