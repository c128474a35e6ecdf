"""Build synthetic slime logs in the exact formats slime, Ray, Megatron, NCCL and torch print.

A test double for slime itself, which cannot run here (no GPUs). Every line shape is copied
from a real log (see tests/data/real-logs/ and the slime notes):

  (MegatronTrainRayActor pid=32167) [2026-08-21 10:00:28] model.py:918 - step 3: {'train/loss': ...}
  (MegatronTrainRayActor pid=32167) [2026-08-21 10:00:28] train_metric_utils.py:401 - perf 3: {'perf/...': ...}
  (RolloutManager pid=31845) [2026-08-21 10:00:15] rollout.py:1193 - perf 3: {'rollout/response_len/mean': ...}
  (MegatronTrainRayActor pid=32167) [2026-08-21 10:00:20] timer.py:32 - Timer actor_train end (elapsed: 1.0s)
  (MegatronTrainRayActor pid=32167) cpverify-layout rank=0 world=2 tp=1 pp=1 cp=2 dp=1
  (MegatronTrainRayActor pid=32167) e54db9740f9d:32167:32500 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
  (MegatronTrainRayActor pid=32167) [rank0]:[E0821 10:12:32.712922209 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog ...

Usage (other tests import this; pytest puts tests/ on sys.path):

    from helpers.slime_log import SlimeLog, synthetic_arm
    log = SlimeLog()
    log.layout(cp=2, dp=1)
    log.nccl_init()
    for rid in range(8):
        log.iteration(rid, actor_train_time=1.0)
    path = log.write(tmp_path / "cp2.log")

`SlimeLog.marks` records the 1-based line number of each record it wrote, and
`SlimeLog.expected()` returns the ParsedLog a correct parser should produce from the text
(the ground truth), so verdict tests need no parser and parser tests get an oracle.
"""

from __future__ import annotations

import copy
import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from cpverify.parse import ErrorRecord, Layout, ParsedLog, PerfRecord, StepRecord, TimerRecord
from cpverify.redact import is_secret_name

TRAIN_ACTOR = "MegatronTrainRayActor"
ROLLOUT_ACTOR = "RolloutManager"
SGLANG_ACTOR = "SGLangEngine"

# The primary and secondary metrics the verdict reads, in slime's train-side perf dict.
TRAIN_PERF_KEYS = ("perf/actor_train_time", "perf/log_probs_time", "perf/ref_log_probs_time",
                   "perf/train_time", "perf/step_time")


