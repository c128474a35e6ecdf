"""cpverify.verdict.stats: quantiles, bootstrap ratio interval, Mann-Whitney U."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from cpverify.verdict import stats


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


def test_bootstrap_interval_covers_the_truth_about_as_often_as_it_claims():
    """With 7 rollouts per arm (a real run's size) the 95% interval still covers the true ratio ~95% of the time."""
    rng = random.Random(7)
    trials, hits = 200, 0
    for i in range(trials):
        baseline = [rng.lognormvariate(0, 0.05) for _ in range(7)]
        candidate = [1.2 * rng.lognormvariate(0, 0.05) for _ in range(7)]
        lo, hi = stats.bootstrap_ratio_ci(baseline, candidate, resamples=500, seed=i)
        hits += lo <= 1.2 <= hi
    assert 0.85 <= hits / trials <= 1.0


def test_bootstrap_rejects_undefined_ratios():
    with pytest.raises(ValueError):
        stats.bootstrap_ratio_ci([], [1.0])
    with pytest.raises(ValueError):
        stats.bootstrap_ratio_ci([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        stats.bootstrap_ratio_ci([1.0], [1.0], confidence=1.0)


def test_compare_gives_no_interval_below_min_n():
    est = stats.compare([1.0, 1.1], [2.0, 2.1], min_n=3)
    assert est.ratio == pytest.approx(2.05 / 1.05)
    assert est.ci is None and "too few" in est.note
    assert est.p_value is not None


def test_compare_handles_missing_and_non_positive_baselines():
    assert stats.compare([], [1.0]).ratio is None
    assert "baseline" in stats.compare([], [1.0]).note
    assert "either" in stats.compare([], []).note
    est = stats.compare([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert est.ratio is None and "3 in the baseline" in est.note and "not durations" in est.note


@pytest.mark.parametrize("bad", [-1.0, 0.0, -0.0, math.nan, math.inf, -math.inf])
def test_a_candidate_value_that_is_not_a_duration_gives_no_ratio(bad):
    """Negated or zeroed candidate timings once gave ratios of -1.02 and 0.00 (issue 10)."""
    good = [1.0, 1.1, 0.9, 1.05]
    est = stats.compare(good, [1.0, 1.02, bad, 0.98])
    assert est.ratio is None and est.ci is None and "1 in the candidate" in est.note
    assert stats.compare([bad, *good], good).ratio is None
    with pytest.raises(ValueError):
        stats.bootstrap_ratio_ci(good, [bad, *good])


def test_is_duration():
    assert all(map(stats.is_duration, [1e-9, 0.5, 3, 1e300]))
    assert not any(map(stats.is_duration, [0, 0.0, -1.0, math.nan, math.inf, True, "1.0", None]))


def test_compare_full_estimate_serialises():
    rng = random.Random(2)
    est = stats.compare([rng.uniform(1, 1.1) for _ in range(8)], [rng.uniform(1, 1.1) for _ in range(8)])
    data = est.to_json()
    assert data["ci"][0] <= data["ratio"] <= data["ci"][1]
    assert 0 <= data["p_value"] <= 1 and data["n_baseline"] == 8
