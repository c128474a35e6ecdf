"""What a verdict says before its tables, from its data: the setup in one line, each phase's ratio
and what it means against the threshold, a reading of where the cost goes, the root cause of a
failure (deduplicated across arms), the checks grouped so that a thing is said once, a warm-up
outlier. verdict.md (cpverify.report.markdown) and the terminal (cpverify.report.summary) tell the
same story from these; the texts are plain (the renderers make them inert for their medium).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from cpverify import __version__
from cpverify.lengths import length_label
from cpverify.model import CheckStatus
from cpverify.verdict import (
    BLOCKED,
    FAIL,
    INCONCLUSIVE,
    SECONDARY_GATED,
    ArmSummary,
    Check,
    Comparison,
    Verdict,
    short_metric,
    timing_metrics,
)
from cpverify.verdict.stats import MEDIAN, Estimate, RatioEstimate
from cpverify.verdict.terms import WRAPPER_ERRORS

# Phases in the order a step runs them; train and step are context (they include the others).
CONTEXT_METRICS = ("perf/train_time", "perf/step_time")
OUTLIER_FACTOR = 3.0  # a counted step this many times its arm's median is worth a sentence


def seconds(value: float | None) -> str:
    """A duration in the unit that reads best: 1756 s, 14.2 s, 1.02 s, 113 ms, 2.1 ms, 850 µs."""
    if value is None or not math.isfinite(value):
        return "–" if value is None else str(value)
    magnitude = abs(value)
    if magnitude >= 1 or magnitude == 0:
        decimals = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2
        return f"{value:.{decimals}f} s"
    if magnitude >= 1e-3:
        ms = value * 1e3
        return f"{ms:.{0 if abs(ms) >= 100 else 1 if abs(ms) >= 10 else 2}f} ms"
    us = value * 1e6
    return f"{us:.{0 if abs(us) >= 10 else 1}f} µs"


def shown(est: RatioEstimate | None, threshold: float) -> Estimate | None:
    """The ratio a phase shows: the one its decision reads (of the median's and the mean's, the worse
    against the threshold), else the median's without an interval."""
    if est is None or est.ratio is None:
        return None
    return est.against(threshold) or est.of(MEDIAN)


def ratio_text(est: RatioEstimate | None, threshold: float) -> str:
    """`1.50× (1.40–1.60)`, `3.37× (2.12–4.89) by the mean`, `1.50× (no interval)`, or `–`."""
    e = shown(est, threshold)
    if e is None:
        return "–"
    by = "" if e.statistic == MEDIAN else f" by the {e.statistic}"
    if e.ci is None:
        return f"{e.ratio:.2f}× (no interval){by}"
    return f"{e.ratio:.2f}× ({e.ci[0]:.2f}–{e.ci[1]:.2f}){by}"


# What a phase's interval means against the threshold: (mark, words). Only the primary metric
# decides; log_probs and ref_log_probs warn; train and step are context.
def meaning(metric: str, est: RatioEstimate | None, verdict: Verdict) -> tuple[str, str]:
    t = verdict.thresholds
    limit = f"{t.pass_ratio:.2f}"
    e = shown(est, t.pass_ratio)
    if est is None or e is None:
        return "➖", "no ratio" + (f" ({est.note})" if est is not None and est.note else "")
    if e.ci is None:
        return "❔", f"undecided: no interval ({est.note or 'too few steps'})"
    decides = metric == t.primary_metric
    if metric in CONTEXT_METRICS and not decides:
        return "", "context (includes the phases above)" if metric == "perf/train_time" else "context (the whole step)"
    if e.ci[1] <= t.pass_ratio:
        return "✅", f"within {limit}"
    if e.ci[0] > t.pass_ratio:
        return ("❌", f"above {limit}: decides FAIL") if decides else ("⚠️", f"above {limit} (warns, does not decide)")
    return "❔", f"undecided: the interval straddles {limit}"


