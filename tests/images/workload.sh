#!/bin/sh
# Test workloads for the runner tests: shell loops that print the lines slime, Megatron
# and NCCL really print (formats from tests/data/real-logs), in the ways real runs end.
# Runs under busybox sh (the test image) and under the host's /bin/sh (local runner).
#
#   workload.sh train STEPS INTERVAL [EXIT]   STEPS train steps, then exit EXIT (default 0)
#   workload.sh hang LINES                    LINES steps, then silence
#   workload.sh stall INTERVAL                health-check chatter forever, never a step
#   workload.sh nccl_timeout                  2 steps, the NCCL watchdog timeout, then stuck
#   workload.sh forever INTERVAL              steps forever, with a background grandchild
#   workload.sh stubborn INTERVAL             like forever, but ignores SIGTERM (needs SIGKILL)
set -u
mode=$1
shift

now() { date '+%Y-%m-%d %H:%M:%S'; }

step() {  # $1 = step number
    echo "(MegatronTrainRayActor pid=$$) [$(now)] model.py:918 - step $1: {'train/loss': -6.05e-09, 'train/pg_loss': -6.05e-09, 'train/grad_norm': 0.0799, 'train/lr-pg_0': 1e-06, 'train/step': $1}"
    echo "(MegatronTrainRayActor pid=$$) [$(now)] train_metric_utils.py:401 - perf $1: {'perf/log_probs_time': 0.11, 'perf/actor_train_time': 1.02, 'perf/train_time': 2.84, 'perf/step_time': 14.18}"
}

steps_forever() {  # $1 = interval
    i=0
    while :; do
        step "$i"
        i=$((i + 1))
        sleep "$1"
    done
}

echo "workload mode=$mode pid=$$"
case "$mode" in
train)
    i=0
    while [ "$i" -lt "$1" ]; do
        step "$i"
        i=$((i + 1))
        sleep "$2"
    done
    echo "(MegatronTrainRayActor pid=$$) [$(now)] train.py:120 - training finished"
    exit "${3:-0}"
    ;;
hang)
    i=0
    while [ "$i" -lt "$1" ]; do step "$i"; i=$((i + 1)); done
    exec sleep 3600
    ;;
stall)
    while :; do
        echo "(SGLangEngine pid=$$) [$(now)] INFO:     127.0.0.1:62932 - \"GET /health HTTP/1.1\" 200 OK"
        sleep "$1"
    done
    ;;
nccl_timeout)
    step 0
    step 1
    echo "(MegatronTrainRayActor pid=$$) [rank0]:[E1225 12:58:32.712922209 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=17284, OpType=_ALLGATHER_BASE, NumelIn=415236096, NumelOut=1245708288, Timeout(ms)=600000) ran for 600031 milliseconds before timing out."
    echo "(MegatronTrainRayActor pid=$$) [rank0]:[E1225 12:58:32.713134032 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 0] Exception (either an error or timeout) detected by watchdog at work: 17284, last enqueued NCCL work: 17290, last completed NCCL work: 17283."
    # Real runs sit here for minutes while the watchdog tears the process group down.
    exec sleep 3600
    ;;
forever)
    sleep 3600 &
    echo "grandchild pid=$!"
    steps_forever "$1"
    ;;
stubborn)
    trap '' TERM
    sh -c "trap '' TERM; sleep 3600" &
    echo "grandchild pid=$!"
    steps_forever "$1"
    ;;
*)
    echo "workload.sh: unknown mode $mode" >&2
    exit 2
    ;;
esac
