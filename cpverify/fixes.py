"""What to do about a failure: ONE table from how a workload ended, or an error class, to its fix.

The runners' watcher puts the fix on an arm's result (`ArmResult.fix`), the verdict shows it beside
each failed check, the deep lint beside slime's refusal of an argument: all of them look it up here,
so a failure gets the same advice whichever path found it. Data only, below every stage and runner
(ARCHITECTURE.md). What a failure does to a verdict (FAIL, INCONCLUSIVE, a warning) is the verdict's
(`ERROR_EFFECTS`); whether it stops an arm early is `model.DEFAULT_FATAL_CLASSES`. Below the table, the
advice of the verdict's own checks (too few steps, a slow CP, an unconfirmed CP), per workload.
"""

from __future__ import annotations

from cpverify.model import Outcome
from cpverify.versions import MIN_CUDA, MIN_DRIVER, MIN_NCCL

# From the hand procedure's troubleshooting list (seed 001, section 4) plus the obvious ones.
FIX_COLLECT = "collect more detail: rerun with NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL"
FIX_TRANSPORT = ("look for 'via NET/Socket' in NCCL_DEBUG=INFO output (TCP fallback): check NCCL_P2P_DISABLE, "
                 "NCCL_SHM_DISABLE and NCCL_IB_DISABLE are unset, that /dev/infiniband is passed into the "
                 "container, and that --ipc=host --shm-size=16g are set; compare with NCCL_P2P_DISABLE=1")
# When the logs already show the sockets: what to change, not what to look for.
FIX_SOCKETS_SEEN = ("NCCL took TCP sockets (`via NET/Socket`) between the GPUs: unset NCCL_P2P_DISABLE, "
                    "NCCL_SHM_DISABLE and NCCL_IB_DISABLE, pass /dev/infiniband into the container and set "
                    "--ipc=host --shm-size=16g, then rerun: over sockets the ratio measures the transport as much as CP")
FIX_OLD_STACK = (f"use driver >= {MIN_DRIVER}, CUDA >= {MIN_CUDA} and NCCL >= {MIN_NCCL} with the same driver on every "
                 "GPU (the pinned image has NCCL 2.28.9)")

