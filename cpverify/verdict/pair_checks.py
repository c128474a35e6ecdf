"""The checks of one comparison (baseline arm, candidate arm): did the arms run the same job but for
CP, the speed ratio and its interval, the other timings, NCCL, the numerics. Each a small function
from the pair's facts to its rows of the table."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from cpverify._versions import parse_version
from cpverify.fixes import NO_PERF, fix_more_steps, fix_slow_cp, for_error
from cpverify.verdict import stats
from cpverify.verdict.arm_checks import MIN_NCCL
from cpverify.verdict.evidence import LEADING_TAGS, excerpt, first_step_numerics
from cpverify.verdict.model import (
    FAIL,
    INCONCLUSIVE,
    SECONDARY_GATED,
    ArmEvidence,
    ArmSummary,
    Check,
    Thresholds,
    short_metric,
    timing_metrics,
)


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
           t: Thresholds, workload: str, *, arms_decide: bool) -> PairFacts:
        estimates = {}
        for metric in timing_metrics(t):
            b_values, c_values = arms[base.name].samples[metric], arms[cand.name].samples[metric]
            if b_values or c_values:
                estimates[metric] = stats.compare(b_values, c_values, min_n=t.min_counted_steps,
                                                  confidence=t.confidence, resamples=t.resamples, seed=t.seed)
        numerics = first_step_numerics(base.parsed, cand.parsed, base.name, cand.name, t)
        return cls(base, cand, arms[base.name], arms[cand.name], labels, t, workload, arms_decide, estimates,
                   numerics)

    @property
    def name(self) -> str:
        return f"{self.cand.name} vs {self.base.name}"

    def slow_cp_fix(self) -> str:
        """The slow-CP advice, minus what both arms' NCCL lines rule out."""
        logs = (self.base.parsed, self.cand.parsed)
        transports = tuple(dict.fromkeys(t for log in logs for t in log.nccl.transports))
        seen = all(log.nccl.transports for log in logs)
        versions = [parse_version(log.nccl.version) for log in logs]
        return fix_slow_cp(self.workload, transports=transports,
                           slow_path=any(log.nccl_transport_warning() for log in logs) or (None if not seen else False),
                           old_nccl=None if None in versions else any(v < MIN_NCCL for v in versions if v))

    def what(self, metric: str) -> str:
        return f"{self.labels[self.cand.name]} {short_metric(metric)} vs {self.labels[self.base.name]}"


def same_gpus(pair: PairFacts) -> Iterator[Check]:
    """Same GPUs: CP=1/DP=2 against CP=2/DP=1 keeps the world size; anything else compares different
    jobs (CP=2 on twice the GPUs of CP=1 would look cheap), so the ratio proves nothing."""
    b_layout, c_layout = pair.b_arm.layout, pair.c_arm.layout
    if not (b_layout and c_layout):
        return
    world = {name: layout.get("world") or layout["cp"] * layout["dp"] * layout["tp"] * layout["pp"]
             for name, layout in ((pair.base.name, b_layout), (pair.cand.name, c_layout))}
    b_world, c_world = world[pair.base.name], world[pair.cand.name]
    if b_world != c_world:
        yield Check(f"same_gpus:{pair.name}", "fail",
                    f"the arms ran on different world sizes ({b_world} vs {c_world}): the ratio compares different jobs",
                    "run both arms on the same GPUs; only the CP flag may differ (DP absorbs it)", effect=INCONCLUSIVE,
                    brief=f"the arms ran on different numbers of GPUs ({b_world} vs {c_world})")


# Megatron-LM arguments that may differ between the arms of one CP comparison: CP itself and its
# options, the DP that absorbs it on the same GPUs, the world size (same_gpus judges it), slime's
# grad-norm handoff (the CP=1 arm saves, the others load) and the rank that printed the dump.
_CP_ONLY_ARGUMENTS = re.compile(r"context_parallel|^cp_|^data_parallel_size$|^world_size$|^ci_(?:save|load)_grad_norm$"
                                r"|^(?:local_)?rank$")
# Differences that leave each step's work alone: where results and metrics go, how long and how often
# (the per-step timings compare), ports and addresses, the seed. A path that differs may still hold
# other data: that is a warning.
_INCIDENTAL_ARGUMENTS = re.compile(r"^(?:wandb|tensorboard|swanlab|mlflow)_|_(?:port|addr|address|project|group|"
                                   r"run_name|exp_name|interval|iters)$|^(?:seed|num_rollout|train_iters|exit_\w+|"
                                   r"timing_log_level)$")


