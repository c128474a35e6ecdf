"""A stand-in for slime's train.py, for tests only: slime (Megatron + SGLang + GPUs) cannot run
on CI machines, so this prints what slime prints, in slime's real formats (see the notes in
tests/fake_slime/README.md), and does nothing else. Standard library only: it runs inside
test images that carry nothing but python3.

Behaviour is steered by environment variables, never by cpverify itself:
  FAKE_SLIME_BASE_S      actor_train_time at CP=1 (default 1.0)
  FAKE_SLIME_CP_FACTOR   multiplier of actor_train_time when --context-parallel-size > 1 (default 1.05)
  FAKE_SLIME_FAULT       none | nccl_timeout | hang | silent_hang | oom | exit137 | segfault | no_steps
                         | nccl_network (a lost peer: NCCL's lines name this host, other nodes, a peer IP
                           and a home path)
                         | exit0_mid_step (exits 0 inside rollout 5's actor_train: a wrapper that swallows
                           the failure, so only the log shows that the arm never finished)
                         (exit137 kills itself, which PID 1 of a container cannot: kill it from outside there)
  FAKE_SLIME_STEP_S      wall seconds between rollouts (default 0.05)
  FAKE_SLIME_IGNORE_CP   1 = behave like a misspelled CP flag: report cp=1 whatever was asked
  FAKE_SLIME_GRAD_DRIFT  relative change of the grad norm when --context-parallel-size > 1 (default 0):
                         with --ci-load-grad-norm, beyond 1% it fails slime's check as slime does
  FAKE_SLIME_DROP_CI     1 = run as if --ci-save-grad-norm/--ci-load-grad-norm never reached slime (a
                         wrapper that drops them): its argument dump says None and nothing is checked
Train-only flags behave as slime's: --load-debug-rollout-data reads rollout_{rollout_id} files
(a missing one stops the run with torch.load's error), --ci-save-grad-norm writes each step's grad
norm and --ci-load-grad-norm asserts math.isclose(rel/abs 0.01) against it ("grad norm mismatch").
Fault-injection tests (tests/faults) add:
  FAKE_SLIME_LEDGER      a directory: after printing each line, append "N<TAB>line" to
                         cp<N>.ledger there, so a test knows exactly which lines were emitted
                         before a fault and can check that the log on disk holds every one
  FAKE_SLIME_IGNORE_TERM 1 = ignore SIGTERM (a workload that only SIGKILL stops)
  FAKE_SLIME_PRINT_ENV   1 = print the environment and the arguments first, as Ray's runtime-env
                         dump and Megatron's argument listing do (where leaked secrets would show)
  FAKE_SLIME_SHM_BYTES   reserve this many bytes in /dev/shm at start-up, as NCCL's shared-memory
                         transport does; print NCCL's real error and exit 1 when it does not fit
  FAKE_SLIME_ECHO_PROMPTS  N = print the first N prompts of --prompt-data, as a rollout's sample
                         dump does (where a secret in the dataset would show)
  FAKE_SLIME_SEED_DIR    a directory: the n-th process of a CP draws the n-th timings and prints the
                         n-th pid (a counter file per process there): a run's outputs are the same every time
  FAKE_SLIME_PRINT_FILE  a file: print its text at start-up in writes of FAKE_SLIME_WRITE_BYTES
                         bytes (default 7), each flushed, so lines -- and a PEM block -- reach the
                         reader in pieces (what a workload's own output may hold)
"""

import argparse
import json
import math
import os
import random
import signal
import socket
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--context-parallel-size", type=int, default=1)
parser.add_argument("--actor-num-gpus-per-node", type=int, default=8)
parser.add_argument("--num-rollout", type=int, default=None)
parser.add_argument("--prompt-data", default=None)
parser.add_argument("--load-debug-rollout-data", default=None)
parser.add_argument("--ci-save-grad-norm", default=None)
parser.add_argument("--ci-load-grad-norm", default=None)
args, _unknown = parser.parse_known_args()  # slime ignores unknown flags too
if os.environ.get("FAKE_SLIME_DROP_CI") == "1":
    args.ci_save_grad_norm = args.ci_load_grad_norm = None