ERROR_FIXES: dict[str, str] = {
    "nccl_timeout": ("the NCCL watchdog fired (a collective hung for --distributed-timeout-minutes): "
                     + FIX_COLLECT + "; check the transport (" + FIX_TRANSPORT + "); make sure "
                     "CUDA_DEVICE_MAX_CONNECTIONS=1 is set"),
    "nccl_heartbeat_stuck": "the NCCL watchdog itself got stuck: " + FIX_COLLECT + "; " + FIX_TRANSPORT,
    "nccl_error": FIX_OLD_STACK + "; give the container enough shared memory (--ipc=host --shm-size=16g); "
                  + FIX_COLLECT,
    "nccl_cuda_failure": FIX_OLD_STACK + "; use an image built for this GPU architecture (cu130 for Blackwell); "
                         + FIX_COLLECT,
    "nccl_unhandled_system_error": "check /dev/shm size (--ipc=host --shm-size=16g), --ulimit memlock=-1 and "
                                   "/dev/infiniband; " + FIX_COLLECT,
    "cuda_oom": ("lower --max-tokens-per-gpu (with CP a micro-batch holds max_tokens_per_gpu x cp tokens), or "
                 "lower --sglang-mem-fraction-static when colocated"),
    "cuda_illegal_memory_access": ("rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; rule out FA3 with "
                                   "--attention-backend torch (or flash)"),
    "collective_shape_mismatch": ("a CP shape bug: keep --seq-length a multiple of 2 x context-parallel-size and "
                                  "report it upstream with this bundle"),
    "ray_actor_died": "read the first error above this line in the arm's log; Ray kills actors on host OOM",
    "ray_host_oom": "free host memory or lower the offload footprint; Ray's memory monitor killed an actor",
    "ray_job_failed": "read the first error above this line in the arm's log",
    "sglang_startup_failure": "lower --sglang-mem-fraction-static and check that the GPUs are otherwise idle",
    "sglang_server_startup_failure": "lower --sglang-mem-fraction-static and check that the GPUs are otherwise idle",
    "sglang_http_500": "read the SGLang engine's traceback in the log; check --sglang-mem-fraction-static",
    "argparse_error": "fix the flag named in the message; run `cpverify lint` before running on GPUs",
    "argparse_unrecognized_arguments": "remove or correct the flags named; run `cpverify lint`",
    "argparse_ambiguous_option": "spell the flag out in full; run `cpverify lint`",
    "assertion_error": ("read the assertion; `cpverify lint` catches the usual ones (batch arithmetic, "
                        "CUDA_DEVICE_MAX_CONNECTIONS=1, seq-length multiple of 2 x CP)"),
    "hang": "a rank stopped making progress: " + FIX_COLLECT + "; check the transport; dump stacks with py-spy",
    "nccl_shm_failure": "give the container more shared memory: --ipc=host --shm-size=16g (Docker's default is 64 MB)",
    "sglang_not_enough_memory": "raise --sglang-mem-fraction-static or free the GPUs (colocated training holds memory)",
    "megatron_cuda_device_max_connections": "export CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron requires it for CP>1)",
    "megatron_world_size_not_divisible": ("make the training GPUs (--actor-num-nodes x --actor-num-gpus-per-node) a "
                                          "multiple of TP x PP x CP and of EP x ETP x PP (ETP defaults to TP); "
                                          "`cpverify lint` names the size to change"),
    "cuda_error": ("a CUDA call failed (the excerpt names it): rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; "
                   "check that the driver supports the image's CUDA and the image was built for this GPU"),
    "cuda_device_assert": ("a kernel's own assert failed, usually an index out of range (a token id beyond the "
                           "vocabulary, a bad label): rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel"),
    "cudnn_error": ("cuDNN refused the operation (`No execution plans support the graph`: a shape, dtype or mask its "
                    "fused attention lacks on this GPU): try --attention-backend flash, or NVTE_FUSED_ATTN=0 to take "
                    "TransformerEngine off cuDNN; CUDNN_LOGERR_DBG=1 CUDNN_LOGDEST_DBG=stderr says why"),
    "cublas_error": ("a cuBLAS call failed (EXECUTION_FAILED usually follows a bad memory access earlier, "
                     "NOT_SUPPORTED a dtype or shape this GPU lacks): rerun with CUDA_LAUNCH_BLOCKING=1"),
    "native_check_failed": ("a check inside a native library failed (TransformerEngine's NVTE_CHECK, a torch internal "
                            "assert): the excerpt names the condition; compare the versions of torch, "
                            "TransformerEngine and Megatron-LM with the pinned image's"),
    "native_crash": ("the process died in native code (an uncaught C++ exception, a segfault): the `what():` line or "
                     "the error just before it names the cause; rerun with NCCL_DEBUG=INFO and "
                     "TORCH_SHOW_CPP_STACKTRACES=1 for more"),
    "nccl_invalid_argument": "NCCL refused an argument: rerun with NCCL_DEBUG=WARN to see which; " + FIX_OLD_STACK,
    "megatron_seq_length_multiple": "make --seq-length a multiple of 2 x --context-parallel-size",
    "slime_num_rollouts_lt_global_batch": ("rollout-batch-size x n-samples-per-prompt must be >= global-batch-size: "
                                           "use --n-samples-per-prompt 4 or a smaller --global-batch-size"),
    "slime_num_rollout_not_set": "use --num-rollout (slime has no --rollout-num; it is silently misread)",
    "slime_hf_validate_args_failed": "add the model's MODEL_ARGS (scripts/models/<model>.sh) to the train args",
    "slime_rm_type_missing": "pass --rm-type (e.g. --rm-type math)",
    "slime_ref_load_missing": "point --ref-load at an existing HF or torch_dist checkpoint (run `cpverify fetch`)",
    "torch_memory_saver_missing": "use the pinned slime image (it ships torch_memory_saver)",
    "ray_placement_group_wait": ("--actor-num-gpus-per-node (default 8) must not exceed the GPUs given to Ray; "
                                 "set it to the arm's GPU count"),
    "cp_correctness": "a cpverify correctness check failed: compare against the single-GPU reference; report upstream",
    "slime_grad_norm_mismatch": ("on identical rollouts CP>1's gradients differ from CP=1's beyond slime's 1% tolerance: "
                                 "a CP numerics problem; rerun once to rule out a nondeterministic kernel "
                                 "(NVTE_ALLOW_NONDETERMINISTIC_ALGO=0), then report it upstream with this bundle"),
    "layout_mismatch": ("ranks state two parallel layouts: a log holding two runs (give each arm its own log file) or "
                        "an edited one (judge the arm's own log); if one run's nodes really differ, give every node "
                        "the same train args"),
    "run_restarted": "the log holds more than one run (step numbers go backwards): give each arm its own log file",
}
FIX_ERROR_DEFAULT = "read the excerpt and the lines before it in the arm's log; " + FIX_COLLECT