def same_workload(pair: PairFacts) -> Iterator[Check]:
    """Do two arms' logs show the same job but for CP? Megatron-LM prints every argument at start-up
    (slime's and Megatron's own logs both carry the dump): a CP=1 log at 32K tokens against a CP=2
    log at 1K gives a ratio of 0.3 that says nothing about CP. No row when neither log has a dump
    (the parser keeps no secret-named argument)."""
    base, cand = pair.base, pair.cand
    b_args, c_args = base.parsed.arguments, cand.parsed.arguments
    name = f"same_workload:{pair.name}"
    if not b_args and not c_args:
        return
    if not b_args or not c_args:
        missing = base.name if not b_args else cand.name
        yield Check(name, "skip", f"{missing}'s log has no Megatron argument dump to compare with the other's",
                    "compare whole logs, from the start of each run")
        return

    def shown(value: str | None) -> str:
        return "(absent)" if value is None else value if len(value) <= 60 else value[:57] + "..."

    differ = sorted(key for key in b_args.keys() | c_args.keys()
                    if b_args.get(key) != c_args.get(key) and not _CP_ONLY_ARGUMENTS.search(key))
    paths = [key for key in differ if "/" in (b_args.get(key) or "") + (c_args.get(key) or "")
             or _INCIDENTAL_ARGUMENTS.search(key)]
    real = [key for key in differ if key not in paths]

    def listed(keys: list[str]) -> str:
        text = ", ".join(f"{key} {shown(b_args.get(key))} vs {shown(c_args.get(key))}" for key in keys[:6])
        return text + (f" (and {len(keys) - 6} more)" if len(keys) > 6 else "")

    if real:
        yield Check(name, "fail", f"the arms ran different jobs, not only a different CP: {listed(real)} "
                    "(Megatron's argument dumps)", "compare two runs that differ only in --context-parallel-size "
                    "(DP absorbs it on the same GPUs): `cpverify run` plans such arms, `cpverify plan --sh` prints "
                    "their commands", effect=INCONCLUSIVE,
                    brief=f"the arms ran different jobs, not only a different CP: {listed(real[:2])}")
    elif paths:
        yield Check(name, "warn", f"the arms' arguments match but for CP and these, which do not change a step's "
                    f"work (if the paths hold the same data and model): {listed(paths)}",
                    "give both arms the same data, checkpoint and settings; only the CP flag may differ")
    else:
        yield Check(name, "pass", f"Megatron's argument dumps match in all {len(b_args)} arguments but CP, DP "
                    "and slime's grad-norm handoff")


def speed(pair: PairFacts) -> Iterator[Check]:
    """The primary timing's ratio, candidate against baseline, and its interval against the threshold."""
    t, workload, name = pair.t, pair.workload, f"speed:{pair.name}"
    primary = pair.estimates.get(t.primary_metric)
    what = pair.what(t.primary_metric)
    if primary is None or primary.ratio is None or primary.ci is None:
        if primary is None or primary.ratio is None:
            detail = f"{what}: no ratio ({primary.note if primary else 'no values'})"
            fix = NO_PERF[workload] + "; " + fix_more_steps(workload)
        else:
            detail, fix = f"{what}: {primary.ratio:.2f}×, {primary.note}", fix_more_steps(workload)
        if pair.arms_decide:
            yield Check(name, "skip", detail + "; the arms' own checks decide")
        else:
            yield Check(name, "fail", detail, fix, effect=INCONCLUSIVE,
                        brief=f" — {primary.note}" if primary and primary.ratio is not None else "")
    elif primary.ci[1] <= t.pass_ratio:
        yield Check(name, "pass", f"{what}: {_format_ratio(primary, t)}")
    elif primary.ci[0] > t.pass_ratio:
        yield Check(name, "fail", f"{what}: {_format_ratio(primary, t)}; the whole interval is above the threshold",
                    pair.slow_cp_fix(), effect=FAIL, brief=" — the whole interval is above the threshold")
    else:
        yield Check(name, "fail", f"{what}: {_format_ratio(primary, t)}; the interval straddles the threshold",
                    fix_more_steps(workload), effect=INCONCLUSIVE, brief=" — the interval straddles the threshold")


def secondary_speed(pair: PairFacts) -> Iterator[Check]:
    """log_probs and ref_log_probs, where CP communication lands too: a warning, never a FAIL."""
    for metric in SECONDARY_GATED:
        est = pair.estimates.get(metric)
        if est is None or est.ci is None:
            continue
        name, shown = f"speed:{short_metric(metric)}:{pair.name}", f"{pair.what(metric)}: {_format_ratio(est, pair.t)}"
        if est.ci[0] > pair.t.pass_ratio:
            primary = pair.estimates.get(pair.t.primary_metric)
            slow_too = primary is not None and primary.ci is not None and primary.ci[0] > pair.t.pass_ratio
            yield Check(name, "warn", shown, f"as for {short_metric(pair.t.primary_metric)} (its speed row)"
                        if slow_too else pair.slow_cp_fix())
        elif est.ci[1] > pair.t.pass_ratio:  # straddles: neither within the threshold nor above it
            yield Check(name, "skip", f"{shown}; undecided: the interval straddles the threshold")
        else:
            yield Check(name, "pass", shown)


