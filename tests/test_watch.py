"""The shared LogWatcher, driven by in-process output sources.

The workload here is a test double (`Workload`: a generator of output chunks plus the
stop/poll_exit callbacks a runner would give) so that each limit can be hit at an exact
moment; the parser is the real cpverify.parse.LogParser. The runners' own tests drive the
same watcher with real processes and containers.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from cpverify.errors import ArtifactWriteError
from cpverify.model import ArmInterrupted, Limits, Outcome
from cpverify.runners.watch import LogWatcher

STEP = "(MegatronTrainRayActor pid=7) [2026-08-21 10:00:28] model.py:918 - step {n}: {{'train/loss': 0.5, 'train/grad_norm': 0.08, 'train/step': {n}}}\n"
PERF = "(MegatronTrainRayActor pid=7) [2026-08-21 10:00:28] train_metric_utils.py:401 - perf {n}: {{'perf/actor_train_time': 1.02, 'perf/train_time': 2.84, 'perf/step_time': 14.18}}\n"
TIMER = "(MegatronTrainRayActor pid=7) [2026-08-21 10:00:28] timer.py:24 - Timer {name} {what}\n"
HEALTH = '(SGLangEngine pid=9) [2025-12-17 14:10:37] INFO:     127.0.0.1:62932 - "GET /health HTTP/1.1" 200 OK\n'
WATCHDOG = (
    "[rank0]:[E1225 12:58:32.712922209 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=17284, OpType=_ALLGATHER_BASE, NumelIn=415236096, "
    "NumelOut=1245708288, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.\n"
)

FAST = Limits(deadline_s=10, hang_s=5, stall_s=5)


class Workload:
    """Test double for a process: output comes from `script`, a generator function
    receiving this object; `stop()` makes it exit with `stop_code`."""

    def __init__(self, script, exit_code: int = 0, stop_code: int = 143) -> None:
        self.script = script
        self.exit_code = exit_code
        self.stop_code = stop_code
        self.stopped = threading.Event()
        self.stop_calls = 0
        self._code: int | None = None

    def source(self):
        yield from self.script(self)
        if not self.stopped.is_set():
            self._code = self.exit_code

    def stop(self) -> None:
        self.stop_calls += 1
        self.stopped.set()
        self._code = self.stop_code

    def poll_exit(self) -> int | None:
        return self._code

    def sleep(self, seconds: float) -> bool:
        """Sleep like a workload; True when it was stopped meanwhile."""
        return self.stopped.wait(seconds)


def watch(tmp_path, workload: Workload, limits: Limits = FAST, **options):
    watcher = LogWatcher(tmp_path / "arm.log", limits, arm_name="arm", **options)
    result = watcher.watch(workload.source(), stop=workload.stop, poll_exit=workload.poll_exit)
    return watcher, result


def test_every_line_is_on_disk_before_the_next_is_printed(tmp_path):
    log = tmp_path / "arm.log"
    seen_on_disk = []

    def script(w):
        for n in range(3):
            line = STEP.format(n=n)
            yield line.encode()
            # Still "inside the workload": the line must already be readable from the file.
            seen_on_disk.append(wait_until(lambda: line in log.read_text(), 2.0))

    watcher, result = watch(tmp_path, Workload(script))
    assert seen_on_disk == [True, True, True]
    assert result.outcome == Outcome.OK and result.exit_code == 0
    assert [s.step for s in watcher.parsed.steps] == [0, 1, 2]


def test_chunks_are_split_into_lines_and_a_last_partial_line_is_kept(tmp_path):
    raw = [b"(MegatronTrainRayActor pid=7) [2026-08-21 10:00:28] model.py:918 - st",
           b"ep 4: {'train/loss': 0.5}\nplain line\n\xff\xfe not utf-8\nlast line without newline"]

    def script(w):
        yield from raw

    watcher, result = watch(tmp_path, Workload(script))
    assert (tmp_path / "arm.log").read_bytes() == b"".join(raw)  # byte for byte, invalid UTF-8 included
    assert result.lines == watcher.lines == 4
    assert [(s.step, s.line) for s in watcher.parsed.steps] == [(4, 1)]


def test_appending_to_an_existing_log_keeps_line_numbers_true_to_the_file(tmp_path):
    (tmp_path / "arm.log").write_text("earlier line 1\nearlier line 2\n")

    def script(w):
        yield STEP.format(n=1)

    watcher, result = watch(tmp_path, Workload(script))
    assert [s.line for s in watcher.parsed.steps] == [3]
    assert (tmp_path / "arm.log").read_text().startswith("earlier line 1\n")


def test_exit_code_nonzero_is_failed_and_names_a_fatal_error_it_printed(tmp_path):
    def script(w):
        yield STEP.format(n=0)
        yield WATCHDOG

    limits = Limits(deadline_s=10, hang_s=5, stall_s=5, stop_on_fatal=False)
    workload = Workload(script, exit_code=1)
    _, result = watch(tmp_path, workload, limits)
    assert result.outcome == Outcome.FAILED and result.exit_code == 1
    assert result.error_class == "nccl_timeout"
    assert workload.stop_calls == 0


def test_fatal_signature_stops_the_workload_early(tmp_path):
    def script(w):
        yield STEP.format(n=0)
        yield WATCHDOG
        w.sleep(30)  # a real run sits for minutes in the watchdog's teardown

    workload = Workload(script)
    t0 = time.monotonic()
    _, result = watch(tmp_path, workload)
    assert time.monotonic() - t0 < 3
    assert result.outcome == Outcome.FATAL and result.error_class == "nccl_timeout"
    assert "line 2" in result.reason and "Watchdog caught collective operation timeout" in result.reason
    assert workload.stop_calls == 1 and result.exit_code == 143


def test_fatal_classes_are_configurable(tmp_path):
    def script(w):
        yield WATCHDOG
        w.sleep(0.5)

    limits = Limits(deadline_s=10, hang_s=5, stall_s=5, fatal_classes=frozenset({"cuda_oom"}))
    workload = Workload(script)
    watcher, result = watch(tmp_path, workload, limits)
    assert workload.stop_calls == 0
    assert result.outcome == Outcome.OK and result.error_class == ""
    assert [e.cls for e in watcher.parsed.errors] == ["nccl_timeout"]  # still parsed, just not fatal


def test_silence_is_a_hang(tmp_path):
    def script(w):
        yield STEP.format(n=0)
        w.sleep(60)

    workload = Workload(script)
    t0 = time.monotonic()
    _, result = watch(tmp_path, workload, Limits(deadline_s=30, hang_s=0.6, stall_s=30))
    assert 0.6 <= time.monotonic() - t0 < 3
    assert result.outcome == Outcome.HANG and workload.stop_calls == 1
    assert result.fix


def test_a_workload_that_never_prints_is_a_hang_too(tmp_path):
    def script(w):
        w.sleep(60)
        yield from ()

    workload = Workload(script)
    _, result = watch(tmp_path, workload, Limits(deadline_s=30, hang_s=0.5, stall_s=30))
    assert result.outcome == Outcome.HANG and result.lines == 0


def test_chatter_without_training_steps_is_a_stall(tmp_path):
    def script(w):
        while not w.sleep(0.05):
            yield HEALTH

    workload = Workload(script)
    _, result = watch(tmp_path, workload, Limits(deadline_s=30, hang_s=5, stall_s=0.8))
    assert result.outcome == Outcome.STALLED and workload.stop_calls == 1
    assert result.lines > 5


def test_steady_steps_reset_the_stall_clock(tmp_path):
    def script(w):
        for n in range(6):  # 1.8 s in all, a step every 0.3 s: never 0.8 s without one
            yield STEP.format(n=n)
            for _ in range(3):
                yield HEALTH
                w.sleep(0.1)

    watcher, result = watch(tmp_path, Workload(script), Limits(deadline_s=30, hang_s=5, stall_s=0.8))
    assert result.outcome == Outcome.OK and len(watcher.parsed.steps) == 6


def test_train_side_perf_records_count_as_progress(tmp_path):
    def script(w):
        for n in range(5):
            yield PERF.format(n=n)
            w.sleep(0.3)

    watcher, result = watch(tmp_path, Workload(script), Limits(deadline_s=30, hang_s=5, stall_s=0.8))
    assert result.outcome == Outcome.OK and [p.rollout for p in watcher.parsed.perf] == [0, 1, 2, 3, 4]


def test_deadline(tmp_path):
    def script(w):
        n = 0
        while not w.sleep(0.1):
            yield STEP.format(n=n)
            n += 1

    workload = Workload(script)
    t0 = time.monotonic()
    _, result = watch(tmp_path, workload, Limits(deadline_s=0.7, hang_s=5, stall_s=5))
    assert 0.7 <= time.monotonic() - t0 < 3
    assert result.outcome == Outcome.DEADLINE and "0.7s deadline" in result.reason


def test_what_the_workload_prints_while_dying_is_drained(tmp_path):
    def script(w):
        yield STEP.format(n=0)
        w.sleep(60)
        yield b"Traceback (most recent call last):\n"  # printed after stop(), as a real process would
        yield b"RuntimeError: the real cause\n"

    _, result = watch(tmp_path, Workload(script), Limits(deadline_s=30, hang_s=0.5, stall_s=30))
    assert result.outcome == Outcome.HANG
    assert (tmp_path / "arm.log").read_text().endswith("RuntimeError: the real cause\n")


def test_draining_is_bounded_when_the_output_never_ends(tmp_path):
    """A grandchild that escaped the kill can keep the pipe open: don't wait for it."""
    release = threading.Event()

    def script(w):
        yield STEP.format(n=0)
        w.sleep(60)
        release.wait(30)  # never ends on its own
        yield b"printed after the watcher gave up\n"

    t0 = time.monotonic()
    _, result = watch(tmp_path, Workload(script), Limits(deadline_s=30, hang_s=0.3, stall_s=30), drain_s=0.5)
    assert time.monotonic() - t0 < 3
    release.set()
    time.sleep(0.2)
    assert result.outcome == Outcome.HANG
    assert "printed after" not in (tmp_path / "arm.log").read_text()  # the log was closed, not corrupted


