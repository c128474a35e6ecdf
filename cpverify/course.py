"""The course of a run's rounds (state.json's `rounds`): what has run, the looks, why it stopped.

cpverify.plan.rounds says what a design asks for and cpverify.verdict.sequential what a look
shows; this module reads and writes what a run did with them, in its RunRecord, so that a step in
another process, a continued run and the verdict all see the same course:

  design   the design the last arm step ran under (fixed or sequential, caps, budget)
  order    the rounds' names in the order they ran (a round run again moves to the end)
  looks    every look taken: its index, the rounds per arm it saw, its intervals, whether decided
  stopped  why no further round ran (None while the run may go on)

A look is taken once per number of rounds: a continued run that reaches the same rounds reads the
recorded look instead of spending another share of the error rate on the same data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, cast

from cpverify.artifacts import HashingReader, new_run_id
from cpverify.errors import InputError
from cpverify.model import Arm, Outcome
from cpverify.parse import ParsedLog, parse_stream
from cpverify.plan.rounds import Design, Stop, arm_seconds, stop_before
from cpverify.run_state import ArmRecord, RunRecord


def recorded_log(root: Path, recorded: ArmRecord) -> ParsedLog:
    """The log a round wrote, parsed once from bytes that are hashed as they are read: a verdict
    judges exactly what its own arms wrote, or nothing (exit 2 if the file changed since)."""
    path = root / recorded.log
    if not recorded.log_sha256:  # the round never got to write its log (a refused container, say)
        return ParsedLog()
    try:
        with path.open("rb") as raw:
            reader = HashingReader(raw)
            parsed = parse_stream(cast(IO[bytes], reader))  # a binary stream: read(), readinto()
            reader.drain()
    except FileNotFoundError:
        reader = None
    if reader is None or (reader.sha256.hexdigest(), reader.size) != (recorded.log_sha256, recorded.log_bytes):
        now = "is gone" if reader is None else f"now has {reader.size} bytes, sha256 {reader.sha256.hexdigest()[:12]}"
        raise InputError(f"{path} is not the log arm {recorded.result.arm} wrote ({recorded.log_bytes} bytes, sha256 "
                         f"{recorded.log_sha256[:12]}); it {now}",
                         f"start a new run (--run-id {new_run_id()}): a run's rounds are judged on the logs "
                         "they wrote")
    return parsed


def state(record: RunRecord) -> dict:
    """The record's rounds section, created empty."""
    if record.rounds is None:
        record.rounds = {"design": None, "order": [], "looks": [], "stopped": None}
    return record.rounds


def begin(record: RunRecord, design: Design) -> None:
    """An arm step starts under `design`: the run may go on, so it has not stopped (yet)."""
    course = state(record)
    course["design"], course["stopped"] = design.to_json(), None


def ran(record: RunRecord, name: str) -> None:
    """Round `name` (cp1.r2) has run: it goes last in the run's order."""
    order = state(record).setdefault("order", [])
    if name in order:
        order.remove(name)
    order.append(name)


def done(record: RunRecord, arm: str, k: int) -> ArmRecord | None:
    """Round k of planned arm `arm` when it stands recorded (a continued run does not run it again)."""
    found = next((r for r in record.rounds_of(arm) if r.round == k), None)
    return found if found is not None and found.counts else None


def completed(record: RunRecord, arms: Sequence[Arm]) -> int:
    """How many rounds every planned arm has completed in a row from round 1 (what a look can see)."""
    n = 0
    while all(done(record, a.name, n + 1) for a in arms):
        n += 1
    return n


def durations(record: RunRecord, arms: Sequence[Arm], upto: int) -> dict[str, list[float]]:
    """Each planned arm's rounds' durations (rounds 1..upto)."""
    return {a.name: [r.result.duration_s for r in record.rounds_of(a.name) if r.round <= upto and r.counts]
            for a in arms}


def not_ok(record: RunRecord, arms: Sequence[Arm], upto: int) -> str:
    """The first round (1..upto) that did not end ok or never ran, in words ("" when none)."""
    for k in range(1, upto + 1):
        for a in arms:
            found = done(record, a.name, k)
            if found is None:
                return f"{a.name} has no round {k}" + (" (run the cp1 step first)" if k == 1 else "")
            if found.result.outcome != Outcome.OK:
                return f"round {k} of {a.name} ended {found.result.outcome}"
    return ""


def look_at(record: RunRecord, rounds: int, take: Callable[[int, int | None], dict]) -> dict:
    """The look at `rounds` rounds per arm: the recorded one, or a new one, `take(rounds, index)`
    (cpverify.verdict.across.look_of of the verdict on those rounds), recorded. `take(rounds, None)`
    is the verdict without a look (no share of the error rate spent: what but the speed decides)."""
    looks = state(record)["looks"]
    for seen in looks:
        if seen["rounds"] == rounds:
            return seen
    taken = {**take(rounds, len(looks) + 1), "look": len(looks) + 1, "rounds": rounds}
    looks.append(taken)
    return taken


def next_stop(record: RunRecord, arms: Sequence[Arm], design: Design, rounds: int,
              take: Callable[[int, int | None], dict]) -> Stop | None:
    """Whether to stop before round rounds+1 (None: run it); a stop is recorded with the rounds and
    the arm time it took. The look (sequential, from design.min_rounds on; and whenever a round did
    not end ok) is the verdict on the rounds so far: what decides it but the speed (a crash, a log
    cut short, a CP that did not take effect) stops the rounds, as a speed that decides does."""
    failed = not_ok(record, arms, rounds)
    decided = False
    if not failed and (design.sequential and rounds >= design.min_rounds):
        seen = look_at(record, rounds, take)
        failed, decided = seen.get("failed", ""), seen["decided"]
    elif not failed and rounds:
        failed = take(rounds, None).get("failed", "")
    stop = stop_before(design, completed=rounds, durations=durations(record, arms, rounds), decided=decided,
                       failed=failed)
    if stop is not None:
        used = arm_seconds(durations(record, arms, rounds))
        state(record)["stopped"] = {**stop.to_json(), "rounds": rounds, "arm_seconds": used}
    return stop


def verdict_look(record: RunRecord, arms: Sequence[Arm]) -> int | None:
    """The look the verdict is (None: the run took none, so its one interval is the only one): the
    last look when the verdict sees the rounds it saw, else the next."""
    looks = (record.rounds or {}).get("looks") or []
    if not looks:
        return None
    last = looks[-1]
    return last["look"] if last["rounds"] == completed(record, arms) else last["look"] + 1


def summary(record: RunRecord, arms: Sequence[Arm], *, gpus: int) -> dict:
    """What verdict.json's `rounds` adds from the run: the design, the rounds' order, why they
    stopped, the time the arms held the GPUs and the GPU-minutes that is."""
    course = record.rounds or {}
    used = sum(r.result.duration_s for a in arms for r in record.rounds_of(a.name))
    return {"design": course.get("design"), "order": course.get("order", []), "stopped": course.get("stopped"),
            "looks_taken": len(course.get("looks") or []), "arm_seconds": used, "gpus": gpus,
            "gpu_minutes": used * max(gpus, 1) / 60}
