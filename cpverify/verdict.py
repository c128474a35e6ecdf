"""Decide PASS / FAIL / INCONCLUSIVE / BLOCKED from parsed logs of two or more arms.

Pure: `decide()` takes parsed evidence and returns a Verdict; it touches no file.
The `cpverify verdict` subcommand at the bottom is the only part that reads logs and
writes artifacts (through cpverify.report).

The decision rule, in words, is `Verdict.rule` (also printed in verdict.md). In short:
every failed check names the verdict status it forces; a comparison's status is the
worst forced status among its arms' checks and its own; the overall status is the
worst over all comparisons, with FAIL > BLOCKED > INCONCLUSIVE > PASS. FAIL outranks
BLOCKED because an error we saw is evidence about the software, whereas BLOCKED only
says that part of it could not be tested.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.version import Version

from cpverify import stats
from cpverify._versions import parse_version
from cpverify.errors import EXIT_BLOCKED, EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_OK, InputError
from cpverify.fixes import FIX_COLLECT, FIX_OLD_STACK, FIX_TRANSPORT, for_error, for_outcome
from cpverify.model import ArmResult
from cpverify.parse import ParsedLog
from cpverify.parse.signatures import integer

SCHEMA_VERSION = 1

PASS, FAIL, INCONCLUSIVE, BLOCKED = "PASS", "FAIL", "INCONCLUSIVE", "BLOCKED"
_SEVERITY = {PASS: 0, INCONCLUSIVE: 1, BLOCKED: 2, FAIL: 3}
EXIT_CODES = {PASS: EXIT_OK, FAIL: EXIT_FAIL, INCONCLUSIVE: EXIT_INCONCLUSIVE, BLOCKED: EXIT_BLOCKED}

PRIMARY_METRIC = "perf/actor_train_time"
# Train-side timings slime prints per rollout. actor_train, log_probs and ref_log_probs are
# where CP communication lands; train_time and step_time (which includes generation) give context.
TIMING_METRICS = ("perf/actor_train_time", "perf/log_probs_time", "perf/ref_log_probs_time",
                  "perf/train_time", "perf/step_time")
SECONDARY_GATED = ("perf/log_probs_time", "perf/ref_log_probs_time")  # warn, never fail
# Megatron-LM pretraining logs have no slime steps; their `iteration N/ M | … elapsed time per
# iteration (ms): X` records are what two such logs (CP=1, CP=2) are compared on.
ITERATION_METRIC = "iteration/elapsed_ms"
NUMERICS_METRICS = ("train/entropy_loss", "train/kl_loss", "train/grad_norm",
                    "train/train_rollout_logprob_abs_diff")
MIN_NCCL = Version("2.18")

# The verdict status an error class forces; absent classes force FAIL. None: shown as a
# warning only -- these lines also appear in runs that go on to train normally (a retried
# HTTP request, a logged-and-handled traceback, a placement group that is granted later).
ERROR_EFFECTS: dict[str, str | None] = {
    "nccl_warn": None, "sglang_http_500": None, "sglang_http_5xx": None, "python_traceback": None,
    "ray_placement_group_wait": None, "resource_wait": None,
    "run_restarted": INCONCLUSIVE,  # two runs in one log: the timings mix, nothing failed for sure
}

# Runner outcomes (cpverify.runners.base) and the verdict status each forces.
_OUTCOME_EFFECT = {"ok": None, "blocked": BLOCKED, "interrupted": INCONCLUSIVE, "failed": FAIL, "fatal": FAIL,
                   "hang": FAIL, "stalled": FAIL, "deadline": FAIL}

# Fixes for the verdict's own checks; those for an outcome or an error class are cpverify.fixes'.
FIX_P2P_OFF = ("NCCL found no peer-to-peer path between the GPUs: unset NCCL_P2P_DISABLE, check "
               "`nvidia-smi topo -m`, and compare with NCCL_P2P_DISABLE=1 to measure the difference")
FIX_LAYOUT_HOOK = ("run through `cpverify run` (it adds the layout hook), or add "
                   "--custom-megatron-init-path cpverify.slime_hooks.layout.log_layout to the train args so the "
                   "log states the effective CP")
FIX_DAMAGED_TIMINGS = ("judge the arm's own, unedited log: slime's timers print positive seconds; if it is the arm's "
                       "own log, rerun the arm (a timer at or below zero, NaN or inf means its clock or metrics broke)")
FIX_INCOMPLETE = ("judge the whole log of a finished arm (a copy taken while the arm ran ends mid-step); if the arm's "
                  "own log ends there, the arm died: read its last lines (the Evidence section) and rerun")

# Advice that names the workload's own knobs: slime's flags mean nothing to the probe profile
# (torch's ring attention under torch.distributed.run), and the probe's mean nothing to slime.
WORKLOADS = ("slime", "probe")
_MORE_STEPS = {
    "slime": "run more rollouts (e.g. --num-rollout 16) so each arm has more counted steps",
    "probe": "run more measured steps (e.g. --set steps=60) so each arm has more counted steps",
}
_NO_PERF = {
    "slime": "make sure both logs hold slime's train-side `perf N:` lines",
    "probe": "the probe prints one `perf N:` line per measured step: read the end of the arm's log for why it stopped",
}
# How a detail names where the log stated its layout (cpverify.parse.records.Layout.source).
_LAYOUT_SOURCES = {"cpverify-layout": "", "megatron-arguments": ", from Megatron's argument dump"}
_NO_LAYOUT = {
    "slime": FIX_LAYOUT_HOOK,
    "probe": ("the probe prints its cpverify-layout line once its process group is up: read the arm's log for why it "
              "did not get that far"),
}
_SHORT_SEQUENCES = {
    "slime": "rule out FA3 with --attention-backend torch (or flash); note that at short sequences CP communication "
             "dominates (try the long profile)",
    "probe": "at short sequences CP communication dominates: compare the longer seq_lens of the sweep",
}


def fix_more_steps(workload: str) -> str:
    return _MORE_STEPS[workload] + ", on otherwise idle GPUs, to narrow the interval"


def fix_slow_cp(workload: str) -> str:
    return ("CP>1 is much slower than CP=1: " + FIX_OLD_STACK + "; " + FIX_TRANSPORT + "; "
            + _SHORT_SEQUENCES[workload] + "; turn off MIG and GPU power limits (nvidia-smi -pl); " + FIX_COLLECT)





@dataclass(frozen=True)
class Thresholds:
    pass_ratio: float = 1.3
    primary_metric: str = PRIMARY_METRIC
    min_counted_steps: int = 3
    warmup: int = 1  # rollouts with id < warmup carry torch.compile / NCCL init and are not counted
    confidence: float = 0.95
    numerics_tolerance: float = 0.01  # rel and abs, as slime's own grad-norm check (math.isclose)
    deterministic: bool = False  # only then are numerics a hard check
    resamples: int = stats.DEFAULT_RESAMPLES
    seed: int = stats.DEFAULT_SEED

    def __post_init__(self) -> None:
        problems = []
        if not self.pass_ratio > 0:
            problems.append(f"pass ratio {self.pass_ratio} must be > 0")
        if not 0 < self.confidence < 1:
            problems.append(f"confidence {self.confidence} must lie between 0 and 1")
        if self.min_counted_steps < 1:
            problems.append(f"min steps {self.min_counted_steps} must be >= 1")
        if self.warmup < 0:
            problems.append(f"warmup {self.warmup} must be >= 0")
        if self.resamples < 100:
            problems.append(f"resamples {self.resamples} must be >= 100")
        if problems:
            raise InputError("; ".join(problems),
                             "use e.g. --pass-ratio 1.3 --warmup 1 --min-steps 3 (confidence 0.95)")

    def to_json(self) -> dict:
        return {"pass_ratio": self.pass_ratio, "primary_metric": self.primary_metric,
                "min_counted_steps": self.min_counted_steps, "warmup": self.warmup, "confidence": self.confidence,
                "numerics_tolerance": self.numerics_tolerance, "deterministic": self.deterministic,
                "resamples": self.resamples, "seed": self.seed}


@dataclass
class ArmEvidence:
    name: str
    cp_requested: int
    parsed: ParsedLog
    result: ArmResult | None = None
    # slime itself compared this arm's grad norm at every step with the baseline arm's on identical
    # rollouts (train-only: --ci-load-grad-norm of the path the baseline saved to)
    grad_norm_checked: bool = False
    # Rollouts the plan asked this arm for (ids 0..n-1: slime's --num-rollout, the probe's warm-up +
    # measured steps); None when nobody said. An arm that counted fewer did not finish.
    expected_rollouts: int | None = None
    log_path: Path | None = None  # the file `parsed` came from (for the failure evidence in verdict.md)


@dataclass
class Check:
    name: str
    status: str  # pass | fail | warn | skip
    detail: str
    fix: str = ""
    arm: str | None = None
    effect: str | None = None  # the verdict status a failed check forces (FAIL, INCONCLUSIVE, BLOCKED)
    brief: str = ""  # a shorter detail for the headline (not serialised)

    def __post_init__(self) -> None:
        # A row that says "fail" must force a status, and only a failed row may: otherwise the
        # table and the status it explains contradict each other.
        if (self.status == "fail") != (self.effect is not None):
            raise ValueError(f"check {self.name}: status {self.status!r} with effect {self.effect!r}")

    @property
    def meaning(self) -> str:
        """What this row means for the verdict: the status it forces, or that it decides nothing."""
        return self.effect or {"pass": "pass", "warn": "warning", "skip": "not judged"}[self.status]

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix,
                "arm": self.arm, "effect": self.effect}


@dataclass
class ArmSummary:
    name: str
    cp_requested: int
    cp_effective: int | None  # None: the log does not state it
    layout: dict | None
    outcome: str | None
    counted_rollouts: list[int]
    metrics: dict[str, stats.Summary]
    nccl: dict
    lines: int
    values: dict[str, list[float]] = field(default_factory=dict)  # primary metric per counted rollout (plots)
    samples: dict[str, list[float]] = field(default_factory=dict, repr=False)  # every timing metric's samples
    log_path: Path | None = None
    # Why this arm failed, for the evidence in verdict.md: {"line": first fatal error line or None
    # (then the end of the log), "class", "text", "why"}; None when the arm did not fail.
    failure: dict | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "cp_requested": self.cp_requested,
                "cp_effective": self.cp_effective if self.cp_effective is not None else "unconfirmed",
                "layout": self.layout, "outcome": self.outcome, "counted_rollouts": self.counted_rollouts,
                "counted_steps": len(self.counted_rollouts),
                "metrics": {name: s.to_json() for name, s in self.metrics.items()}, "nccl": self.nccl,
                "log_lines": self.lines, "values": self.values, "failure": self.failure}


@dataclass
class Comparison:
    baseline: str
    candidate: str
    status: str
    reason: str
    metrics: dict[str, stats.RatioEstimate]
    checks: list[Check]

    def to_json(self) -> dict:
        return {"baseline": self.baseline, "candidate": self.candidate, "status": self.status, "reason": self.reason,
                "metrics": {name: est.to_json() for name, est in self.metrics.items()}}


@dataclass
class Verdict:
    status: str
    summary: str  # the headline without the status word
    rule: str
    thresholds: Thresholds
    arms: list[ArmSummary]
    comparisons: list[Comparison]
    checks: list[Check]
    numerics: list[dict]
    errors: list[dict]
    labels: dict[str, str] = field(default_factory=dict)  # arm name -> "CP=2" (or the name)
    ab: dict | None = None  # A/B of two slime revisions (cpverify.ab.analyze), when the plan had one
    workload: str = "slime"  # whose advice the fixes give: slime or probe

    @property
    def headline(self) -> str:
        return f"{self.status} — {self.summary}"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def primary(self) -> Comparison:
        return self.comparisons[0]

    def to_json(self) -> dict:
        primary = self.primary.metrics.get(self.thresholds.primary_metric)
        return {
            "schema_version": SCHEMA_VERSION,
            "status": self.status,
            "headline": self.headline,
            "rule": self.rule,
            "thresholds": self.thresholds.to_json(),
            "primary_comparison": {"baseline": self.primary.baseline, "candidate": self.primary.candidate,
                                   "metric": self.thresholds.primary_metric},
            "ratio": primary.ratio if primary else None,
            "ratio_ci": list(primary.ci) if primary and primary.ci else None,
            "arms": [arm.to_json() for arm in self.arms],
            "comparisons": [c.to_json() for c in self.comparisons],
            "checks": [c.to_json() for c in self.checks],
            "numerics": self.numerics,
            "errors": self.errors,
            "workload": self.workload,
            **({"ab": self.ab} if self.ab is not None else {}),
        }


def worst(statuses: Iterable[str]) -> str:
    return max(statuses, key=_SEVERITY.__getitem__, default=PASS)


def timing_metrics(t: Thresholds) -> tuple[str, ...]:
    """The timings summarised and compared: the standard five, plus a custom primary metric."""
    return TIMING_METRICS if t.primary_metric in TIMING_METRICS else (t.primary_metric, *TIMING_METRICS)


def short_metric(metric: str) -> str:
    """perf/actor_train_time -> actor_train."""
    return metric.removeprefix("perf/").removesuffix("_time")


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


# -- per arm ----------------------------------------------------------------------------------

def counted_perf(parsed: ParsedLog, warmup: int) -> dict[int, dict[str, float]]:
    """Train-side perf records of rollouts >= warmup, one per rollout id (the first one printed).

    Several ranks can print the same rollout's perf line; the first is rank 0's in slime's
    output order, and counting duplicates would inflate n and shrink the interval.
    """
    kept: dict[int, dict[str, float]] = {}
    for record in parsed.perf:
        if record.side == "train" and record.rollout >= warmup and record.rollout not in kept:
            kept[record.rollout] = record.metrics
    return dict(sorted(kept.items()))


def counted_iterations(parsed: ParsedLog, warmup: int) -> dict[int, dict[str, float]]:
    """Megatron-LM iteration times, one per logged iteration, the first `warmup` records left out
    (the first interval carries start-up: compilation, NCCL setup, a checkpoint load)."""
    kept: dict[int, dict[str, float]] = {}
    timed = [(i.iteration, i.elapsed_ms) for i in parsed.iterations if i.elapsed_ms is not None]
    for iteration, elapsed_ms in timed[warmup:]:
        kept.setdefault(iteration, {ITERATION_METRIC: elapsed_ms})
    return kept


def pretraining_only(parsed: ParsedLog) -> bool:
    """A Megatron-LM pretraining log: iteration times, and no slime training step at all."""
    return (not parsed.steps and not any(p.side == "train" for p in parsed.perf)
            and any(i.elapsed_ms is not None for i in parsed.iterations))


def _measurements(per_rollout: dict[int, dict[str, float]], metric: str) -> tuple[list[float], list[tuple[int, float]]]:
    """The metric's durations per counted rollout, and the (rollout, value) pairs that are not durations."""
    kept, rejected = [], []
    for rollout, metrics in per_rollout.items():
        if metric not in metrics:
            continue
        if stats.is_duration(metrics[metric]):
            kept.append(float(metrics[metric]))
        else:
            rejected.append((rollout, metrics[metric]))
    return kept, rejected


