"""A verdict claims only what its logs show: numerics it saw checked, sameness it could establish,
ratios CP can give, one reading of a log that states a fact once.

Each rule is held for generated pairs (hypothesis) in slime's real line formats (tests/helpers/
slime_log.py, the test double for slime, which cannot run here), parsed as text by the real parser
and judged by the real decide(); the pair is clean (it PASSes) until the test breaks one thing.
"""

from __future__ import annotations

import gzip
import io
import json
import random
import re
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_verdict import ARGS, REAL, SCHEMA

from cpverify import verdict as v
from cpverify.parse import parse_stream
from cpverify.verdict.evidence import FAR_BEYOND_NOISE
from cpverify.verdict.pair_checks import FIX_GRAD_NORM_CHECK, WORK_TOLERANCE, ratio_floor
from helpers.rounds import arm_rounds
from helpers.slime_log import SlimeLog, synthetic_arm

THRESHOLDS = {"resamples": 500}  # the rules here never ride on the resampler's precision
PROPERTY = settings(max_examples=30, deadline=None)
LOSSES_AND_NORMS = ("train/loss", "train/pg_loss", "train/entropy_loss", "train/kl_loss", "train/grad_norm")
NOT_FINITE = st.sampled_from([float("nan"), float("inf"), float("-inf")])
TIMERS = ("perf/actor_train_time", "perf/log_probs_time", "perf/ref_log_probs_time", "perf/train_time")


def parsed(log: SlimeLog):
    return parse_stream(io.BytesIO(log.text().encode()))


def judge(base: SlimeLog, cand: SlimeLog, *, c_cp: int = 2, planned: bool = False, **thresholds) -> v.Verdict:
    """The verdict on the two logs, each given as every one of ROUNDS rounds of its arm (no spread between
    rounds: the speed decides as soon as the prior allows, and every rule below rides on the logs alone)."""
    cand_rounds = arm_rounds(f"cp{c_cp}", c_cp, 1.0, parsed=parsed(cand))
    for ev in cand_rounds:
        ev.grad_norm_planned = planned
    verdict = v.decide([*arm_rounds("cp1", 1, 1.0, parsed=parsed(base)), *cand_rounds],
                       comparisons=[("cp1", f"cp{c_cp}")], thresholds=v.Thresholds(**{**THRESHOLDS, **thresholds}))
    assert (verdict.status == v.PASS) == (not [c for c in verdict.checks if c.effect])
    jsonschema.validate(json.loads(json.dumps(verdict.to_json())), SCHEMA)
    return verdict


def forced(verdict: v.Verdict, name: str, arm: str | None = None) -> set[str | None]:
    """The statuses the rows named `name` (of `arm`) force: {None} for rows that force nothing."""
    found = {c.effect for c in verdict.checks
             if (c.name == name or c.name.startswith(f"{name}:")) and (arm is None or c.arm == arm)}
    assert found, f"no {name} row in {[c.name for c in verdict.checks]}"
    return found


def pair(**kwargs) -> tuple[SlimeLog, SlimeLog]:
    """A clean CP=1/CP=2 pair on the same two GPUs at the same speed."""
    return (synthetic_arm(cp=1, actor_train_time=1.0, seed=1, **kwargs),
            synthetic_arm(cp=2, actor_train_time=1.0, seed=2, **kwargs))


def set_step(log: SlimeLog, step: int, **metrics: float) -> None:
    """Rewrite slime's `step N:` line with these metrics changed (ground truth too)."""
    record = next(s for s in log.truth.steps if s.step == step)
    record.metrics.update({k.replace("__", "/"): value for k, value in metrics.items()})
    head = log.lines[record.line - 1].partition(f" - step {step}: ")[0]
    log.lines[record.line - 1] = f"{head} - step {step}: {record.metrics!r}"