def phase_rows(verdict: Verdict, comp: Comparison) -> list[tuple[str, ArmSummary, ArmSummary, RatioEstimate | None]]:
    """(metric, baseline arm, candidate arm, estimate) for every timing either arm has."""
    base, cand = verdict.pooled(comp.baseline), verdict.pooled(comp.candidate)
    return [(m, base, cand, comp.metrics.get(m)) for m in timing_metrics(verdict.thresholds)
            if m in base.metrics or m in cand.metrics]


def reading(verdict: Verdict, comp: Comparison) -> list[str]:
    """One or two sentences on where the cost goes and what the logs rule out (claims the data shows)."""
    t = verdict.thresholds
    base, cand = verdict.pooled(comp.baseline), verdict.pooled(comp.candidate)
    label_b, label_c = verdict.labels.get(base.name, base.name), verdict.labels.get(cand.name, cand.name)
    primary = comp.metrics.get(t.primary_metric)
    said = []
    if primary is not None and primary.ratio is not None and t.primary_metric in base.metrics \
            and t.primary_metric in cand.metrics:
        b, c = base.metrics[t.primary_metric].median, cand.metrics[t.primary_metric].median
        change = "adds" if c >= b else "saves"
        said.append(f"{label_c} {change} {seconds(abs(c - b))} per step in {short_metric(t.primary_metric)} "
                    f"({seconds(b)} → {seconds(c)}).")
        forward = [(short_metric(m), e.ratio) for m in SECONDARY_GATED
                   if (e := comp.metrics.get(m)) is not None and e.ratio is not None]
        if forward and primary.ratio > 1.1:  # below, run-to-run noise: no story to tell
            listed = ", ".join(f"{name} {r:.2f}×" for name, r in forward)
            if min(r for _, r in forward) >= 0.9 * primary.ratio:
                # what CP adds to every forward pass, said only where the arms' CP differs (an A/B at one CP)
                per_pass = (" (for CP: the ring exchange, splitting packed sequences)"
                            if base.cp_requested != cand.cp_requested else "")
                said.append(f"The forward-only passes grow as much ({listed}): the cost is in work every forward "
                            f"pass does{per_pass}, not in the backward pass or the optimizer step alone.")
            elif max(r for _, r in forward) <= 1.05:
                # actor_train's forward computes the loss, which the forward-only passes never do
                said.append(f"The forward-only passes barely change ({listed}): the cost is in what only training "
                            "does: the loss, the backward pass or the optimizer step.")
    if base.layout and cand.layout and base.layout.get("world") and base.layout.get("world") == cand.layout.get("world"):
        world = base.layout["world"]
        gpus = "the same GPU" if world == 1 else f"the same {world} GPUs"
        said.append(f"Both arms ran on {gpus} ({label_b} as dp={base.layout['dp']}, "
                    f"{label_c} as dp={cand.layout['dp']}), so the ideal ratio is 1.0.")
    transports = [a.nccl.get("transports") or [] for a in (base, cand)]
    if all(transports):
        if any(any(x.startswith("NET/Socket") for x in ts) for ts in transports):
            which = [a.name for a, ts in zip((base, cand), transports, strict=True)
                     if any(x.startswith("NET/Socket") for x in ts)]
            said.append(f"NCCL sent GPU traffic over TCP sockets in {' and '.join(which)}: CP's extra communication "
                        "pays for that, so the ratio measures the sockets as much as CP.")
        else:
            shown = ", ".join(dict.fromkeys(x for ts in transports for x in ts))
            said.append(f"NCCL used {shown} in both arms: the transport is not the cause.")
    return said


def outliers(verdict: Verdict) -> list[str]:
    """A counted step far slower than its arm's median (a warm-up that lasted longer than --warmup)."""
    t = verdict.thresholds
    said = []
    for arm in verdict.arms:
        values = arm.values.get(t.primary_metric) or []
        summary = arm.metrics.get(t.primary_metric)
        if len(values) < 3 or summary is None or summary.median <= 0:
            continue
        worst = max(range(len(values)), key=values.__getitem__)
        factor = values[worst] / summary.median
        if factor >= OUTLIER_FACTOR:
            rollout = arm.counted_rollouts[worst] if len(arm.counted_rollouts) == len(values) else None
            where = f"rollout {rollout}" if rollout is not None else "one counted step"
            later = f"; `--warmup {rollout + 1}` would leave it out" if rollout is not None and worst == 0 else ""
            said.append(f"{where} of {arm.name} took {factor:.1f}× its arm's median {short_metric(t.primary_metric)} "
                        f"({seconds(values[worst])} against {seconds(summary.median)}): the median is robust to one "
                        f"such step{later}.")
    return said