def nccl_same_version(pair: PairFacts) -> Iterator[Check]:
    b_version, c_version = pair.b_arm.nccl["version"], pair.c_arm.nccl["version"]
    if b_version and c_version and b_version != c_version:
        yield Check(f"nccl_same_version:{pair.name}", "warn", f"NCCL differs between arms ({b_version} vs {c_version})",
                    "run both arms in the same image; only the CP flag may differ")


def numerics(pair: PairFacts) -> Iterator[Check]:
    """slime's own grad-norm check where it ran (train-only arms), else the first common step's
    numerics, a gate only in deterministic mode."""
    t, name, rows = pair.t, f"numerics:{pair.name}", pair.numerics
    if pair.cand.grad_norm_checked:
        yield _grad_norm_gate(pair.cand, pair.name)
    elif rows:
        off = [row for row in rows if not row["within_tolerance"]]
        step = rows[0]["step"]
        if not t.deterministic:
            worst_rel = max((row["rel_diff"] or 0.0) for row in rows)
            yield Check(name, "skip", f"step {step}: largest relative difference {worst_rel:.3g} (reported only: runs "
                        f"are not deterministic)", "enable deterministic mode to gate numerics")
        elif off:
            names = ", ".join(f"{r['metric']} {r['baseline']:.6g} vs {r['candidate']:.6g}" for r in off)
            yield Check(name, "fail", f"step {step} differs beyond rel/abs {t.numerics_tolerance:g}: {names}",
                        "compare on the same rollout data (--load-debug-rollout-data) with dropout 0 and "
                        "--attention-backend flash; report the CP path if it persists", effect=FAIL)
        else:
            yield Check(name, "pass", f"step {step}: all within rel/abs {t.numerics_tolerance:g}")
    elif t.deterministic:
        yield Check(name, "fail", "no common train step to compare", "make sure both logs hold slime's `step N:` lines",
                    effect=INCONCLUSIVE)


def _grad_norm_gate(cand: ArmEvidence, pair: str) -> Check:
    """slime's grad-norm check as the numerics gate: slime asserts, at every step, that the
    candidate's grad norm matches the one the baseline saved (math.isclose, rel/abs 0.01)."""
    name = f"numerics:{pair}"
    mismatch = next((e for e in cand.parsed.errors if e.cls == "slime_grad_norm_mismatch"), None)
    steps = sum(1 for s in cand.parsed.steps if s.kind == "step")
    outcome = cand.result.outcome if cand.result else None
    if mismatch is not None:
        return Check(name, "fail", f"slime's grad-norm check failed at line {mismatch.line}: "
                     f"{excerpt(LEADING_TAGS.sub('', mismatch.text), 160)} (same rollouts as the baseline, "
                     "rel/abs 0.01)", for_error("slime_grad_norm_mismatch"), cand.name, FAIL,
                     brief=" — slime's grad-norm check failed")
    if steps and outcome in (None, "ok"):
        return Check(name, "pass", f"slime checked the grad norm of all {steps} steps against the baseline's on "
                     "the same rollouts (--ci-load-grad-norm, rel/abs 0.01): every one matched", arm=cand.name)
    return Check(name, "fail", f"slime's grad-norm check did not run to the end ({steps} step(s) checked, runner "
                 f"outcome {outcome!r})", "see this arm's other checks for what stopped it", cand.name, INCONCLUSIVE)



# Whether the two arms ran one job but for CP; then, only if they did, what CP cost.
JOB_CHECKS = (same_gpus, same_workload)
MEASURE_CHECKS = (speed, secondary_speed, nccl_same_version, numerics)


def check_pair(pair: PairFacts) -> list[Check]:
    """A comparison's own rows of the table."""
    checks = [row for check in JOB_CHECKS for row in check(pair)]
    if any(c.effect for c in checks):  # two different jobs: their ratio says nothing about CP, high or low
        return [*checks, Check(f"speed:{pair.name}", "skip",
                               f"{pair.what(pair.t.primary_metric)}: not judged, the arms did not run the same job")]
    return checks + [row for check in MEASURE_CHECKS for row in check(pair)]


def _format_ratio(est: stats.RatioEstimate, t: Thresholds) -> str:
    ci = f"{t.confidence:.0%} CI {est.ci[0]:.2f}–{est.ci[1]:.2f}" if est.ci else "no CI"
    return f"{est.ratio:.2f}× ({ci}, threshold ≤ {t.pass_ratio:.2f})"
