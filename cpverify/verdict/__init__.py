"""Decide PASS / FAIL / INCONCLUSIVE / BLOCKED from parsed logs of two or more arms.

Pure: `decide()` takes parsed evidence and returns a Verdict; it touches no file (the `cpverify
verdict` command, cpverify/cli/verdict.py, reads the logs; cpverify.report writes the bundle).

The decision rule, in words, is `Verdict.rule` (also printed in verdict.md). In short:
every failed check names the verdict status it forces; a comparison's status is the
worst forced status among its arms' checks and its own; the overall status is the
worst over all comparisons, with FAIL > BLOCKED > INCONCLUSIVE > PASS. FAIL outranks
BLOCKED because an error we saw is evidence about the software, whereas BLOCKED only
says that part of it could not be tested.

  model.py        the statuses, the metrics, Thresholds, ArmEvidence, Check, ArmSummary, Comparison, Verdict
  evidence.py     what the checks read from a parsed log: counted rollouts, durations, errors by class
  arm_checks.py   the checks of one arm, each a function of its facts to its rows
  pair_checks.py  the checks of one comparison: the same job but for CP, the speed, the numerics
  decide.py       the decision over every arm and comparison, and the headline
  rule.py         the decision rule in words
  stats.py        the statistics of steps: medians and means, their bootstrap and the ratio interval, how many values it needs, Mann-Whitney U
  rounds.py       the statistics of rounds: the between-round interval, its prior, alpha spent per look, warm-up
  across.py       a metric's ratios across an arm's rounds (stats' RatioEstimate), the A/A reading, verdict.json's rounds, a look
  ab.py           the A/B of two slime revisions: the ratio of their CP overheads
The fixes the rows give are cpverify.fixes'.
"""

from cpverify.verdict.decide import decide
from cpverify.verdict.evidence import counted_iterations, counted_perf, pretraining_only
from cpverify.verdict.rule import decision_rule, short_rule
from cpverify.verdict.terms import (
    BLOCKED,
    ERROR_EFFECTS,
    EXIT_CODES,
    FAIL,
    INCONCLUSIVE,
    ITERATION_METRIC,
    NUMERICS_METRICS,
    PASS,
    PRIMARY_METRIC,
    SCHEMA_VERSION,
    SECONDARY_GATED,
    TIMING_METRICS,
    ArmEvidence,
    ArmSummary,
    Check,
    Comparison,
    Thresholds,
    Verdict,
    short_metric,
    timing_metrics,
    worst,
)

__all__ = [
    "BLOCKED", "ERROR_EFFECTS", "EXIT_CODES", "FAIL", "INCONCLUSIVE", "ITERATION_METRIC", "NUMERICS_METRICS", "PASS",
    "PRIMARY_METRIC", "SCHEMA_VERSION", "SECONDARY_GATED", "TIMING_METRICS", "ArmEvidence", "ArmSummary", "Check",
    "Comparison", "Thresholds", "Verdict", "counted_iterations", "counted_perf", "decide", "decision_rule",
    "pretraining_only", "short_metric", "short_rule", "timing_metrics", "worst",
]
