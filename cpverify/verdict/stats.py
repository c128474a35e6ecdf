"""Statistics of an A/B of per-rollout timings (numpy, vectorised, deterministic).

Method choices, and why:
- Two statistics of an arm's step times, because a user pays for two things:
  the **median**, what a typical step costs: a slime iteration occasionally stalls (NCCL
  re-init, a slow rollout, GC) and one stall must not move it (Megatron-LM's functional tests and
  pytest-benchmark compare medians for the same reason); and the **mean**, the total time
  divided by the steps, what a run costs: a slow minority hides under the median (a quarter of
  the CP=2 steps 10x slower leaves the median ratio at 1.0 while the run takes 3.3x as long).
  The verdict judges the CP=2/CP=1 ratio of both and decides on the worse
  (cpverify.verdict.pair_checks.speed).
- A ratio (candidate/baseline) is scale-free ("CP=2 takes 1.04x as long") and compares across
  models and GPUs.
- Its interval is an equal-tailed **percentile bootstrap**: each arm resampled independently
  (`bootstrap`, an arm's distribution of the statistic), the ratio of the two distributions,
  alpha/2 of it left out in each tail (`percentile_interval`); a fixed seed, so the same logs
  always give the same interval. No distributional assumption.
- **Fewer values than an interval needs get none** (`min_sample`): an interval for a median
  from n values can reach no further than their smallest and largest, and the median lies
  outside that range with probability 2^(1-n) whatever the (continuous) distribution; so no interval from
  fewer than 6 values per arm holds 95%, whatever method draws it.
- A **Mann-Whitney U** two-sided p-value is reported beside it (as asv does): rank-based, exact
  for small samples without ties. It answers "do the arms differ at all", not "by how much", so
  it informs the reader but does not gate.
Quantiles use linear interpolation between order statistics (numpy's default, R type 7).

An arm's bootstrap distribution is a vector of `resamples` values of its statistic, however it
was resampled (its steps here; its rounds, then their steps, elsewhere): `percentile_interval` of
the ratio of two such vectors is the ratio's interval.

The verdict's own intervals are taken across rounds (separate processes: cpverify.verdict.across,
.rounds), because steps of one process do not show what a rerun meets; they come in this module's
shape (`RatioEstimate`, one `Estimate` per statistic), so `RatioEstimate.against` is the one rule
of "the worse" for a step bootstrap and a rounds interval alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
# numpy is imported in the functions that use it, not here: `cpverify --help` imports the verdict
# package (for the options' defaults) and stays light (tests/test_cli_help.py).

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20260821
MEDIAN, MEAN = "median", "mean"
STATISTICS = (MEDIAN, MEAN)
_EXACT_MW_MAX_N = 60  # exact U distribution below this total size (fast enough, no ties)
_CHUNK = 1 << 20  # values gathered at once when resampling a mean: memory flat in the sample's size


def is_duration(value: object) -> bool:
    """A timing a ratio can be taken of: a real number of seconds, finite and > 0.

    A zero, negative, NaN or infinite "duration" is not a measurement (a broken timer, a damaged
    or edited log); one of them in either arm would make a ratio of medians say anything.
    """
    if type(value) is float:  # what the parser gives, tested first: checks read thousands of them
        return 0.0 < value < math.inf  # NaN compares false
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


_PLAIN_NUMBERS = frozenset({float, int})


def all_durations(values: Sequence[float]) -> bool:
    """Every one of `values` is a duration (is_duration)."""
    return _not_durations(values) == 0


def _not_durations(values: Sequence[float]) -> int:
    """How many of `values` are not durations (is_duration), counted by numpy when they are all numbers."""
    import numpy as np

    if set(map(type, values)) <= _PLAIN_NUMBERS:  # a bool among floats would read as 1.0 in an array
        x = np.asarray(values)
        if x.dtype.kind in "iuf":  # not an int past 64 bits
            return int(np.count_nonzero(~(np.isfinite(x) & (x > 0))))
    return sum(1 for v in values if not is_duration(v))  # bools, strings, None: one at a time


def min_sample(confidence: float) -> int:
    """The fewest values per arm an interval at `confidence` can come from: the smallest n with
    2^(1-n) <= 1 - confidence (6 at 95%, 5 at 90%, 8 at 99%). Below it even the widest interval
    the values allow, from their smallest to their largest, misses the median more often than
    1 - confidence (all n values fall on one side of it with probability 2 * 2^-n)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} must lie strictly between 0 and 1")
    n = 1
    while 2.0 ** (1 - n) > 1.0 - confidence:
        n += 1
    return n


