"""Rules the verdict must keep for every pair of logs, not only the scenarios in test_verdict.py.

hypothesis generates CP=1/CP=2 pairs in slime's real line format (tests/helpers/slime_log.py:
the test double for slime, which cannot run here), every log goes through the real parser as
text, and the real decide() judges it. The rules are the ones a wrong PASS would break
(issue 10): a real slowdown, an error signature, a step cut short, a timing that is not a
duration or an unconfirmed CP never PASS; the order the arms are given in and the unit the
timings are in never change the decision.

The bootstrap runs 500 resamples instead of 2000 to keep the suite quick: the rules are about
the decision, which no property here lets ride on the resampler's precision.
"""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from cpverify import verdict as v
from cpverify.parse import parse_stream
from helpers.slime_log import ERROR_LINES, SlimeLog, synthetic_arm

THRESHOLDS = v.Thresholds(resamples=500)
PROPERTY = settings(max_examples=40, deadline=None)
STEP_TIMERS = ("wake_up", "data_preprocess", "ref_log_probs", "log_probs", "actor_train")

# Per-rollout actor_train times: a level, and per-step noise within +/-10% (a quiet GPU box).
levels = st.floats(min_value=0.05, max_value=50.0, allow_nan=False, allow_infinity=False)
noise = st.lists(st.floats(min_value=0.9, max_value=1.1), min_size=4, max_size=12)


def arm(cp: int, times: list[float], *, layout_cp: int | None | str = "same", seed: int = 0) -> SlimeLog:
    """An arm whose rollout 0 is a 3x warm-up (not counted) and whose counted rollouts take `times`."""
    return synthetic_arm(cp=cp, actor_train_time=times[0], times=[3 * times[0], *times], layout_cp=layout_cp,
                         seed=seed)


def judge(base: SlimeLog, cand: SlimeLog, *, b_cp: int = 1, c_cp: int = 2, swapped: bool = False) -> v.Verdict:
    """Parse both logs as text and decide; `swapped` names them in the other order (as a user might)."""
    evidence = [v.ArmEvidence(f"cp{b_cp}", b_cp, parse_stream(io.BytesIO(base.text().encode()))),
                v.ArmEvidence(f"cp{c_cp}", c_cp, parse_stream(io.BytesIO(cand.text().encode())))]
    pair = (f"cp{b_cp}", f"cp{c_cp}")
    if swapped:
        evidence, pair = evidence[::-1], pair[::-1]
    return v.decide(evidence, comparisons=[pair], thresholds=THRESHOLDS)


@st.composite
def same_speed(draw) -> tuple[list[float], list[float]]:
    """Counted step times of two arms at the same speed (the same steps in another order): a clean
    pair of them PASSes, so whatever a test then does to one arm is what decides."""
    level = draw(levels)
    times = [level * s for s in draw(noise)]
    return times, [times[i] for i in draw(st.permutations(range(len(times))))]


@st.composite
def clean_pairs(draw) -> tuple[SlimeLog, SlimeLog]:
    base, cand = draw(same_speed())
    return arm(1, base, seed=1), arm(2, cand, seed=2)


def decision(verdict: v.Verdict):
    return verdict.status, verdict.to_json()["ratio"], verdict.to_json()["ratio_ci"], sorted(
        (c.name, c.arm or "", c.effect) for c in verdict.checks if c.effect)


@PROPERTY
@given(level=levels, steps=noise, data=st.data(),
       cost=st.floats(min_value=THRESHOLDS.pass_ratio * 1.0001, max_value=4.0))
def test_a_true_cost_above_the_threshold_never_passes(level, steps, data, cost):
    """Every CP=2 step is at least `cost` x a CP=1 step (the same steps, reordered, each possibly slower)."""
    base = [level * s for s in steps]
    order = data.draw(st.permutations(range(len(base))))
    slower = data.draw(st.lists(st.floats(min_value=1.0, max_value=1.5), min_size=len(base), max_size=len(base)))
    cand = [cost * base[i] * f for i, f in zip(order, slower, strict=True)]
    verdict = judge(arm(1, base, seed=1), arm(2, cand, seed=2))
    assert verdict.status != v.PASS, verdict.headline
    assert verdict.to_json()["ratio"] >= cost * (1 - 1e-9)


@PROPERTY
@given(pair=clean_pairs(), cls=st.sampled_from(sorted(ERROR_LINES)), in_base=st.booleans(), where=st.floats(0, 1))
def test_an_error_signature_in_either_arm_never_passes(pair, cls, in_base, where):
    base, cand = pair
    clean = judge(base, cand)
    assert clean.status == v.PASS, clean.headline  # the pair is clean without the error
    hit = base if in_base else cand
    hit.lines.insert(int(where * len(hit.lines)), f"(MegatronTrainRayActor pid=4242) {ERROR_LINES[cls]}")
    verdict = judge(base, cand)
    assert verdict.status == v.FAIL and cls in {c.name.removeprefix("error:") for c in verdict.checks if c.effect}