def perf_again(log: SlimeLog, rollout: int, **changes: float) -> None:
    """Print rollout N's train-side perf line a second time, right after the first, with `changes`."""
    record = next(p for p in log.truth.perf if p.side == "train" and p.rollout == rollout)
    head = log.lines[record.line - 1].partition(f" - perf {rollout}: ")[0]
    again = {**record.metrics, **{k.replace("__", "/"): value for k, value in changes.items()}}
    log.lines.insert(record.line, f"{head} - perf {rollout}: {again!r}")


# -- numerics: a NaN or inf is a FAIL; a first step far beyond noise is at least INCONCLUSIVE -------

@PROPERTY
@given(in_base=st.booleans(), step=st.integers(0, 7), metric=st.sampled_from(LOSSES_AND_NORMS), bad=NOT_FINITE,
       deterministic=st.booleans())
def test_a_loss_or_grad_norm_that_is_not_finite_fails_in_either_arm(in_base, step, metric, bad, deterministic):
    base, cand = pair()
    assert judge(base, cand, deterministic=deterministic).status == v.PASS
    set_step(base if in_base else cand, step, **{metric.replace("/", "__"): bad})
    verdict = judge(base, cand, deterministic=deterministic)
    assert verdict.status == v.FAIL
    assert forced(verdict, "numerics_finite", "cp1" if in_base else "cp2") == {v.FAIL}


def test_a_cp2_arm_whose_every_step_is_nan_fails_without_deterministic_mode():
    base, cand = pair()
    for step in range(8):
        set_step(cand, step, train__loss=float("nan"), train__grad_norm=float("nan"))
    verdict = judge(base, cand)
    assert verdict.status == v.FAIL and forced(verdict, "numerics_finite", "cp2") == {v.FAIL}
    assert next(a for a in verdict.arms if a.name == "cp2").failure["class"] == "numerics_finite"  # the evidence points at the first NaN step


def test_inf_beside_inf_is_no_match_in_deterministic_mode():
    base, cand = pair()
    for log in (base, cand):
        set_step(log, 0, train__grad_norm=float("inf"))
    verdict = judge(base, cand, deterministic=True)
    row = next(r for r in verdict.numerics if r["metric"] == "train/grad_norm")
    assert row["within_tolerance"] is False
    assert verdict.status == v.FAIL and forced(verdict, "numerics") == {v.FAIL}


@pytest.mark.parametrize("line", [
    "lm loss: nan | loss scale: 1.0 | grad norm: 3.4 | number of skipped iterations:   0 | number of nan iterations:   0 |",
    "lm loss: 2.5 | loss scale: 1.0 | grad norm: inf | number of skipped iterations:   0 | number of nan iterations:   0 |",
    "lm loss: 2.5 | loss scale: 1.0 | grad norm: 3.4 | number of skipped iterations:   0 | number of nan iterations:   1 |",
])
def test_a_megatron_iteration_with_a_nan_loss_or_norm_fails(line):
    def log(nan_at: int | None) -> str:
        return "".join(f" [2025-06-04 10:12:{n:02d}] iteration {n:8d}/       8 | elapsed time per iteration (ms): "
                       f"{1000 + n:.1f} | global batch size:    64 | "
                       + (line if n == nan_at else "lm loss: 2.5 | loss scale: 1.0 | grad norm: 3.4 | number of "
                          "nan iterations:   0 |") + "\n" for n in range(1, 9))

    arms = [v.ArmEvidence(name, cp, parse_stream(io.BytesIO(log(5 if cp == 2 else None).encode())))
            for name, cp in (("cp1", 1), ("cp2", 2))]
    verdict = v.decide(arms, comparisons=[("cp1", "cp2")])
    assert verdict.status == v.FAIL and forced(verdict, "numerics_finite", "cp2") == {v.FAIL}
    assert forced(verdict, "numerics_finite", "cp1") == {None}


@PROPERTY
@given(norm=st.floats(0.05, 100.0), factor=st.floats(FAR_BEYOND_NOISE * 1.001, 1e4), smaller=st.booleans(),
       deterministic=st.booleans())
