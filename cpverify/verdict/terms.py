"""The verdict's terms: the statuses, the metrics, the thresholds, the evidence of an arm, a check
(one row of the table), an arm's summary, a comparison, the verdict itself. (Not `model`: that is
cpverify.model, the data every stage shares, and the model the arms train is the HF one.)"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cpverify.errors import EXIT_BLOCKED, EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_OK, InputError
from cpverify.model import ArmResult, CheckStatus, Outcome, Status
from cpverify.parse import ParsedLog
from cpverify.verdict import stats

if TYPE_CHECKING:
    from cpverify.profiles import Profile

SCHEMA_VERSION = 1

# The statuses (model.Status) by the names the verdict's rules use.
PASS, FAIL, INCONCLUSIVE, BLOCKED = Status.PASS, Status.FAIL, Status.INCONCLUSIVE, Status.BLOCKED
SEVERITY: dict[Status, int] = {PASS: 0, INCONCLUSIVE: 1, BLOCKED: 2, FAIL: 3}
EXIT_CODES: dict[Status, int] = {PASS: EXIT_OK, FAIL: EXIT_FAIL, INCONCLUSIVE: EXIT_INCONCLUSIVE, BLOCKED: EXIT_BLOCKED}

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

# The verdict status an error class forces; absent classes force FAIL. None: shown as a
# warning only -- these lines also appear in runs that go on to train normally (a retried
# HTTP request, a logged-and-handled traceback, a placement group that is granted later).
ERROR_EFFECTS: dict[str, Status | None] = {
    "nccl_warn": None, "sglang_http_500": None, "sglang_http_5xx": None, "python_traceback": None,
    "ray_placement_group_wait": None, "resource_wait": None,
    "run_restarted": INCONCLUSIVE,  # two runs in one log: the timings mix, nothing failed for sure
    "layout_mismatch": INCONCLUSIVE,  # ranks state two layouts: the log contradicts itself (two runs, an edit)
}

# Errors that report another process's or task's failure, whose cause the log prints elsewhere (Ray's
# driver-side RayTaskError(OutOfMemoryError) before the worker's own traceback; torchrun's
# ChildFailedError after the rank's). The root cause of a failed arm is its first other fatal error.
WRAPPER_ERRORS = frozenset({"ray_task_error", "ray_actor_died", "ray_actor_unavailable", "ray_node_died",
                            "ray_job_failed", "launcher_failed", "subprocess_failed", "sglang_child_process_failed",
                            "python_traceback", "python_fatal_error"})

# Runner outcomes (cpverify.runners.base) and the verdict status each forces.
OUTCOME_EFFECTS: dict[Outcome, Status | None] = {
    Outcome.OK: None, Outcome.BLOCKED: BLOCKED, Outcome.INTERRUPTED: INCONCLUSIVE, Outcome.FAILED: FAIL,
    Outcome.FATAL: FAIL, Outcome.HANG: FAIL, Outcome.STALLED: FAIL, Outcome.DEADLINE: FAIL}


@dataclass(frozen=True)
class Thresholds:
    pass_ratio: float = 1.3
    primary_metric: str = PRIMARY_METRIC
    min_counted_steps: int = 6  # stats.min_sample(0.95): the fewest values a 95% interval can come from
    # Rollouts with id < warmup carry torch.compile / NCCL init and are not counted; None: found in
    # each round's own data (cpverify.verdict.rounds.warmup_end), the default
    warmup: int | None = None
    confidence: float = 0.95
    numerics_tolerance: float = 0.01  # rel and abs, as slime's own grad-norm check (math.isclose)
    deterministic: bool = False  # only then are numerics a hard check
    resamples: int = stats.DEFAULT_RESAMPLES
    seed: int = stats.DEFAULT_SEED

    def __post_init__(self) -> None:
        problems = []
        # Written as ranges a NaN falls outside of (every comparison with it is false). An infinite
        # pass ratio would pass every ratio, an infinite tolerance match every pair of numbers.
        if not 0 < self.pass_ratio < math.inf:
            problems.append(f"pass ratio {self.pass_ratio} must be a finite number > 0")
        if not 0 <= self.numerics_tolerance < math.inf:
            problems.append(f"numerics tolerance {self.numerics_tolerance} must be a finite number >= 0")
        if not 0 < self.confidence < 1:
            problems.append(f"confidence {self.confidence} must lie between 0 and 1")
        elif self.min_counted_steps < (need := stats.min_sample(self.confidence)):
            # Fewer values than an interval needs would either label one it cannot hold or leave
            # every verdict INCONCLUSIVE: refused here, before any GPU time is spent on it.
            n = self.min_counted_steps
            raise InputError(f"a minimum of {n} counted step(s) per arm is below the {need} a {self.confidence:.0%} "
                             f"interval needs (an interval from {n} value(s) reaches at most from the smallest to "
                             f"the largest, and misses the median {2.0 ** (1 - n):.0%} of the time or more)",
                             f"ask for at least {need}: `cpverify verdict --min-steps {need}`, `cpverify run --set "
                             f"min_counted_steps={need}`, and enough rollouts after the warm-up to count them")
        if self.warmup is not None and self.warmup < 0:
            problems.append(f"warmup {self.warmup} must be >= 0")
        if self.resamples < 100:
            problems.append(f"resamples {self.resamples} must be >= 100")
        if problems:
            raise InputError("; ".join(problems),
                             "use e.g. `cpverify verdict --pass-ratio 1.3 --warmup 1 --min-steps 6`, `cpverify run "
                             "--set pass_ratio=1.3` (confidence 0.95, numerics tolerance 0.01)")

    @classmethod
    def of(cls, profile: Profile) -> Thresholds:
        """A profile's thresholds: the one place its fields become the verdict's (`cpverify verdict`
        takes them from its options instead)."""
        return cls(pass_ratio=profile.pass_ratio, primary_metric=profile.metric,
                   min_counted_steps=profile.min_counted_steps, warmup=profile.warmup_steps,
                   confidence=profile.confidence, deterministic=profile.deterministic)

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
    # The plan asked slime to compare this arm's grad norm at every step with the baseline arm's on
    # identical rollouts (train-only: --ci-load-grad-norm of the path the baseline saves to). Whether
    # slime did is for the arms' logs to show (their argument dumps); a plan only says it should have.
    grad_norm_planned: bool = False
    # Rollouts the plan asked this arm for (ids 0..n-1: slime's --num-rollout, the probe's warm-up +
    # measured steps); None when nobody said. An arm that counted fewer did not finish.
    expected_rollouts: int | None = None
    log_path: Path | None = None  # the file `parsed` came from (for the failure evidence in verdict.md)
    # An arm runs as one or more rounds (separate processes, each its own log and evidence): the
    # planned arm this log is a round of ("": `name` itself), and which round (1, 2, ...).
    arm: str = ""
    round: int = 1
    # What the arm varied, as the plan's Arm carries it (model.Arm; never read back from a name):
    role: str | None = None  # BASE or CANDIDATE in an A/B of two slime revisions (cpverify.model)
    seq_len: int | None = None  # its response length, in a profile of sequence lengths
    slime_ref: str | None = None  # the label of the slime revision it ran, when known

    @property
    def planned(self) -> str:
        """The planned arm (cp1) this round (cp1 or cp1.r2) belongs to."""
        return self.arm or self.name


# What a row that forces no status means for the verdict (Check.meaning).
_MEANINGS: dict[CheckStatus, str] = {CheckStatus.PASS: CheckStatus.PASS, CheckStatus.WARN: "warning",
                                     CheckStatus.SKIP: "not judged"}


@dataclass
class Check:
    name: str
    status: CheckStatus
    detail: str
    fix: str = ""
    arm: str | None = None
    effect: Status | None = None  # the verdict status a failed check forces (FAIL, INCONCLUSIVE, BLOCKED)
    brief: str = ""  # a shorter detail for the headline (not serialised)

    def __post_init__(self) -> None:
        # A row that says "fail" must force a status, and only a failed row may: otherwise the
        # table and the status it explains contradict each other.
        if (self.status == CheckStatus.FAIL) != (self.effect is not None):
            raise ValueError(f"check {self.name}: status {self.status!r} with effect {self.effect!r}")

    @property
    def meaning(self) -> str:
        """What this row means for the verdict: the status it forces, or that it decides nothing."""
        return self.effect or _MEANINGS[self.status]

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix,
                "arm": self.arm, "effect": self.effect}


@dataclass
class ArmSummary:
    name: str
    cp_requested: int
    cp_effective: int | None  # None: the log does not state it
    layout: dict | None
    outcome: Outcome | None
    counted_rollouts: list[int]
    metrics: dict[str, stats.Summary]
    nccl: dict
    lines: int
    values: dict[str, list[float]] = field(default_factory=dict)  # primary metric per counted rollout (plots)
    samples: dict[str, list[float]] = field(default_factory=dict, repr=False)  # every timing metric's samples
    # The work of each counted step (cpverify.verdict.evidence.work: tokens, samples, TFLOP per GPU)
    work: dict[int, dict[str, float]] = field(default_factory=dict, repr=False)
    log_path: Path | None = None
    # Why this arm failed, for the evidence in verdict.md: {"line": first fatal error line or None
    # (then the end of the log), "class", "text", "why"}; None when the arm did not fail.
    failure: dict | None = None
    arm: str = ""  # the planned arm this round belongs to ("": name)
    round: int = 1
    warmup: int = 0  # the warm-up left out: rollouts < warmup (records, for Megatron-LM iterations)
    # What the arm varied (ArmEvidence's; the plots and the sweep table read these, not the name)
    role: str | None = None
    seq_len: int | None = None
    slime_ref: str | None = None

    @property
    def planned(self) -> str:
        return self.arm or self.name

    def to_json(self) -> dict:
        return {"name": self.name, "arm": self.planned, "round": self.round, "warmup": self.warmup,
                "cp_requested": self.cp_requested,
                "cp_effective": self.cp_effective if self.cp_effective is not None else "unconfirmed",
                "layout": self.layout, "outcome": self.outcome, "counted_rollouts": self.counted_rollouts,
                "counted_steps": len(self.counted_rollouts),
                "metrics": {name: s.to_json() for name, s in self.metrics.items()}, "nccl": self.nccl,
                "log_lines": self.lines, "values": self.values, "failure": self.failure,
                "work": self.work_medians()}

    def work_medians(self) -> dict[str, float]:
        """Per fact of the work (tokens, samples, TFLOP per GPU), its median over the counted steps."""
        facts = sorted({fact for step in self.work.values() for fact in step})
        return {fact: stats.median([step[fact] for step in self.work.values() if fact in step]) for fact in facts}


@dataclass
class Comparison:
    baseline: str
    candidate: str
    status: Status
    reason: str
    metrics: dict[str, stats.RatioEstimate]
    checks: list[Check]
    # Of the primary metric's ratio of medians and ratio of means, the one the decision used (the
    # worse: cpverify.verdict.pair_checks.decisive); None when neither has an interval.
    decided_by: stats.Estimate | None = None

    def to_json(self) -> dict:
        return {"baseline": self.baseline, "candidate": self.candidate, "status": self.status, "reason": self.reason,
                "metrics": {name: est.to_json() for name, est in self.metrics.items()},
                "decided_by": self.decided_by.to_json() if self.decided_by else None}


@dataclass
class Verdict:
    status: Status
    summary: str  # the headline without the status word
    rule: str
    thresholds: Thresholds
    arms: list[ArmSummary]
    comparisons: list[Comparison]
    checks: list[Check]
    numerics: list[dict]
    errors: list[dict]
    labels: dict[str, str] = field(default_factory=dict)  # arm name -> "CP=2" (or the name)
    ab: dict | None = None  # A/B of two slime revisions (cpverify.verdict.ab.analyze), when the plan had one
    workload: str = "slime"  # whose advice the fixes give: slime or probe
    # The rounds: how many per arm, each round's ratio, their spread, the A/A reading, the look and
    # (cpverify run) the design and why it stopped (cpverify.verdict.across.section)
    rounds: dict = field(default_factory=dict)
    # The failed check the headline tells (None for a PASS): what the headline's wording is about,
    # for callers that must not parse it. Not serialised: verdict.json has the checks themselves.
    told: Check | None = None

    @property
    def headline(self) -> str:
        return f"{self.status} — {self.summary}"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def primary(self) -> Comparison:
        return self.comparisons[0]

    @property
    def planned_arms(self) -> list[str]:
        """The planned arms, in the order their rounds came (each arm once, whatever its rounds)."""
        return list(dict.fromkeys(a.planned for a in self.arms))

    def per_arm(self) -> list[ArmSummary]:
        """One summary per planned arm, over all its rounds (pooled())."""
        return [self.pooled(name) for name in self.planned_arms]

    def rounds_of(self, arm: str) -> list[ArmSummary]:
        """The summaries of planned arm `arm`'s rounds, in round order."""
        return sorted((a for a in self.arms if a.planned == arm), key=lambda a: a.round)

    def pooled(self, arm: str) -> ArmSummary:
        """Planned arm `arm` over all its rounds: round 1's facts, every round's counted steps (what a
        table of medians per arm shows). Round 1 itself when the arm ran one round."""
        rounds = self.rounds_of(arm)
        if len(rounds) == 1:
            return rounds[0]
        samples = {m: [v for r in rounds for v in r.samples.get(m, [])] for m in rounds[0].samples}
        values = {m: [v for r in rounds for v in r.values.get(m, [])] for m in rounds[0].values}
        return dataclasses.replace(rounds[0], name=arm, samples=samples, values=values,
                                   counted_rollouts=[i for r in rounds for i in r.counted_rollouts],
                                   metrics={m: stats.summarize(v) for m, v in samples.items() if v})

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
            "decided_by": self.primary.decided_by.to_json() if self.primary.decided_by else None,
            "arms": [arm.to_json() for arm in self.arms],
            "comparisons": [c.to_json() for c in self.comparisons],
            "checks": [c.to_json() for c in self.checks],
            "numerics": self.numerics,
            "errors": self.errors,
            "workload": self.workload,
            "rounds": self.rounds,
            **({"ab": self.ab} if self.ab is not None else {}),
        }


def worst(statuses: Iterable[Status]) -> Status:
    return max(statuses, key=SEVERITY.__getitem__, default=PASS)


def timing_metrics(t: Thresholds) -> tuple[str, ...]:
    """The timings summarised and compared: the standard five, plus a custom primary metric."""
    return TIMING_METRICS if t.primary_metric in TIMING_METRICS else (t.primary_metric, *TIMING_METRICS)


def short_metric(metric: str) -> str:
    """perf/actor_train_time -> actor_train."""
    return metric.removeprefix("perf/").removesuffix("_time")
