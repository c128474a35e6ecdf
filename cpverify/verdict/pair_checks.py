"""The checks of one comparison (baseline arm, candidate arm): did the arms run the same job but for
CP, the speed ratio and its interval, the other timings, NCCL, the numerics. Each a small function
from the pair's facts to its rows of the table."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cpverify.fixes import (
    FIX_MORE_ROUNDS,
    FIX_SLOWER_AT_ONE_CP,
    NO_LAYOUT,
    NO_PERF,
    fix_more_steps,
    fix_slow_cp,
    for_error,
)
from cpverify.model import CheckStatus, Outcome
from cpverify.verdict import stats
from cpverify.verdict.evidence import FAR_BEYOND_NOISE, LEADING_TAGS, WORK, excerpt, first_step_numerics
from cpverify.verdict.terms import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    SECONDARY_GATED,
    SEVERITY,
    ArmEvidence,
    ArmSummary,
    Check,
    Thresholds,
    short_metric,
)
from cpverify.versions import MIN_NCCL, parse_version

# Work per step that differs by more than this between the arms is other work, not the same job at
# another CP. Identical rollouts agree exactly (the real train-only pairs of tests/data/real-logs/
# slime-train-only-h200x2: to the token at every rollout), sampled rollouts of one job by a few
# percent in the median; beyond 10 % the difference in work alone moves the ratio as much as two
# identical runs differ (5 % on 2x H200, the README beside those logs).
WORK_TOLERANCE = 0.10


@dataclass(frozen=True)
class WorkRatio:
    """One fact of the work per step (evidence.WORK) in both arms: its medians over the steps both
    arms counted (over each arm's own where they share none)."""

    fact: str
    baseline: float
    candidate: float
    steps: str  # which steps the medians are over, in words

    @property
    def ratio(self) -> float:
        return self.candidate / self.baseline

    @property
    def agrees(self) -> bool:
        return 1 / (1 + WORK_TOLERANCE) <= self.ratio <= 1 + WORK_TOLERANCE

    def __str__(self) -> str:
        def number(x: float) -> str:  # tokens whole, TFLOP to three digits
            return f"{x:.0f}" if x >= 100 else f"{x:.3g}"

        return f"{WORK[self.fact]} {number(self.baseline)} vs {number(self.candidate)} ({self.ratio:.2f}×, medians {self.steps})"


@dataclass
class PairFacts:
    """What a comparison's checks read: both arms' evidence and summaries, the ratio estimates of
    every timing, the first common step's numerics; `arms_decide`: the arms' own checks already force
    a status (an arm blocked, failed, too short), so a missing ratio only restates that."""

    base: ArmEvidence
    cand: ArmEvidence
    b_arm: ArmSummary
    c_arm: ArmSummary
    labels: dict[str, str]
    t: Thresholds
    workload: str
    arms_decide: bool
    estimates: dict[str, stats.RatioEstimate]
    numerics: list[dict]

    @classmethod
    def of(cls, base: ArmEvidence, cand: ArmEvidence, arms: dict[str, ArmSummary], labels: dict[str, str],
           t: Thresholds, workload: str, *, arms_decide: bool,
           estimates: dict[str, stats.RatioEstimate]) -> PairFacts:
        """`estimates`: the timings' ratios, taken across the arms' rounds (cpverify.verdict.across)."""
        numerics = first_step_numerics(base.parsed, cand.parsed, base.name, cand.name, t)
        return cls(base, cand, arms[base.name], arms[cand.name], labels, t, workload, arms_decide, estimates,
                   numerics)

    @property
    def name(self) -> str:
        return f"{self.cand.name} vs {self.base.name}"

    def slow_cp_fix(self) -> str:
        """The slow-CP advice, minus what both arms' NCCL lines rule out; for two arms of one CP (an A/B
        of revisions), where to look in the revisions instead."""
        if self.base.cp_requested == self.cand.cp_requested:
            return FIX_SLOWER_AT_ONE_CP
        logs = (self.base.parsed, self.cand.parsed)
        transports = tuple(dict.fromkeys(t for log in logs for t in log.nccl.transports))
        seen = all(log.nccl.transports for log in logs)
        versions = [parse_version(log.nccl.version) for log in logs]
        return fix_slow_cp(self.workload, transports=transports,
                           slow_path=any(log.nccl_transport_warning() for log in logs) or (None if not seen else False),
                           old_nccl=None if None in versions else any(v < MIN_NCCL for v in versions if v))

    def what(self, metric: str) -> str:
        return f"{self.labels[self.cand.name]} {short_metric(metric)} vs {self.labels[self.base.name]}"

    def work(self, *facts: str) -> WorkRatio | None:
        """The first of `facts` both arms' logs state, compared (None: neither states any)."""
        b, c = self.b_arm.work, self.c_arm.work
        for fact in facts:
            common = [step for step in b.keys() & c.keys() if fact in b[step] and fact in c[step]]
            if common:
                b_values, c_values = [b[s][fact] for s in common], [c[s][fact] for s in common]
                steps = f"over the {len(common)} steps both counted"
            else:
                b_values = [w[fact] for w in b.values() if fact in w]
                c_values = [w[fact] for w in c.values() if fact in w]
                steps = f"over {len(b_values)} and {len(c_values)} steps"
            if b_values and c_values:
                return WorkRatio(fact, stats.median(b_values), stats.median(c_values), steps)
        return None

    def worlds(self) -> tuple[int, int] | None:
        """Both arms' world sizes, where both logs state a layout."""
        layouts = (self.b_arm.layout, self.c_arm.layout)
        if not all(layouts):
            return None
        b_world, c_world = (layout.get("world") or layout["cp"] * layout["dp"] * layout["tp"] * layout["pp"]
                            for layout in layouts if layout)
        return b_world, c_world

    def unestablished(self, name: str, detail: str, fix: str) -> Check:
        """A sameness the logs cannot show: never a PASS; no row of its own where the arms' checks decide."""
        if self.arms_decide:
            return Check(name, CheckStatus.SKIP, detail + "; the arms' own checks decide")
        return Check(name, CheckStatus.FAIL, detail, fix, effect=INCONCLUSIVE, brief=detail)


FIX_SAME_JOB = ("compare two runs that differ only in --context-parallel-size (DP absorbs it on the same GPUs): "
                "`cpverify run` plans such arms, `cpverify plan --sh` prints their commands")
FIX_WHOLE_LOGS = ("judge whole logs, from the start of each run: slime prints Megatron's argument dump at start-up and "
                  "each rollout's tokens (perf/actor_train_tok_per_s) with its timings")


def same_gpus(pair: PairFacts) -> Iterator[Check]:
    """Same GPUs: CP=1/DP=2 against CP=2/DP=1 keeps the world size; anything else compares different
    jobs (CP=2 on twice the GPUs of CP=1 would look cheap), so the ratio proves nothing. The layouts
    say it; where a log states none, the work per GPU does (the same work on other GPUs differs)."""
    name = f"same_gpus:{pair.name}"
    worlds = pair.worlds()
    if worlds is not None:
        b_world, c_world = worlds
        if b_world != c_world:
            yield Check(name, CheckStatus.FAIL, f"the arms ran on different world sizes ({b_world} vs {c_world}): the ratio "
                        "compares different jobs", "run both arms on the same GPUs; only the CP flag may differ (DP "
                        "absorbs it)", effect=INCONCLUSIVE,
                        brief=f"the arms ran on different numbers of GPUs ({b_world} vs {c_world})")
        else:
            yield Check(name, CheckStatus.PASS, f"both arms ran on {b_world} GPUs (their layouts)")
        return
    unstated = " and ".join(arm.name for arm in (pair.b_arm, pair.c_arm) if not arm.layout)
    whole, per_gpu = pair.work("tokens", "samples"), pair.work("tflop_per_gpu")
    if whole is not None and per_gpu is not None and whole.agrees:
        if per_gpu.agrees:
            yield Check(name, CheckStatus.PASS, f"{unstated}'s log states no layout; the arms did the same work ({whole}) and "
                        f"the same work per GPU ({per_gpu}), which differs on another number of GPUs")
        else:
            yield Check(name, CheckStatus.FAIL, f"the arms did the same work ({whole}) but not the same work per GPU "
                        f"({per_gpu}): they ran on different numbers of GPUs ({unstated}'s log states no layout)",
                        "run both arms on the same GPUs; only the CP flag may differ (DP absorbs it)",
                        effect=INCONCLUSIVE, brief=f"the arms ran on different numbers of GPUs ({per_gpu})")
        return
    yield pair.unestablished(name, f"could not establish that the arms ran on the same GPUs: {unstated}'s log states "
                             "no layout (no cpverify-layout line, no Megatron argument dump) and the logs show no "
                             "work per GPU to compare", NO_LAYOUT[pair.workload] + "; or " + FIX_WHOLE_LOGS)


# Megatron-LM arguments that may differ between the arms of one CP comparison: CP itself and its
# options, the DP that absorbs it on the same GPUs, the world size (same_gpus judges it), slime's
# grad-norm handoff (the CP=1 arm saves, the others load) and the rank that printed the dump.
_CP_ONLY_ARGUMENTS = re.compile(r"context_parallel|^cp_|^data_parallel_size$|^world_size$|^ci_(?:save|load)_grad_norm$"
                                r"|^(?:local_)?rank$")
# Differences that leave each step's work alone: where results and metrics go, how long and how often
# (the per-step timings compare), ports and addresses, the seed. A path that differs may still hold
# other data: that is a warning where the work per step agrees, and not enough to call it one job
# where the logs show no work per step.
_INCIDENTAL_ARGUMENTS = re.compile(r"^(?:wandb|tensorboard|swanlab|mlflow)_|_(?:port|addr|address|project|group|"
                                   r"run_name|exp_name|interval|iters)$|^(?:seed|num_rollout|train_iters|exit_\w+|"
                                   r"timing_log_level)$")


@dataclass
class JobDifference:
    """How two logs' jobs compare (same_workload, same_round): the arguments that differ in what a step
    does (`real`) and in paths and incidentals only (`paths`), the work per step that differs (`other`)
    and that agrees (`agreeing`), in words."""

    real: list[str]
    paths: list[str]
    other: list[str]
    agreeing: list[str]
    listed: Callable[[list[str]], str]
    dumps: bool  # both logs have Megatron's argument dump


def job_difference(pair: PairFacts) -> JobDifference:
    """What the logs show of two arms' jobs: Megatron-LM's argument dump (slime's and Megatron's own
    logs carry it; the parser keeps no secret-named argument) and the work per step (tokens, samples;
    TFLOP per GPU where the GPUs are the same). CP and what comes with it are no difference."""
    b_args, c_args = pair.base.parsed.arguments, pair.cand.parsed.arguments
    whole = pair.work("tokens", "samples")
    worlds = pair.worlds()
    per_gpu = pair.work("tflop_per_gpu") if worlds is not None and worlds[0] == worlds[1] else None

    def shown(value: str | None) -> str:
        return "(absent)" if value is None else value if len(value) <= 60 else value[:57] + "..."

    differ = sorted(key for key in b_args.keys() | c_args.keys()
                    if b_args.get(key) != c_args.get(key) and not _CP_ONLY_ARGUMENTS.search(key))
    paths = [key for key in differ if "/" in (b_args.get(key) or "") + (c_args.get(key) or "")
             or _INCIDENTAL_ARGUMENTS.search(key)]
    real = [key for key in differ if key not in paths] if b_args and c_args else []

    def listed(keys: list[str]) -> str:
        text = ", ".join(f"{key} {shown(b_args.get(key))} vs {shown(c_args.get(key))}" for key in keys[:6])
        return text + (f" (and {len(keys) - 6} more)" if len(keys) > 6 else "")

    other = [str(work) for work in (whole, per_gpu) if work is not None and not work.agrees]
    agreeing = [str(work) for work in (whole, per_gpu) if work is not None]
    return JobDifference(real, paths, other, agreeing, listed, bool(b_args and c_args))


def same_workload(pair: PairFacts) -> Iterator[Check]:
    """Do two arms' logs show the same job but for CP? A CP=1 log at 32K tokens against a CP=2 log
    at 1K gives a ratio of 0.3 that says nothing about CP (job_difference: the argument dumps and
    the work per step). Any of them differing is another job; neither showing the same job is no
    PASS either."""
    base, cand = pair.base, pair.cand
    b_args = base.parsed.arguments
    name = f"same_workload:{pair.name}"
    job = job_difference(pair)
    real, paths, other, listed = job.real, job.paths, job.other, job.listed
    if real or other:
        said = ([f"{listed(real)} (Megatron's argument dumps)"] if real else []) + other
        yield Check(name, CheckStatus.FAIL, "the arms ran different jobs, not only a different CP: " + "; ".join(said),
                    FIX_SAME_JOB, effect=INCONCLUSIVE, brief="the arms ran different jobs, not only a different CP: "
                    + (listed(real[:2]) if real else other[0]))
        return
    agreeing = list(job.agreeing)
    dumps_match = job.dumps and not paths
    if dumps_match:
        agreeing.insert(0, f"Megatron's argument dumps match in all {len(b_args)} arguments but CP, DP and slime's "
                           "grad-norm handoff")
    if not agreeing:
        without = " and ".join(arm.name for arm in (base, cand) if not arm.parsed.arguments)
        why = (f"{without}'s log has no Megatron argument dump" if without else
               f"the argument dumps differ in paths that may hold other data ({listed(paths)})")
        yield pair.unestablished(name, f"could not establish that the arms ran the same job: {why}, and the logs "
                                 "show no work per step (tokens, samples, TFLOP per GPU) to compare", FIX_WHOLE_LOGS)
    elif paths and job.dumps:
        yield Check(name, CheckStatus.WARN, f"the arms' arguments match but for CP and these, which do not change a step's "
                    f"work (if the paths hold the same data and model): {listed(paths)}; " + "; ".join(agreeing),
                    "give both arms the same data, checkpoint and settings; only the CP flag may differ")
    else:
        yield Check(name, CheckStatus.PASS, "; ".join(agreeing))


FIX_SAME_ROUND = ("run every round of an arm with the same command on the same GPUs (`cpverify run --rounds` does); "
                  "give `cpverify verdict` one arm's rounds under one option")


def same_round(pair: PairFacts) -> Iterator[Check]:
    """A later round of an arm (`pair.cand`) against its round 1 (`pair.base`): the same job on the same
    GPUs, or the spread between the rounds measures something else. A row of the later round."""
    worlds = pair.worlds()
    job = job_difference(pair)
    gpus_shown = worlds is not None
    if worlds is not None and worlds[0] != worlds[1]:
        job.other.insert(0, f"world size {worlds[1]} vs {worlds[0]} in round 1")
    elif worlds is None and (per_gpu := pair.work("tflop_per_gpu")) is not None:
        # A log without a layout: the work per GPU tells the number of GPUs, as in same_gpus (a
        # round on half the GPUs is twice as slow, and moves its arm's mean with nothing else)
        gpus_shown = True
        (job.agreeing if per_gpu.agrees else job.other).append(str(per_gpu))
    if job.real or job.other:
        said = ([f"{job.listed(job.real)} (Megatron's argument dumps)"] if job.real else []) + job.other
        yield Check("same_round", CheckStatus.FAIL, "ran another job than its arm's round 1: " + "; ".join(said), FIX_SAME_ROUND,
                    pair.cand.name, INCONCLUSIVE,
                    brief=f"round {pair.cand.round} of {pair.base.planned} ran another job than its round 1: {said[0]}")
    elif gpus_shown and (job.dumps or job.agreeing):
        shown = ([f"Megatron's argument dumps match but for {job.listed(job.paths)}" if job.paths else
                  "Megatron's argument dumps match"] if job.dumps else []) + job.agreeing
        yield Check("same_round", CheckStatus.PASS, "ran the job of its arm's round 1: " + "; ".join(shown), arm=pair.cand.name)
    else:
        what = ("no layout (no cpverify-layout line, no Megatron argument dump) and no work per GPU to compare"
                if job.dumps or job.agreeing else "no Megatron argument dump and no work per step to compare")
        check = pair.unestablished("same_round", "could not establish that this round ran the job of its arm's "
                                   f"round 1 on its GPUs: the logs show {what}", FIX_WHOLE_LOGS)
        check.arm = pair.cand.name
        yield check


# CP=c runs on the GPUs where CP=1 ran c data-parallel ranks per CP group. At best it spreads over
# those c GPUs the work the slowest of the c ranks did alone (every other rank idle): 1/c of CP=1's
# time, the same FLOPs on the same GPUs. Half of that again leaves room for what this reckoning
# leaves out; a ratio below it is a broken comparison (timings in ms against s, other work), not CP.
def ratio_floor(b_cp: int, c_cp: int) -> float:
    """The smallest candidate/baseline ratio CP=c_cp can give against CP=b_cp on the same GPUs."""
    return b_cp / c_cp / 2


def judged(estimate: stats.Estimate, t: Thresholds) -> str:
    """Where a ratio's interval lies against the threshold: PASS below it, FAIL above it, INCONCLUSIVE across it."""
    assert estimate.ci is not None
    low, high = estimate.ci
    return PASS if high <= t.pass_ratio else FAIL if low > t.pass_ratio else INCONCLUSIVE


def decisive(est: stats.RatioEstimate | None, t: Thresholds) -> stats.Estimate | None:
    """The statistic a decision uses: the worse of the median's ratio (a typical step) and the mean's
    (the total a run pays) against the threshold (RatioEstimate.against). None without an interval."""
    return est.against(t.pass_ratio) if est else None


def speed(pair: PairFacts) -> Iterator[Check]:
    """The primary timing's ratio, candidate against baseline, and its interval against the threshold:
    of the median and the mean, the worse decides."""
    t, workload, name = pair.t, pair.workload, f"speed:{pair.name}"
    primary = pair.estimates.get(t.primary_metric)
    what = pair.what(t.primary_metric)
    floor = ratio_floor(pair.base.cp_requested, pair.cand.cp_requested)
    chosen = decisive(primary, t)
    if primary is not None and primary.ratio is not None and primary.ratio < floor:
        yield Check(name, CheckStatus.FAIL, f"{what}: {primary.ratio:.2g}×, below the {floor:.2f}× that CP={pair.cand.cp_requested} "
                    f"can give at best against CP={pair.base.cp_requested} on the same GPUs: the comparison is broken, "
                    "not CP fast", "check that both logs' timings are in seconds (slime prints seconds) and that the "
                    "arms ran the same job; judge each arm's own, unedited log", effect=INCONCLUSIVE,
                    brief=f" — below the {floor:.2f}× CP can give at best: a broken comparison")
        return
    if primary is None or primary.ratio is None or chosen is None:
        if primary is None or primary.ratio is None:
            detail = f"{what}: no ratio ({primary.note if primary else 'no values'})"
            fix = NO_PERF[workload] + "; " + fix_more_steps(workload)
        else:
            detail, fix = f"{what}: {primary.ratio:.2f}×, {primary.note}", fix_more_steps(workload)
        if pair.arms_decide:
            yield Check(name, CheckStatus.SKIP, detail + "; the arms' own checks decide")
        else:
            yield Check(name, CheckStatus.FAIL, detail, fix, effect=INCONCLUSIVE,
                        brief=f" — {primary.note}" if primary and primary.ratio is not None else "")
        return
    status = judged(chosen, t)
    shown = f"{what}: {_format_ratio(primary, t, chosen)}"
    # Said when the other statistic alone would have decided otherwise: a minority of much slower
    # (or faster) steps moves the mean and not the median.
    other = next((e for e in primary.estimates if e is not chosen and e.ci), None)
    why = (f" (the {chosen.statistic}'s; the {other.statistic}'s alone: {judged(other, t)}, as when a minority of "
           "steps is far from the rest)" if other and judged(other, t) != status else "")
    if status == PASS:
        yield Check(name, CheckStatus.PASS, shown)
    elif status == FAIL:
        yield Check(name, CheckStatus.FAIL, f"{shown}; the whole interval is above the threshold{why}", pair.slow_cp_fix(),
                    effect=FAIL, brief=f" — the whole interval is above the threshold{why}")
    else:
        yield Check(name, CheckStatus.FAIL, f"{shown}; the interval straddles the threshold{why}", FIX_MORE_ROUNDS,
                    effect=INCONCLUSIVE, brief=f" — the interval straddles the threshold{why}")


def secondary_speed(pair: PairFacts) -> Iterator[Check]:
    """log_probs and ref_log_probs, where CP communication lands too: a warning, never a FAIL."""
    primary = decisive(pair.estimates.get(pair.t.primary_metric), pair.t)
    primary_slow = primary is not None and judged(primary, pair.t) == FAIL
    for metric in SECONDARY_GATED:
        est = pair.estimates.get(metric)
        worse = decisive(est, pair.t)
        if est is None or worse is None:
            continue
        name, shown = f"speed:{short_metric(metric)}:{pair.name}", f"{pair.what(metric)}: {_format_ratio(est, pair.t, worse)}"
        if judged(worse, pair.t) == FAIL:
            yield Check(name, CheckStatus.WARN, shown, f"as for {short_metric(pair.t.primary_metric)} (its speed row)"
                        if primary_slow else pair.slow_cp_fix())
        elif judged(worse, pair.t) == INCONCLUSIVE:  # straddles: neither within the threshold nor above it
            yield Check(name, CheckStatus.SKIP, f"{shown}; undecided: the interval straddles the threshold")
        else:
            yield Check(name, CheckStatus.PASS, shown)


def nccl_same_version(pair: PairFacts) -> Iterator[Check]:
    b_version, c_version = pair.b_arm.nccl["version"], pair.c_arm.nccl["version"]
    if b_version and c_version and b_version != c_version:
        yield Check(f"nccl_same_version:{pair.name}", CheckStatus.WARN, f"NCCL differs between arms ({b_version} vs {c_version})",
                    "run both arms in the same image; only the CP flag may differ")


def numerics(pair: PairFacts) -> Iterator[Check]:
    """One row: slime's own grad-norm check where the logs show it ran (train-only arms), and the first
    common step's numerics (a gate in deterministic mode; far beyond noise, INCONCLUSIVE in any
    mode), whichever forces the worse status (slime's check where they tie)."""
    rows = [row for row in (_grad_norm_gate(pair), _first_step(pair)) if row is not None]
    if rows:
        yield max(rows, key=lambda row: SEVERITY[row.effect] if row.effect else -1)


def _first_step(pair: PairFacts) -> Check | None:
    t, name, rows = pair.t, f"numerics:{pair.name}", pair.numerics
    if not rows:
        return (Check(name, CheckStatus.FAIL, "no common train step to compare", "make sure both logs hold slime's `step N:` "
                      "lines", effect=INCONCLUSIVE) if t.deterministic else None)
    step = rows[0]["step"]

    def said(found: list[dict]) -> str:
        return ", ".join(f"{r['metric']} {r['baseline']:.6g} vs {r['candidate']:.6g}" for r in found)

    off = [row for row in rows if not row["within_tolerance"]]
    far = [row for row in rows if row["beyond_noise"]]
    if t.deterministic and off:
        return Check(name, CheckStatus.FAIL, f"step {step} differs beyond rel/abs {t.numerics_tolerance:g}: {said(off)}",
                     "compare on the same rollout data (--load-debug-rollout-data) with dropout 0 and "
                     "--attention-backend flash; report the CP path if it persists", effect=FAIL)
    if far:
        return Check(name, CheckStatus.FAIL, f"step {step} differs far beyond run-to-run noise (more than "
                     f"{FAR_BEYOND_NOISE:g}× apart, where identical inputs differ by rounding): {said(far)}",
                     "compare CP=1 and CP=2 on the same rollouts (--profile train-only runs slime's grad-norm check "
                     "at every step); a CP that changes the first step this much computes something else: report it "
                     "upstream with this bundle", effect=INCONCLUSIVE,
                     brief=f"first-step numerics far apart: {said(far[:1])}")
    if t.deterministic:
        return Check(name, CheckStatus.PASS, f"step {step}: all within rel/abs {t.numerics_tolerance:g}")
    finite = [row["rel_diff"] for row in rows if row["rel_diff"] is not None and math.isfinite(row["rel_diff"])]
    return Check(name, CheckStatus.SKIP, f"step {step}: largest relative difference {max(finite, default=0.0):.3g} (reported "
                 "only: runs are not deterministic)", "enable deterministic mode to gate numerics")


def _handoff(value: str | None) -> str | None:
    """A path argument as Megatron's dump prints it: None where unset."""
    return None if value in (None, "None") else value


FIX_GRAD_NORM_CHECK = ("give the CP>1 arm --ci-load-grad-norm with the path the CP=1 arm saves to (--ci-save-grad-norm) "
                       "and no --ci-save-grad-norm of its own (slime saves instead of checking when both are set); "
                       "judge whole logs, whose argument dumps show both")


def _grad_norm_gate(pair: PairFacts) -> Check | None:
    """slime's grad-norm check as the numerics gate, as far as the logs show it: at every step slime
    asserts that the candidate's grad norm matches the one loaded from ci_load_grad_norm
    (math.isclose, rel/abs 0.01), when ci_save_grad_norm is unset (slime/backends/megatron_utils/
    model.py). It compares with the baseline only where the baseline's dump saved to that path.
    None: neither the plan nor the logs involve it."""
    cand, base = pair.cand, pair.base
    name, args = f"numerics:{pair.name}", cand.parsed.arguments
    loaded, saves_too = _handoff(args.get("ci_load_grad_norm")), _handoff(args.get("ci_save_grad_norm"))
    checked = loaded is not None and "ci_save_grad_norm" in args and saves_too is None
    if not checked:
        if not cand.grad_norm_planned:
            return None
        why = ("has no Megatron argument dump" if not args else f"shows ci_load_grad_norm {loaded or 'None'}"
               + (f" and ci_save_grad_norm {saves_too}" if saves_too else ""))
        return Check(name, CheckStatus.FAIL, f"the plan asked slime to check this arm's grad norm against the baseline's at every "
                     f"step, but its log {why}: the check did not run", FIX_GRAD_NORM_CHECK, cand.name, INCONCLUSIVE,
                     brief=f"slime's grad-norm check did not run in arm {cand.name} (its log {why})")
    saved = _handoff(base.parsed.arguments.get("ci_save_grad_norm"))
    if saved != loaded:
        whose = (f"its ci_save_grad_norm is {saved}" if saved else "its log shows no ci_save_grad_norm"
                 if base.parsed.arguments else "its log has no Megatron argument dump")
        return Check(name, CheckStatus.FAIL, f"slime checked this arm's grad norm against {loaded}, which the baseline's log does "
                     f"not show it saved ({whose}): a comparison with some other run", FIX_GRAD_NORM_CHECK, cand.name,
                     INCONCLUSIVE, brief=f"slime's grad-norm check in arm {cand.name} compared with a file the "
                     "baseline did not write")
    mismatch = next((e for e in cand.parsed.errors if e.cls == "slime_grad_norm_mismatch"), None)
    steps = sum(1 for s in cand.parsed.steps if s.kind == "step")
    outcome = cand.result.outcome if cand.result else None
    rollouts = _handoff(args.get("load_debug_rollout_data"))
    same_data = (f" on the same rollout files ({rollouts})"
                 if rollouts and rollouts == _handoff(base.parsed.arguments.get("load_debug_rollout_data")) else "")
    if mismatch is not None:
        return Check(name, CheckStatus.FAIL, f"slime's grad-norm check failed at line {mismatch.line}: "
                     f"{excerpt(LEADING_TAGS.sub('', mismatch.text), 160)} (against the baseline's{same_data}, "
                     "rel/abs 0.01)", for_error("slime_grad_norm_mismatch"), cand.name, FAIL,
                     brief=f"slime's grad-norm check failed in arm {cand.name} at line {mismatch.line}")
    if steps and outcome in (None, Outcome.OK):
        return Check(name, CheckStatus.PASS, f"slime checked the grad norm of all {steps} steps against the baseline's"
                     f"{same_data} (the argument dumps: this arm's ci_load_grad_norm is the baseline's "
                     "ci_save_grad_norm; rel/abs 0.01): every one matched", arm=cand.name)
    return Check(name, CheckStatus.FAIL, f"slime's grad-norm check did not run to the end ({steps} step(s) checked, runner "
                 f"outcome {outcome!r})", "see this arm's other checks for what stopped it", cand.name, INCONCLUSIVE)


# Whether the two arms ran one job but for CP; then, only if they did, what CP cost.
JOB_CHECKS = (same_gpus, same_workload)
MEASURE_CHECKS = (speed, secondary_speed, nccl_same_version, numerics)


def check_pair(pair: PairFacts) -> list[Check]:
    """A comparison's own rows of the table."""
    checks = [row for check in JOB_CHECKS for row in check(pair)]
    if any(c.effect for c in checks):  # two different jobs: their ratio says nothing about CP, high or low
        return [*checks, Check(f"speed:{pair.name}", CheckStatus.SKIP,
                               f"{pair.what(pair.t.primary_metric)}: not judged, the arms did not run the same job")]
    return checks + [row for check in MEASURE_CHECKS for row in check(pair)]


def _format_ratio(est: stats.RatioEstimate, t: Thresholds, chosen: stats.Estimate) -> str:
    """Both statistics' ratios and intervals, the one that decides first."""
    ordered = [chosen, *(e for e in est.estimates if e is not chosen)]
    ratios = ", ".join(f"{e.statistic} {e.ratio:.2f}× ({t.confidence:.0%} CI {e.ci[0]:.2f}–{e.ci[1]:.2f})"
                       if e.ci else f"{e.statistic} {e.ratio:.2f}× (no CI)" for e in ordered)
    decides = f"; the {chosen.statistic}, the worse, decides" if len(ordered) > 1 else ""
    return f"{ratios}; threshold ≤ {t.pass_ratio:.2f}{decides}"