def test_a_first_step_far_beyond_noise_never_passes(norm, factor, smaller, deterministic):
    """The same weights and rollouts at step 0: CP=1 and CP=2 differ by rounding (0.2 % in real logs)."""
    base, cand = pair()
    set_step(base, 0, train__grad_norm=norm)
    set_step(cand, 0, train__grad_norm=norm / factor if smaller else norm * factor)
    verdict = judge(base, cand, deterministic=deterministic)
    assert verdict.status != v.PASS
    assert forced(verdict, "numerics") == {v.FAIL if deterministic else v.INCONCLUSIVE}


@PROPERTY
@given(norm=st.floats(0.05, 100.0), factor=st.floats(1.0, 2.0), smaller=st.booleans())
def test_a_first_step_within_noise_is_reported_not_judged(norm, factor, smaller):
    base, cand = pair()
    set_step(base, 0, train__grad_norm=norm)
    set_step(cand, 0, train__grad_norm=norm / factor if smaller else norm * factor)
    verdict = judge(base, cand)
    assert verdict.status == v.PASS and forced(verdict, "numerics") == {None}


# -- sameness: what the logs show must agree, and must be shown ------------------------------------

off_by = (st.floats(0.01, 1 / (1 + WORK_TOLERANCE) * 0.999) | st.floats((1 + WORK_TOLERANCE) * 1.001, 100.0))


@PROPERTY
@given(work=off_by, dumps=st.sampled_from(["none", "same", "path"]), speed=st.floats(0.5, 1.2))
def test_arms_whose_tokens_per_step_differ_never_pass(work, dumps, speed):
    """A CP=1 log at 32K-token responses against a CP=2 log at 1K, with or without argument dumps,
    or with dumps equal but for where the rollouts come from: whatever the ratio, no CP comparison."""
    args = {"none": None, "same": ARGS, "path": {**ARGS, "load_debug_rollout_data": "/data/a/rollout_{rollout_id}.pt"}}
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1, arguments=ARGS if dumps != "none" else None)
    cand = synthetic_arm(cp=2, actor_train_time=speed, seed=2, work=work, arguments=args[dumps])
    verdict = judge(base, cand)
    assert verdict.status == v.INCONCLUSIVE
    assert forced(verdict, "same_workload") == {v.INCONCLUSIVE}


@PROPERTY
@given(work=st.floats(0.97, 1.03), jitter=st.integers(0, 2 ** 16))
def test_one_job_of_sampled_rollouts_is_still_one_job(work, jitter):
    """Sampled rollouts differ from run to run by a few percent per step: that is the same job."""
    rng = random.Random(jitter)
    tokens = [[5000 * rng.uniform(0.97, 1.03) for _ in range(8)] for _ in range(2)]
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1, tokens=tokens[0])
    cand = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, tokens=[t * work for t in tokens[1]])
    verdict = judge(base, cand)
    assert verdict.status == v.PASS and forced(verdict, "same_workload") == {None}


@PROPERTY
@given(b_dp=st.sampled_from([1, 2, 4, 8]), c_dp=st.sampled_from([1, 2, 4]))
def test_arms_on_other_gpus_never_pass_even_where_a_log_states_no_layout(b_dp, c_dp):
    """A CP=1 log with no layout at all against a CP=2 log on 8 GPUs: the work per GPU tells."""
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1, dp=b_dp, layout_cp=None)
    cand = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, dp=c_dp)
    verdict = judge(base, cand)
    if b_dp == 2 * c_dp:  # the same world: the same job
        assert verdict.status == v.PASS
    else:
        assert verdict.status == v.INCONCLUSIVE and forced(verdict, "same_gpus") == {v.INCONCLUSIVE}


@pytest.mark.parametrize(("dumps", "status"), [(("none", "none"), v.INCONCLUSIVE), (("same", "none"), v.INCONCLUSIVE),
                                              (("same", "path"), v.INCONCLUSIVE), (("same", "same"), v.PASS)])