def test_ctrl_c_stops_the_workload_keeps_the_log_and_raises(tmp_path):
    def script(w):
        n = 0
        while not w.sleep(0.05):
            yield STEP.format(n=n)
            n += 1

    def press_ctrl_c():
        wait_until(lambda: (tmp_path / "arm.log").exists() and (tmp_path / "arm.log").read_text().count(" - step ") >= 3, 5)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    workload = Workload(script)
    watcher = LogWatcher(tmp_path / "arm.log", FAST, arm_name="arm")
    threading.Thread(target=press_ctrl_c, daemon=True).start()
    with pytest.raises(ArmInterrupted) as raised:
        watcher.watch(workload.source(), stop=workload.stop, poll_exit=workload.poll_exit)
    assert isinstance(raised.value, KeyboardInterrupt)
    result = raised.value.result
    assert result.outcome == Outcome.INTERRUPTED and workload.stop_calls == 1
    assert len(watcher.parsed.steps) >= 3
    assert (tmp_path / "arm.log").read_text().count(" - step ") == len(watcher.parsed.steps)


def test_progress_reports_steps_and_a_failing_display_does_not_end_the_run(tmp_path):
    reports = []

    def script(w):
        for n in range(4):
            yield TIMER.format(name="actor_train", what="start")
            w.sleep(0.15)
            yield STEP.format(n=n)
            yield PERF.format(n=n)
            w.sleep(0.15)

    def on_progress(progress):
        reports.append(progress)

    watcher, result = watch(tmp_path, Workload(script), on_progress=on_progress)
    assert result.outcome == Outcome.OK
    steps = [r.step for r in reports if r.step is not None]
    assert steps == sorted(steps) and steps[-1] >= 2
    assert all(r.elapsed_s >= 0 and r.lines >= 0 for r in reports)
    # what the live display shows: whose report, the last rollout with a train-side perf record, the phase
    assert {r.arm for r in reports} == {"arm"}
    rollouts = [r.rollout for r in reports if r.rollout is not None]
    assert rollouts == sorted(rollouts) and rollouts[-1] >= 2
    assert "actor_train" in {r.phase for r in reports}

    def broken_display(progress):
        raise RuntimeError("terminal went away")

    watcher, result = watch(tmp_path, Workload(script), on_progress=broken_display)
    assert result.outcome == Outcome.OK and len(watcher.parsed.steps) == 4