@dataclass
class SlimeLog:
    """An in-memory slime log; each method appends the lines one real event prints."""

    start: datetime = datetime(2026, 8, 21, 10, 0, 0)
    train_pid: int = 32167
    rollout_pid: int = 31845
    sglang_pid: int = 32001
    hostname: str = "e54db9740f9d"
    ansi: bool = False  # Ray colours prefixes on a TTY: "\x1b[36m(MegatronTrainRayActor pid=1)\x1b[0m"
    lines: list[str] = field(default_factory=list)
    marks: dict[str, list[int]] = field(default_factory=dict)
    truth: ParsedLog = field(default_factory=ParsedLog)

    def __post_init__(self) -> None:
        self.clock = self.start

    def expected(self) -> ParsedLog:
        """The ParsedLog a correct parser returns for `text()` (a copy; safe to modify)."""
        result = copy.deepcopy(self.truth)
        result.lines = len(self.lines)
        return result

    # -- plumbing -------------------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        # A broken timer (NaN, inf, negative: a test's damaged timing) moves no clock.
        if math.isfinite(seconds) and seconds > 0:
            self.clock += timedelta(seconds=seconds)

    def raw(self, text: str, *, mark: str | None = None) -> int:
        """Append one physical line verbatim; returns its 1-based line number."""
        self.lines.append(text)
        number = len(self.lines)
        if mark:
            self.marks.setdefault(mark, []).append(number)
        return number

    def _prefix(self, actor: str, pid: int) -> str:
        prefix = f"({actor} pid={pid})"
        return f"\x1b[36m{prefix}\x1b[0m " if self.ansi else f"{prefix} "

    def _stamp(self) -> str:
        return self.clock.strftime("%Y-%m-%d %H:%M:%S")

    def logger(self, message: str, *, file: str, lineno: int, actor: str = TRAIN_ACTOR, pid: int | None = None,
               mark: str | None = None, suffix: str = "") -> int:
        """A slime logger line: Ray prefix + `[YYYY-mm-dd HH:MM:SS] file.py:NNN - ` + message."""
        pid = pid if pid is not None else (self.train_pid if actor == TRAIN_ACTOR else self.rollout_pid)
        return self.raw(f"{self._prefix(actor, pid)}[{self._stamp()}] {file}:{lineno} - {message}{suffix}", mark=mark)

    # -- records --------------------------------------------------------------------------
    def layout(self, *, cp: int, tp: int = 1, pp: int = 1, dp: int = 1, world: int | None = None,
               ranks: int = 1, pid: int | None = None) -> int:
        """The cpverify layout hook's line (printed by every train rank; `ranks` of them)."""
        world = world if world is not None else tp * pp * cp * dp
        first = 0
        for rank in range(ranks):
            number = self.raw(f"{self._prefix(TRAIN_ACTOR, (pid or self.train_pid) + rank)}"
                              f"cpverify-layout rank={rank} world={world} tp={tp} pp={pp} cp={cp} dp={dp}",
                              mark="layout")
            first = first or number
        if self.truth.layout is None:
            self.truth.layout = Layout(cp=cp, dp=dp, tp=tp, pp=pp)
        return first

    def megatron_arguments(self, arguments: dict[str, object]) -> int:
        """Megatron-LM's argument dump as `_print_args` writes it on rank 0 at start-up: a name, a
        space, dots up to column 50, a space, the value (no dots for names of 48 characters or more,
        which the parser does not read); returns the header's line."""
        first = self.raw("------------------------ arguments ------------------------", mark="arguments")
        for name, value in sorted(arguments.items(), key=lambda kv: kv[0].lower()):
            self.raw(f"  {name} {'.' * (48 - len(name))} {value}")
            if len(name) < 48 and not is_secret_name(name):  # the parser keeps no secret-named argument
                self.truth.arguments.setdefault(name, str(value))
        self.raw("-------------------- end of arguments ---------------------")
        return first

    def nccl_init(self, *, version: str = "2.28.9", cuda: str = "12.9", transport: str = "P2P/CUMEM",
                  ranks: int = 2, ip: str = "172.17.0.3") -> None:
        """NCCL_DEBUG=INFO start-up: version line, network selection, one channel line per rank pair.

        transport: "P2P/CUMEM" (NVLink/PCIe P2P), "SHM/direct/direct" (P2P disabled),
        "NET/Socket/0" (TCP fallback; printed with [send]/[receive]), "P2P/IPC/read" (older NCCL).
        """
        tid = self.train_pid + 333
        head = f"{self._prefix(TRAIN_ACTOR, self.train_pid)}{self.hostname}:{self.train_pid}"
        self.raw(f"{head}:{self.train_pid} [0] NCCL INFO Bootstrap: Using eth0:{ip}<0>")
        self.raw(f"{head}:{self.train_pid} [0] NCCL INFO cudaDriverVersion 12090")
        self.raw(f"{head}:{self.train_pid} [0] NCCL INFO NCCL version {version}+cuda{cuda}", mark="nccl_version")
        self.truth.nccl.version = self.truth.nccl.version or version
        self.truth.nccl.network = "Socket"
        # The transport family, without the NIC index: NET/Socket/0 -> NET/Socket.
        family = "/".join(transport.split("/")[:2]) if transport.startswith("NET/") else transport
        if family not in self.truth.nccl.transports:
            self.truth.nccl.transports.append(family)
        self.raw(f"{head}:{tid} [0] NCCL INFO NET/IB : No device found.")
        self.raw(f"{head}:{tid} [0] NCCL INFO NET/Socket : Using [0]eth0:{ip}<0>")
        # Printed on healthy single-node NVLink runs too: the channel lines tell the transport.
        self.raw(f"{head}:{tid} [0] NCCL INFO Using network Socket")
        for channel in range(2):
            for src in range(ranks):
                dst = (src + 1) % ranks
                direction = " [send]" if transport.startswith("NET/") else ""
                self.raw(f"{head}:{tid} [{src}] NCCL INFO Channel {channel:02d}/0 : {src}[{src}] -> {dst}[{dst}]"
                         f"{direction} via {transport}", mark="nccl_channel")

    def iteration(self, rollout_id: int, *, actor_train_time: float, log_probs_time: float = 0.11,
                  ref_log_probs_time: float = 1.40, rollout_time: float = 3.25, steps: int = 1,
                  step_metrics: dict[str, float] | None = None, duplicate_pids: tuple[int, ...] = (),
                  update_weights_time: float = 0.33, tokens: float | None = None, world: int = 2,
                  throughput: bool = True) -> None:
        """One slime iteration, in slime's print order.

        RolloutManager `perf N` (rollout side), Timer lines, Memory-Usage, `rollout N`,
        `step K` per optimizer step, then the train-side `perf N`. `duplicate_pids` prints the
        train-side perf line again, as it is, with those actor pids (a log that holds a line twice).
        `tokens`: the rollout batch's tokens (default: rollout_tokens(rollout_id)); slime's
        throughput and TFLOPS keys are computed from them as slime does, on `world` GPUs
        (`throughput=False`: left out, as slime before 3f87d04 and pasted excerpts have none).
        """
        self.advance(rollout_time)
        rollout_side = {
            "rollout/response_len/mean": 312.5, "rollout/response_len/median": 298.0,
            "rollout/response_len/max": 1024, "rollout/response_len/min": 41,
            "rollout/truncated_ratio": 0.0, "perf/rollout_time": rollout_time,
            "perf/tokens_per_gpu_per_sec": 245.8, "perf/longest_sample_tokens_per_sec": 11.0,
        }
        line = self.logger(f"perf {rollout_id}: {rollout_side!r}", file="rollout.py", lineno=1193,
                           actor=ROLLOUT_ACTOR, mark="rollout_perf")
        self.truth.perf.append(PerfRecord(rollout_id, "rollout", line, dict(rollout_side)))

        sleep_time, wake_up_time, preprocess = 4.03, 1.94, 0.002
        train_wait = rollout_time + sleep_time + wake_up_time + update_weights_time
        if any(name == "train_wait" for name, _ in self.truth.timers_open):
            self._timer_end("train_wait", train_wait)
        self._timer("wake_up", wake_up_time)
        self.logger("[Rank 0] Memory-Usage after wake_up model: " + repr({
            "gpu": "0", "total_GB": 139.81, "free_GB": 101.2, "used_GB": 38.61, "allocated_GB": 23.99,
            "reserved_GB": 25.04}), file="memory_utils.py", lineno=41)
        self._timer("data_preprocess", preprocess)
        self._timer("ref_log_probs", ref_log_probs_time)
        self._timer("log_probs", log_probs_time)
        self.logger(f"rollout {rollout_id}: " + repr({
            "rollout/log_probs": -0.412, "rollout/ref_log_probs": -0.412, "rollout/advantages": 0.0,
            "rollout/rewards": 0.5, "rollout/raw_reward": 0.5}), file="train_metric_utils.py", lineno=260)
        self._timer_start("actor_train")
        self.advance(actor_train_time)
        for k in range(steps):
            step = rollout_id * steps + k
            metrics = default_step_metrics(step)
            metrics.update(step_metrics or {})
            line = self.logger(f"step {step}: {metrics!r}", file="model.py", lineno=918, mark="step")
            self.truth.steps.append(StepRecord(step, line, dict(metrics)))
        self._timer_end("actor_train", actor_train_time)
        # slime times the wait for the next rollout from here: a complete log ends with it open.
        self._timer_start("train_wait")
        train_time = preprocess + ref_log_probs_time + log_probs_time + actor_train_time + 0.3
        step_time = train_wait + train_time
        perf = {
            "perf/sleep_time": sleep_time, "perf/update_weights_time": update_weights_time,
            "perf/wake_up_time": wake_up_time, "perf/data_preprocess_time": preprocess,
            "perf/train_wait_time": train_wait, "perf/ref_log_probs_time": ref_log_probs_time,
            "perf/log_probs_time": log_probs_time, "perf/actor_train_time": actor_train_time,
            "perf/train_time": train_time,
            **(slime_throughput(rollout_tokens(rollout_id) if tokens is None else tokens, world, actor_train_time,
                                log_probs_time) if throughput else {}),
            "perf/step_time": step_time, "perf/wait_time_ratio": train_wait / step_time,
        }
        line = self.logger(f"perf {rollout_id}: {perf!r}", file="train_metric_utils.py", lineno=401,
                           mark="train_perf")
        self.truth.perf.append(PerfRecord(rollout_id, "train", line, dict(perf)))
        for pid in duplicate_pids:
            line = self.logger(f"perf {rollout_id}: {perf!r}", file="train_metric_utils.py", lineno=401, pid=pid,
                               mark="train_perf_duplicate")
            self.truth.perf.append(PerfRecord(rollout_id, "train", line, dict(perf)))
        self.advance(sleep_time)

    def _timer_start(self, name: str) -> None:
        line = self.logger(f"Timer {name} start", file="timer.py", lineno=24, mark="timer")
        self.truth.timers_open = [t for t in self.truth.timers_open if t[0] != name] + [(name, line)]

    def cut_mid_step(self, rollout_id: int, *, timer: str = "actor_train") -> int:
        """The start of an iteration whose arm died (or whose log copy was cut) inside `timer`:
        the rollout-side perf line, then `Timer <timer> start` and nothing after it."""
        self.advance(3.0)
        self.logger(f"perf {rollout_id}: {{'perf/rollout_time': 3.0}}", file="rollout.py", lineno=1193,
                    actor=ROLLOUT_ACTOR)
        self.truth.perf.append(PerfRecord(rollout_id, "rollout", len(self.lines), {"perf/rollout_time": 3.0}))
        if any(name == "train_wait" for name, _ in self.truth.timers_open):
            self._timer_end("train_wait", 3.0)
        self._timer_start(timer)
        return len(self.lines)

    def _timer_end(self, name: str, elapsed: float) -> None:
        line = self.logger(f"Timer {name} end (elapsed: {elapsed:.1f}s)", file="timer.py", lineno=32, mark="timer")
        self.truth.timers.append(TimerRecord(name, round(elapsed, 1), line))
        self.truth.timers_open = [t for t in self.truth.timers_open if t[0] != name]

    def _timer(self, name: str, elapsed: float) -> None:
        self._timer_start(name)
        self.advance(elapsed)
        self._timer_end(name, elapsed)

    # -- failures -------------------------------------------------------------------------
    def nccl_watchdog_timeout(self, *, rank: int = 0, seq: int = 1207, op: str = "ALLREDUCE",
                              timeout_ms: int = 600000, repeated: int = 0) -> int:
        """torch ProcessGroupNCCL's watchdog line, as printed inside a Ray actor."""
        self.advance(timeout_ms / 1000)
        stamp = self.clock.strftime("%m%d %H:%M:%S") + ".712922209"
        suffix = f" [repeated {repeated}x across cluster]" if repeated else ""
        message = (f"[rank{rank}]:[E{stamp} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
                   f"operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1048576, NumelOut=1048576, "
                   f"Timeout(ms)={timeout_ms}) ran for {timeout_ms + 31} milliseconds before timing out.")
        line = self.raw(f"{self._prefix(TRAIN_ACTOR, self.train_pid + rank)}{message}{suffix}", mark="error")
        self.truth.errors.append(ErrorRecord("nccl_timeout", line, message))
        return line

    def cuda_oom(self, *, gib: float = 58.15) -> int:
        """torch's CUDA OOM exception line (the last line of its traceback)."""
        message = (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {gib:.2f} GiB. GPU 0 has a total "
                   "capacity of 139.81 GiB of which 47.69 GiB is free. Process 22249 has 3.24 GiB memory in use.")
        line = self.raw(f"{self._prefix(TRAIN_ACTOR, self.train_pid)}{message}", mark="error")
        self.truth.errors.append(ErrorRecord("cuda_oom", line, message))
        return line

    def error(self, cls: str) -> int:
        """One real failure line of class `cls` (a key of ERROR_LINES), as a train actor prints it.

        expected() records the fine class only; the parser also reports its coarse twin
        (e.g. nccl_error beside nccl_remote_error) on the same line.
        """
        message = ERROR_LINES[cls]
        line = self.raw(f"{self._prefix(TRAIN_ACTOR, self.train_pid)}{message}", mark="error")
        self.truth.errors.append(ErrorRecord(cls, line, message))
        return line

    # -- output ---------------------------------------------------------------------------
    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.text(), encoding="utf-8")
        return path