def test_sameness_the_logs_cannot_show_is_not_assumed(dumps, status):
    """Without slime's throughput keys the argument dumps are all a log shows of its job: two that
    match show one job; one missing, or two that differ in where the data comes from, show none."""
    args = {"none": None, "same": ARGS, "path": {**ARGS, "load": "/ckpt/other"}}
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1, throughput=False, arguments=args[dumps[0]])
    cand = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, throughput=False, arguments=args[dumps[1]])
    verdict = judge(base, cand)
    assert verdict.status == status
    assert forced(verdict, "same_workload") == ({None} if status == v.PASS else {v.INCONCLUSIVE})


def _real(path: Path) -> SlimeLog:
    """A real log, whole (gzip or not)."""
    data = path.read_bytes()
    return SlimeLog(lines=(gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8").splitlines())


def _without_dump(path: Path) -> SlimeLog:
    """A real log as pasted into an issue: from after Megatron's argument dump on."""
    log = _real(path)
    log.lines = log.lines[next(i for i, line in enumerate(log.lines) if "end of arguments" in line) + 1:]
    return log


@pytest.mark.parametrize(("cp1", "cp2"), [("slime-cp1.log", "long8k/slime-cp2.log"),
                                          ("long8k/slime-cp1.log", "slime-cp2.log")])
def test_real_logs_of_other_lengths_without_their_dumps_are_no_cp_comparison(cp1, cp2):
    folder = REAL / "slime-train-only-h200x2"
    verdict = judge(_without_dump(folder / cp1), _without_dump(folder / cp2), pass_ratio=100.0)
    assert verdict.status == v.INCONCLUSIVE and forced(verdict, "same_workload") == {v.INCONCLUSIVE}


@pytest.mark.parametrize("folder", ["", "long8k/", "kit-check-12rollouts/"])
def test_real_logs_of_one_run_without_their_dumps_are_still_one_job(folder):
    base = REAL / "slime-train-only-h200x2" / folder
    verdict = judge(_without_dump(base / "slime-cp1.log"), _without_dump(base / "slime-cp2.log"))
    assert forced(verdict, "same_workload") == {None} and forced(verdict, "same_gpus") == {None}


@pytest.mark.parametrize("pasted", [False, True])
def test_a_real_cp1_log_on_one_gpu_is_no_baseline_for_cp2_on_two(pasted):
    """The same rollouts (the same tokens per step) on one H200 at CP=1 and two at CP=2: whole, the
    layouts tell; pasted without the layout line and the argument dump, slime's TFLOP per GPU does."""
    one_gpu = REAL.parent / "aa-rounds" / "h200x1-aa-r1.log.gz"  # CP=1 on one H200, the same rollouts
    base = _without_dump(one_gpu) if pasted else _real(one_gpu)
    if pasted:
        base.lines = [line for line in base.lines if "cpverify-layout" not in line]
    cand = _real(REAL / "slime-train-only-h200x2" / "aa-24rollouts" / "slime-cp2.log")
    verdict = judge(base, cand)
    assert verdict.status == v.INCONCLUSIVE and forced(verdict, "same_gpus") == {v.INCONCLUSIVE}
    if pasted:  # the same rollouts, all the excerpts show of the job (whole, the dumps name the GPU counts too)
        assert forced(verdict, "same_workload") == {None}
    works = {arm["name"]: arm["work"] for arm in verdict.to_json()["arms"]}
    assert works["cp1"]["tflop_per_gpu"] > 1.9 * works["cp2"]["tflop_per_gpu"]


# -- ratios CP cannot give are a broken comparison ------------------------------------------------------

@PROPERTY
@given(c_cp=st.sampled_from([2, 4]), scale=st.floats(1e-3, 0.999), throughput=st.booleans())
def test_a_ratio_below_what_cp_can_give_never_passes(c_cp, scale, throughput):
    """Baseline timings in ms and the candidate's in s give 0.001x; CP=c on the same GPUs can at
    best take 1/c of CP=1's time. The dumps match, so only the ratio tells."""
    floor = ratio_floor(1, c_cp)
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1, dp=c_cp, jitter=0.0, throughput=throughput,
                         arguments=ARGS)
    cand = synthetic_arm(cp=c_cp, actor_train_time=floor * scale, seed=2, dp=1, jitter=0.0, throughput=throughput,
                         arguments=ARGS)
    verdict = judge(base, cand, c_cp=c_cp)
    assert verdict.status == v.INCONCLUSIVE and verdict.to_json()["ratio"] < floor
    assert forced(verdict, f"speed:cp{c_cp} vs cp1") == {v.INCONCLUSIVE}


@PROPERTY
@given(c_cp=st.sampled_from([2, 4]), speed=st.floats(0.5, 1.1))  # up to what 4 alike rounds decide
def test_a_cp_faster_than_cp1_within_what_cp_can_give_passes(c_cp, speed):
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1, dp=c_cp, jitter=0.0)
    cand = synthetic_arm(cp=c_cp, actor_train_time=speed, seed=2, dp=1, jitter=0.0)
    assert judge(base, cand, c_cp=c_cp).status == v.PASS