@dataclass
class Cause:
    """The root cause of failed arms: the innermost fatal error, the same class counted once."""

    cls: str
    text: str
    where: list[tuple[str, int | None]] = field(default_factory=list)  # (arm, line)
    why: str = ""


def root_causes(verdict: Verdict) -> list[Cause]:
    """Each failed arm's root cause (ArmSummary.failure), arms with the same error class together."""
    causes: dict[tuple[str, str], Cause] = {}
    for arm in verdict.arms:
        failure = arm.failure
        if failure is None:
            continue
        key = (failure["class"] or "", "" if failure["class"] else failure["why"])
        cause = causes.setdefault(key, Cause(failure["class"] or "", failure["text"] or "", why=failure["why"]))
        cause.where.append((arm.name, failure["line"]))
    return list(causes.values())


@dataclass
class Said:
    """Checks that say the same thing (name, detail and fix but for the arm) told once, for their arms."""

    check: Check
    arms: list[str] = field(default_factory=list)
    rounds: dict[str, list[str]] = field(default_factory=dict, repr=False)  # planned arm -> its rounds' names

    @property
    def name(self) -> str:
        return self.check.name

    def where(self) -> str:
        """The arms, an arm all of whose rounds it is said of named once: `cp1 (rounds 1-6)`."""
        if not self.arms:
            return ""
        shown, done = [], set()
        for name in self.arms:
            planned = next((arm for arm, names in self.rounds.items() if name in names), None)
            every = self.rounds.get(planned or "", [])
            if planned is not None and len(every) > 1 and set(every) <= set(self.arms):
                if planned not in done:
                    shown.append(f"{planned} (rounds 1–{len(every)})")
                    done.add(planned)
            else:
                shown.append(name)
        return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + f" and {shown[-1]}"


def grouped(checks: Sequence[Check], verdict: Verdict | None = None) -> list[Said]:
    """`checks` with repeats across arms merged: a BLOCKED reason is one line, not one per arm, and
    one error class is one line (its first arm's excerpt) whatever the arms it struck."""
    out: dict[tuple, Said] = {}
    rounds = {name: [a.name for a in verdict.rounds_of(name)] for name in verdict.planned_arms} if verdict else {}
    for check in checks:
        detail = check.detail.replace(check.arm, "{arm}") if check.arm else check.detail
        if check.name.startswith("error:"):
            detail = ""  # the class and its fix say it; the lines differ from arm to arm
        key = (check.name, check.status, check.effect, detail, check.fix)
        said = out.setdefault(key, Said(check, rounds=rounds))
        if check.arm:
            said.arms.append(check.arm)
    return list(out.values())


# A row's meaning (Check.meaning: the status it forces, or what it says without forcing one), in order.
ORDER = {FAIL: 0, BLOCKED: 1, INCONCLUSIVE: 2, "warning": 3, CheckStatus.PASS: 4, "not judged": 5}
MARK = {FAIL: "❌", INCONCLUSIVE: "❔", BLOCKED: "⛔", "warning": "⚠️", CheckStatus.PASS: "✅", "not judged": "➖"}


def problems(verdict: Verdict) -> tuple[list[Said], list[str]]:
    """The checks that force a status or warn, what decided first, each said once; and the error
    classes left out because they restate a root cause told on its own (root_causes()): its own
    row, and the wrappers (Ray's RayTaskError, a Python traceback) that report it."""
    shown = sorted((c for c in verdict.checks if c.status in (CheckStatus.FAIL, CheckStatus.WARN)), key=lambda c: ORDER[c.meaning])
    said = grouped(shown, verdict)
    told = {cause.cls for cause in root_causes(verdict) if cause.cls}
    if not told:
        return said, []
    classes = [s.name.removeprefix("error:") for s in said if s.name.startswith("error:")]
    echoes = [cls for cls in classes if cls not in told and cls in WRAPPER_ERRORS]
    return [s for s in said if s.name.removeprefix("error:") not in told | set(echoes)], echoes


