"""Rules the verdict must keep for every pair of logs, not only the scenarios in test_verdict.py.

hypothesis generates CP=1/CP=2 pairs in slime's real line format (tests/helpers/slime_log.py:
the test double for slime, which cannot run here), every log goes through the real parser as
text, and the real decide() judges it. The rules are the ones a wrong PASS would break:
a real slowdown, an error signature, a step cut short, a timing that is not a
duration or an unconfirmed CP never PASS; the order the arms are given in and the unit the
timings are in never change the decision.

Each log is judged as ROUNDS rounds of its arm (the same log each time: no spread between rounds,
so the interval is the recorded prior's, moderated by the rounds' degrees of freedom, about ×/÷ 1.2),
enough for a clean pair at one speed to PASS; one round per arm could not (its interval is the
prior's alone). The warm-up is the fixed first rollout, which the generated logs make 3x slow.
"""

from __future__ import annotations

import io
import random
import tracemalloc

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cpverify import verdict as v
from cpverify.errors import EXIT_USAGE, InputError
from cpverify.parse import parse_stream
from cpverify.report import story
from cpverify.verdict import stats
from cpverify.verdict.evidence import gaps
from cpverify.verdict.terms import SEVERITY
from helpers.slime_log import ERROR_LINES, SlimeLog, synthetic_arm

THRESHOLDS = v.Thresholds(resamples=500, warmup=1)
ROUNDS = 3
PROPERTY = settings(max_examples=40, deadline=None)
STEP_TIMERS = ("wake_up", "data_preprocess", "ref_log_probs", "log_probs", "actor_train")

# Per-rollout actor_train times: a level, and per-step noise within +/-10% (a quiet GPU box).
levels = st.floats(min_value=0.05, max_value=50.0, allow_nan=False, allow_infinity=False)
noise = st.lists(st.floats(min_value=0.9, max_value=1.1), min_size=stats.min_sample(THRESHOLDS.confidence),
                max_size=12)


def arm(cp: int, times: list[float], *, layout_cp: int | None | str = "same", seed: int = 0) -> SlimeLog:
    """An arm whose rollout 0 is a 3x warm-up (not counted) and whose counted rollouts take `times`."""
    return synthetic_arm(cp=cp, actor_train_time=times[0], times=[3 * times[0], *times], layout_cp=layout_cp,
                         seed=seed)


def as_rounds(name: str, cp: int, log: SlimeLog) -> list[v.ArmEvidence]:
    """The log parsed as text, as ROUNDS rounds of arm `name`."""
    parsed = parse_stream(io.BytesIO(log.text().encode()))
    return [v.ArmEvidence(name if k == 1 else f"{name}.r{k}", cp, parsed, arm=name, round=k)
            for k in range(1, ROUNDS + 1)]


def judge(base: SlimeLog, cand: SlimeLog, *, b_cp: int = 1, c_cp: int = 2, swapped: bool = False) -> v.Verdict:
    """Decide on both logs, each as ROUNDS rounds of its arm; `swapped` names them in the other order
    (as a user might)."""
    evidence = [*as_rounds(f"cp{b_cp}", b_cp, base), *as_rounds(f"cp{c_cp}", c_cp, cand)]
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


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


