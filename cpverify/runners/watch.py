"""The one log watcher every runner shares.

A runner starts its workload, hands the watcher an iterator over the workload's output
(bytes chunks or lines, from a pipe or a Docker log stream) and two callbacks:
`stop()` (kill the workload and return once it is dead) and `poll_exit()` (its exit
code, or None while it runs). The watcher then

  * reads the output in a background thread and appends every line to the log file the
    moment it arrives (unbuffered: a crash, a kill or Ctrl-C loses nothing printed so far),
    with credentials scrubbed first (a token must never reach the disk; a private-key block
    stays scrubbed across lines and across the writes it was split into);
  * feeds each line to the streaming parser, whose records the limits below read (the
    verdict parses the recorded file itself, the bytes it hashes);
  * enforces the Limits from the main thread: overall deadline, hang (no output at all),
    stall (output, but no new training step), and fatal error signatures. A progress bar that
    measured its pace (tqdm's `1/16 [11:01<2:45:20, 661.36s/it]`) and has not finished says how
    long its silence may last: the hang limit is then BAR_PATIENCE times its seconds per item, if
    that is longer (a ten-minute step is slow, not hung);
  * on a trigger calls stop(), then still drains what the workload printed while dying,
    bounded by `drain_s`, so the last lines (often the real error) reach the log.

Ctrl-C arrives in the main thread as KeyboardInterrupt; the watcher stops the workload,
drains, closes the log and raises ArmInterrupted (a KeyboardInterrupt) carrying the
partial ArmResult. A second Ctrl-C while the workload is being stopped makes the runner
kill it at once instead of waiting out its grace period. Runners release their own
resources in `finally`.

A log that cannot be written (disk full, read-only) stops the workload at once: a run
nobody can read afterwards would only hold the GPUs. The watcher then raises
ArtifactWriteError naming the file and the fix.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cpverify.artifacts import fix_for_write, open_in_place
from cpverify.errors import ArtifactWriteError
from cpverify.fixes import for_outcome
from cpverify.model import ArmInterrupted, ArmResult, Limits, Outcome
from cpverify.parse import LogParser
from cpverify.parse.bars import Bar, last_bar
from cpverify.parse.native import signal_detail
from cpverify.progress import phase_of
from cpverify.redact import LineScrubber

log = logging.getLogger(__name__)

Chunk = bytes | str
ProgressCallback = Callable[["Progress"], None]

# A "line" with no newline (a tqdm bar redrawn with \r for an hour) is cut here so the
# watcher's memory stays bounded; the bytes still reach the log file unchanged.
MAX_LINE_BYTES = 1 << 20
# A running bar may be silent this many times its measured seconds per item before it is a hang
# (its rate is an average: the next item may take longer than the mean).
BAR_PATIENCE = 2.0


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, turned into an interrupt so the same cleanup runs as for Ctrl-C."""


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While an arm runs, SIGTERM and SIGHUP raise Terminated in the main thread.

    By default they kill cpverify on the spot, and the workload, in its own session or
    container, would run on holding the GPUs: nox, systemd and `docker stop` send
    SIGTERM, a closed ssh session SIGHUP. Outside the main thread this does nothing
    (Python only lets the main thread set handlers).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum, frame):
        raise Terminated(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, raise_terminated) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass(frozen=True)
class Progress:
    """What a live display needs, reported from the watching thread about every poll."""

    step: int | None  # the last training step (or train-side perf rollout) seen, None before any
    train_records: int  # `step N:` records plus train-side `perf N:` records so far
    lines: int
    elapsed_s: float
    idle_s: float  # seconds since the workload last printed anything
    arm: str = ""
    rollout: int | None = None  # the last rollout (the probe: step) with a train-side perf record
    phase: str = "starting"  # what the log says the workload is doing (cpverify.progress.phase_of)


@dataclass
class _Trigger:
    outcome: Outcome
    reason: str
    error_class: str = ""


