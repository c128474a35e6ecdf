"""The checks of one arm: each a small function from the arm's facts to its rows of the table (none,
one, or one per error class), in the order verdict.md lists them; then the arm's summary and, for
an arm that failed, the evidence verdict.md quotes from its log."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cpverify.fixes import (
    FIX_CONFLICTING_LOG,
    FIX_CP_NOT_APPLIED,
    FIX_DAMAGED_TIMINGS,
    FIX_INCOMPLETE,
    FIX_NONFINITE,
    FIX_OLD_STACK,
    FIX_P2P_OFF,
    FIX_SOCKETS_SEEN,
    NO_LAYOUT,
    fix_more_steps,
    for_error,
    for_outcome,
)
from cpverify.model import CheckStatus, Outcome
from cpverify.parse.signatures import integer
from cpverify.verdict import stats
from cpverify.verdict.evidence import (
    IDLE_TIMERS,
    LEADING_TAGS,
    ArmFacts,
    coarse_class,
    errors_by_class,
    excerpt,
    gaps,
    ranges,
    spans_text,
)
from cpverify.verdict.terms import (
    ERROR_EFFECTS,
    FAIL,
    INCONCLUSIVE,
    OUTCOME_EFFECTS,
    WRAPPER_ERRORS,
    ArmEvidence,
    ArmSummary,
    Check,
    Thresholds,
)
from cpverify.versions import MIN_NCCL, parse_version

# How a detail names where the log stated its layout (cpverify.parse.records.Layout.source).
LAYOUT_SOURCES = {"cpverify-layout": "", "megatron-arguments": ", from Megatron's argument dump"}


def check_runner(arm: ArmFacts) -> Iterator[Check]:
    """Did the runner get the arm going at all, and did it end cleanly?"""
    ev = arm.ev
    if ev.result is None:
        yield Check("runner", CheckStatus.SKIP, "no runner result: verdict from existing logs", arm=ev.name)
        return
    outcome = ev.result.outcome
    effect = OUTCOME_EFFECTS[outcome]
    detail = f"runner outcome {outcome!r}"
    if ev.result.exit_code is not None:
        detail += f", exit code {ev.result.exit_code}"
    if ev.result.reason:
        detail += f": {ev.result.reason}"
    # the watcher's fix (cpverify.fixes, as here) or a blocked workload's own
    fix = ev.result.fix or for_outcome(outcome, ev.result.error_class, coarse_class(arm.parsed, ev.result.error_class))
    yield Check("runner", CheckStatus.PASS if effect is None else CheckStatus.FAIL, detail, "" if effect is None else fix, ev.name, effect)


def check_errors(arm: ArmFacts) -> Iterator[Check]:
    """The error signatures: one row per class, naming its first occurrence."""
    parsed, name = arm.parsed, arm.ev.name
    # The root cause first (the headline tells the first failed row): a wrapper after what it wraps.
    for cls, found in sorted(errors_by_class(parsed.errors).items(), key=lambda kv: kv[0] in WRAPPER_ERRORS):
        first = found[0]
        coarse = getattr(first, "coarse", "") or cls
        more = f" ({len(found)} occurrences)" if len(found) > 1 else ""
        named = cls if coarse == cls else f"{cls} ({coarse})"
        detail = f"{named} at line {first.line}{more}: {excerpt(first.text)}"
        cause = getattr(first, "detail", {}).get("cause")  # the parser's reading: "killed by SIGKILL, ..."
        if cause:
            detail += f" ({cause})"
        effect = ERROR_EFFECTS.get(cls, FAIL)
        brief = f"{cls} in arm {name} at line {first.line}: {excerpt(LEADING_TAGS.sub('', first.text), 120)}"
        if cause:
            brief += f" — {cause}"
        yield Check(f"error:{cls}", CheckStatus.WARN if effect is None else CheckStatus.FAIL, detail, for_error(cls, coarse), name,
                    effect, brief)
    if not parsed.errors:
        yield Check("errors", CheckStatus.PASS, f"no error signatures in {parsed.lines} lines", arm=name)


def check_cp_effective(arm: ArmFacts) -> Iterator[Check]:
    """Did the requested CP take effect? slime ignores misspelled flags, so only the run can say."""
    ev, layout = arm.ev, arm.parsed.layout
    if layout is None:
        if ev.cp_requested > 1:
            yield Check("cp_effective", CheckStatus.FAIL, f"could not confirm CP={ev.cp_requested}: the log has no "
                        "cpverify-layout line and no Megatron argument dump", NO_LAYOUT[arm.workload], ev.name,
                        INCONCLUSIVE)
        else:
            yield Check("cp_effective", CheckStatus.WARN, "CP=1 unconfirmed (no cpverify-layout line or Megatron argument "
                        "dump; 1 is the default)", NO_LAYOUT[arm.workload], ev.name)
    elif layout.cp != ev.cp_requested:
        yield Check("cp_effective", CheckStatus.FAIL,
                    f"CP did not take effect: requested CP={ev.cp_requested}, the run reports cp={layout.cp} "
                    f"(tp={layout.tp} pp={layout.pp} dp={layout.dp}{LAYOUT_SOURCES[layout.source]})",
                    FIX_CP_NOT_APPLIED, ev.name, FAIL)
    else:
        yield Check("cp_effective", CheckStatus.PASS, f"cp={layout.cp} tp={layout.tp} pp={layout.pp} dp={layout.dp}"
                    f"{LAYOUT_SOURCES[layout.source]}", arm=ev.name)


def check_timings(arm: ArmFacts) -> Iterator[Check]:
    """Are the timings measurements? A zero, negative, NaN or infinite duration is not one (a broken
    timer, or an edited log); it is left out, and the arm cannot pass with it."""
    name, t = arm.ev.name, arm.t
    damaged = {m: rejected for m, (_, rejected) in arm.measured.items() if rejected}
    if damaged:
        said = {m: f"{m} at rollout(s) {ranges([r for r, _ in bad])} (" + ", ".join(f"{v:.4g}" for _, v in bad[:3])
                + (", …)" if len(bad) > 3 else ")") for m, bad in damaged.items()}
        first = said.get(t.primary_metric) or next(iter(said.values()))
        yield Check("timings", CheckStatus.FAIL, "timings that are not durations (zero, negative, NaN or infinite are "
                    "not measurements, so they are left out): " + "; ".join(said.values()),
                    FIX_DAMAGED_TIMINGS, name, INCONCLUSIVE,
                    brief=f"arm {name} has timings that are not durations: {first}")
    elif arm.per_rollout:
        yield Check("timings", CheckStatus.PASS, "every counted timing is a positive duration", arm=name)


def check_counted_steps(arm: ArmFacts) -> Iterator[Check]:
    """Enough counted steps for an interval?"""
    ev, parsed, t = arm.ev, arm.parsed, arm.t
    n = len(arm.samples[t.primary_metric])
    skipped = sum(1 for r in parsed.perf if r.side == "train" and r.rollout < arm.warmup)
    how = "found in its data" if t.warmup is None else "as given"
    detail = (f"{n} counted {t.primary_metric} values (rollouts >= {arm.warmup}, the warm-up {how}; {skipped} "
              f"warm-up record(s) excluded)")
    if n >= t.min_counted_steps:
        yield Check("counted_steps", CheckStatus.PASS, detail, arm=ev.name)
        return
    if not parsed.perf and parsed.steps:
        detail += "; the log has step lines but no train-side perf lines"
    elif not parsed.steps and not any(r.side == "train" for r in parsed.perf):
        code = ev.result.exit_code if ev.result else None
        ended = f" and exited with code {code}" if code is not None else ""
        detail += f"; the arm printed no training step at all{ended}"
    needed = (f"run at least {arm.warmup + t.min_counted_steps} rollouts (--num-rollout)" if arm.workload == "slime"
              else f"run at least {t.min_counted_steps} measured steps (--set steps=N)")
    yield Check("counted_steps", CheckStatus.FAIL, f"{detail}; need >= {t.min_counted_steps}",
                f"{needed}; {fix_more_steps(arm.workload)}", ev.name, INCONCLUSIVE)


def check_complete(arm: ArmFacts) -> Iterator[Check]:
    """Did the arm finish? A log that ends inside a step (a timer started, never ended) was cut or its
    arm died there; an arm with fewer rollouts than its plan asked for stopped early."""
    ev, parsed = arm.ev, arm.parsed
    unfinished = []
    open_steps = [(name, line) for name, line in parsed.timers_open if name not in IDLE_TIMERS]
    if open_steps:
        unfinished.append("the log ends inside a step: " + ", ".join(
            f"Timer {name} started at line {line} never ended" for name, line in open_steps))
    seen = {r.rollout for r in parsed.perf if r.side == "train"}
    if ev.expected_rollouts is not None:
        missing = gaps(seen, arm.warmup, ev.expected_rollouts)
        if missing:
            unfinished.append(f"the plan asked for {ev.expected_rollouts} rollouts (0-{ev.expected_rollouts - 1}, "
                              f"counted from {arm.warmup}) and {_count(missing)} of them have no train-side perf "
                              f"record (rollouts {spans_text(missing)})")
    elif (planned := integer(parsed.arguments.get("num_rollout", ""))) is not None and seen:
        # No plan (`cpverify verdict` on logs): slime printed its own --num-rollout. A run that
        # stopped between two rollouts (killed outright: no traceback, no open timer) ends short of
        # it. Counted from the first rollout the log holds, so a resumed run is not "unfinished".
        missing = gaps(seen, max(arm.warmup, min(seen)), planned)
        if missing:
            unfinished.append(f"the run was started with --num-rollout {planned} (its argument dump) and "
                              f"{_count(missing)} rollout(s) have no train-side perf record (rollouts "
                              f"{spans_text(missing)})")
    elif ev.result is None and (ended := _ended_in_exception(parsed)):
        # No plan and no --num-rollout: nothing says how many rollouts the run meant to do, but a run
        # whose log ends in an uncaught exception after its last record stopped there (the exception
        # may be one no signature names: its traceback is the only sign). Not a PASS on what it did.
        unfinished.append(ended)
    if unfinished:
        yield Check("complete", CheckStatus.FAIL, "; ".join(unfinished), FIX_INCOMPLETE, ev.name, INCONCLUSIVE,
                    brief=f"arm {ev.name} did not finish: {'; '.join(unfinished)}")
    else:
        detail = "no step left unfinished" + (f"; all {ev.expected_rollouts} planned rollouts have a perf record"
                                              if ev.expected_rollouts is not None else " (no planned rollout count)")
        yield Check("complete", CheckStatus.PASS, detail, arm=ev.name)


def _ended_in_exception(parsed) -> str | None:
    """Where the log ends in a Python exception printed after its last step, perf or iteration record."""
    records = [r.line for kind in (parsed.steps, parsed.perf, parsed.iterations) for r in kind]
    ended = [t for t in parsed.tracebacks if t.exception_line and t.exception_line > max(records, default=0)]
    if not records or not ended:
        return None
    last = ended[-1]
    return (f"the log ends in an uncaught exception at line {last.exception_line} "
            f"({excerpt(last.exception or 'exception', 80)}) after its last record (line {max(records)}), and it "
            "states no --num-rollout to count its rollouts against")


def check_consistent(arm: ArmFacts) -> Iterator[Check]:
    """Does the log state each fact once? Two values for one fact (a layout line against the argument
    dump, two perf records of one rollout with other timings) leave it unsaid which is the arm's:
    never one silently."""
    name = arm.ev.name
    if not arm.conflicts:
        return
    said = [f"{c.what}: {c.first}" + (f" (line {c.first_line})" if c.first_line else "") + f" and {c.then} "
            f"(line {c.line})" for c in arm.conflicts[:4]]
    more = f"; and {len(arm.conflicts) - 4} more" if len(arm.conflicts) > 4 else ""
    yield Check("consistent", CheckStatus.FAIL, "the log contradicts itself: " + "; ".join(said) + more, FIX_CONFLICTING_LOG,
                name, INCONCLUSIVE, brief=f"arm {name}'s log contradicts itself: {said[0]}")


def check_numerics_finite(arm: ArmFacts) -> Iterator[Check]:
    """Are the losses and grad norms numbers? A NaN or inf in either arm is a broken computation:
    a FAIL whatever the speed, deterministic runs or not."""
    name, found = arm.ev.name, arm.nonfinite
    if found:
        shown = ", ".join(f"{what} at {record} (line {line})" for record, line, what in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        yield Check("numerics_finite", CheckStatus.FAIL, f"losses or grad norms that are not finite: {shown}{more}",
                    FIX_NONFINITE, name, FAIL, brief=f"arm {name} computed a non-finite loss or grad norm: {shown}")
    elif arm.parsed.steps or arm.parsed.iterations:
        yield Check("numerics_finite", CheckStatus.PASS, "every loss and grad norm printed is finite", arm=name)


def _count(spans: list[tuple[int, int]]) -> int:
    return sum(last - first + 1 for first, last in spans)


def check_nccl(arm: ArmFacts) -> Iterator[Check]:
    """NCCL's transport and version: warnings, which explain a slow CP and do not decide it."""
    parsed, name = arm.parsed, arm.ev.name
    transports = list(parsed.nccl.transports)
    slow_path = parsed.nccl_transport_warning()
    if slow_path:
        fix = FIX_SOCKETS_SEEN if parsed.tcp_fallback else FIX_P2P_OFF
        yield Check("nccl_transport", CheckStatus.WARN, f"{slow_path} (transports: {', '.join(transports)})", fix, name)
    elif transports:
        yield Check("nccl_transport", CheckStatus.PASS, ", ".join(transports), arm=name)
    else:
        yield Check("nccl_transport", CheckStatus.SKIP, "the log shows no NCCL channel lines",
                    "rerun with NCCL_DEBUG=INFO to record the transport", name)
    if len(set(parsed.nccl.versions)) > 1:
        yield Check("nccl_version", CheckStatus.WARN, f"several NCCL versions in one run: {', '.join(parsed.nccl.versions)}",
                    "use one image for every process", name)
    version = parse_version(parsed.nccl.version)
    if version is not None and version < MIN_NCCL:
        yield Check("nccl_version", CheckStatus.WARN, f"NCCL {parsed.nccl.version} is older than {MIN_NCCL}", FIX_OLD_STACK,
                    name)