# -- a log that contradicts itself: never one side silently --------------------------------------------

@PROPERTY
@given(in_base=st.booleans(), rollout=st.integers(0, 7), timer=st.sampled_from(TIMERS), factor=st.floats(0.1, 10.0),
       alike=st.booleans())
def test_a_rollout_printed_twice_with_other_timings_never_passes(in_base, rollout, timer, factor, alike):
    base, cand = pair()
    log = base if in_base else cand
    value = next(p for p in log.truth.perf if p.side == "train" and p.rollout == rollout).metrics[timer]
    perf_again(log, rollout, **({} if alike or factor == 1.0 else {timer.replace("/", "__"): value * factor}))
    verdict = judge(base, cand)
    if alike or factor == 1.0:  # the same line twice: one record
        assert verdict.status == v.PASS
    else:
        assert verdict.status == v.INCONCLUSIVE
        assert forced(verdict, "consistent", "cp1" if in_base else "cp2") == {v.INCONCLUSIVE}


@PROPERTY
@given(size=st.sampled_from(["context_parallel_size", "data_parallel_size", "world_size"]), stated=st.integers(1, 16))
def test_a_layout_line_the_argument_dump_contradicts_never_passes(size, stated):
    base, cand = pair(arguments=ARGS)
    line = next(i for i, text in enumerate(cand.lines) if text.startswith(f"  {size} ."))
    kept = {"context_parallel_size": 2, "data_parallel_size": 1, "world_size": 2}[size]
    cand.lines[line] = f"  {size} {'.' * (48 - len(size))} {stated}"
    verdict = judge(base, cand)
    if stated == kept:
        assert verdict.status == v.PASS
    else:
        assert verdict.status == v.INCONCLUSIVE and forced(verdict, "consistent", "cp2") == {v.INCONCLUSIVE}
        assert next(a for a in verdict.arms if a.name == "cp2").cp_effective == 2  # the hook's line is still the layout reported


def test_the_parse_states_each_fact_the_log_gives_twice():
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, arguments=ARGS)
    line = next(i for i, text in enumerate(log.lines) if text.startswith("  context_parallel_size ."))
    log.lines[line] = log.lines[line].replace(" 2", " 1")
    log.lines.append(f"  seed {'.' * (48 - len('seed'))} 99")  # a second dump's seed: ARGS has 1234
    data = parsed(log).to_json()
    assert [(c["what"], c["first"], c["then"]) for c in data["conflicts"]] == [
        ("argument seed", "1234", "99"),
        ("layout", "cp=2 dp=1 tp=1 world=2 (cpverify-layout)", "cp=1 dp=1 tp=1 world=2 (Megatron's argument dump)")]


def test_two_argument_dumps_that_disagree_are_inconclusive():
    base, cand = pair(arguments=ARGS)
    dump = [line for line in cand.lines if re.match(r"  \w+ \.+ ", line) or "arguments ---" in line]
    cand.lines[:0] = [re.sub(r"^(  seq_length \.+ )4096$", r"\g<1>8192", line) for line in dump]
    verdict = judge(base, cand)
    assert verdict.status == v.INCONCLUSIVE and forced(verdict, "consistent", "cp2") == {v.INCONCLUSIVE}


