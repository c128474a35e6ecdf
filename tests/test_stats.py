"""cpverify.verdict.stats: quantiles, the bootstrap of a median and of a mean, the ratio interval and
how many values it needs, Mann-Whitney U."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpverify.verdict import stats

PROPERTY = settings(max_examples=60, deadline=None)


@pytest.mark.parametrize("n", [1, 2, 5, 8, 13])
def test_quantiles_match_the_inclusive_method(n):
    rng = random.Random(n)
    values = [rng.uniform(0, 10) for _ in range(n)]
    assert stats.median(values) == pytest.approx(statistics.median(values))
    if n >= 2:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        assert stats.quantile(values, 0.25) == pytest.approx(q1)
        assert stats.quantile(values, 0.75) == pytest.approx(q3)


def test_quantile_rejects_bad_input():
    with pytest.raises(ValueError):
        stats.quantile([], 0.5)
    with pytest.raises(ValueError):
        stats.quantile([1.0], 1.5)


def test_summary_reports_median_and_spread():
    s = stats.summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s.n, s.median, s.q1, s.q3, s.min, s.max) == (5, 3.0, 2.0, 4.0, 1.0, 100.0)
    assert s.iqr == 2.0 and s.rel_iqr == pytest.approx(2 / 3)
    assert s.to_json()["iqr"] == 2.0


def test_mann_whitney_exact_small_samples():
    # 3 vs 3, completely separated: U = 9, exact two-sided p = 2 / C(6,3) = 0.1
    assert stats.mann_whitney_u([1, 2, 3], [4, 5, 6]) == (9.0, pytest.approx(0.1))
    # 7 vs 7 separated: p = 2 / C(14,7)
    u, p = stats.mann_whitney_u(list(range(7)), list(range(10, 17)))
    assert u == 49 and p == pytest.approx(2 / math.comb(14, 7))
    # the statistic is symmetric: candidate below baseline gives U = 0, same p
    assert stats.mann_whitney_u([4, 5, 6], [1, 2, 3]) == (0.0, pytest.approx(0.1))


@PROPERTY
@given(baseline=st.lists(st.integers(1, 8).map(float), min_size=1, max_size=30),
       candidate=st.lists(st.integers(1, 8).map(float), min_size=1, max_size=30))
def test_mann_whitney_u_counts_the_pairs_the_candidate_wins(baseline, candidate):
    """U is the number of (baseline, candidate) pairs the candidate is larger in, ties counted 1/2."""
    u, p = stats.mann_whitney_u(baseline, candidate)
    assert u == sum((c > b) + 0.5 * (c == b) for b in baseline for c in candidate)
    assert 0.0 <= p <= 1.0


def test_mann_whitney_all_identical_is_not_significant():
    assert stats.mann_whitney_u([1.0] * 5, [1.0] * 5) == (12.5, 1.0)


def test_mann_whitney_agrees_with_scipy():
    from scipy import stats as scipy_stats  # in the test extra: a missing scipy fails, it never skips
    rng = random.Random(3)
    # (sizes, scipy method we must agree with): exact below 60 values without ties, else normal approximation
    cases = [((4, 6), "exact"), ((7, 7), "exact"), ((12, 9), "exact"), ((40, 35), "asymptotic")]
    samples = [([rng.gauss(0, 1) for _ in range(m)], [rng.gauss(0.5, 1) for _ in range(n)], method)
               for (m, n), method in cases]
    samples.append(([1, 2, 2, 3, 3, 3], [2, 3, 4, 4, 5], "asymptotic"))  # ties
    for baseline, candidate, method in samples:
        u, p = stats.mann_whitney_u(baseline, candidate)
        reference = scipy_stats.mannwhitneyu(candidate, baseline, alternative="two-sided", method=method)
        assert u == pytest.approx(reference.statistic)
        assert p == pytest.approx(reference.pvalue, rel=1e-9)


def test_bootstrap_interval_is_reproducible_and_brackets_the_ratio():
    rng = random.Random(11)
    baseline = [rng.uniform(0.95, 1.05) for _ in range(7)]
    candidate = [2 * rng.uniform(0.95, 1.05) for _ in range(7)]
    first = stats.bootstrap_ratio_ci(baseline, candidate)
    assert first == stats.bootstrap_ratio_ci(baseline, candidate)  # fixed seed: same logs, same verdict
    ratio = stats.median(candidate) / stats.median(baseline)
    assert first[0] <= ratio <= first[1]
    assert 1.8 < first[0] < first[1] < 2.25


def test_bootstrap_interval_narrows_with_more_data():
    rng = random.Random(5)
    small = ([rng.gauss(1, 0.05) for _ in range(6)], [rng.gauss(1.1, 0.05) for _ in range(6)])
    large = ([rng.gauss(1, 0.05) for _ in range(200)], [rng.gauss(1.1, 0.05) for _ in range(200)])
    lo_s, hi_s = stats.bootstrap_ratio_ci(*small)
    lo_l, hi_l = stats.bootstrap_ratio_ci(*large)
    assert hi_l - lo_l < (hi_s - lo_s) / 2
    assert lo_l < 1.1 < hi_l


@pytest.mark.parametrize("statistic", stats.STATISTICS)
def test_bootstrap_interval_covers_the_truth_about_as_often_as_it_claims(statistic):
    """With 7 rollouts per arm (a real run's size) the 95% interval still covers the true ratio ~95% of the time."""
    rng = random.Random(7)
    trials, hits = 200, 0
    for i in range(trials):
        baseline = [rng.lognormvariate(0, 0.05) for _ in range(7)]
        candidate = [1.2 * rng.lognormvariate(0, 0.05) for _ in range(7)]
        lo, hi = stats.bootstrap_ratio_ci(baseline, candidate, statistic=statistic, resamples=500, seed=i)
        hits += lo <= 1.2 <= hi
    assert 0.85 <= hits / trials <= 1.0


@pytest.mark.parametrize("statistic", stats.STATISTICS)
def test_a_95_percent_interval_covers_95_percent_not_90(statistic):
    """Where the bootstrap is accurate (40 steps per arm), the interval labelled 95% covers the true
    ratio at least 93% of the time: an interval leaving alpha (not alpha/2) in each tail, a 90% one,
    covers about 90% and fails; and at most 99%: it is not needlessly wide."""
    rng = np.random.default_rng(40)
    trials, hits = 600, 0
    for i in range(trials):
        baseline, candidate = rng.lognormal(0, 0.1, 40), 1.2 * rng.lognormal(0, 0.1, 40)
        lo, hi = stats.bootstrap_ratio_ci(list(baseline), list(candidate), statistic=statistic, resamples=1000, seed=i)
        hits += lo <= 1.2 <= hi
    assert 0.93 <= hits / trials <= 0.99


@pytest.mark.parametrize("slow_share", [0.0, 0.26])
def test_the_mean_interval_from_the_fewest_steps_covers_at_least_90_percent(slow_share):
    """At 6 steps per arm (min_sample at 95%), steps with +/-10% noise or a quarter of them 10x slower
    in both arms: the 95% interval of the ratio of means covers the true 1.2 at least 90% of the
    time (resampling alone gives its means (n - 1)/n of their variance: 87-89% here)."""
    rng = np.random.default_rng(6)
    trials, hits = 1000, 0
    for i in range(trials):
        baseline, candidate = ([scale * (10.0 if rng.random() < slow_share else 1.0) * rng.lognormal(0, 0.1)
                                for _ in range(6)] for scale in (1.0, 1.2))
        lo, hi = stats.bootstrap_ratio_ci(baseline, candidate, statistic=stats.MEAN, resamples=1000, seed=i)
        hits += lo <= 1.2 <= hi
    assert hits / trials >= 0.90


@PROPERTY
@given(size=st.integers(400, 4000), seed=st.integers(0, 2**32 - 1), decimals=st.integers(1, 6),
       confidence=st.floats(0.5, 0.99))
def test_the_interval_leaves_half_of_one_minus_confidence_in_each_tail(size, seed, decimals, confidence):
    """percentile_interval of any bootstrap distribution (ties included) leaves (1 - confidence)/2 of it
    below and as much above, to within one value: a 90% interval labelled 95% leaves 5% and fails."""
    distribution = np.round(np.random.default_rng(seed).lognormal(0, 0.3, size), decimals)
    lo, hi = stats.percentile_interval(distribution, confidence)
    tail, slack = (1 - confidence) / 2, 1 / size
    assert np.mean(distribution < lo) <= tail + slack and np.mean(distribution <= lo) >= tail - slack
    assert np.mean(distribution > hi) <= tail + slack and np.mean(distribution >= hi) >= tail - slack


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [1.0, 2.0, 4.0], [1.0, 1.0, 2.0, 5.0], [0.5, 1.0, 2.0, 3.0, 8.0],
                                    [1.0, 2.0, 3.0, 5.0, 8.0, 13.0]])
