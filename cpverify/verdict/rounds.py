"""Intervals that hold across runs: rounds (separate processes) of each arm, and when to stop.

One process's steps describe that process, not the host: three identical CP=1 processes of real
slime on one H100 gave medians 0.634, 0.613 and 0.898 s (benchmarks/slime-h100x1-aa-rounds/), far
outside what any one round's step-to-step spread suggests. So an arm runs as several **rounds**,
and the ratio's interval is built from the rounds, not from the steps:

- Each round is summarised by one number (its statistic over the counted steps) and taken on the
  log scale, where a CP cost is a difference and process-to-process noise is roughly symmetric.
- The log ratio is the difference of the arms' mean log round statistics; its standard error uses
  the **pooled between-round variance** of both arms (within-round noise is inside it: a round's
  statistic carries its own sampling error).
- Few rounds estimate a variance badly, so the variance is **moderated** as limma's moderated t
  does (Smyth 2004, doi:10.2202/1544-6115.1027): the rounds' pooled variance is averaged with a
  prior, weighted by degrees of freedom. The prior is what recorded A/A rounds of real slime show
  (PRIOR_SD, PRIOR_DF below). With one round per arm the interval is the prior's alone, and says so.
- Sequential looks (add rounds while undecided) spend the error rate: look k uses
  alpha_k = alpha / (k (k + 1)), which sums to alpha over any number of looks, so the chance that
  ANY look's interval misses the true ratio stays at most alpha however long the run goes on.

Warm-up is found in the data (`warmup_end`), per round, instead of a fixed count of rollouts: 0, 1
or 2 leading steps (MAX_FOUND_WARMUP, what recorded real slime needs), never more.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# numpy (and scipy) are imported in the functions that use them: `cpverify --help` imports the
# verdict package, through evidence.py, and stays light (tests/test_cli_help.py; stats.py says why)

# The between-round standard deviation of log(round statistic) seen in recorded A/A rounds of real
# slime (identical CP=1 processes, train-only, 1K responses; mean actor_train_time after the detected
# warm-up): H100 x1 (two sessions of 3 rounds: 0.127, 0.214), H200 x1 (3 rounds: 0.035), 2x H200
# (2 rounds: 0.032); pooled over the 7 degrees of freedom. `benchmarks/slime-h100x1-aa-rounds/`.
PRIOR_SD = 0.135
PRIOR_DF = 7
DEFAULT_CONFIDENCE = 0.95
# Student's t quantile at the default confidence, scipy.special.stdtrit(df, 0.975), for df PRIOR_DF
# to PRIOR_DF + 31 (up to 16 rounds an arm), as scipy computes them (tests/test_rounds.py holds each
# to it): importing scipy.special takes ~0.4 s of CPU, most of a short verdict's, for one number.
_T_DEFAULT = (
    2.364624251592784, 2.306004135204166, 2.262157162798205, 2.228138851986274,
    2.200985160091639, 2.1788128296672284, 2.1603686564627913, 2.144786687917804,
    2.131449545559776, 2.1199052992212546, 2.1098155778333156, 2.1009220402410382,
    2.0930240544083087, 2.085963447265864, 2.0796138447276795, 2.0738730679040254,
    2.0686576104190486, 2.0638985616280245, 2.0595385527532972, 2.0555294386428735,
    2.0518305164802846, 2.0484071417952454, 2.045229642132703, 2.0422724563012378,
    2.039513446396408, 2.0369333434601016, 2.0345152974493383, 2.0322445093177186,
    2.030107928250343, 2.0280940009804502, 2.0261924630291093, 2.0243941639119694,
)


def t_quantile(df: int, p: float) -> float:
    """Student's t quantile: scipy.special.stdtrit, the ufunc scipy.stats.t.ppf calls (its scale 1
    and loc 0 change no bit; importing scipy.stats takes half a second, scipy.special a fifth of it),
    read from _T_DEFAULT where it holds it."""
    if p == 0.5 + DEFAULT_CONFIDENCE / 2 and 0 <= df - PRIOR_DF < len(_T_DEFAULT):
        return _T_DEFAULT[df - PRIOR_DF]
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def spent_alpha(alpha: float, look: int) -> float:
    """The error rate look `look` (1, 2, ...) may spend: alpha / (k (k+1)), summing to alpha."""
    if look < 1:
        raise ValueError(f"looks are counted from 1, not {look}")
    return alpha / (look * (look + 1))


# The most leading steps of a round the data may call warm-up. Recorded real slime (624b824a,
# train-only, tests/data/aa-rounds) is slow at rollout 0 on every host (5-21x the steady step) and,
# on 2x H200, sometimes still at rollout 1 (0.8-2.8 s against ~0.34 s); rollout 2 is steady in every
# recorded round. A slow stretch longer than that is no warm-up slime has shown: it is part of what
# the user pays, and a CP=2 round whose first steps are slow must be judged on them (a cap of half a
# round let five 3x steps in twelve fall away, and a run that cost 1.8x PASSed).
MAX_FOUND_WARMUP = 2


def warmup_end(values: Sequence[float], *, k: float = 3.0) -> int:
    """How many leading steps of one round are warm-up (0 to MAX_FOUND_WARMUP): the leading run of
    steps above the round's band (its median + k robust standard deviations from the median absolute
    deviation, and at least 1.25x the median), at most MAX_FOUND_WARMUP and at most half the round.
    The median and MAD ignore a few slow steps, so the warm-up does not widen its band.

    A slow step after the first steady one is not warm-up: it is part of what the user pays.
    """
    import numpy as np

    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 3:  # two values have no majority to call steady
        return 0
    centre = float(np.median(x))
    mad = float(np.median(np.abs(x - centre))) * 1.4826
    # and at least 25% above the median: a step a little slower than an unusually even round is noise
    band = max(centre + k * mad, 1.25 * centre)
    cut = 0
    while cut < min(MAX_FOUND_WARMUP, n // 2) and x[cut] > band:
        cut += 1
    return cut


@dataclass(frozen=True)
class RoundsInterval:
    """The ratio candidate/baseline across rounds and its interval at `confidence`."""

    ratio: float
    low: float
    high: float
    confidence: float
    rounds: tuple[int, int]  # (baseline, candidate)
    df: int  # of the moderated variance: PRIOR_DF + the rounds' own
    between_sd: float | None  # measured pooled log-sd of the rounds; None with one round per arm
    sd: float  # the moderated log-sd the interval used

    @property
    def measured(self) -> bool:
        """Whether the rounds themselves showed their spread (at least one arm with two rounds)."""
        return self.between_sd is not None

    def clears(self, threshold: float) -> bool:
        """The interval lies entirely on one side of the threshold: the data decide."""
        return self.high <= threshold or self.low > threshold

    def to_json(self) -> dict:
        return {"ratio": self.ratio, "ci_low": self.low, "ci_high": self.high, "confidence": self.confidence,
                "rounds": {"baseline": self.rounds[0], "candidate": self.rounds[1]}, "df": self.df,
                "between_round_sd": self.between_sd, "sd_used": self.sd,
                "prior": {"sd": PRIOR_SD, "df": PRIOR_DF}}


def ratio_across_rounds(baseline: Sequence[float], candidate: Sequence[float], *,
                        confidence: float = DEFAULT_CONFIDENCE) -> RoundsInterval:
    """The ratio of the arms' geometric means of their round statistics (one positive number per
    round), with a moderated-t interval (see the module's docstring)."""
    if not baseline or not candidate:
        raise ValueError("each arm needs at least one round")
    return contrast_across_rounds([(baseline, -1), (candidate, +1)], confidence=confidence)


def contrast_across_rounds(groups: Sequence[tuple[Sequence[float], int]], *,
                           confidence: float = DEFAULT_CONFIDENCE) -> RoundsInterval:
    """exp(sum of sign x mean log round statistic) over the groups (arms), with its moderated-t
    interval: the same machinery for one ratio (baseline -1, candidate +1) and for the ratio of
    two ratios of an A/B (base CP=1 +1, base CP=N -1, candidate CP=1 -1, candidate CP=N +1).

    Every group's rounds are independent processes with the same between-round spread on the log
    scale (what the A/A rounds show), so the contrast's variance is sd^2 x sum(1/n_group), sd^2
    pooled over every group (sum of n_group - 1 degrees of freedom) and moderated by the prior.
    `rounds` in the result: (rounds of the first group, rounds of the last)."""
    import numpy as np

    if not groups or any(not values for values, _ in groups):
        raise ValueError("each arm needs at least one round")
    if any(sign not in (1, -1) for _, sign in groups):
        raise ValueError("a contrast's signs are +1 and -1")
    means, deviations = [], []
    for values, _ in groups:
        raw = np.asarray(values, dtype=float)
        if not (np.all(np.isfinite(raw)) and np.all(raw > 0)):
            raise ValueError("a round statistic must be a positive, finite number")
        # Logs relative to the group's first round: seconds or milliseconds, every quotient (and so the
        # spread and the ratio) is the same number, bit for bit, when all rounds scale by a power of two
        relative = np.log(raw / raw[0])
        means.append(float(raw[0]) * math.exp(float(relative.mean())))  # the group's geometric mean
        deviations.append(relative - relative.mean())
    own_df = sum(len(x) - 1 for x in deviations)
    between = None
    if own_df > 0:
        between = math.sqrt(sum(float(np.sum(x ** 2)) for x in deviations) / own_df)
    df = PRIOR_DF + own_df
    variance = (PRIOR_DF * PRIOR_SD ** 2 + own_df * (between or 0.0) ** 2) / df
    se = math.sqrt(variance * sum(1 / len(x) for x in deviations))
    half = t_quantile(df, 0.5 + confidence / 2) * se
    ratio = 1.0
    for mean, (_, sign) in zip(means, groups, strict=True):
        ratio = ratio * mean if sign > 0 else ratio / mean
    return RoundsInterval(ratio=ratio, low=ratio * math.exp(-half), high=ratio * math.exp(half),
                          confidence=confidence, rounds=(len(deviations[0]), len(deviations[-1])), df=df,
                          between_sd=between, sd=math.sqrt(variance))


def sequential_interval(baseline: Sequence[float], candidate: Sequence[float], *, look: int,
                        alpha: float = 1 - DEFAULT_CONFIDENCE) -> RoundsInterval:
    """The interval at look `look` of a sequential design, at the confidence it may spend."""
    return ratio_across_rounds(baseline, candidate, confidence=1 - spent_alpha(alpha, look))