class LogWatcher:
    """Streams one workload's output to `log_path` and the parser, and enforces `limits`.

    One watcher per arm: create it, call `watch(...)` once.
    """

    def __init__(
        self,
        log_path: Path | str,
        limits: Limits,
        *,
        arm_name: str = "",
        parser=None,
        on_progress: ProgressCallback | None = None,
        drain_s: float = 5.0,
        poll_s: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        secrets: Iterable[str] = (),
    ) -> None:
        """`secrets`: values to scrub from every line (see runners.workload_env.secret_values); everything
        cpverify.redact recognises as a credential, and this process's secret-named variables, always is."""
        if parser is None:
            parser = LogParser()
        self.log_path = Path(log_path)
        self.limits = limits
        self.arm_name = arm_name or self.log_path.stem
        self.parser = parser
        self.on_progress = on_progress
        self.drain_s = drain_s
        self.poll_s = poll_s
        self._clock = clock
        self._scrub = LineScrubber(secrets)

        self._lock = threading.Lock()  # guards the file, the parser and the counters below
        self._source_done = threading.Event()
        self._source_error: BaseException | None = None
        self._write_error: OSError | None = None
        self._file: Any = None  # the log, opened unbuffered by watch()
        self._closed = False
        self._line_base = 0  # lines already in the file (append mode): keeps `lineno` file-true
        self._lines = 0
        self._last_line = ""
        self._parser_failures = 0
        self._start = 0.0
        self._last_output = 0.0
        self._bar: Bar | None = None  # the last bar state printed, while it has not finished
        self._bar_at = 0.0  # when it was printed
        self._first_line_at: float | None = None
        self._last_train_at: float | None = None
        self._train_records = 0
        self._last_step: int | None = None
        self._last_rollout: int | None = None
        self._phase = "starting"
        self._first_fatal = None  # the first fatal error: the finest ErrorRecord of its line
        self._last_progress: tuple | None = None
        self._last_progress_at = 0.0

    @property
    def parsed(self):
        """The ParsedLog built while streaming (complete once `watch` has returned)."""
        with self._lock:
            return self.parser.result()

    @property
    def lines(self) -> int:
        return self._lines

    def watch(
        self,
        source: Iterable[Chunk],
        *,
        stop: Callable[[], None],
        poll_exit: Callable[[], int | None],
    ) -> ArmResult:
        """Watch until the workload exits or a limit fires; return the arm's result.

        Raises ArmInterrupted on Ctrl-C, after stopping the workload and closing the log.
        """
        self._open_log()
        self._start = self._last_output = self._clock()
        reader = threading.Thread(
            target=self._pump, args=(source,), name=f"cpverify-watch-{self.arm_name}", daemon=True
        )
        reader.start()
        try:
            trigger, exit_code = self._watch_until_done(stop, poll_exit)
            self._finish(reader)
        except KeyboardInterrupt as exc:
            why = f"terminated ({exc.args[0]})" if isinstance(exc, Terminated) else "interrupted (Ctrl-C)"
            try:
                try:
                    stop()
                except KeyboardInterrupt:  # the second Ctrl-C: the runner killed it at once
                    why += "; stopped at once by a second interrupt"
            finally:
                self._finish(reader)
            raise ArmInterrupted(self._result(_Trigger(Outcome.INTERRUPTED, why), poll_exit())) from None
        if self._write_error is not None:
            raise self._write_failure(self._write_error)
        return self._result(trigger, exit_code)

    def _watch_until_done(self, stop, poll_exit) -> tuple[_Trigger | None, int | None]:
        while True:
            # Both waits are interruptible by Ctrl-C: the main thread never blocks where
            # KeyboardInterrupt cannot reach it. Waiting on the event notices the end of
            # the output at once; once it has ended, sleep (a set event would not wait).
            if self._source_done.is_set():
                time.sleep(self.poll_s)
            else:
                self._source_done.wait(self.poll_s)
            trigger = self._check(self._clock())
            if trigger is not None:
                break
            exit_code = poll_exit()
            if exit_code is not None:
                return None, exit_code
        exit_code = poll_exit()
        if exit_code is not None:  # it died on its own in the same instant: report that
            return None, exit_code
        stop()
        return trigger, self._wait_exit(poll_exit)

    # -- the reading thread --------------------------------------------------------------

    def _pump(self, source: Iterable[Chunk]) -> None:
        pending = b""
        try:
            for chunk in source:
                if isinstance(chunk, str):
                    chunk = chunk.encode("utf-8", "replace")
                if not chunk:
                    continue
                self._last_output = self._clock()
                if b"s/it]" in chunk:  # tqdm redraws with \r: its pace arrives before any newline
                    bar = last_bar(chunk.decode("utf-8", "replace"))
                    if bar is not None:
                        self._bar, self._bar_at = (None if bar.finished else bar), self._last_output
                pending += chunk
                *complete, pending = pending.split(b"\n")
                # all the lines of a read at once: the scrubber's gate is cheapest over a block
                for line in self._scrub.lines([line + b"\n" for line in complete]):
                    self._emit(line)
                while len(pending) > MAX_LINE_BYTES:
                    self._emit(self._scrub(pending[:MAX_LINE_BYTES]))
                    pending = pending[MAX_LINE_BYTES:]
        except BaseException as exc:  # a broken stream must not kill the watcher, only end it
            self._source_error = exc
        finally:
            if pending:
                self._emit(self._scrub(pending))  # the last line, printed without a newline
            self._source_done.set()

    def _emit(self, raw: bytes) -> None:
        """Append one line, already scrubbed, to the log and feed it to the parser."""
        with self._lock:
            if self._closed or self._write_error is not None:
                return
            try:
                _write_all(self._file, raw)  # unbuffered file: the line reaches the disk now
            except OSError as exc:  # disk full, read-only, quota: the main thread stops the workload
                self._write_error = exc
                return
            self._lines += 1
            if self._first_line_at is None:
                self._first_line_at = self._clock()
            text = raw.rstrip(b"\n").decode("utf-8", "replace")
            self._last_line = text
            try:
                self.parser.feed(text, self._line_base + self._lines)
            except Exception:  # a parser bug must not cost the log; the file can be re-parsed
                self._parser_failures += 1
                if self._parser_failures == 1:
                    log.exception("log parser failed on %s line %d", self.log_path, self._lines)

    # -- the watching (main) thread ------------------------------------------------------

    def _check(self, now: float) -> _Trigger | None:
        limits = self.limits
        if self._write_error is not None:
            return _Trigger(Outcome.FAILED, "the log cannot be written")  # watch() raises ArtifactWriteError
        with self._lock:
            parsed = self.parser.result()
            self._scan(parsed, now)
            lines, last_line = self._lines, self._last_line
        self._report_progress(now, lines)
        fatal = self._first_fatal
        if fatal is not None and limits.stop_on_fatal:
            return _Trigger(Outcome.FATAL, f"{fatal.cls} at line {fatal.line}: {fatal.text.strip()[:300]}", fatal.cls)
        if now - self._start > limits.deadline_s:
            return _Trigger(Outcome.DEADLINE, f"ran past the {limits.deadline_s:g}s deadline")
        bar, silent = self._bar, now - self._last_output
        if silent > limits.hang_s and (bar is None or now - self._bar_at > max(limits.hang_s, BAR_PATIENCE * bar.s_per_it)):
            where = f"; last line {self._line_base + lines}: {last_line.strip()[:200]!r}" if lines else ""
            if bar is None:
                return _Trigger(Outcome.HANG, f"no output for {limits.hang_s:g}s{where}")
            return _Trigger(Outcome.HANG, (
                f"no output for {silent:.0f}s{where}; its progress bar{' ' + repr(bar.desc[:60]) if bar.desc else ''} "
                f"stood at {bar.done}/{bar.total}, over {BAR_PATIENCE:g}x the {bar.s_per_it:g}s per item it measured"))
        if self._first_line_at is not None:
            since = max(self._first_line_at, self._last_train_at or self._first_line_at)
            if now - since > limits.stall_s:
                last = f"step {self._last_step}" if self._last_step is not None else "none yet"
                return _Trigger(
                    Outcome.STALLED,
                    f"output kept coming but no training step for {limits.stall_s:g}s (last: {last})",
                )
        return None

    def _scan(self, parsed, now: float) -> None:
        """Update the step clock and the first fatal error from a parser snapshot."""
        train_perf = [record for record in parsed.perf if record.side == "train"]
        if train_perf:
            self._last_rollout = train_perf[-1].rollout
        if parsed.steps:
            self._last_step = parsed.steps[-1].step
        elif train_perf:
            self._last_step = train_perf[-1].rollout
        self._phase = phase_of(parsed)
        train = len(parsed.steps) + len(train_perf)
        if train > self._train_records:
            self._train_records = train
            self._last_train_at = now
        if self._first_fatal is None:
            for error in parsed.errors:
                if error.cls in self.limits.fatal_classes:
                    # The finest class of its line (nccl_cuda_failure, not its coarse twin nccl_error):
                    # the reason names it and the fix is its own, as in the verdict's row for it.
                    self._first_fatal = next((finer for finer in parsed.errors if finer.line == error.line
                                              and finer.cls != error.cls
                                              and getattr(finer, "coarse", "") == error.cls), error)
                    break

    def _report_progress(self, now: float, lines: int) -> None:
        if self.on_progress is None:
            return
        state = (lines, self._train_records, self._phase)
        if state == self._last_progress and now - self._last_progress_at < 1.0:
            return
        self._last_progress, self._last_progress_at = state, now
        try:
            self.on_progress(
                Progress(
                    step=self._last_step,
                    train_records=self._train_records,
                    lines=lines,
                    elapsed_s=now - self._start,
                    idle_s=now - self._last_output,
                    arm=self.arm_name,
                    rollout=self._last_rollout,
                    phase=self._phase,
                )
            )
        except Exception:  # a display bug must not end a GPU run
            log.exception("progress callback failed; live progress is off for this arm")
            self.on_progress = None

    def _wait_exit(self, poll_exit: Callable[[], int | None]) -> int | None:
        give_up = self._clock() + self.drain_s
        while True:
            code = poll_exit()
            if code is not None or self._clock() >= give_up:
                return code
            time.sleep(0.05)

    # -- the file ------------------------------------------------------------------------

    def _open_log(self) -> None:
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            # Never through a link planted at the log's name; unbuffered append: every write is on
            # disk at once, whatever happens next. Lines already there are counted from the start.
            self._file = open(open_in_place(self.log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT), "ab+",
                              buffering=0)
            self._line_base = _count_lines(self._file)
        except OSError as exc:
            raise ArtifactWriteError(
                f"cannot write the log {self.log_path}: {exc.strerror or exc}",
                fix=fix_for_write(exc, self.log_path),
            ) from exc

    def _finish(self, reader: threading.Thread) -> None:
        # Drain: the workload's dying words are usually the real error. Bounded, because a
        # grandchild that escaped the kill can hold the pipe open forever.
        try:
            reader.join(self.drain_s)
        finally:
            self._close()

    def _close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._file.close()
            parsed = self.parser.result()
            self._scan(parsed, self._clock())

    def _write_failure(self, exc: OSError) -> ArtifactWriteError:
        return ArtifactWriteError(
            f"could not write the log {self.log_path}: {exc.strerror or exc}; the workload was stopped "
            f"({self._lines} lines are on disk)",
            fix_for_write(exc, self.log_path),
        )

    def _result(self, trigger: _Trigger | None, exit_code: int | None) -> ArmResult:
        duration = self._clock() - self._start
        fatal = self._first_fatal
        if trigger is not None:
            outcome, reason, error_class = trigger.outcome, trigger.reason, trigger.error_class
        else:
            outcome = Outcome.OK if exit_code == 0 else Outcome.FAILED
            reason = "" if exit_code == 0 else exit_text(exit_code)
            error_class = fatal.cls if fatal is not None else ""
            if fatal is not None:
                reason += f"{'; ' if reason else ''}{fatal.cls} at line {fatal.line}: {fatal.text.strip()[:300]}"
        coarse = getattr(fatal, "coarse", "") if fatal is not None and fatal.cls == error_class else ""
        if self._source_error is not None:  # even when it ended well: the log may lack lines
            reason += f"{'; ' if reason else ''}the output stream broke, the log may be incomplete: {self._source_error!r}"
        return ArmResult(
            arm=self.arm_name,
            outcome=outcome,
            exit_code=exit_code,
            log_path=self.log_path,
            duration_s=duration,
            reason=reason,
            fix=for_outcome(outcome, error_class, coarse),
            lines=self._lines,
            error_class=error_class,
        )


def exit_text(code: int | None) -> str:
    """`exited with code 139 (segmentation fault (SIGSEGV): a native crash ...)`: what an exit code
    means, a death by signal N (128 + N) in the words a log's own report of that signal gets."""
    text = f"exited with code {code}"
    if code is not None and 128 < code <= 128 + 64 and (died := signal_detail(code - 128)):
        text += f" ({died['cause']})"
    return text


def _write_all(file, data: bytes) -> None:
    # A raw file's write() may write only part of the data (the last bytes before the disk
    # fills); the next write then raises the error that says why.
    view = memoryview(data)
    while view:
        written = file.write(view)
        if not written:  # never spin on a file that takes nothing and names no error
            raise OSError(errno.EIO, "the log file accepted no more bytes")
        view = view[written:]


def _count_lines(file: Any) -> int:
    """Newlines in an open file, read from its start (positional reads: an O_APPEND file writes at its end)."""
    count, offset = 0, 0
    while block := os.pread(file.fileno(), 1 << 20, offset):
        count += block.count(b"\n")
        offset += len(block)
    return count