def test_a_parser_bug_costs_no_log_line(tmp_path):
    """Test double: a parser that fails on every line, standing in for a parser bug."""

    class BrokenParser:
        def feed(self, line, lineno):
            raise ValueError("parser bug")

        def result(self):
            from cpverify.parse import ParsedLog

            return ParsedLog()

    def script(w):
        for n in range(3):
            yield STEP.format(n=n)

    _, result = watch(tmp_path, Workload(script), parser=BrokenParser())
    assert result.outcome == Outcome.OK
    assert (tmp_path / "arm.log").read_text().count(" - step ") == 3


def test_an_unwritable_log_path_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    watcher = LogWatcher(tmp_path / "file" / "arm.log", FAST)
    workload = Workload(lambda w: iter(()))
    with pytest.raises(ArtifactWriteError) as raised:
        watcher.watch(workload.source(), stop=workload.stop, poll_exit=workload.poll_exit)
    assert "arm.log" in str(raised.value) and raised.value.fix


def test_limits_must_be_positive():
    from cpverify.errors import InputError

    with pytest.raises(InputError, match="hang_s"):
        Limits(hang_s=0)


def wait_until(predicate, timeout: float) -> bool:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def test_output_closed_before_exit_is_waited_for_without_spinning(tmp_path):
    """A workload may close its output and run on (a daemon, `exec >&-`): the watcher
    keeps polling for the exit at its normal pace, not in a busy loop."""
    calls = []
    exits_at = time.monotonic() + 1.0

    def poll_exit():
        calls.append(1)
        return 0 if time.monotonic() >= exits_at else None

    watcher = LogWatcher(tmp_path / "arm.log", FAST, poll_s=0.1)
    result = watcher.watch(iter([b"closing my stdout\n"]), stop=lambda: None, poll_exit=poll_exit)
    assert result.outcome == Outcome.OK and result.exit_code == 0
    assert len(calls) < 30