# Real failure lines (from slime, torch, Ray, Megatron, argparse), keyed by the parser's fine class.
ERROR_LINES = {
    "nccl_remote_error": ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
                          "ProcessGroupNCCL.cpp:3356, remote process exited or there was a network error, "
                          "NCCL version 2.28.9"),
    "cuda_illegal_memory_access": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "ray_actor_died": "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    "megatron_cuda_device_max_connections": (
        "AssertionError: Using tensor model parallelism or context parallelism require setting the environment "
        "variable CUDA_DEVICE_MAX_CONNECTIONS to 1"),
    "argparse_invalid_choice": ("train.py: error: argument --train-backend: invalid choice: 'fsdp' "
                                "(choose from 'megatron')"),
    "sglang_server_startup_failure": "RuntimeError: Server process terminated unexpectedly.",
    "slime_num_rollouts_lt_global_batch": ("AssertionError: num_rollouts (2) < global_batch_size (8); need at least "
                                           "one rollout per step."),
}


# slime's forward FLOPs per token of the real runs beside tests/data/real-logs/slime-train-only-h200x2
# (Qwen2.5-0.5B-shaped, ~730-token samples): actor_train TFLOP per GPU per step x world / tokens / 3.
FWD_TFLOP_PER_TOKEN = 1.02e-3


