#!/usr/bin/env bash
# A/A rounds of real slime on ONE GPU (device kit: slime 624b824a, Megatron-LM 1dcf0daf, TE 2.16.1,
# Ray 2.56.1): the same CP=1 train-only job run ROUNDS times, each round a separate `train.py`
# process, labelled A B B A A B ... as an interleaved A/A design would run two identical arms.
# Nothing differs between rounds (same seeded rollouts, same random checkpoint): the spread of the
# rounds is the between-process noise a verdict's interval must cover.
#
#   cp -r <device-kit> .kit     # then, on the GPU machine, in this checkout:
#   OUT=/some/dir ROUNDS=6 ROLLOUTS=20 bash benchmarks/run_slime_aa_device.sh
#
# Logs: $OUT/aa-<k><A|B>.log; timings: $OUT/aa-rounds.txt.
set -uo pipefail
OUT=${OUT:-/tmp/cpverify-aa}; mkdir -p "$OUT"; T0=$SECONDS; say() { echo "[$((SECONDS-T0))s] $*" | tee -a "$OUT/aa-rounds.txt"; }
source .kit/setup.sh || exit 1
P=$PWD; R=$KIT_ROOT; N=${ROLLOUTS:-20}; RESP=${RESP:-1024}
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
[ -f $R/model/config.json ] || timeout 150 python3 .kit/make_fake_qwen.py $R/model | tail -1
timeout 60 python3 .kit/make_rollout_data.py $R/rollout $N 2 4 64 $RESP 4096 | tail -1; say data
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
ARGS="--train-backend megatron --input-key messages --apply-chat-template --num-rollout $N --rollout-batch-size 2 --n-samples-per-prompt 4 --rollout-max-response-len $RESP --global-batch-size 8 --advantage-estimator gspo --use-kl-loss --kl-loss-coef 0.0 --kl-loss-type low_var_kl --entropy-coef 0.0 --optimizer adam --lr 1e-6 --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.98 --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --use-dynamic-batch-size --max-tokens-per-gpu $((RESP * 2)) --rollout-num-gpus-per-engine 1 --prompt-data $P/datasets/cp_smoke.jsonl --custom-rm-path cpverify.slime_hooks.reward.length_reward --custom-megatron-init-path cpverify.slime_hooks.layout.log_layout --attention-dropout 0.0 --hidden-dropout 0.0 --swiglu --num-layers 24 --hidden-size 896 --ffn-hidden-size 4864 --num-attention-heads 14 --use-rotary-position-embeddings --disable-bias-linear --add-qkv-bias --normalization RMSNorm --norm-epsilon 1e-6 --rotary-base 1000000 --group-query-attention --num-query-groups 2 --vocab-size 151936 --actor-num-nodes 1 --actor-num-gpus-per-node 1 --hf-checkpoint $R/model --ref-load $R/model --attention-backend fused --no-gradient-accumulation-fusion --debug-train-only --load-debug-rollout-data $R/rollout/rollout_{rollout_id}.pt --context-parallel-size 1"
labels=(A B B A A B B A A B B A)
cd $SLIME_DIR
for k in $(seq 1 "${ROUNDS:-6}"); do
  l=${labels[$((k-1))]}
  timeout 240 python3 train.py $ARGS > "$OUT/aa-$k$l.log" 2>&1; rc=$?
  python3 -m ray.scripts.scripts stop --force >/dev/null 2>&1; sleep 1
  say "round $k ($l) exit $rc"
done