# slime starts train_wait when a step ends (it times the wait for the next rollout), so every
# complete log ends with it open; any other timer left open means the log ends inside a step.
IDLE_TIMERS = frozenset({"train_wait"})


def _ranges(ids: Sequence[int]) -> str:
    """[1, 2, 3, 5] -> "1-3, 5"."""
    parts: list[list[int]] = []
    for i in sorted(ids):
        if parts and parts[-1][1] == i - 1:
            parts[-1][1] = i
        else:
            parts.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)


# "[rank0]:[E0821 10:11:26.712922209 ProcessGroupNCCL.cpp:616] [Rank 0] " carries no meaning in a headline.
_LEADING_TAGS = re.compile(r"^(?:\s*\[[^\]]*\]:?)+\s*")


def _excerpt(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _arm_checks(ev: ArmEvidence, t: Thresholds, workload: str) -> tuple[ArmSummary, list[Check]]:
    parsed = ev.parsed
    checks: list[Check] = []
    outcome = ev.result.outcome if ev.result else None
    layout = parsed.layout
    nccl: dict[str, Any] = {"version": parsed.nccl.version, "transports": list(parsed.nccl.transports),
            "network": parsed.nccl.network}
    per_rollout = (counted_iterations(parsed, t.warmup) if t.primary_metric == ITERATION_METRIC
                   else counted_perf(parsed, t.warmup))
    measured = {m: _measurements(per_rollout, m) for m in timing_metrics(t)}
    samples = {m: kept for m, (kept, _) in measured.items()}
    primary = {r: float(m[t.primary_metric]) for r, m in per_rollout.items()
               if stats.is_duration(m.get(t.primary_metric))}
    log_path = ev.log_path or (ev.result.log_path if ev.result else None)
    summary = ArmSummary(
        name=ev.name, cp_requested=ev.cp_requested, cp_effective=layout.cp if layout else None,
        layout=({"cp": layout.cp, "dp": layout.dp, "tp": layout.tp, "pp": layout.pp,
                 "world": getattr(layout, "world", None), "source": layout.source} if layout else None),
        outcome=outcome, counted_rollouts=list(primary), values={t.primary_metric: list(primary.values())},
        metrics={m: stats.summarize(v) for m, v in samples.items() if v}, nccl=nccl, lines=parsed.lines,
        samples=samples, log_path=log_path)

    # 1. Did the runner get the arm going at all, and did it end cleanly?
    if ev.result is None:
        checks.append(Check("runner", "skip", "no runner result: verdict from existing logs", arm=ev.name))
    else:
        outcome = ev.result.outcome
        effect = _OUTCOME_EFFECT.get(outcome, INCONCLUSIVE)
        detail = f"runner outcome {outcome!r}"
        if ev.result.exit_code is not None:
            detail += f", exit code {ev.result.exit_code}"
        if ev.result.reason:
            detail += f": {ev.result.reason}"
        if outcome not in _OUTCOME_EFFECT:
            detail += " (unknown outcome)"
        # the watcher's fix (cpverify.fixes, as here) or a blocked workload's own
        fix = ev.result.fix or for_outcome(outcome, ev.result.error_class, _coarse(parsed, ev.result.error_class))
        checks.append(Check("runner", "pass" if effect is None else "fail", detail, "" if effect is None else fix,
                            ev.name, effect))
        if outcome == "blocked":
            # Nothing ran: the log checks below would only restate that.
            return summary, checks

    # 2. Error signatures: one check per class, naming the first occurrence.
    fatal = None
    for cls, found in _errors_by_class(parsed.errors).items():
        first = found[0]
        coarse = getattr(first, "coarse", "") or cls
        more = f" ({len(found)} occurrences)" if len(found) > 1 else ""
        named = cls if coarse == cls else f"{cls} ({coarse})"
        detail = f"{named} at line {first.line}{more}: {_excerpt(first.text)}"
        cause = getattr(first, "detail", {}).get("cause")  # the parser's reading: "killed by SIGKILL, ..."
        if cause:
            detail += f" ({cause})"
        fix = for_error(cls, coarse)
        effect = ERROR_EFFECTS.get(cls, FAIL)
        brief = f"{cls} in arm {ev.name} at line {first.line}: {_excerpt(_LEADING_TAGS.sub('', first.text), 120)}"
        if cause:
            brief += f" — {cause}"
        checks.append(Check(f"error:{cls}", "warn" if effect is None else "fail", detail, fix, ev.name, effect,
                            brief))
        if effect == FAIL and (fatal is None or first.line < fatal.line):
            fatal = first
    if not parsed.errors:
        checks.append(Check("errors", "pass", f"no error signatures in {parsed.lines} lines", arm=ev.name))

    # 3. Did the requested CP take effect? slime ignores misspelled flags, so only the run can say.
    if layout is None:
        if ev.cp_requested > 1:
            checks.append(Check("cp_effective", "fail",
                                f"could not confirm CP={ev.cp_requested}: the log has no cpverify-layout line and no "
                                "Megatron argument dump", _NO_LAYOUT[workload], ev.name, INCONCLUSIVE))
        else:
            checks.append(Check("cp_effective", "warn", "CP=1 unconfirmed (no cpverify-layout line or Megatron "
                                "argument dump; 1 is the default)", _NO_LAYOUT[workload], ev.name))
    elif layout.cp != ev.cp_requested:
        checks.append(Check("cp_effective", "fail",
                            f"CP did not take effect: requested CP={ev.cp_requested}, the run reports cp={layout.cp} "
                            f"(tp={layout.tp} pp={layout.pp} dp={layout.dp}{_LAYOUT_SOURCES[layout.source]})",
                            "check the spelling of --context-parallel-size in the train args (slime silently "
                            "ignores unknown flags); run `cpverify lint`", ev.name, FAIL))
    else:
        checks.append(Check("cp_effective", "pass", f"cp={layout.cp} tp={layout.tp} pp={layout.pp} dp={layout.dp}"
                            f"{_LAYOUT_SOURCES[layout.source]}", arm=ev.name))

    # 4. Are the timings measurements? A zero, negative, NaN or infinite duration is not one
    # (a broken timer, or an edited log); it is left out, and the arm cannot pass with it.
    damaged = {m: rejected for m, (_, rejected) in measured.items() if rejected}
    if damaged:
        said = {m: f"{m} at rollout(s) {_ranges([r for r, _ in bad])} (" + ", ".join(f"{v:.4g}" for _, v in bad[:3])
                + (", …)" if len(bad) > 3 else ")") for m, bad in damaged.items()}
        first = said.get(t.primary_metric) or next(iter(said.values()))
        checks.append(Check("timings", "fail", "timings that are not durations (zero, negative, NaN or infinite are "
                            "not measurements, so they are left out): " + "; ".join(said.values()),
                            FIX_DAMAGED_TIMINGS, ev.name, INCONCLUSIVE,
                            brief=f"arm {ev.name} has timings that are not durations: {first}"))
    elif per_rollout:
        checks.append(Check("timings", "pass", "every counted timing is a positive duration", arm=ev.name))

    # 5. Enough counted steps for an interval?
    n = len(samples[t.primary_metric])
    skipped = sum(1 for r in parsed.perf if r.side == "train" and r.rollout < t.warmup)
    detail = (f"{n} counted {t.primary_metric} values (rollouts >= {t.warmup}; {skipped} warm-up record(s) "
              f"excluded)")
    if n < t.min_counted_steps:
        if not parsed.perf and parsed.steps:
            detail += "; the log has step lines but no train-side perf lines"
        elif not parsed.steps and not any(r.side == "train" for r in parsed.perf):
            code = ev.result.exit_code if ev.result else None
            ended = f" and exited with code {code}" if code is not None else ""
            detail += f"; the arm printed no training step at all{ended}"
        needed = (f"run at least {t.warmup + t.min_counted_steps} rollouts (--num-rollout)" if workload == "slime"
                  else f"run at least {t.min_counted_steps} measured steps (--set steps=N)")
        checks.append(Check("counted_steps", "fail", f"{detail}; need >= {t.min_counted_steps}",
                            f"{needed}; {fix_more_steps(workload)}", ev.name, INCONCLUSIVE))
    else:
        checks.append(Check("counted_steps", "pass", detail, arm=ev.name))

    # 6. Did the arm finish? A log that ends inside a step (a timer started, never ended) was cut
    # or its arm died there; an arm with fewer rollouts than its plan asked for stopped early.
    unfinished = []
    open_steps = [(name, line) for name, line in parsed.timers_open if name not in IDLE_TIMERS]
    if open_steps:
        unfinished.append("the log ends inside a step: " + ", ".join(
            f"Timer {name} started at line {line} never ended" for name, line in open_steps))
    seen = {r.rollout for r in parsed.perf if r.side == "train"}
    if ev.expected_rollouts is not None:
        missing = [r for r in range(t.warmup, ev.expected_rollouts) if r not in seen]
        if missing:
            unfinished.append(f"the plan asked for {ev.expected_rollouts} rollouts (0-{ev.expected_rollouts - 1}, "
                              f"counted from {t.warmup}) and {len(missing)} of them have no train-side perf record "
                              f"(rollouts {_ranges(missing)})")
    elif (planned := integer(parsed.arguments.get("num_rollout", ""))) is not None and seen:
        # No plan (`cpverify verdict` on logs): slime printed its own --num-rollout. A run that
        # stopped between two rollouts (killed outright: no traceback, no open timer) ends short of
        # it. Counted from the first rollout the log holds, so a resumed run is not "unfinished".
        missing = [r for r in range(max(t.warmup, min(seen)), planned) if r not in seen]
        if missing:
            unfinished.append(f"the run was started with --num-rollout {planned} (its argument dump) and "
                              f"{len(missing)} rollout(s) have no train-side perf record (rollouts {_ranges(missing)})")
    if unfinished:
        checks.append(Check("complete", "fail", "; ".join(unfinished), FIX_INCOMPLETE, ev.name, INCONCLUSIVE,
                            brief=f"arm {ev.name} did not finish: {'; '.join(unfinished)}"))
    else:
        detail = "no step left unfinished" + (f"; all {ev.expected_rollouts} planned rollouts have a perf record"
                                              if ev.expected_rollouts is not None else " (no planned rollout count)")
        checks.append(Check("complete", "pass", detail, arm=ev.name))

    # 7. NCCL transport and version (warnings: they explain a slow CP, they do not decide it).
    transports = nccl["transports"]
    slow_path = parsed.nccl_transport_warning()
    if slow_path:
        fix = FIX_TRANSPORT if parsed.tcp_fallback else FIX_P2P_OFF
        checks.append(Check("nccl_transport", "warn", f"{slow_path} (transports: {', '.join(transports)})", fix,
                            ev.name))
    elif transports:
        checks.append(Check("nccl_transport", "pass", ", ".join(transports), arm=ev.name))
    else:
        checks.append(Check("nccl_transport", "skip", "the log shows no NCCL channel lines",
                            "rerun with NCCL_DEBUG=INFO to record the transport", ev.name))
    if len(set(parsed.nccl.versions)) > 1:
        checks.append(Check("nccl_version", "warn", f"several NCCL versions in one run: "
                            f"{', '.join(parsed.nccl.versions)}", "use one image for every process", ev.name))
    version = parse_version(nccl["version"])
    if version is not None and version < MIN_NCCL:
        checks.append(Check("nccl_version", "warn", f"NCCL {nccl['version']} is older than {MIN_NCCL}",
                            FIX_OLD_STACK, ev.name))

    # The evidence verdict.md shows for an arm that crashed, failed or did not finish: where it went
    # wrong. A CP that did not take effect is a FAIL too, but the end of the log says nothing about it.
    failed = [c for c in checks
              if (c.effect == FAIL and c.name != "cp_effective") or (c.name == "complete" and c.effect)]
    if failed:
        why = "; ".join(f"error signature {c.name.removeprefix('error:')}" if c.name.startswith("error:")
                        else c.detail for c in failed)
        summary.failure = ({"line": fatal.line, "class": fatal.cls, "text": fatal.text, "why": why} if fatal
                           else {"line": None, "class": None, "text": None, "why": why})
    return summary, checks


def _coarse(parsed: ParsedLog, cls: str) -> str:
    """The coarse class the parser gave `cls` in this log ("" when the log has no such error)."""
    return next((getattr(e, "coarse", "") for e in parsed.errors if e.cls == cls), "") if cls else ""


def _errors_by_class(errors: Sequence) -> dict[str, list]:
    """Error records grouped by their finest class, in order of first appearance.

    The parser reports a fine class and, on the same line, its coarse twin (nccl_cuda_failure
    and nccl_error); the twin adds nothing, so it is dropped when its fine class is present.
    """
    groups: dict[str, list] = {}
    for e in errors:
        finer_on_same_line = any(other.line == e.line and other.cls != e.cls and getattr(other, "coarse", "") == e.cls
                                 for other in errors)
        if not finer_on_same_line:
            groups.setdefault(e.cls, []).append(e)
    return groups


# -- per comparison ---------------------------------------------------------------------------

def _numerics(base: ParsedLog, cand: ParsedLog, b_name: str, c_name: str, t: Thresholds) -> list[dict]:
    """First common step's numerics, side by side. Only rollout 0 can match across runs."""
    b_steps = {s.step: s for s in base.steps if s.kind == "step"}
    c_steps = {s.step: s for s in cand.steps if s.kind == "step"}
    common = sorted(set(b_steps) & set(c_steps))
    if not common:
        return []
    step = common[0]
    rows = []
    for metric in NUMERICS_METRICS:
        b, c = b_steps[step].metrics.get(metric), c_steps[step].metrics.get(metric)
        if not isinstance(b, (int, float)) or not isinstance(c, (int, float)):
            continue
        abs_diff = abs(c - b)
        rel_diff = abs_diff / abs(b) if b else (0.0 if c == 0 else None)
        rows.append({"baseline_arm": b_name, "candidate_arm": c_name, "step": step, "metric": metric,
                     "baseline": b, "candidate": c, "abs_diff": abs_diff, "rel_diff": rel_diff,
                     "within_tolerance": math.isclose(c, b, rel_tol=t.numerics_tolerance,
                                                      abs_tol=t.numerics_tolerance)})
    return rows


def _format_ratio(est: stats.RatioEstimate, t: Thresholds) -> str:
    ci = f"{t.confidence:.0%} CI {est.ci[0]:.2f}–{est.ci[1]:.2f}" if est.ci else "no CI"
    return f"{est.ratio:.2f}× ({ci}, threshold ≤ {t.pass_ratio:.2f})"


def _comparison_checks(base: ArmEvidence, cand: ArmEvidence, arms: dict[str, ArmSummary], labels: dict[str, str],
                       t: Thresholds, estimates: dict[str, stats.RatioEstimate], numerics: list[dict], *,
                       workload: str, arms_decide: bool) -> list[Check]:
    """`arms_decide`: the two arms' own checks already force a status (an arm blocked, failed, too
    short); then a missing ratio or interval only restates that and is not judged here."""
    pair = f"{cand.name} vs {base.name}"
    checks: list[Check] = []
    b_arm, c_arm = arms[base.name], arms[cand.name]

    # Same GPUs: CP=1/DP=2 against CP=2/DP=1 keeps the world size; anything else compares different
    # jobs (CP=2 on twice the GPUs of CP=1 would look cheap), so the ratio proves nothing.
    if b_arm.layout and c_arm.layout:
        world = {name: layout.get("world") or layout["cp"] * layout["dp"] * layout["tp"] * layout["pp"]
                 for name, layout in ((base.name, b_arm.layout), (cand.name, c_arm.layout))}
        if world[base.name] != world[cand.name]:
            checks.append(Check(f"same_gpus:{pair}", "fail",
                                f"the arms ran on different world sizes ({world[base.name]} vs {world[cand.name]}): "
                                "the ratio compares different jobs",
                                "run both arms on the same GPUs; only the CP flag may differ (DP absorbs it)",
                                effect=INCONCLUSIVE,
                                brief=f"the arms ran on different numbers of GPUs ({world[base.name]} vs {world[cand.name]})"))
    same = _same_workload(base, cand, pair)
    if same is not None:
        checks.append(same)
    # Two different jobs give a ratio that says nothing about CP, high or low: then no speed is judged.
    if any(c.effect for c in checks):
        checks.append(Check(f"speed:{pair}", "skip", f"{labels[cand.name]} {short_metric(t.primary_metric)} vs "
                            f"{labels[base.name]}: not judged, the arms did not run the same job"))
        return checks

    primary = estimates.get(t.primary_metric)
    what = f"{labels[cand.name]} {short_metric(t.primary_metric)} vs {labels[base.name]}"
    if primary is None or primary.ratio is None or primary.ci is None:
        if primary is None or primary.ratio is None:
            detail = f"{what}: no ratio ({primary.note if primary else 'no values'})"
            fix = _NO_PERF[workload] + "; " + fix_more_steps(workload)
        else:
            detail, fix = f"{what}: {primary.ratio:.2f}×, {primary.note}", fix_more_steps(workload)
        if arms_decide:
            checks.append(Check(f"speed:{pair}", "skip", detail + "; the arms' own checks decide"))
        else:
            checks.append(Check(f"speed:{pair}", "fail", detail, fix, effect=INCONCLUSIVE,
                                brief=f" — {primary.note}" if primary and primary.ratio is not None else ""))
    elif primary.ci[1] <= t.pass_ratio:
        checks.append(Check(f"speed:{pair}", "pass", f"{what}: {_format_ratio(primary, t)}"))
    elif primary.ci[0] > t.pass_ratio:
        checks.append(Check(f"speed:{pair}", "fail", f"{what}: {_format_ratio(primary, t)}; the whole interval "
                            f"is above the threshold", fix_slow_cp(workload), effect=FAIL,
                            brief=" — the whole interval is above the threshold"))
    else:
        checks.append(Check(f"speed:{pair}", "fail", f"{what}: {_format_ratio(primary, t)}; the interval "
                            f"straddles the threshold", fix_more_steps(workload), effect=INCONCLUSIVE,
                            brief=" — the interval straddles the threshold"))

    for metric in SECONDARY_GATED:
        est = estimates.get(metric)
        if est is None or est.ci is None:
            continue
        label = f"{labels[cand.name]} {short_metric(metric)} vs {labels[base.name]}"
        if est.ci[0] > t.pass_ratio:
            checks.append(Check(f"speed:{short_metric(metric)}:{pair}", "warn",
                                f"{label}: {_format_ratio(est, t)}", fix_slow_cp(workload)))
        else:
            checks.append(Check(f"speed:{short_metric(metric)}:{pair}", "pass", f"{label}: {_format_ratio(est, t)}"))


    b_version, c_version = b_arm.nccl["version"], c_arm.nccl["version"]
    if b_version and c_version and b_version != c_version:
        checks.append(Check(f"nccl_same_version:{pair}", "warn",
                            f"NCCL differs between arms ({b_version} vs {c_version})",
                            "run both arms in the same image; only the CP flag may differ"))

    if cand.grad_norm_checked:  # slime's own gate replaces the first-step comparison below
        checks.append(_grad_norm_gate(cand, pair))
    elif numerics:
        off = [row for row in numerics if not row["within_tolerance"]]
        step = numerics[0]["step"]
        if not t.deterministic:
            worst_rel = max((row["rel_diff"] or 0.0) for row in numerics)
            checks.append(Check(f"numerics:{pair}", "skip",
                                f"step {step}: largest relative difference {worst_rel:.3g} (reported only: runs "
                                f"are not deterministic)", "enable deterministic mode to gate numerics"))
        elif off:
            names = ", ".join(f"{r['metric']} {r['baseline']:.6g} vs {r['candidate']:.6g}" for r in off)
            checks.append(Check(f"numerics:{pair}", "fail", f"step {step} differs beyond rel/abs "
                                f"{t.numerics_tolerance:g}: {names}",
                                "compare on the same rollout data (--load-debug-rollout-data) with dropout 0 and "
                                "--attention-backend flash; report the CP path if it persists", effect=FAIL))
        else:
            checks.append(Check(f"numerics:{pair}", "pass", f"step {step}: all within rel/abs "
                                f"{t.numerics_tolerance:g}"))
    elif t.deterministic:
        checks.append(Check(f"numerics:{pair}", "fail", "no common train step to compare",
                            "make sure both logs hold slime's `step N:` lines", effect=INCONCLUSIVE))
    return checks


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


def _same_workload(base: ArmEvidence, cand: ArmEvidence, pair: str) -> Check | None:
    """Do two arms' logs show the same job but for CP? Megatron-LM prints every argument at start-up
    (slime's and Megatron's own logs both carry the dump): a CP=1 log at 32K tokens against a CP=2
    log at 1K gives a ratio of 0.3 that says nothing about CP. None when neither log has a dump
    (the parser keeps no secret-named argument)."""
    b_args, c_args = base.parsed.arguments, cand.parsed.arguments
    name = f"same_workload:{pair}"
    if not b_args and not c_args:
        return None
    if not b_args or not c_args:
        missing = base.name if not b_args else cand.name
        return Check(name, "skip", f"{missing}'s log has no Megatron argument dump to compare with the other's",
                     "compare whole logs, from the start of each run")

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
        return Check(name, "fail", f"the arms ran different jobs, not only a different CP: {listed(real)} "
                     "(Megatron's argument dumps)", "compare two runs that differ only in --context-parallel-size "
                     "(DP absorbs it on the same GPUs): `cpverify run` plans such arms, `cpverify plan --sh` prints "
                     "their commands", effect=INCONCLUSIVE,
                     brief=f"the arms ran different jobs, not only a different CP: {listed(real[:2])}")
    if paths:
        return Check(name, "warn", f"the arms' arguments match but for CP and these, which do not change a step's "
                     f"work (if the paths hold the same data and model): {listed(paths)}",
                     "give both arms the same data, checkpoint and settings; only the CP flag may differ")
    return Check(name, "pass", f"Megatron's argument dumps match in all {len(b_args)} arguments but CP, DP and "
                 "slime's grad-norm handoff")


def _grad_norm_gate(cand: ArmEvidence, pair: str) -> Check:
    """slime's grad-norm check as the numerics gate: slime asserts, at every step, that the
    candidate's grad norm matches the one the baseline saved (math.isclose, rel/abs 0.01)."""
    name = f"numerics:{pair}"
    mismatch = next((e for e in cand.parsed.errors if e.cls == "slime_grad_norm_mismatch"), None)
    steps = sum(1 for s in cand.parsed.steps if s.kind == "step")
    outcome = cand.result.outcome if cand.result else None
    if mismatch is not None:
        return Check(name, "fail", f"slime's grad-norm check failed at line {mismatch.line}: "
                     f"{_excerpt(_LEADING_TAGS.sub('', mismatch.text), 160)} (same rollouts as the baseline, "
                     "rel/abs 0.01)", for_error("slime_grad_norm_mismatch"), cand.name, FAIL,
                     brief=" — slime's grad-norm check failed")
    if steps and outcome in (None, "ok"):
        return Check(name, "pass", f"slime checked the grad norm of all {steps} steps against the baseline's on "
                     "the same rollouts (--ci-load-grad-norm, rel/abs 0.01): every one matched", arm=cand.name)
    return Check(name, "fail", f"slime's grad-norm check did not run to the end ({steps} step(s) checked, runner "
                 f"outcome {outcome!r})", "see this arm's other checks for what stopped it", cand.name, INCONCLUSIVE)


# -- the decision -----------------------------------------------------------------------------

def _labels(evidence: Sequence[ArmEvidence]) -> dict[str, str]:
    cps = [ev.cp_requested for ev in evidence]
    return {ev.name: f"CP={ev.cp_requested}" if cps.count(ev.cp_requested) == 1 else ev.name for ev in evidence}


def decide(evidence: list[ArmEvidence], *, comparisons: list[tuple[str, str]],
           thresholds: Thresholds | None = None, workload: str = "slime",
           run_checks: Sequence[Check] = ()) -> Verdict:
    """The verdict over N arms and several (baseline, candidate) comparisons; the first is primary.

    The question is always what the larger CP costs against the smaller one, so each pair is
    oriented by the CP its arms requested, whichever order it names them in: a pair given as
    (cp2, cp1) is judged as cp2 against cp1, never as the inverse ratio. A pair of equal CPs
    verifies nothing and is refused. `workload` (slime or probe) picks the advice in the fixes.
    `run_checks` are about the run as a whole (it was interrupted outside any arm): they weigh on
    the status like a check of an arm outside every comparison.
    """
    t = thresholds or Thresholds()
    if workload not in WORKLOADS:
        raise InputError(f"unknown workload {workload!r}", f"use one of {', '.join(WORKLOADS)}")
    by_name = {ev.name: ev for ev in evidence}
    if len(by_name) != len(evidence):
        raise InputError("two arms share a name", "give every arm a unique name (cp1, cp2, cp4, ...)")
    if not comparisons:
        raise InputError("no comparison to decide", "pass at least one (baseline, candidate) pair, e.g. (cp1, cp2)")
    oriented = []
    for pair in comparisons:
        missing = [name for name in pair if name not in by_name]
        if missing:
            raise InputError(f"comparison {pair} names unknown arm(s) {missing}",
                             f"compare only arms that exist: {sorted(by_name)}")
        (b_cp, base_name), (c_cp, cand_name) = sorted((by_name[name].cp_requested, name) for name in pair)
        if b_cp == c_cp:
            raise InputError(f"comparison {pair[0]} vs {pair[1]}: both arms requested CP={b_cp}, so there is no "
                             "CP to verify", "compare a CP=1 arm against a CP>1 arm, e.g. --baseline-cp 1 "
                             "--candidate-cp 2")
        oriented.append((base_name, cand_name))

    if t.primary_metric == PRIMARY_METRIC and all(pretraining_only(ev.parsed) for ev in evidence):
        t = replace(t, primary_metric=ITERATION_METRIC)
    labels = _labels(evidence)
    arms: dict[str, ArmSummary] = {}
    arm_checks: dict[str, list[Check]] = {}
    for ev in evidence:
        arms[ev.name], arm_checks[ev.name] = _arm_checks(ev, t, workload)

    results: list[Comparison] = []
    told: dict[int, Check | None] = {}  # comparison index -> the check its reason tells
    all_numerics: list[dict] = []
    for base_name, cand_name in oriented:
        base, cand = by_name[base_name], by_name[cand_name]
        estimates = {}
        for metric in timing_metrics(t):
            b_values, c_values = arms[base_name].samples[metric], arms[cand_name].samples[metric]
            if b_values or c_values:
                estimates[metric] = stats.compare(b_values, c_values, min_n=t.min_counted_steps,
                                                  confidence=t.confidence, resamples=t.resamples, seed=t.seed)
        numerics = _numerics(base.parsed, cand.parsed, base_name, cand_name, t)
        all_numerics.extend(numerics)
        arms_decide = any(c.effect for c in arm_checks[base_name] + arm_checks[cand_name])
        own = _comparison_checks(base, cand, arms, labels, t, estimates, numerics, workload=workload,
                                 arms_decide=arms_decide)
        involved = arm_checks[base_name] + arm_checks[cand_name] + own
        status = worst(c.effect for c in involved if c.effect)
        reason, told[len(results)] = _reason(status, involved, estimates.get(t.primary_metric), base_name,
                                             cand_name, labels, t)
        results.append(Comparison(base_name, cand_name, status, reason, estimates, own))

    compared = {name for pair in oriented for name in pair}
    loose = [c for name in by_name if name not in compared for c in arm_checks[name] if c.effect]
    loose += [c for c in run_checks if c.effect]
    status = worst([c.status for c in results] + [c.effect for c in loose if c.effect])
    # The headline tells the story of the worst comparison (the primary one when tied).
    index = next(i for i, c in enumerate(results) if c.status == worst(c.status for c in results))
    summary, shown = results[index].reason, told[index]
    if loose and _SEVERITY[worst(c.effect for c in loose if c.effect)] > _SEVERITY[results[index].status]:
        shown = next(c for c in loose if c.effect == status)
        summary = shown.brief or f"arm {shown.arm}: {shown.detail}"
    primary = results[0]
    told_primary = summary == primary.reason

    checks = ([c for ev in evidence for c in arm_checks[ev.name]] + [c for r in results for c in r.checks]
              + list(run_checks))
    # Every other row that forces a status, counted by the status it forces: the headline names one.
    others = [c.effect for c in checks if c.effect and c is not shown]
    if others:
        counts = sorted(set(others), key=_SEVERITY.__getitem__, reverse=True)
        summary += (f" (+{len(others)} more failed check{'s' if len(others) > 1 else ''}: "
                    + ", ".join(f"{others.count(e)} {e}" for e in counts) + "; see checks)")
    if not told_primary:
        # Another comparison decided; the primary one is still the number people quote.
        summary += f" [primary {labels[primary.candidate]} vs {labels[primary.baseline]}: {primary.status}"
        estimate = primary.metrics.get(t.primary_metric)
        if estimate is not None and estimate.ratio is not None:
            summary += f", {short_metric(t.primary_metric)} {estimate.ratio:.2f}×"
        summary += "]"

    errors = [{"arm": ev.name, "class": cls, "line": e.line, "text": e.text,
               "fatal": ERROR_EFFECTS.get(cls, FAIL) == FAIL, "count": len(found)}
              for ev in evidence for cls, found in _errors_by_class(ev.parsed.errors).items() for e in found[:1]]
    return Verdict(status=status, summary=summary, rule=decision_rule(t), thresholds=t,
                   arms=[arms[ev.name] for ev in evidence], comparisons=results, checks=checks,
                   numerics=all_numerics, errors=errors, labels=labels, workload=workload)


def _reason(status: str, checks: list[Check], primary: stats.RatioEstimate | None, base: str, cand: str,
            labels: dict[str, str], t: Thresholds) -> tuple[str, Check | None]:
    """A comparison's one-line story, and the check it tells (None for a PASS)."""
    speed = ""
    if primary is not None and primary.ratio is not None:
        n_b, n_c = primary.n_baseline, primary.n_candidate
        steps = f"{n_b} steps each" if n_b == n_c else f"{n_b} vs {n_c} steps"
        speed = (f"{labels[cand]} {short_metric(t.primary_metric)} {primary.ratio:.2f}× {labels[base]} "
                 f"({f'{t.confidence:.0%} CI {primary.ci[0]:.2f}–{primary.ci[1]:.2f}' if primary.ci else 'no CI'}, "
                 f"threshold ≤ {t.pass_ratio:.2f}), {steps}")
    if status == PASS:
        return speed, None
    first = next(c for c in checks if c.effect == status)
    if first.name.startswith("speed:") and speed:
        text = speed + first.brief  # the speed check's brief is the suffix saying why
    elif first.brief:
        text = first.brief
    else:
        where = f"arm {first.arm}: " if first.arm else ""
        text = where + first.detail
        if speed:
            text += f"; {speed}"
    return text, first
