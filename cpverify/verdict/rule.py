"""The decision rule in words: whole (verdict.md, verdict.json's `rule`) and in one line (terminals)."""

from __future__ import annotations

from cpverify.verdict.model import NUMERICS_METRICS, Thresholds, short_metric


def decision_rule(t: Thresholds) -> str:
    conf = f"{t.confidence:.0%}"
    numerics = (f" or when first-step numerics ({', '.join(NUMERICS_METRICS)}) differ beyond "
                f"rel/abs {t.numerics_tolerance:g} (deterministic mode)" if t.deterministic else "")
    return (
        f"PASS when every compared arm finished without an error signature, its log does not end inside a step "
        f"and holds every rollout its plan asked for (when the plan says), every counted timing is a positive "
        f"duration, its effective CP read from the log equals the requested CP, it has at least "
        f"{t.min_counted_steps} counted steps (train-side perf records of rollouts >= {t.warmup}, a rollout seen "
        f"from several ranks counted once), and the upper bound of the {conf} percentile-bootstrap interval "
        f"({t.resamples} resamples, fixed seed) of median(candidate {t.primary_metric}) / median(baseline "
        f"{t.primary_metric}) is <= {t.pass_ratio:.2f}, the candidate being the arm with the larger CP. "
        f"FAIL when an arm shows an error signature or the runner reports failed, fatal, hang, stalled or "
        f"deadline; when the effective CP differs from the requested CP; when the interval's lower bound is "
        f"> {t.pass_ratio:.2f}{numerics}. BLOCKED when an arm could not start (environment). INCONCLUSIVE "
        f"otherwise: too few counted steps, an arm that did not finish, a timing that is zero, negative, NaN or "
        f"infinite, an interval that straddles {t.pass_ratio:.2f}, or a CP>1 arm whose "
        f"effective CP the log does not state (slime ignores misspelled flags, so an unconfirmed CP never "
        f"passes). Over several comparisons the worst status wins: FAIL > BLOCKED > INCONCLUSIVE > PASS."
    )


def short_rule(t: Thresholds) -> str:
    """The rule in one line, for terminals; decision_rule() has the whole of it."""
    # "PASS if", not "PASS:": a `NAME: value` pair whose name reads like a password is redacted.
    return (f"PASS if no errors, arms finished, timings are durations, effective CP confirmed, "
            f">= {t.min_counted_steps} steps per arm, and the "
            f"{t.confidence:.0%} CI upper bound of {short_metric(t.primary_metric)} candidate/baseline <= "
            f"{t.pass_ratio:.2f}; FAIL if errors, CP mismatch, or the lower bound > {t.pass_ratio:.2f}; "
            f"otherwise INCONCLUSIVE (BLOCKED if an arm could not start)")