def quantile(values: Sequence[float], q: float) -> float:
    """Quantile q in [0, 1] with linear interpolation (type 7). `values` need not be sorted."""
    import numpy as np

    if len(values) == 0:
        raise ValueError("quantile of an empty sample")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile level {q} is outside [0, 1]")
    return float(np.quantile(np.asarray(values, dtype=float), q))


def median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def statistic_of(values: Sequence[float], statistic: str) -> float:
    """The median or the mean of a sample."""
    import numpy as np

    if len(values) == 0:
        raise ValueError(f"{statistic} of an empty sample")
    if statistic == MEDIAN:
        return median(values)
    if statistic == MEAN:
        return float(np.mean(np.asarray(values, dtype=float)))
    raise ValueError(f"unknown statistic {statistic!r}: use one of {', '.join(STATISTICS)}")


@dataclass(frozen=True)
class Summary:
    """Median, spread and mean of one metric in one arm."""

    n: int
    median: float
    q1: float
    q3: float
    min: float
    max: float
    mean: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def rel_iqr(self) -> float | None:
        """IQR as a fraction of the median: the run-to-run noise the reader should expect."""
        return self.iqr / self.median if self.median else None

    def to_json(self) -> dict:
        return {"n": self.n, "median": self.median, "q1": self.q1, "q3": self.q3, "iqr": self.iqr,
                "rel_iqr": self.rel_iqr, "min": self.min, "max": self.max, "mean": self.mean}


def summarize(values: Sequence[float]) -> Summary:
    import numpy as np

    if len(values) == 0:
        raise ValueError("cannot summarise an empty sample")
    x = np.asarray(values, dtype=float)
    q1, mid, q3 = (float(q) for q in np.quantile(x, [0.25, 0.5, 0.75]))
    return Summary(n=x.size, median=mid, q1=q1, q3=q3, min=float(x.min()), max=float(x.max()),
                   mean=float(x.mean()))