def rounds_line(verdict: Verdict) -> str:
    """The rounds in one line: how many per arm, each round's primary ratio, their spread, the A/A
    reading (this host's noise floor), the look, why they stopped and the GPU time; for one round
    per arm, what it cannot show. "" when the verdict has no rounds section."""
    rounds, metric = verdict.rounds, short_metric(verdict.thresholds.primary_metric)
    per_arm = rounds.get("per_arm") or {}
    if not per_arm:
        return ""
    counts = sorted(set(per_arm.values()))
    # `cpverify run` interleaves the rounds it runs (their order is recorded); given logs keep the order given
    parts = [f"{' / '.join(map(str, counts))} round{'s' if counts != [1] else ''} per arm"
             + (", interleaved" if counts != [1] and rounds.get("order") else "")]
    if rounds.get("note"):
        parts.append(rounds["note"].split(": ", 1)[1] + ": the interval is as wide as one process per arm can "
                     "show; " + _to_measure_the_spread(rounds))
    first = (rounds.get("comparisons") or [{}])[0]
    if len(first.get("round_ratios") or []) > 1:
        ratios = ", ".join(f"{r:.2f}" for r in first["round_ratios"][:12])
        more = ", …" if len(first["round_ratios"]) > 12 else ""
        parts.append(f"each round's {metric} ratio ({first['statistic']}s): {ratios}{more}")
    if first.get("between_round_sd") is not None:
        parts.append(f"between-round sd {first['between_round_sd']:.3f} (log scale)")
    for reading in rounds.get("aa", [])[:2]:
        low, high = reading["ci"]
        parts.append(f"A/A {reading['arm']} odd vs even rounds {reading['ratio']:.2f}× ({low:.2f}–{high:.2f}), "
                     "this host's noise floor")
    if rounds.get("look"):
        parts.append(f"sequential look {rounds['look']}: each look's interval at {rounds['confidence']:.2%}, "
                     f"{verdict.thresholds.confidence:.0%} over every look")
    stopped = rounds.get("stopped")
    if stopped:
        parts.append(f"stopped ({stopped['reason'].replace('_', ' ')}): {stopped['detail']}")
    if rounds.get("arm_seconds"):
        parts.append(f"{rounds['gpu_minutes']:.1f} GPU-minutes ({rounds['arm_seconds'] / 60:.1f} min of arm time on "
                     f"{rounds['gpus']} GPU{'s' if rounds['gpus'] != 1 else ''})")
    return " · ".join(parts)


def _to_measure_the_spread(rounds: dict) -> str:
    """What gives one round per arm a second: the budget that stopped `cpverify run` (it continues the
    run), `--rounds auto` for a run that asked for one round, each round's log for given logs."""
    if (rounds.get("stopped") or {}).get("reason") == "budget":
        return "a larger --budget with the same --run-id continues the run and measures the spread"
    if rounds.get("order"):  # the rounds `cpverify run` ran
        return "`cpverify run --rounds auto` measures the spread"
    return "each round's log given once (--baseline r1.log --baseline r2.log …) measures the spread"