# In the order of the table; a blocked arm gets the runner's row alone (nothing ran: the log's rows
# would only restate that).
ARM_CHECKS = (check_runner, check_errors, check_cp_effective, check_consistent, check_numerics_finite, check_timings,
              check_counted_steps, check_complete, check_nccl)


def check_arm(ev: ArmEvidence, t: Thresholds, workload: str) -> tuple[ArmSummary, list[Check]]:
    """An arm's summary and its rows of the table."""
    arm = ArmFacts.of(ev, t, workload)
    blocked = ev.result is not None and ev.result.outcome == Outcome.BLOCKED
    checks: list[Check] = []
    for check in ARM_CHECKS[:1] if blocked else ARM_CHECKS:
        checks.extend(check(arm))
    summary = summarize(arm)
    if not blocked:
        summary.failure = failure(arm, checks)
    return summary, checks


def summarize(arm: ArmFacts) -> ArmSummary:
    ev, parsed, t = arm.ev, arm.parsed, arm.t
    layout = parsed.layout
    nccl_facts: dict[str, Any] = {"version": parsed.nccl.version, "transports": list(parsed.nccl.transports),
                                  "network": parsed.nccl.network}
    primary = {r: float(m[t.primary_metric]) for r, m in arm.per_rollout.items()
               if stats.is_duration(m.get(t.primary_metric))}
    samples = arm.samples
    return ArmSummary(
        name=ev.name, cp_requested=ev.cp_requested, cp_effective=layout.cp if layout else None,
        layout=({"cp": layout.cp, "dp": layout.dp, "tp": layout.tp, "pp": layout.pp,
                 "world": getattr(layout, "world", None), "source": layout.source} if layout else None),
        outcome=ev.result.outcome if ev.result else None, counted_rollouts=list(primary),
        values={t.primary_metric: list(primary.values())},
        metrics={m: stats.summarize(v) for m, v in samples.items() if v}, nccl=nccl_facts, lines=parsed.lines,
        samples=samples, work=arm.work, log_path=ev.log_path or (ev.result.log_path if ev.result else None),
        arm=ev.planned, round=ev.round, warmup=arm.warmup, role=ev.role, seq_len=ev.seq_len, slime_ref=ev.slime_ref)