def _bar(done: int, total: int, s_per_it: float, desc: str = "update weights") -> str:
    """A bar as tqdm itself draws it (tqdm comes with huggingface_hub)."""
    from tqdm import tqdm

    return tqdm.format_meter(done, total, done * s_per_it, prefix=desc)


def test_a_progress_bar_slower_than_the_hang_limit_that_moves_is_no_hang(tmp_path):
    """Silence between two updates of a bar that measured its pace is the bar working: a step that
    takes longer than the hang limit and finishes is slow, not hung."""
    def script(w):
        yield STEP.format(n=0)
        yield ("\r" + _bar(1, 2, 1.2)).encode()  # redrawn with \r: no newline until it finishes
        if w.sleep(1.6):  # longer than hang_s, within twice the bar's pace
            return
        yield ("\r" + _bar(2, 2, 1.4) + "\n").encode()
        yield STEP.format(n=1)

    _, result = watch(tmp_path, Workload(script), Limits(deadline_s=30, hang_s=0.6, stall_s=30))
    assert result.outcome == Outcome.OK, result.reason


def test_a_progress_bar_silent_past_twice_its_pace_is_a_hang(tmp_path):
    def script(w):
        yield STEP.format(n=0)
        yield ("\r" + _bar(1, 4, 1.25)).encode()  # tqdm shows s/it for items slower than a second
        w.sleep(60)

    t0 = time.monotonic()
    _, result = watch(tmp_path, Workload(script), Limits(deadline_s=30, hang_s=0.5, stall_s=30))
    assert result.outcome == Outcome.HANG
    assert 2.5 <= time.monotonic() - t0 < 5  # 2 x 1.25 s per item, not the 0.5 s limit
    assert "1/4" in result.reason and "1.25s per item" in result.reason


def test_a_finished_bar_gives_no_more_patience(tmp_path):
    def script(w):
        yield STEP.format(n=0)
        yield (_bar(4, 4, 5.0) + "\n").encode()  # done: what follows is no longer the bar's work
        w.sleep(60)

    t0 = time.monotonic()
    _, result = watch(tmp_path, Workload(script), Limits(deadline_s=30, hang_s=0.5, stall_s=30))
    assert result.outcome == Outcome.HANG and time.monotonic() - t0 < 3
