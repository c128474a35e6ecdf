"""The decision rule in words: whole (verdict.md, verdict.json's `rule`) and in one line (terminals)."""

from __future__ import annotations

from cpverify.verdict.evidence import FAR_BEYOND_NOISE
from cpverify.verdict.pair_checks import WORK_TOLERANCE
from cpverify.verdict.rounds import MAX_FOUND_WARMUP, PRIOR_DF, PRIOR_SD
from cpverify.verdict.terms import NUMERICS_METRICS, Thresholds, short_metric


def decision_rule(t: Thresholds) -> str:
    conf = f"{t.confidence:.0%}"
    numerics = (f" or when first-step numerics ({', '.join(NUMERICS_METRICS)}) differ beyond "
                f"rel/abs {t.numerics_tolerance:g} (deterministic mode)" if t.deterministic else "")
    return (
        f"PASS when every compared arm finished without an error signature, its log does not end inside a step "
        f"and holds every rollout its plan asked for (when the plan says), states each fact once, every counted "
        f"timing is a positive duration and every loss and grad norm a finite number, its effective CP read from "
        f"the log equals the requested CP, the two logs show one job on the same GPUs but for CP (layouts, "
        f"Megatron's argument dumps, work per step within {WORK_TOLERANCE:.0%}), it has at least "
        f"{t.min_counted_steps} counted steps in every round ({_counted(t)}, a rollout printed "
        f"twice alike counted once), every later round of an arm ran the job of its round 1, and the upper bounds "
        f"of the {conf} intervals of candidate/baseline {t.primary_metric} across rounds, of the ratio of medians "
        f"(a typical step) and of the ratio of means (the total time per step: a slow minority of steps moves it, "
        f"not the median), are both <= {t.pass_ratio:.2f}, the candidate being the arm with the larger CP; the "
        f"worse of the two decides (verdict.json's decided_by). An arm runs as rounds (separate processes); each "
        f"round is summarised by the median and the mean of its counted steps, each ratio is that of the arms' "
        f"geometric means of those, and its interval a moderated t from the spread between rounds pooled with the "
        f"recorded A/A rounds of real slime (sd {PRIOR_SD} on {PRIOR_DF} degrees of freedom): with one round per "
        f"arm the prior alone. When `cpverify run` adds rounds until the interval decides, look k uses confidence "
        f"1 - {1 - t.confidence:.2g}/(k(k+1)), so that every look together stays at {conf}. "
        f"FAIL when an arm shows an error signature, a NaN or infinite loss or grad norm, or the runner reports "
        f"failed, fatal, hang, stalled or deadline; when the effective CP differs from the requested CP; when "
        f"slime's grad-norm check failed; when either interval's lower bound is > {t.pass_ratio:.2f}{numerics}. "
        f"BLOCKED when an arm could not start (environment). INCONCLUSIVE otherwise: too few counted steps, an arm "
        f"that did not finish, a timing that is zero, negative, NaN or infinite, an interval that straddles "
        f"{t.pass_ratio:.2f} (and none above it), a CP>1 arm whose effective CP the log does not state (slime ignores misspelled "
        f"flags, so an unconfirmed CP never passes), a log that states one fact twice with two values, arms whose "
        f"logs show other jobs or other GPUs or cannot show they ran the same, a ratio below half of "
        f"baseline CP / candidate CP (more than CP can give on the same GPUs: a broken comparison), first-step "
        f"numerics more than {FAR_BEYOND_NOISE:g}x apart, or a grad-norm check the plan asked for that the logs "
        f"do not show. Over several comparisons the worst status wins: FAIL > BLOCKED > INCONCLUSIVE > PASS."
    )


def _counted(t: Thresholds) -> str:
    if t.warmup is None:
        return ("train-side perf records after the round's warm-up, the leading steps above its median + 3 robust "
                f"sd and 1.25x its median, at most {MAX_FOUND_WARMUP} (and at most half the round)")
    return f"train-side perf records of rollouts >= {t.warmup}"


def short_rule(t: Thresholds) -> str:
    """The rule in one line, for terminals; decision_rule() has the whole of it."""
    # "PASS if", not "PASS:": a `NAME: value` pair whose name reads like a password is redacted.
    return (f"PASS if no errors, arms finished, timings are durations, losses finite, effective CP confirmed, "
            f"one job on the same GPUs, >= {t.min_counted_steps} steps per round, and the "
            f"{t.confidence:.0%} CI (across rounds) upper bounds of {short_metric(t.primary_metric)} "
            f"candidate/baseline, median and mean, <= {t.pass_ratio:.2f}; FAIL if errors, NaN losses, CP mismatch, "
            f"or either lower bound > {t.pass_ratio:.2f}; "
            f"otherwise INCONCLUSIVE (BLOCKED if an arm could not start)")