OUTCOME_FIXES: dict[Outcome, str] = {
    Outcome.BLOCKED: "run `cpverify doctor` and follow its fixes (GPU runtime, Docker daemon, free GPUs)",
    Outcome.DEADLINE: ("the run exceeded its deadline: raise it (--set deadline_s=SECONDS), or run fewer rollouts "
                       "(--num-rollout) or shorter responses"),
    Outcome.HANG: ("no new log line for the hang limit: read the last lines of the log to see which phase went silent; "
                   "if it is legitimately quiet (a long checkpoint load or compile), raise the limit (--set "
                   "hang_s=SECONDS); if the ranks wait in a collective, " + FIX_COLLECT + ", check the transport and "
                   "dump stacks with py-spy"),
    Outcome.STALLED: ("log lines but no training step for the stall limit: look for a placement-group wait "
                      "(--actor-num-gpus-per-node must fit the GPUs), a stuck SGLang engine or a retry loop in the "
                      "log; raise the limit (--set stall_s=SECONDS) if the warm-up is legitimately long"),
    Outcome.FATAL: "read the error line quoted in the reason and the lines before it in the log",
    Outcome.FAILED: "read the last lines of the log: the workload's own error is usually there",
    Outcome.INTERRUPTED: "rerun when ready; the partial log is kept",
}


def for_error(cls: str, coarse: str = "") -> str:
    """The fix for an error class; its coarse class's when it has none of its own."""
    return ERROR_FIXES.get(cls) or ERROR_FIXES.get(coarse) or FIX_ERROR_DEFAULT


def for_outcome(outcome: Outcome, error_class: str = "", coarse: str = "") -> str:
    """The fix for how a workload ended: the error's own fix when an error class ended it; none
    when it ended well."""
    if outcome == Outcome.OK:
        return ""
    if error_class and outcome in (Outcome.FATAL, Outcome.FAILED):
        return for_error(error_class, coarse)
    return OUTCOME_FIXES.get(outcome, FIX_COLLECT)


# -- the advice of the verdict's own checks ---------------------------------------------------------

FIX_P2P_OFF = ("NCCL found no peer-to-peer path between the GPUs: unset NCCL_P2P_DISABLE, check "
               "`nvidia-smi topo -m`, and compare with NCCL_P2P_DISABLE=1 to measure the difference")
FIX_LAYOUT_HOOK = ("run through `cpverify run` (it adds the layout hook), or add "
                   "--custom-megatron-init-path cpverify.slime_hooks.layout.log_layout to the train args so the "
                   "log states the effective CP")
FIX_DAMAGED_TIMINGS = ("judge the arm's own, unedited log: slime's timers print positive seconds; if it is the arm's "
                       "own log, rerun the arm (a timer at or below zero, NaN or inf means its clock or metrics broke)")
FIX_CONFLICTING_LOG = ("judge one run's own, unedited log: this one states the same fact twice with two values (two "
                       "runs appended to one file, or an edit); give each arm its own log file")
FIX_NONFINITE = ("a loss or gradient norm of NaN or inf means training broke in this arm: if it is the CP>1 arm, compare "
                 "it with CP=1 on the same rollouts (--profile train-only, slime's grad-norm check) and rule out FA3 "
                 "(--attention-backend flash), then report it upstream with this bundle; if CP=1 breaks too, fix the "
                 "run itself (learning rate, data) before judging CP")
FIX_CP_NOT_APPLIED = ("check the spelling of --context-parallel-size in the train args (slime silently ignores unknown "
                      "flags); run `cpverify lint`")