def test_the_bootstrap_of_a_median_draws_what_resampling_draws(values):
    """Every one of the n^n equally likely resamples, enumerated: the median's bootstrap distribution
    (drawn from order statistics, without building a resample) gives each median its probability."""
    n = len(values)
    exact = Counter(float(np.median(resample)) for resample in itertools.product(values, repeat=n))
    drawn = stats.bootstrap(values, stats.MEDIAN, resamples=200_000, rng=np.random.default_rng(n))
    assert set(np.unique(drawn)) <= set(exact)
    for value, ways in exact.items():
        assert np.mean(drawn == value) == pytest.approx(ways / n**n, abs=0.005), value


def test_the_bootstrap_of_a_mean_centres_on_the_mean_and_spreads_as_its_standard_error():
    """Resampled means: centred on the sample's mean, with the variance of a mean (s^2 / n, s^2 the
    unbiased variance; plain resampling gives (n - 1)/n of it, too narrow for a few steps)."""
    values = [0.9, 1.0, 1.05, 1.1, 0.95, 1.2]
    drawn = stats.bootstrap(values, stats.MEAN, resamples=200_000, rng=np.random.default_rng(6))
    assert drawn.mean() == pytest.approx(np.mean(values), rel=1e-3)
    assert drawn.var() == pytest.approx(np.var(values, ddof=1) / len(values), rel=0.03)
    assert (drawn > 0).all()


