"""The decision: the verdict over N arms and their comparisons, from the arms' and the comparisons'
checks (the rule in words is `rule.decision_rule`). In short: every failed check names the status it
forces; a comparison's status is the worst forced status among its arms' checks and its own; the
overall status is the worst over all comparisons, with FAIL > BLOCKED > INCONCLUSIVE > PASS."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from cpverify.errors import InputError
from cpverify.model import BASE, CANDIDATE, WORKLOADS
from cpverify.verdict import across, stats
from cpverify.verdict.across import confidence_at
from cpverify.verdict.arm_checks import check_arm
from cpverify.verdict.evidence import errors_by_class, pretraining_only
from cpverify.verdict.pair_checks import PairFacts, check_pair, decisive, same_round
from cpverify.verdict.rule import decision_rule
from cpverify.verdict.terms import (
    ERROR_EFFECTS,
    FAIL,
    ITERATION_METRIC,
    PASS,
    PRIMARY_METRIC,
    SEVERITY,
    ArmEvidence,
    ArmSummary,
    Check,
    Comparison,
    Thresholds,
    Verdict,
    short_metric,
    worst,
)


def _labels(groups: dict[str, list[ArmEvidence]]) -> dict[str, str]:
    """Each planned arm's label ("CP=2", or its name where two arms share a CP) and each later round's
    ("CP=2 round 3")."""
    cps = [rounds[0].cp_requested for rounds in groups.values()]
    labels = {}
    for name, rounds in groups.items():
        cp = rounds[0].cp_requested
        label = f"CP={cp}" if cps.count(cp) == 1 else name
        labels.update({ev.name: label if ev.round == 1 else f"{label} round {ev.round}" for ev in rounds})
        labels[name] = label
    return labels


def _rounds(evidence: Sequence[ArmEvidence]) -> dict[str, list[ArmEvidence]]:
    """Each planned arm's rounds, in round order: one CP, each round once."""
    groups: dict[str, list[ArmEvidence]] = {}
    for ev in evidence:
        groups.setdefault(ev.planned, []).append(ev)
    for name, rounds in groups.items():
        rounds.sort(key=lambda ev: ev.round)
        numbers = [ev.round for ev in rounds]
        if len(set(numbers)) != len(numbers) or min(numbers) < 1:
            raise InputError(f"arm {name} has rounds {numbers}: each round is one log, numbered from 1",
                             "give every round of an arm once, in the order they ran")
        if len({ev.cp_requested for ev in rounds}) > 1:
            raise InputError(f"the rounds of arm {name} requested different CPs "
                             f"({', '.join(f'{ev.name} CP={ev.cp_requested}' for ev in rounds)})",
                             "every round of an arm runs the same command: give each CP's logs to its own arm")
    return groups


def _oriented(comparisons: Sequence[tuple[str, str]], by_name: dict[str, ArmEvidence]) -> list[tuple[str, str]]:
    """Each (baseline, candidate) pair as (smaller CP, larger CP), whichever order it names them in."""
    if not comparisons:
        raise InputError("no comparison to decide", "pass at least one (baseline, candidate) pair, e.g. (cp1, cp2)")
    oriented = []
    for pair in comparisons:
        missing = [name for name in pair if name not in by_name]
        if missing:
            raise InputError(f"comparison {pair} names unknown arm(s) {missing}",
                             f"compare only arms that exist: {sorted(by_name)}")
        (b_cp, base_name), (c_cp, cand_name) = sorted((by_name[name].cp_requested, name) for name in pair)
        roles = {by_name[name].role: name for name in pair}
        if b_cp == c_cp and set(roles) == {BASE, CANDIDATE}:  # two revisions at one CP: the candidate's cost
            oriented.append((roles[BASE], roles[CANDIDATE]))
            continue
        if b_cp == c_cp:
            raise InputError(f"comparison {pair[0]} vs {pair[1]}: both arms requested CP={b_cp}, so there is no "
                             "CP to verify", "compare a CP=1 arm against a CP>1 arm, e.g. --baseline-cp 1 "
                             "--candidate-cp 2")
        oriented.append((base_name, cand_name))
    return oriented