def setup_line(verdict: Verdict, env: dict | None) -> str:
    """What ran, in one line: GPUs, driver, torch, CUDA, NCCL, TE, slime and Megatron-LM, profile,
    response length, steps, cpverify. From `cpverify run`'s doctor and plan; for `cpverify verdict`,
    what the logs state, the rest said to be unknown (the machine that judged is not the GPU host)."""
    env = env or {}
    if "logs_state" in env or str(env.get("source", "")).startswith("cpverify verdict"):
        return _from_logs(verdict, env)
    facts = {k: (v or {}).get("value") or {} for k, v in ((env.get("doctor") or {}).get("facts") or {}).items()}
    parts, unknown = [], []
    gpus = (facts.get("gpus") or {}).get("gpus") or []
    used = [g for g in gpus if g.get("index") in set(env.get("gpus") or [])] or gpus
    if used:
        names = dict.fromkeys(g.get("name", "GPU") for g in used)
        drivers = dict.fromkeys(g.get("driver_version") for g in used if g.get("driver_version"))
        parts.append(f"{len(used)}× {' + '.join(names)}" + (f", driver {', '.join(drivers)}" if drivers else ""))
    else:
        unknown.append("GPUs")
    torch = facts.get("torch") or {}
    packages = facts.get("packages") or {}
    image = (env.get("image") or {}).get("versions") or env.get("image") or {}
    for label, value in (("torch", torch.get("torch") or image.get("torch")),
                         ("CUDA", torch.get("cuda_runtime") or image.get("cuda")),
                         ("NCCL", torch.get("nccl") or image.get("nccl") or _log_nccl(verdict)),
                         ("TE", packages.get("transformer_engine") or packages.get("transformer-engine")
                          or image.get("transformer_engine"))):
        (parts.append(f"{label} {value}") if value else unknown.append(label))
    sources = env.get("sources") or {}
    for label, value in (("slime", sources.get("slime") or image.get("slime_commit")),
                         ("Megatron-LM", sources.get("megatron") or image.get("megatron_commit"))):
        (parts.append(f"{label} `{str(value)[:12]}`") if value else unknown.append(f"{label} commit"))
    profile = env.get("profile") or {}
    if profile.get("name"):
        parts.append(f"profile {profile['name']}")
    lengths = profile.get("seq_lens") or []
    if lengths:
        parts.append("response " + ", ".join(length_label(n) for n in lengths))
    parts.append(_steps(verdict))
    parts.append(f"cpverify {__version__}")
    return " · ".join(parts) + (f" · not recorded: {', '.join(unknown)}" if unknown else "")


def _from_logs(verdict: Verdict, env: dict) -> str:
    state = env.get("logs_state") or {}
    parts = []
    nccl = dict.fromkeys(v for s in state.values() if (v := s.get("nccl")))
    if not nccl:
        nccl = dict.fromkeys(v for a in verdict.arms if (v := a.nccl.get("version")))
    if nccl:
        parts.append("NCCL " + " vs ".join(nccl))
    cuda = dict.fromkeys(v for s in state.values() if (v := s.get("cuda")))
    if cuda:
        parts.append("CUDA " + " vs ".join(cuda) + " (NCCL's build)")
    worlds = dict.fromkeys(a.layout.get("world") for a in verdict.arms if a.layout and a.layout.get("world"))
    if worlds:
        parts.append(" vs ".join(str(w) for w in worlds) + " ranks")
    lengths = dict.fromkeys(v for s in state.values() if (v := s.get("response_length")))
    if lengths:
        parts.append("response " + " vs ".join(length_label(int(n)) if str(n).isdigit() else str(n) for n in lengths))
    parts.append(_steps(verdict))
    parts.append(f"cpverify {__version__}")
    return ("From the logs: " + " · ".join(parts) + " · not in the logs: GPUs, driver, torch, TE, slime and "
            "Megatron-LM commits (judged by `cpverify verdict` on another machine)")


def _log_nccl(verdict: Verdict) -> str | None:
    versions = dict.fromkeys(v for a in verdict.arms if (v := a.nccl.get("version")))
    return " vs ".join(versions) or None


def _steps(verdict: Verdict) -> str:
    counts = list(dict.fromkeys(len(a.counted_rollouts) for a in verdict.arms))
    rounds = any(a.round > 1 for a in verdict.arms)
    if rounds and len(counts) > 2:  # many rounds: their range
        counted = f"{min(counts)}–{max(counts)}"
    else:
        counted = " / ".join(str(n) for n in counts) if counts else "0"
    if verdict.thresholds.warmup is not None:
        warmup = f"warm-up {verdict.thresholds.warmup}"
    else:
        found = sorted(set(a.warmup for a in verdict.arms))
        warmup = "warm-up found per " + ("round" if rounds else "arm") + ": " + (
            f"{found[0]}–{found[-1]}" if len(found) > 1 else str(found[0] if found else 0))
    return f"{counted} counted steps per {'round' if rounds else 'arm'} ({warmup})"