@PROPERTY
@given(pair=clean_pairs(), in_base=st.booleans(), timer=st.sampled_from(STEP_TIMERS))
def test_an_arm_cut_inside_a_step_never_passes(pair, in_base, timer):
    """The arm died inside its next step, or the log was copied while it ran."""
    base, cand = pair
    hit = base if in_base else cand
    hit.cut_mid_step(len([line for line in hit.lines if "train_metric_utils.py:401 - perf " in line]), timer=timer)
    verdict = judge(base, cand)
    assert verdict.status != v.PASS
    assert any(c.name == "complete" and c.effect for c in verdict.checks)


@PROPERTY
@given(times=same_speed(), data=st.data(), in_base=st.booleans(),
       bad=st.sampled_from([0.0, -0.0, float("nan"), float("inf"), float("-inf")]) | st.floats(max_value=-1e-9))
def test_a_timing_that_is_not_a_duration_never_passes(times, data, in_base, bad):
    base, cand = (list(t) for t in times)
    damaged = base if in_base else cand
    damaged[data.draw(st.integers(0, len(damaged) - 1))] = bad  # in a counted rollout
    verdict = judge(arm(1, base, seed=1), arm(2, cand, seed=2))
    assert verdict.status != v.PASS
    assert any(c.name == "timings" and c.effect for c in verdict.checks)


@PROPERTY
@given(times=same_speed(), layout=st.sampled_from([None, 1, 4]))
def test_an_unconfirmed_or_different_cp_never_passes(times, layout):
    """slime ignores a misspelled CP flag: without the layout line saying cp=2, CP=2 is not confirmed."""
    base, cand = times
    assert judge(arm(1, base, seed=1), arm(2, cand, seed=2)).status == v.PASS
    verdict = judge(arm(1, base, seed=1), arm(2, cand, layout_cp=layout, seed=2))
    assert verdict.status != v.PASS
    assert any(c.name == "cp_effective" and c.effect for c in verdict.checks)


@st.composite
def any_pairs(draw):
    """Any pair: either arm's speed, a possible error line, a cut, a missing layout line."""
    steps, level = draw(noise), draw(levels)
    base = [level * s for s in steps]
    cand = [draw(st.floats(0.5, 3.0)) * b * draw(st.floats(0.8, 1.25)) for b in base]
    logs = [arm(1, base, seed=1), arm(2, cand, seed=2, layout_cp=draw(st.sampled_from(["same", "same", None])))]
    if draw(st.booleans()):
        draw(st.sampled_from(logs)).error(draw(st.sampled_from(sorted(ERROR_LINES))))
    if draw(st.booleans()):
        draw(st.sampled_from(logs)).cut_mid_step(len(steps) + 1)
    return logs


@PROPERTY
@given(pair=any_pairs())
def test_the_order_the_arms_are_given_in_never_changes_the_decision(pair):
    base, cand = pair
    assert decision(judge(base, cand, swapped=True)) == decision(judge(base, cand))


@PROPERTY
@given(level=levels, steps=noise, data=st.data(), power=st.integers(-10, 10))
def test_scaling_both_arms_by_one_factor_never_changes_the_decision(level, steps, data, power):
    """Seconds or milliseconds, a slow or a fast GPU: only the ratio matters. Powers of two keep
    every product exact in binary floating point, so what is tested is the rule, not rounding."""
    base = [level * s for s in steps]
    cand = [data.draw(st.floats(0.5, 3.0)) * b for b in base]
    factor = 2.0 ** power
    plain = judge(arm(1, base, seed=1), arm(2, cand, seed=2))
    scaled = judge(arm(1, [t * factor for t in base], seed=1), arm(2, [t * factor for t in cand], seed=2))
    assert decision(scaled) == decision(plain)


@PROPERTY
@given(pair=any_pairs(), junk=st.none() | st.text(max_size=3000), in_base=st.booleans())
def test_logs_alone_never_make_a_verdict_blocked(pair, junk, in_base):
    """BLOCKED says an arm could not start, which only a runner knows: `cpverify verdict` (logs, no
    runner) documents the exit codes of the statuses logs can give, and no log may give another."""
    from cpverify.cli.verdict import EXIT_CODES

    texts = [log.text() for log in pair]
    if junk is not None:  # any text at all in place of one arm's log
        texts[0 if in_base else 1] = junk
    evidence = [v.ArmEvidence(f"cp{cp}", cp, parse_stream(io.BytesIO(text.encode()))) for cp, text in zip((1, 2), texts, strict=True)]
    verdict = v.decide(evidence, comparisons=[("cp1", "cp2")], thresholds=THRESHOLDS)
    assert EXIT_CODES[verdict.exit_code] == verdict.status != v.BLOCKED