def decide(evidence: list[ArmEvidence], *, comparisons: list[tuple[str, str]],
           thresholds: Thresholds | None = None, workload: str = "slime",
           run_checks: Sequence[Check] = (), look: int | None = None) -> Verdict:
    """The verdict over N arms and several (baseline, candidate) comparisons; the first is primary.

    The question is always what the larger CP costs against the smaller one, so each pair is
    oriented by the CP its arms requested, whichever order it names them in: a pair given as
    (cp2, cp1) is judged as cp2 against cp1, never as the inverse ratio. A pair of equal CPs
    verifies nothing and is refused, but for an A/B's two revisions at one CP (ArmEvidence.role):
    the candidate's against the base's. `workload` (slime or probe) picks the advice in the fixes.
    `run_checks` are about the run as a whole (it was interrupted outside any arm): they weigh on
    the status like a check of an arm outside every comparison.

    An arm may come as several rounds (ArmEvidence.arm and .round; comparisons name the planned
    arms): every round's log gets every arm check (a crash in round 3 is a crash), the comparison's
    job checks compare round 1 of each arm (and each later round with its arm's round 1), and the
    ratios are taken across the rounds (cpverify.verdict.across), at the confidence of sequential
    look `look` of `cpverify run` (None: a design without looks).
    """
    t = thresholds or Thresholds()
    if workload not in WORKLOADS:
        raise InputError(f"unknown workload {workload!r}", f"use one of {', '.join(WORKLOADS)}")
    by_name = {ev.name: ev for ev in evidence}
    if len(by_name) != len(evidence):
        raise InputError("two arms share a name", "give every arm a unique name (cp1, cp2, cp4, ...)")
    groups = _rounds(evidence)
    firsts = {name: rounds[0] for name, rounds in groups.items()}
    oriented = _oriented(comparisons, firsts)
    if t.primary_metric == PRIMARY_METRIC and all(pretraining_only(ev.parsed) for ev in evidence):
        t = replace(t, primary_metric=ITERATION_METRIC)
    labels = _labels(groups)
    arms: dict[str, ArmSummary] = {}
    arm_checks: dict[str, list[Check]] = {}
    for ev in evidence:
        arms[ev.name], arm_checks[ev.name] = check_arm(ev, t, workload)
    # Every later round of an arm is the job of its round 1: rows of that round, which (like the pair's
    # own sameness rows) do not silence the pair's rows as the arms' own checks do
    later: dict[str, list[Check]] = {ev.name: [] for ev in evidence}
    for rounds in groups.values():
        for ev in rounds[1:]:
            decided = any(c.effect for c in arm_checks[rounds[0].name] + arm_checks[ev.name])
            later[ev.name] = list(same_round(PairFacts.of(rounds[0], ev, arms, labels, t, workload,
                                                          arms_decide=decided, estimates={})))
    confidence = confidence_at(t, look)

    results: list[Comparison] = []
    told: dict[int, Check | None] = {}  # comparison index -> the check its reason tells
    all_numerics: list[dict] = []
    primaries = {}
    for base_name, cand_name in oriented:
        b_rounds, c_rounds = groups[base_name], groups[cand_name]
        own_arms = [c for ev in b_rounds + c_rounds for c in arm_checks[ev.name]]
        arms_decide = any(c.effect for c in own_arms)
        estimates = across.estimates([arms[ev.name] for ev in b_rounds], [arms[ev.name] for ev in c_rounds], t,
                                     confidence=confidence)
        facts = PairFacts.of(b_rounds[0], c_rounds[0], arms, labels, t, workload, arms_decide=arms_decide,
                             estimates=estimates)
        all_numerics.extend(facts.numerics)
        own = check_pair(facts)
        involved = own_arms + [c for ev in b_rounds + c_rounds for c in later[ev.name]] + own
        status = worst(c.effect for c in involved if c.effect)
        primaries[base_name, cand_name] = facts.estimates.get(t.primary_metric)
        reason, told[len(results)] = _reason(status, involved, facts.estimates.get(t.primary_metric), base_name,
                                             cand_name, labels, t)
        results.append(Comparison(base_name, cand_name, status, reason, facts.estimates, own,
                                  decided_by=decisive(facts.estimates.get(t.primary_metric), t)))

    compared = {ev.name for pair in oriented for name in pair for ev in groups[name]}
    loose = [c for name in by_name if name not in compared for c in arm_checks[name] + later[name] if c.effect]
    loose += [c for c in run_checks if c.effect]
    status = worst([c.status for c in results] + [c.effect for c in loose if c.effect])
    # The headline tells the story of the worst comparison (the primary one when tied).
    index = next(i for i, c in enumerate(results) if c.status == worst(c.status for c in results))
    summary, shown = results[index].reason, told[index]
    if loose and SEVERITY[worst(c.effect for c in loose if c.effect)] > SEVERITY[results[index].status]:
        shown = next(c for c in loose if c.effect == status)
        summary = shown.brief or f"arm {shown.arm}: {shown.detail}"
    primary = results[0]
    told_primary = summary == primary.reason

    checks = ([c for ev in evidence for c in arm_checks[ev.name] + later[ev.name]] + [c for r in results for c in r.checks]
              + list(run_checks))
    # Every other row that forces a status, counted by the status it forces: the headline names one.
    others = [c.effect for c in checks if c.effect and c is not shown]
    if others:
        counts = sorted(set(others), key=SEVERITY.__getitem__, reverse=True)
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
              for ev in evidence for cls, found in errors_by_class(ev.parsed.errors).items() for e in found[:1]]
    section = across.section({name: [arms[ev.name] for ev in group] for name, group in groups.items()}, oriented,
                             primaries, t, look)
    return Verdict(status=status, summary=summary, rule=decision_rule(t), thresholds=t,
                   arms=[arms[ev.name] for ev in evidence], comparisons=results, checks=checks,
                   numerics=all_numerics, errors=errors, labels=labels, workload=workload, rounds=section,
                   told=shown)


def _reason(status: str, checks: list[Check], primary: stats.RatioEstimate | None, base: str, cand: str,
            labels: dict[str, str], t: Thresholds) -> tuple[str, Check | None]:
    """A comparison's one-line story, and the check it tells (None for a PASS)."""
    speed = ""
    if primary is not None and primary.ratio is not None:
        chosen = decisive(primary, t)
        steps = across.sample_size(primary)
        if chosen is None or chosen.ci is None:
            speed = (f"{labels[cand]} {short_metric(t.primary_metric)} {primary.ratio:.2f}× {labels[base]} "
                     f"(no CI, threshold ≤ {t.pass_ratio:.2f}), {steps}")
        else:
            others = "; ".join(f"{e.statistic} {e.ratio:.2f}×" for e in primary.estimates if e is not chosen)
            speed = (f"{labels[cand]} {short_metric(t.primary_metric)} {chosen.ratio:.2f}× {labels[base]} "
                     f"({chosen.statistic}, {t.confidence:.0%} CI {chosen.ci[0]:.2f}–{chosen.ci[1]:.2f}, threshold ≤ "
                     f"{t.pass_ratio:.2f}; {others}), {steps}")
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