@PROPERTY
@given(times=same_speed(), data=st.data(), factor=st.floats(2.0, 20.0))
def test_a_slow_minority_that_makes_the_run_cost_more_than_the_threshold_never_passes(times, data, factor):
    """Some CP=2 steps (at most half: the median does not see them) `factor` x slower, so that the
    CP=2 run's total time per step exceeds the threshold times CP=1's: the user pays that total."""
    base, cand = (list(t) for t in times)
    slow = data.draw(st.sets(st.integers(0, len(cand) - 1), min_size=1, max_size=len(cand) // 2))
    cand = [c * factor if i in slow else c for i, c in enumerate(cand)]
    assume(_mean(cand) > THRESHOLDS.pass_ratio * _mean(base))
    verdict = judge(arm(1, base, seed=1), arm(2, cand, seed=2))
    assert verdict.status != v.PASS, verdict.headline
    assert verdict.to_json()["decided_by"]["ci"][1] > THRESHOLDS.pass_ratio


def test_a_slow_start_after_the_warm_up_that_makes_the_run_cost_more_never_passes_with_the_found_warm_up():
    """As the slow-minority property, the slow steps leading each CP=2 round right after its 3x first
    rollout, the warm-up found in the data (the default) instead of a fixed count."""
    base, cand = [1.0] * 12, [3.0] * 5 + [1.0] * 7
    assert _mean(cand) > THRESHOLDS.pass_ratio * _mean(base)
    verdict = v.decide([*as_rounds("cp1", 1, arm(1, base, seed=1)), *as_rounds("cp2", 2, arm(2, cand, seed=2))],
                       comparisons=[("cp1", "cp2")], thresholds=v.Thresholds(resamples=500))
    assert verdict.status != v.PASS, verdict.headline


@PROPERTY
@given(level=levels, n=st.integers(30, 40), share=st.floats(0.22, 0.3), factor=st.floats(9.0, 12.0),
       seed=st.integers(0, 99))
def test_a_quarter_of_steps_ten_times_slower_fails_on_the_mean(level, n, share, factor, seed):
    """CP=2's steps as CP=1's but a quarter of them ~10x as long: the median ratio stays near 1, the
    run takes ~3x as long. FAIL, decided by the ratio of means, its whole interval above the threshold."""
    rng = random.Random(seed)
    base = [level * rng.uniform(0.95, 1.05) for _ in range(n)]
    slow = set(rng.sample(range(n), round(share * n)))
    cand = [b * (factor if i in slow else 1.0) for i, b in enumerate(base)]
    verdict = judge(arm(1, base, seed=1), arm(2, cand, seed=2))
    data = verdict.to_json()
    assert verdict.status == v.FAIL, verdict.headline
    assert data["ratio"] < THRESHOLDS.pass_ratio  # the ratio of medians alone does not see them
    assert data["decided_by"]["statistic"] == stats.MEAN and data["decided_by"]["ci"][0] > THRESHOLDS.pass_ratio
    assert next(c for c in verdict.checks if c.name == "speed:cp2 vs cp1").effect == v.FAIL
    # verdict.md's per-phase row shows what decided, not the median that stayed within the threshold
    primary = verdict.primary.metrics[THRESHOLDS.primary_metric]
    assert story.shown(primary, THRESHOLDS.pass_ratio).statistic == stats.MEAN
    assert story.meaning(THRESHOLDS.primary_metric, primary, verdict)[0] == "❌"


def _judged(ci: list[float]) -> str:
    return v.PASS if ci[1] <= THRESHOLDS.pass_ratio else v.FAIL if ci[0] > THRESHOLDS.pass_ratio else v.INCONCLUSIVE


@PROPERTY
@given(pair=any_pairs())
def test_the_speed_row_follows_the_worse_of_the_median_and_the_mean(pair):
    """decided_by is the statistic whose interval the speed row judged (below the threshold: pass;
    above: FAIL; across: INCONCLUSIVE), and the worse of the two: none judges worse, and of two that
    judge alike none reaches higher."""
    verdict = judge(*pair)
    data = verdict.to_json()
    speed = next((c for c in verdict.checks if c.name == "speed:cp2 vs cp1"), None)
    decided = data["decided_by"]
    if decided is None or speed is None or speed.status == "skip":
        return
    assert (speed.effect or v.PASS) == _judged(decided["ci"])
    for other in data["comparisons"][0]["metrics"][THRESHOLDS.primary_metric]["statistics"].values():
        worse = (SEVERITY[_judged(other["ci"])], other["ci"][1])
        assert worse <= (SEVERITY[_judged(decided["ci"])], decided["ci"][1])


@PROPERTY
@given(steps=st.integers(-3, 12), confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_a_minimum_below_what_an_interval_needs_is_refused_naming_the_fix(steps, confidence):
    need = stats.min_sample(confidence)
    if steps >= need:
        assert v.Thresholds(min_counted_steps=steps, confidence=confidence).min_counted_steps == steps
        return
    with pytest.raises(InputError) as refused:
        v.Thresholds(min_counted_steps=steps, confidence=confidence)
    assert refused.value.exit_code == EXIT_USAGE and f"--min-steps {need}" in refused.value.fix


def test_cpverify_verdict_refuses_min_steps_1_before_writing_anything(tmp_path, capsys):
    from cpverify.cli import main

    logs = [synthetic_arm(cp=cp, actor_train_time=1.0, seed=cp).write(tmp_path / f"cp{cp}.log") for cp in (1, 2)]
    code = main(["verdict", "--baseline", str(logs[0]), "--candidate", str(logs[1]), "--min-steps", "1",
                 "--out", str(tmp_path / "out")])
    assert code == EXIT_USAGE and "--min-steps 6" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@PROPERTY
@given(seen=st.sets(st.integers(-5, 60)), start=st.integers(-5, 60), stop=st.integers(-5, 70))
def test_gaps_are_the_ids_missing_from_a_range(seen, start, stop):
    spans = gaps(seen, start, stop)
    missing = [i for first, last in spans for i in range(first, last + 1)]
    assert missing == [i for i in range(start, stop) if i not in seen]
    assert all(last < following for (_, last), (following, _) in zip(spans, spans[1:], strict=False))


@pytest.mark.parametrize("stated", ["num_rollout", "expected_rollouts"])
def test_a_stated_rollout_count_stays_a_count(stated):
    """A log (or --expected-rollouts) stating 10,000,000 rollouts, of which 8 ran: judged in the
    memory of a log of 8 rollouts, the missing ones counted and named as one span."""
    count = 10_000_000

    def evidence(name: str, cp: int, seed: int) -> v.ArmEvidence:
        log = synthetic_arm(cp=cp, actor_train_time=1.0, seed=seed,
                            arguments={"num_rollout": count} if stated == "num_rollout" else None)
        return v.ArmEvidence(name, cp, parse_stream(io.BytesIO(log.text().encode())),
                             expected_rollouts=count if stated == "expected_rollouts" else None)

    arms = [evidence("cp1", 1, 1), evidence("cp2", 2, 2)]
    tracemalloc.start()
    try:
        verdict = v.decide(arms, comparisons=[("cp1", "cp2")], thresholds=THRESHOLDS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20  # a list of the 10^7 ids alone takes > 300 MiB
    complete = next(c for c in verdict.checks if c.name == "complete" and c.arm == "cp2")
    assert complete.effect == v.INCONCLUSIVE and f"{count - 8} " in complete.detail
    assert f"rollouts 8-{count - 1})" in complete.detail


@PROPERTY
@given(pair=clean_pairs(), data=st.data())
def test_deciding_never_changes_the_parsed_logs(pair, data):
    """A rollout printed twice, the repeat adding a metric or changing one: the verdict merges them,
    and the records it read are as parsed."""
    base, cand = pair
    text = base.text()
    perf = [line for line in text.splitlines() if " - perf " in line and "perf/actor_train_time" in line]
    repeat = data.draw(st.sampled_from(perf))
    changed = repeat.replace("'perf/actor_train_time': ", data.draw(st.sampled_from(
        ["'perf/extra_time': 1.5, 'perf/actor_train_time': ", "'perf/actor_train_time': 9"])))
    parsed = parse_stream(io.BytesIO((text + changed + "\n").encode()))
    before = parsed.to_json()
    evidence = [v.ArmEvidence("cp1", 1, parsed), *as_rounds("cp2", 2, cand)[:1]]
    v.decide(evidence, comparisons=[("cp1", "cp2")], thresholds=THRESHOLDS)
    assert parsed.to_json() == before