def rollout_tokens(rollout_id: int) -> int:
    """The tokens of rollout N's batch: the same in every arm (identical rollouts), varying by rollout."""
    return 4096 + 512 * (rollout_id % 5)


def slime_throughput(tokens: float, world: int, actor_train_time: float, log_probs_time: float) -> dict[str, float]:
    """slime's throughput keys (slime/observability/train_metric_utils.py log_perf_data): the batch's
    forward TFLOP over the world size per timer, and its tokens per second of actor_train; none where
    the timer is not above zero, as slime leaves them out."""
    fwd = tokens * FWD_TFLOP_PER_TOKEN / world
    keys = {}
    if log_probs_time > 0:
        keys["perf/log_probs_tflops"] = fwd / log_probs_time
    if actor_train_time > 0:
        keys["perf/actor_train_tflops"] = 3 * fwd / actor_train_time
        keys["perf/actor_train_tok_per_s"] = tokens / actor_train_time
    return keys


def default_step_metrics(step: int) -> dict[str, float]:
    """The train-side step dict slime prints (values from a real CP run, slime issue #1136)."""
    return {
        "train/loss": -6.05359673500061e-09, "train/pg_loss": -6.05359673500061e-09,
        "train/entropy_loss": 0.18443581461906433, "train/pg_clipfrac": 0.0, "train/ppo_kl": 0.0,
        "train/train_rollout_logprob_abs_diff": 0.018386833369731903, "train/kl_loss": 0.002021021908149123,
        "train/grad_norm": 0.07986056034213801, "train/lr-pg_0": 1e-06, "train/global_batch_size": 8,
        "train/step": step,
    }