def bootstrap(values: Sequence[float], statistic: str, *, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """An arm's bootstrap distribution: the statistic of `resamples` resamples of `values`, durations
    (> 0), each resample as many values drawn with replacement. Time linear in the sample, memory
    flat in it."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("a bootstrap needs at least one value")
    if statistic == MEDIAN:
        return _bootstrap_quantile(np.sort(x), 0.5, resamples, rng)
    if statistic == MEAN:
        return _bootstrap_mean(x, resamples, rng)
    raise ValueError(f"unknown statistic {statistic!r}: use one of {', '.join(STATISTICS)}")


def _bootstrap_quantile(ordered: np.ndarray, q: float, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The type-7 quantile q of each resample, drawn exactly without building a resample.

    Drawing n indices uniformly from 1..n is taking ceil(n * U) of n uniforms U, and ceil is
    monotone, so the resample's k-th smallest value is ordered[ceil(n * U_(k)) - 1], with U_(k)
    the k-th smallest of n uniforms: Beta(k, n - k + 1). Given U_(k) = u, the next, U_(k+1), is u
    plus (1 - u) times the smallest of the n - k uniforms above u: Beta(1, n - k). A quantile
    between two order statistics takes both.
    """
    n = ordered.size
    position = q * (n - 1)
    low = math.floor(position)
    fraction = position - low
    k = low + 1  # the lower order statistic's rank, 1-based
    u = rng.beta(k, n - k + 1, resamples)
    lower = ordered[_rank_index(u, n)]
    if fraction == 0:
        return lower
    upper = ordered[_rank_index(u + (1 - u) * rng.beta(1, n - k, resamples), n)]
    return lower + fraction * (upper - lower)


def _rank_index(u: np.ndarray, n: int) -> np.ndarray:
    import numpy as np

    return np.clip(np.ceil(u * n).astype(np.int64) - 1, 0, n - 1)


def _bootstrap_mean(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Each resample's mean, the resamples gathered a chunk at a time.

    Resampled means spread with the plug-in variance, (n - 1)/n of the sample's unbiased one: at
    6 steps per arm a "95%" interval of a ratio of means covered 87-89% of simulated runs. Their
    spread about the sample's mean is widened to the unbiased variance, on a log scale so that a
    mean of durations stays positive: 91-93% at 6-7 steps, 95% from about 30 (tests/test_stats.py).
    """
    import numpy as np

    n = x.size
    out = np.empty(resamples)
    rows = max(1, _CHUNK // n)
    index = np.uint32 if n < 2**32 else np.int64
    for start in range(0, resamples, rows):
        stop = min(start + rows, resamples)
        out[start:stop] = x[rng.integers(0, n, (stop - start, n), dtype=index)].mean(axis=1)
    if n > 1:
        mean = x.mean()
        out = mean * (out / mean) ** math.sqrt(n / (n - 1))
    return out


def percentile_interval(distribution: np.ndarray, confidence: float) -> tuple[float, float]:
    """The equal-tailed interval of a bootstrap distribution: (1 - confidence) / 2 of it below, as much above."""
    import numpy as np

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} must lie strictly between 0 and 1")
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(distribution, [tail, 1.0 - tail])
    return float(low), float(high)


def check_samples(confidence: float, *samples: Sequence[float]) -> None:
    """What an interval from these samples needs: durations only, and enough of them in each."""
    need = min_sample(confidence)
    if any(len(s) < need for s in samples):
        raise ValueError(f"an interval at {confidence:.0%} needs >= {need} values in each sample, not "
                         f"{' and '.join(str(len(s)) for s in samples)}")
    if any(_not_durations(s) for s in samples):
        raise ValueError("every value must be a positive, finite duration")


def bootstrap_ratio_ci(baseline: Sequence[float], candidate: Sequence[float], *, statistic: str = MEDIAN,
                       confidence: float = 0.95, resamples: int = DEFAULT_RESAMPLES,
                       seed: int = DEFAULT_SEED) -> tuple[float, float]:
    """Percentile-bootstrap interval for statistic(candidate) / statistic(baseline).

    Raises ValueError for fewer values in either sample than min_sample(confidence), or a value
    in either that is not a duration (a ratio of durations is undefined there).
    """
    check_samples(confidence, baseline, candidate)
    return _ratio_interval(baseline, candidate, statistic, confidence, resamples, seed)


def _ratio_interval(baseline: Sequence[float], candidate: Sequence[float], statistic: str, confidence: float,
                    resamples: int, seed: int) -> tuple[float, float]:
    import numpy as np

    rng = np.random.default_rng(seed)
    base = bootstrap(baseline, statistic, resamples=resamples, rng=rng)
    return percentile_interval(bootstrap(candidate, statistic, resamples=resamples, rng=rng) / base, confidence)


def mann_whitney_u(baseline: Sequence[float], candidate: Sequence[float]) -> tuple[float, float]:
    """(U of candidate, two-sided p-value). U counts pairs where candidate > baseline (ties 1/2).

    Exact null distribution when there are no ties and the samples are small; otherwise the
    normal approximation with tie and continuity corrections.
    """
    import numpy as np

    m, n = len(candidate), len(baseline)
    if not m or not n:
        raise ValueError("Mann-Whitney U needs at least one value in each sample")
    pooled = np.concatenate([np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)])
    _, inverse, tie_sizes = np.unique(pooled, return_inverse=True, return_counts=True)
    average_rank = np.cumsum(tie_sizes) - (tie_sizes - 1) / 2  # 1-based, ties share their mean rank
    u = float(average_rank[inverse][n:].sum()) - m * (m + 1) / 2
    has_ties = bool((tie_sizes > 1).any())
    if not has_ties and m + n <= _EXACT_MW_MAX_N:
        return u, _exact_two_sided_p(round(u), m, n)
    mean = m * n / 2
    tie_term = float((tie_sizes.astype(float) ** 3 - tie_sizes).sum()) / ((m + n) * (m + n - 1)) if m + n > 1 else 0.0
    variance = m * n / 12 * ((m + n + 1) - tie_term)
    if variance <= 0:  # every value identical: no evidence of any difference
        return u, 1.0
    z = (abs(u - mean) - 0.5) / math.sqrt(variance)
    return u, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def _exact_two_sided_p(u: int, m: int, n: int) -> float:
    # counts[k][s]: ways to choose k of the first i positions with rank sum s; U = s - k(k+1)/2.
    total = m + n
    max_sum = sum(range(total - m + 1, total + 1))
    counts = [[0] * (max_sum + 1) for _ in range(m + 1)]
    counts[0][0] = 1
    for rank in range(1, total + 1):
        for k in range(min(rank, m), 0, -1):
            row, prev = counts[k], counts[k - 1]
            for s in range(max_sum, rank - 1, -1):
                if prev[s - rank]:
                    row[s] += prev[s - rank]
    offset = m * (m + 1) // 2
    dist = [counts[m][s + offset] for s in range(m * n + 1)]
    all_ways = sum(dist)
    lower = sum(dist[: u + 1]) / all_ways
    upper = sum(dist[u:]) / all_ways
    return min(1.0, 2 * min(lower, upper))


@dataclass(frozen=True)
class Estimate:
    """One statistic's candidate/baseline ratio and its interval (None: too few values for one)."""

    statistic: str
    ratio: float
    ci: tuple[float, float] | None

    def to_json(self) -> dict:
        return {"statistic": self.statistic, "ratio": self.ratio, "ci": list(self.ci) if self.ci else None}


@dataclass(frozen=True)
class RatioEstimate:
    """The candidate/baseline ratios of one metric, one `Estimate` per statistic (none when no ratio
    can be had: `note` says why); `ratio` and `ci` are the median's."""

    estimates: tuple[Estimate, ...]
    p_value: float | None
    n_baseline: int
    n_candidate: int
    confidence: float
    note: str = ""

    def of(self, statistic: str) -> Estimate | None:
        return next((e for e in self.estimates if e.statistic == statistic), None)

    def against(self, threshold: float) -> Estimate | None:
        """The estimate a decision against `threshold` uses: the worse of those with an interval, the one
        lying wholly above the threshold, else across it, else the one reaching higher. None without one."""

        def worse(e: Estimate) -> tuple[int, float, float]:
            low, high = e.ci or (0.0, 0.0)
            return (2 if low > threshold else 1 if high > threshold else 0), high, e.ratio

        return max((e for e in self.estimates if e.ci), key=worse, default=None)

    @property
    def ratio(self) -> float | None:
        median_ = self.of(MEDIAN)
        return median_.ratio if median_ else None

    @property
    def ci(self) -> tuple[float, float] | None:
        median_ = self.of(MEDIAN)
        return median_.ci if median_ else None

    def to_json(self) -> dict:
        return {"ratio": self.ratio, "ci": list(self.ci) if self.ci else None, "p_value": self.p_value,
                "n_baseline": self.n_baseline, "n_candidate": self.n_candidate, "confidence": self.confidence,
                "statistics": {e.statistic: e.to_json() for e in self.estimates},
                "method": "ratio of medians and ratio of means, each with an equal-tailed percentile bootstrap "
                          "interval (the arms resampled independently); two-sided Mann-Whitney U",
                "note": self.note}


def compare(baseline: Sequence[float], candidate: Sequence[float], *, min_n: int = 6, confidence: float = 0.95,
            resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
            statistics: Sequence[str] = STATISTICS) -> RatioEstimate:
    """Each statistic's ratio with its interval, and the Mann-Whitney p; no interval below `min_n`
    values per arm, nor below what one needs (min_sample). The mean's bootstrap costs resamples x n
    (the median's, resamples): ask only for the statistics something reads."""
    n_b, n_c = len(baseline), len(candidate)

    def estimate(estimates=(), p=None, note=""):
        return RatioEstimate(tuple(estimates), p, n_b, n_c, confidence, note)

    if not n_b or not n_c:
        return estimate(note="no values in " + ("either arm" if not n_b and not n_c else
                                                "the baseline" if not n_b else "the candidate"))
    bad = [f"{count} in the {arm}" for arm, values in (("baseline", baseline), ("candidate", candidate))
           if (count := _not_durations(values))]
    if bad:
        return estimate(note=f"values that are not durations (zero, negative, NaN or infinite): {' and '.join(bad)}; "
                             "a ratio is undefined")
    _, p = mann_whitney_u(baseline, candidate)
    need = max(min_n, min_sample(confidence))
    enough = min(n_b, n_c) >= need
    estimates = [Estimate(s, statistic_of(candidate, s) / statistic_of(baseline, s),
                          _ratio_interval(baseline, candidate, s, confidence, resamples, seed) if enough else None)
                 for s in statistics]
    note = "" if enough else f"too few values for an interval ({n_b} vs {n_c}; need >= {need} each)"
    return estimate(estimates, p, note)