# -- how many values an interval needs -----------------------------------------------------------

@pytest.mark.parametrize(("confidence", "need"), [(0.95, 6), (0.9, 5), (0.99, 8), (0.5, 2), (0.75, 3)])
def test_min_sample_at_common_levels(confidence, need):
    assert stats.min_sample(confidence) == need


@PROPERTY
@given(confidence=st.floats(0.01, 0.999))
def test_min_sample_is_the_fewest_values_whose_range_can_hold_the_confidence(confidence):
    """From n values no interval reaches past their smallest and largest, which miss the median with
    probability 2^(1-n): min_sample is the smallest n for which that is at most 1 - confidence."""
    n = stats.min_sample(confidence)
    assert 2.0 ** (1 - n) <= 1 - confidence
    assert n == 1 or 2.0 ** (2 - n) > 1 - confidence


def test_one_value_fewer_than_min_sample_misses_the_median_too_often():
    """The range of 5 values (one fewer than a 95% interval needs) misses the median of their
    distribution 1/16 of the time: more than the 5% a 95% interval may."""
    values = np.random.default_rng(5).lognormal(0, 0.2, (40_000, stats.min_sample(0.95) - 1))
    missed = np.mean((values.min(axis=1) > 1.0) | (values.max(axis=1) < 1.0))  # lognormal(0, s): median 1
    assert missed == pytest.approx(1 / 16, abs=0.005) and missed > 0.05


@PROPERTY
@given(n_base=st.integers(1, 12), n_cand=st.integers(1, 12), min_n=st.integers(1, 12),
       confidence=st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99]), seed=st.integers(0, 1000))
def test_no_interval_is_labelled_from_fewer_values_than_it_needs(n_base, n_cand, min_n, confidence, seed):
    rng = np.random.default_rng(seed)
    baseline, candidate = list(rng.lognormal(0, 0.1, n_base)), list(rng.lognormal(0, 0.1, n_cand))
    est = stats.compare(baseline, candidate, min_n=min_n, confidence=confidence, resamples=200)
    enough = min(n_base, n_cand) >= max(min_n, stats.min_sample(confidence))
    assert [e.statistic for e in est.estimates] == list(stats.STATISTICS)
    assert all((e.ci is not None) == enough for e in est.estimates)
    assert est.confidence == confidence
    if min(n_base, n_cand) < stats.min_sample(confidence):
        for statistic in stats.STATISTICS:
            with pytest.raises(ValueError):
                stats.bootstrap_ratio_ci(baseline, candidate, statistic=statistic, confidence=confidence)