cp = 1 if os.environ.get("FAKE_SLIME_IGNORE_CP") == "1" else args.context_parallel_size
world = args.actor_num_gpus_per_node
base = float(os.environ.get("FAKE_SLIME_BASE_S", "1.0"))
factor = float(os.environ.get("FAKE_SLIME_CP_FACTOR", "1.05")) if cp > 1 else 1.0
fault = os.environ.get("FAKE_SLIME_FAULT", "none")
pause = float(os.environ.get("FAKE_SLIME_STEP_S", "0.05"))
pid = os.getpid()
# Like real slime, no two processes time their steps alike (a verdict refuses one process's log given
# as two rounds by its timing records); the spread stays the same, whatever the process.
rng = random.Random(f"{1234 + cp}:{pid}")
if os.environ.get("FAKE_SLIME_SEED_DIR"):  # reproducible: the n-th process of a CP draws the n-th timings
    seen = os.listdir(os.environ["FAKE_SLIME_SEED_DIR"])
    drawn = sum(name.startswith(f"cp{cp}-") for name in seen)
    open(os.path.join(os.environ["FAKE_SLIME_SEED_DIR"], f"cp{cp}-{drawn}"), "w").close()
    rng = random.Random(f"{1234 + cp}:{drawn}")
    pid = 1000 * cp + 10 * drawn  # the pid its lines print, the same every time
ledger_dir = os.environ.get("FAKE_SLIME_LEDGER")
ledger = open(os.path.join(ledger_dir, f"cp{args.context_parallel_size}.ledger"), "a") if ledger_dir else None
emitted = 0

if os.environ.get("FAKE_SLIME_IGNORE_TERM") == "1":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def say(text):
    """Print one line; then (never before) record it in the ledger, so the ledger lags the output."""
    global emitted
    print(text, flush=True)
    if ledger is not None:
        for line in text.split("\n"):  # a text of several lines is several lines of the log
            emitted += 1
            ledger.write(f"{emitted}\t{line}\n")
        ledger.flush()


def say_in_pieces(text, size):
    """Print whole lines in writes of `size` bytes, each flushed; record the lines once written."""
    global emitted
    data = text if text.endswith("\n") else text + "\n"
    for start in range(0, len(data), size):
        sys.stdout.write(data[start:start + size])
        sys.stdout.flush()
        time.sleep(0.0005)  # a separate write the reader sees, not one merged read
    if ledger is not None:
        for line in data.splitlines():
            emitted += 1
            ledger.write(f"{emitted}\t{line}\n")
        ledger.flush()


def log(actor, filename, lineno, message):
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    say(f"({actor} pid={pid}) [{stamp}] {filename}:{lineno} - {message}")


if os.environ.get("FAKE_SLIME_PRINT_ENV") == "1":
    say(f"(MegatronTrainRayActor pid={pid}) runtime_env env_vars: {dict(sorted(os.environ.items()))}")
    say(f"(MegatronTrainRayActor pid={pid}) arguments: {' '.join(sys.argv[1:])}")
if os.environ.get("FAKE_SLIME_PRINT_FILE"):
    with open(os.environ["FAKE_SLIME_PRINT_FILE"], encoding="utf-8") as printed:
        say_in_pieces(printed.read(), int(os.environ.get("FAKE_SLIME_WRITE_BYTES", "7")))
if int(os.environ.get("FAKE_SLIME_ECHO_PROMPTS", "0")) and args.prompt_data:
    with open(args.prompt_data, encoding="utf-8") as prompts:
        for _, record in zip(range(int(os.environ["FAKE_SLIME_ECHO_PROMPTS"])), prompts):
            content = json.loads(record)["messages"][-1]["content"]
            say(f"(RolloutManager pid={pid}) sample prompt: {content}")