def synthetic_arm(*, cp: int, actor_train_time: float, rollouts: int = 8, jitter: float = 0.05, seed: int = 0,
                  layout_cp: int | None | str = "same", dp: int | None = None, transport: str = "P2P/CUMEM",
                  nccl_version: str = "2.28.9", warmup_factor: float = 3.0,
                  step_metrics: dict[str, float] | None = None, duplicate_pids: tuple[int, ...] = (),
                  secondary: float | None = None, update_weights_time: float = 0.33,
                  times: list[float] | None = None, arguments: dict[str, object] | None = None,
                  work: float = 1.0, tokens: list[float] | None = None, throughput: bool = True) -> SlimeLog:
    """A whole arm: layout line, NCCL start-up, `rollouts` iterations with seeded +/-jitter.

    Rollout 0 is `warmup_factor` times slower (torch.compile, NCCL lazy init), as in real runs.
    layout_cp: "same" prints cp=`cp`; an int prints that cp (a CP that did not take effect);
    None prints no layout line (a log from a run without the hook). dp defaults to 2 // cp
    (two GPUs). log_probs and ref_log_probs scale with `secondary` (default: actor_train_time), so
    every metric moves together unless a test moves one alone. `times`: actor_train_time per
    rollout exactly as given (no jitter, no warm-up factor; its length sets the rollouts).
    `arguments`: Megatron's argument dump first, with these (context_parallel_size, data_parallel_size
    and world_size added from the layout the run had unless given). `work` scales every rollout's
    tokens (rollout_tokens()); `tokens` gives each rollout's tokens exactly; `throughput=False` leaves
    slime's throughput keys out of the perf lines.
    """
    rng = random.Random(seed)
    log = SlimeLog()
    effective = cp if layout_cp == "same" else layout_cp
    ran_cp = cp if effective is None else int(effective)  # a misspelled flag: slime ran (and prints) cp=1
    ran_dp = dp if dp is not None else max(1, 2 // ran_cp)
    if arguments is not None:
        log.megatron_arguments({"context_parallel_size": ran_cp, "data_parallel_size": ran_dp,
                                "world_size": ran_cp * ran_dp, **arguments})
    if effective is not None:
        log.layout(cp=ran_cp, dp=ran_dp)
    log.nccl_init(version=nccl_version, transport=transport)
    scale = actor_train_time
    other = actor_train_time if secondary is None else secondary
    for rid in range(len(times) if times is not None else rollouts):
        warm = warmup_factor if rid == 0 else 1.0

        def noisy(value: float, warm: float = warm) -> float:
            return round(value * warm * rng.uniform(1 - jitter, 1 + jitter), 6)

        log.iteration(rid, actor_train_time=times[rid] if times is not None else noisy(scale),
                      log_probs_time=noisy(0.11 * other), ref_log_probs_time=noisy(0.14 * other),
                      rollout_time=round(rng.uniform(3.0, 3.5), 4), step_metrics=step_metrics,
                      duplicate_pids=duplicate_pids, update_weights_time=update_weights_time,
                      tokens=tokens[rid] if tokens is not None else work * rollout_tokens(rid), world=ran_cp * ran_dp,
                      throughput=throughput)
    return log