def test_bootstrap_rejects_undefined_ratios():
    with pytest.raises(ValueError):
        stats.bootstrap_ratio_ci([], [1.0])
    with pytest.raises(ValueError):
        stats.bootstrap_ratio_ci([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        stats.bootstrap_ratio_ci([1.0], [1.0], confidence=1.0)


def test_compare_gives_no_interval_below_min_n():
    est = stats.compare([1.0, 1.1] * 3, [2.0, 2.1] * 3, min_n=7)
    assert est.ratio == pytest.approx(2.05 / 1.05) and est.of(stats.MEAN).ratio == pytest.approx(2.05 / 1.05)
    assert est.ci is None and est.of(stats.MEAN).ci is None and est.note  # no interval, and the note says why
    assert est.p_value is not None


def test_compare_gives_the_median_and_the_mean_a_slow_minority_moves():
    """A quarter of the candidate's steps 10x slower: the median ratio stays at 1, the mean's is 3.25."""
    baseline = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99] * 2
    candidate = [10 * b if i % 4 == 0 else b for i, b in enumerate(baseline)]
    est = stats.compare(baseline, candidate)
    median_, mean_ = est.of(stats.MEDIAN), est.of(stats.MEAN)
    assert median_.ratio == pytest.approx(1.0, abs=0.02) and median_.ci[1] < 1.3
    assert mean_.ratio == pytest.approx(np.mean(candidate) / np.mean(baseline)) and mean_.ci[0] > 1.3
    assert est.to_json()["statistics"]["mean"]["ci"] == list(mean_.ci)


def test_compare_handles_missing_and_non_positive_baselines():
    assert stats.compare([], [1.0]).ratio is None
    assert "baseline" in stats.compare([], [1.0]).note
    assert "either" in stats.compare([], []).note
    est = stats.compare([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert est.ratio is None and "3 in the baseline" in est.note  # how many, and in which arm


@pytest.mark.parametrize("bad", [-1.0, 0.0, -0.0, math.nan, math.inf, -math.inf])
def test_a_candidate_value_that_is_not_a_duration_gives_no_ratio(bad):
    """A negated, zero or non-finite candidate timing gives no ratio and no interval, never -1.02 or 0.00."""
    good = [1.0, 1.1, 0.9, 1.05]
    est = stats.compare(good, [1.0, 1.02, bad, 0.98])
    assert est.ratio is None and est.ci is None and "1 in the candidate" in est.note
    assert stats.compare([bad, *good], good).ratio is None
    with pytest.raises(ValueError):
        stats.bootstrap_ratio_ci(good, [bad, *good])


def test_is_duration():
    assert all(map(stats.is_duration, [1e-9, 0.5, 3, 1e300]))
    assert not any(map(stats.is_duration, [0, 0.0, -1.0, math.nan, math.inf, True, "1.0", None]))


@given(st.one_of(st.floats(), st.integers(), st.floats().map(np.float64)))
def test_a_duration_is_a_positive_finite_number_of_any_numeric_type(value):
    assert stats.is_duration(value) == (math.isfinite(value) and value > 0)


def test_compare_full_estimate_serialises():
    rng = random.Random(2)
    est = stats.compare([rng.uniform(1, 1.1) for _ in range(8)], [rng.uniform(1, 1.1) for _ in range(8)])
    data = est.to_json()
    assert data["ci"][0] <= data["ratio"] <= data["ci"][1]
    assert 0 <= data["p_value"] <= 1 and data["n_baseline"] == 8


_ANY_VALUE = st.one_of(st.floats(), st.integers(-(2**70), 2**70), st.booleans(), st.none(), st.just("1.5"),
                       st.builds(np.float64, st.floats()))


@settings(max_examples=300, deadline=None)
@given(st.lists(_ANY_VALUE, max_size=8))
def test_durations_counted_at_once_are_counted_one_at_a_time(values):
    """The count a whole sample is checked by is is_duration's, whatever its values' types (a bool among floats)."""
    assert stats.all_durations(values) == all(map(stats.is_duration, values))