shm_bytes = int(os.environ.get("FAKE_SLIME_SHM_BYTES", "0"))
if shm_bytes:
    segment = f"/dev/shm/nccl-fake-{os.getpid()}"
    fd = os.open(segment, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.posix_fallocate(fd, 0, shm_bytes)  # what NCCL's shmOpen does
    except OSError:
        say(f"host:{pid}:{pid} [0] misc/shmutils.cc:87 NCCL WARN Error: failed to extend {segment} to {shm_bytes} bytes")
        say(f"host:{pid}:{pid} [0] misc/shmutils.cc:129 NCCL WARN Error while creating shared memory segment {segment} (size {shm_bytes})")
        say(f"torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error "
            f"(run with NCCL_DEBUG=INFO for details), NCCL version 2.28.9")
        sys.exit(1)
    finally:
        os.close(fd)
        os.unlink(segment)

# Megatron's argument dump, as slime's driver prints it at start-up (`_print_args`: a name, dots to
# column 50, the value; unset paths print None): what the verdict reads of the arm's settings.
dumped = {"context_parallel_size": cp, "data_parallel_size": world // cp, "tensor_model_parallel_size": 1,
          "pipeline_model_parallel_size": 1, "world_size": world, "num_rollout": args.num_rollout,
          "ci_save_grad_norm": args.ci_save_grad_norm, "ci_load_grad_norm": args.ci_load_grad_norm,
          "load_debug_rollout_data": args.load_debug_rollout_data, "prompt_data": args.prompt_data}
say("------------------------ arguments ------------------------")
for name, value in sorted(dumped.items()):
    say(f"  {name} {'.' * (48 - len(name))} {value}")
say("-------------------- end of arguments ---------------------")
say(f"({'MegatronTrainRayActor'} pid={pid}) NCCL INFO NCCL version 2.28.9+cuda12.9")
for rank in range(world):
    say(f"(MegatronTrainRayActor pid={pid + rank}) cpverify-layout rank={rank} world={world} tp=1 pp=1 cp={cp} dp={world // cp}")
say(f"(MegatronTrainRayActor pid={pid}) host:{pid}:{pid} [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM")

if args.num_rollout is None:
    say("AssertionError: num_epoch is not set, but num_rollout is not set, please set --num-rollout or --num-epoch")
    sys.exit(1)
if fault == "no_steps":
    sys.exit(0)

for rollout in range(args.num_rollout):
    if fault == "silent_hang" and rollout == 2:
        time.sleep(3600)
    if fault == "hang" and rollout == 2:
        while True:  # output flows, no step progress (a stuck collective with a chatty server)
            log("SGLangEngine", "http_server.py", 312, 'INFO:     127.0.0.1:40000 - "GET /health HTTP/1.1" 200 OK')
            time.sleep(0.2)
    warm = 3.0 if rollout == 0 else 1.0
    actor_train = base * factor * warm * rng.uniform(0.97, 1.03)
    log_probs = 0.11 * factor * rng.uniform(0.97, 1.03)
    ref_log_probs = 0.14 * factor * rng.uniform(0.97, 1.03)
    train = actor_train + log_probs + ref_log_probs + 0.3
    rollout_time = 3.2 * rng.uniform(0.95, 1.05)
    log("RolloutManager", "rollout_metrics.py", 268,
        f"perf {rollout}: {{'rollout/response_len/mean': 312.5, 'perf/rollout_time': {rollout_time}, 'perf/tokens_per_gpu_per_sec': 245.8}}")
    log("MegatronTrainRayActor", "timer.py", 24, "Timer actor_train start")
    time.sleep(pause)
    if fault == "nccl_timeout" and rollout == 2:
        say(f"(MegatronTrainRayActor pid={pid}) [rank0]:[E1225 12:58:32.712922209 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=17284, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.")
        time.sleep(3600)
    if fault == "nccl_network" and rollout == 2:
        host = socket.gethostname()  # NCCL prefixes its lines with <host>:<pid>:<tid>
        say(f"{host}:{pid}:{pid + 7} [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
            f"10.23.4.56<45931> failed : Software caused connection abort")
        say(f"(MegatronTrainRayActor pid={pid}) torch.distributed.DistBackendError: NCCL error in: "
            f"/home/alice/src/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, remote process "
            f"exited or there was a network error, NCCL version 2.28.9")
        # the other node, as Ray names it when its actor there dies
        say(f"(MegatronTrainRayActor pid={pid + 1}, ip=10.23.4.56) ray.exceptions.ActorDiedError: The actor died "
            f"unexpectedly before finishing this task. Its node gpu-node-17.corp.example.com "
            f"(ip-172-31-5-10.us-west-2.compute.internal) was marked dead because the detector has missed too many "
            f"heartbeats from it.")
        sys.exit(1)
    if fault == "oom" and rollout == 2:
        say(f"(MegatronTrainRayActor pid={pid}) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 58.15 GiB. GPU 0 has a total capacity of 139.81 GiB of which 47.69 GiB is free.")
        sys.exit(1)
    if fault == "exit0_mid_step" and rollout == 5:
        sys.exit(0)
    if fault == "exit137" and rollout == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    if fault == "segfault" and rollout == 2:
        # A real invalid read, not kill(SIGSEGV): as PID 1 of a container a process ignores the
        # signals it sends itself, but not a fault.
        import ctypes

        ctypes.string_at(0)
    if args.load_debug_rollout_data and not os.path.isfile(args.load_debug_rollout_data.format(rollout_id=rollout)):
        say(f"(MegatronTrainRayActor pid={pid}) FileNotFoundError: [Errno 2] No such file or directory: "
            f"'{args.load_debug_rollout_data.format(rollout_id=rollout)}'")
        sys.exit(1)
    log("MegatronTrainRayActor", "timer.py", 32, f"Timer actor_train end (elapsed: {actor_train:.1f}s)")
    drift = float(os.environ.get("FAKE_SLIME_GRAD_DRIFT", "0")) if cp > 1 else 0.0
    grad_norm = (2.95 + 0.01 * rollout) * (1 + drift)
    log("MegatronTrainRayActor", "model.py", 918,
        f"step {rollout}: {{'train/loss': -6.05e-09, 'train/pg_loss': -6.05e-09, 'train/entropy_loss': 0.1844, "
        f"'train/pg_clipfrac': 0.0, 'train/ppo_kl': 0.0, 'train/train_rollout_logprob_abs_diff': 0.0184, "
        f"'train/kl_loss': 0.0020, 'train/grad_norm': {grad_norm}, 'train/lr-pg_0': 1e-06, 'train/global_batch_size': 8, 'train/step': {rollout}}}")
    if args.ci_save_grad_norm:
        with open(args.ci_save_grad_norm.format(role="actor", rollout_id=rollout, step_id=0), "w") as f:
            f.write(repr(grad_norm))
    elif args.ci_load_grad_norm:
        with open(args.ci_load_grad_norm.format(role="actor", rollout_id=rollout, step_id=0)) as f:
            expected = float(f.read())
        if not math.isclose(grad_norm, expected, rel_tol=0.01, abs_tol=0.01):
            say(f"(MegatronTrainRayActor pid={pid}) AssertionError: grad norm mismatch: {grad_norm} != {expected}")
            sys.exit(1)
    # slime's throughput keys: the rollout batch's tokens (the same rollouts in every arm) and its
    # forward TFLOP over the world size, per second of each timer
    tokens = 4096 + 512 * (rollout % 5)
    fwd_tflop = tokens * 1.02e-3 / world
    log("MegatronTrainRayActor", "train_metric_utils.py", 401,
        f"perf {rollout}: {{'perf/sleep_time': 4.03, 'perf/update_weights_time': 0.33, 'perf/wake_up_time': 1.94, "
        f"'perf/data_preprocess_time': 0.002, 'perf/train_wait_time': {rollout_time}, 'perf/ref_log_probs_time': {ref_log_probs}, "
        f"'perf/log_probs_time': {log_probs}, 'perf/actor_train_time': {actor_train}, 'perf/train_time': {train}, "
        f"'perf/log_probs_tflops': {fwd_tflop / log_probs}, 'perf/actor_train_tflops': {3 * fwd_tflop / actor_train}, "
        f"'perf/actor_train_tok_per_s': {tokens / actor_train}, "
        f"'perf/step_time': {rollout_time + train}, 'perf/wait_time_ratio': 0.8}}")