def test_a_step_printed_twice_with_other_values_is_inconclusive():
    base, cand = pair()
    record = next(s for s in cand.truth.steps if s.step == 3)
    head = cand.lines[record.line - 1].partition(" - step 3: ")[0]
    cand.lines.insert(record.line, f"{head} - step 3: {({**record.metrics, 'train/grad_norm': 7.5})!r}")
    verdict = judge(base, cand)
    assert verdict.status == v.INCONCLUSIVE and forced(verdict, "consistent", "cp2") == {v.INCONCLUSIVE}


def test_ranks_stating_two_layouts_are_a_contradiction_not_a_cp_failure():
    base, cand = pair()
    cand.lines.insert(10, "(MegatronTrainRayActor pid=4242) cpverify-layout rank=1 world=2 tp=1 pp=1 cp=1 dp=2")
    verdict = judge(base, cand)
    assert verdict.status == v.INCONCLUSIVE and forced(verdict, "error:layout_mismatch", "cp2") == {v.INCONCLUSIVE}


# -- slime's grad-norm check: what the logs show it did, never what the plan asked ----------------------

HANDOFF = "/w/grad-norm-{role}-{rollout_id}-{step_id}.pt"


def handoff_pair(*, saved=HANDOFF, loaded=HANDOFF, cand_saves=None, dumps=(True, True)) -> tuple[SlimeLog, SlimeLog]:
    base = synthetic_arm(cp=1, actor_train_time=1.0, seed=1, arguments={
        **ARGS, "ci_save_grad_norm": saved, "ci_load_grad_norm": None} if dumps[0] else None)
    cand = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, arguments={
        **ARGS, "ci_save_grad_norm": cand_saves, "ci_load_grad_norm": loaded} if dumps[1] else None)
    return base, cand


def gate(verdict: v.Verdict) -> v.Check:
    return next(c for c in verdict.checks if c.name.startswith("numerics:"))


@pytest.mark.parametrize("planned", [True, False])
def test_the_grad_norm_check_the_dumps_show_is_the_numerics_gate(planned):
    verdict = judge(*handoff_pair(), planned=planned)
    assert verdict.status == v.PASS and gate(verdict).status == "pass" and gate(verdict).effect is None


@pytest.mark.parametrize("shown", [
    {"loaded": None},  # the dump says ci_load_grad_norm None
    {"cand_saves": HANDOFF},  # both set: slime saves instead of checking
    {"dumps": (True, False)},  # no dump in the arm's log
])
def test_a_planned_grad_norm_check_the_log_does_not_show_never_matched(shown):
    verdict = judge(*handoff_pair(**shown), planned=True)
    assert verdict.status == v.INCONCLUSIVE
    assert gate(verdict).effect == v.INCONCLUSIVE and gate(verdict).fix == FIX_GRAD_NORM_CHECK


@pytest.mark.parametrize("shown", [{"saved": "/w/elsewhere-{rollout_id}.pt"}, {"dumps": (False, True)}])
def test_a_grad_norm_check_against_a_file_the_baseline_did_not_write_proves_nothing(shown):
    verdict = judge(*handoff_pair(**shown))
    assert verdict.status == v.INCONCLUSIVE and gate(verdict).effect == v.INCONCLUSIVE


def test_real_train_only_logs_show_slimes_grad_norm_check():
    folder = REAL / "slime-train-only-h200x2" / "kit-check-12rollouts"
    verdict = judge(_real(folder / "slime-cp1.log"), _real(folder / "slime-cp2.log"))
    assert gate(verdict).status == "pass"
    assert "all 12 steps" in gate(verdict).detail  # how many steps slime checked: only the row says


def test_a_step_zero_with_rounding_differences_is_within_noise():
    """The real logs' first steps: 0.05 % apart in grad norm, nowhere near far beyond noise."""
    folder = REAL / "slime-train-only-h200x2"
    verdict = judge(_real(folder / "slime-cp1.log"), _real(folder / "slime-cp2.log"))
    assert verdict.numerics and not any(row["beyond_noise"] for row in verdict.numerics)