def failure(arm: ArmFacts, checks: list[Check]) -> dict | None:
    """Where an arm that crashed, failed or did not finish went wrong, for the evidence in verdict.md:
    its first fatal error line (None: the end of the log) and why. A CP that did not take effect is a
    FAIL too, but the end of the log says nothing about it."""
    failed = [c for c in checks
              if (c.effect == FAIL and c.name != "cp_effective") or (c.name == "complete" and c.effect)]
    if not failed:
        return None
    why = "; ".join(f"error signature {c.name.removeprefix('error:')}" if c.name.startswith("error:")
                    else c.detail for c in failed)
    firsts = [found[0] for cls, found in errors_by_class(arm.parsed.errors).items()
              if ERROR_EFFECTS.get(cls, FAIL) == FAIL]
    # The root cause: the innermost error, not the wrapper that reports it (WRAPPER_ERRORS).
    fatal = min(firsts, key=lambda e: (e.cls in WRAPPER_ERRORS, e.line), default=None)
    if fatal is None and arm.nonfinite:  # no error line, but a step that printed NaN or inf
        record, line, what = arm.nonfinite[0]
        return {"line": line, "class": "numerics_finite", "text": f"{record}: {what}", "why": why}
    if fatal is None:
        return {"line": None, "class": None, "text": None, "why": why}
    return {"line": fatal.line, "class": fatal.cls, "text": fatal.text, "why": why}