FIX_INCOMPLETE = ("judge the whole log of a finished arm (a copy taken while the arm ran ends mid-step); if the arm's "
                  "own log ends there, the arm died: read its last lines (the Evidence section) and rerun")

# Advice that names the workload's own knobs (one per model.WORKLOADS): slime's flags mean nothing
# to the probe profile (torch's ring attention under torch.distributed.run), and the probe's mean
# nothing to slime.
_MORE_STEPS = {
    "slime": "run more rollouts (e.g. --num-rollout 16) so each arm has more counted steps",
    "probe": "run more measured steps (e.g. --set steps=60) so each arm has more counted steps",
}
NO_PERF = {
    "slime": "make sure both logs hold slime's train-side `perf N:` lines",
    "probe": "the probe prints one `perf N:` line per measured step: read the end of the arm's log for why it stopped",
}
NO_LAYOUT = {
    "slime": FIX_LAYOUT_HOOK,
    "probe": ("the probe prints its cpverify-layout line once its process group is up: read the arm's log for why it "
              "did not get that far"),
}
_SHORT_SEQUENCES = {
    "slime": "rule out FA3 with --attention-backend torch (or flash); note that at short sequences CP communication "
             "dominates (compare longer responses: --seq-len with train-only, or the long profile)",
    "probe": "at short sequences CP communication dominates: compare the longer seq_lens of the sweep",
}


def fix_more_steps(workload: str) -> str:
    return _MORE_STEPS[workload] + ", on otherwise idle GPUs, to narrow the interval"


# The interval comes from the spread between rounds (processes): more of them narrow it, more steps
# in one round do not (cpverify.verdict.across).
FIX_MORE_ROUNDS = ("run more rounds, each a process of its own, on otherwise idle GPUs: `cpverify run --rounds auto "
                   "--budget 30m` adds them until the interval decides; with logs of runs already made, give each "
                   "one: `cpverify verdict --baseline r1.log --baseline r2.log --candidate r1.log --candidate r2.log`")


PER_PHASE = {
    "slime": "read the per-phase rows: log_probs and ref_log_probs growing as much as actor_train point at "
             "per-micro-batch CP work rather than the interconnect (slime#1062)",
    "probe": "compare the bandwidth probe's bus bandwidth with the GPUs' link (cpverify probe --bandwidth)",
}


# Two revisions (or two runs) at the same CP: the difference is in what they run, not in CP, so the
# interconnect and NCCL advice for a slow CP does not apply.
FIX_SLOWER_AT_ONE_CP = ("the candidate is slower than the baseline at the same CP, so the cost is in what the two "
                        "revisions run, not in CP: read the per-phase rows for the phase that grew, diff the two "
                        "revisions along it (the loss, the forward and backward passes, the data path), and rerun "
                        "to confirm once changed")


def fix_slow_cp(workload: str, *, transports: tuple[str, ...] = (), slow_path: bool | None = None,
                old_nccl: bool | None = None) -> str:
    """What to try when CP>1 costs too much, leaving out what the arms' logs already rule out:
    `transports` the NCCL transports both logs show, `slow_path` whether either took a slow one
    (TCP sockets, shared memory only), `old_nccl` whether either NCCL is older than versions.MIN_NCCL; None: the
    logs do not say, so the advice covers it. A slow path a log shows is named, with what to change
    (not 'look for' what is already seen)."""
    sockets = any(t.startswith("NET/Socket") for t in transports)
    steps = []
    if slow_path:  # a log shows it: fix it first
        steps.append(FIX_SOCKETS_SEEN if sockets else FIX_P2P_OFF)
    elif slow_path is None:  # the logs do not say: look
        steps.append(FIX_TRANSPORT)
    if old_nccl is not False:
        steps.append(FIX_OLD_STACK)
    known = []
    if slow_path is False and transports:
        known.append(f"NCCL used {', '.join(transports)} in both arms")
    if old_nccl is False:
        known.append("NCCL is recent")
    steps += [PER_PHASE[workload], _SHORT_SEQUENCES[workload], "turn off MIG and GPU power limits (nvidia-smi -pl)"]
    if slow_path is None:
        steps.append(FIX_COLLECT)
    ruled_out = f" ({' and '.join(known)}: not the cause)" if known else ""
    return f"CP>1 is much slower than CP=1{ruled_out}: " + "; ".join(steps)
