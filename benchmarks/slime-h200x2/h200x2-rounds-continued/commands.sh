#!/usr/bin/env bash
# cpverify h200x2-rounds: profile 'train-only' (slime), arms: cp1-s1k cp2-s1k
# Reproduces each arm exactly as cpverify ran it. Usage: bash commands.sh [ARM ...]
# Model: the local directory /root/rs/model (shaped as Qwen/Qwen2.5-0.5B-Instruct); rollouts under /tmp/cpverify-runs/h200x2-rounds/work (prepare_data); slime in /root/rs/slime.
set -euo pipefail

# GPUs as numbered on the host; inside a container that sees only these, they are 0..N-1.
export CUDA_VISIBLE_DEVICES=0,1

all_arms=(cp1-s1k cp2-s1k)

run_arm() {
  case "$1" in
    cp1-s1k) (
      cd /root/rs/slime
      export CUDA_DEVICE_MAX_CONNECTIONS=1
      export NCCL_NVLS_ENABLE=0
      export NCCL_DEBUG=INFO
      export RAY_DEDUP_LOGS=0
      export RAY_USE_UVLOOP=0
      export PYTHONUNBUFFERED=1
      export PYTHONPATH=/root/Megatron-LM
      /opt/torch/.venv/bin/python3 train.py \
        --train-backend megatron \
        --num-rollout 12 \
        --rollout-batch-size 2 \
        --n-samples-per-prompt 4 \
        --global-batch-size 8 \
        --advantage-estimator gspo \
        --use-kl-loss \
        --kl-loss-coef 0.0 \
        --kl-loss-type low_var_kl \
        --entropy-coef 0.0 \
        --optimizer adam \
        --lr 1e-6 \
        --lr-decay-style constant \
        --weight-decay 0.1 \
        --adam-beta1 0.9 \
        --adam-beta2 0.98 \
        --tensor-model-parallel-size 1 \
        --pipeline-model-parallel-size 1 \
        --use-dynamic-batch-size \
        --custom-megatron-init-path cpverify.slime_hooks.layout.log_layout \
        --attention-dropout 0.0 \
        --hidden-dropout 0.0 \
        --no-gradient-accumulation-fusion \
        --attention-backend fused \
        --swiglu \
        --num-layers 24 \
        --hidden-size 896 \
        --ffn-hidden-size 4864 \
        --num-attention-heads 14 \
        --use-rotary-position-embeddings \
        --disable-bias-linear \
        --add-qkv-bias \
        --normalization RMSNorm \
        --norm-epsilon 1e-6 \
        --rotary-base 1000000 \
        --group-query-attention \
        --num-query-groups 2 \
        --vocab-size 151936 \
        --actor-num-nodes 1 \
        --actor-num-gpus-per-node 2 \
        --hf-checkpoint /root/rs/model \
        --ref-load /root/rs/model \
        --rollout-max-response-len 1024 \
        --max-tokens-per-gpu 1088 \
        --debug-train-only \
        --load-debug-rollout-data '/tmp/cpverify-runs/h200x2-rounds/work/train-only/s1k/rollout_{rollout_id}.pt' \
        --ci-save-grad-norm '/tmp/cpverify-runs/h200x2-rounds/work/train-only/s1k/grad-norm-{role}-{rollout_id}-{step_id}.pt' \
        --context-parallel-size 1
    ) ;;
    cp2-s1k) (
      cd /root/rs/slime
      export CUDA_DEVICE_MAX_CONNECTIONS=1
      export NCCL_NVLS_ENABLE=0
      export NCCL_DEBUG=INFO
      export RAY_DEDUP_LOGS=0
      export RAY_USE_UVLOOP=0
      export PYTHONUNBUFFERED=1
      export PYTHONPATH=/root/Megatron-LM
      /opt/torch/.venv/bin/python3 train.py \
        --train-backend megatron \
        --num-rollout 12 \
        --rollout-batch-size 2 \
        --n-samples-per-prompt 4 \
        --global-batch-size 8 \
        --advantage-estimator gspo \
        --use-kl-loss \
        --kl-loss-coef 0.0 \
        --kl-loss-type low_var_kl \
        --entropy-coef 0.0 \
        --optimizer adam \
        --lr 1e-6 \
        --lr-decay-style constant \
        --weight-decay 0.1 \
        --adam-beta1 0.9 \
        --adam-beta2 0.98 \
        --tensor-model-parallel-size 1 \
        --pipeline-model-parallel-size 1 \
        --use-dynamic-batch-size \
        --custom-megatron-init-path cpverify.slime_hooks.layout.log_layout \
        --attention-dropout 0.0 \
        --hidden-dropout 0.0 \
        --no-gradient-accumulation-fusion \
        --attention-backend fused \
        --swiglu \
        --num-layers 24 \
        --hidden-size 896 \
        --ffn-hidden-size 4864 \
        --num-attention-heads 14 \
        --use-rotary-position-embeddings \
        --disable-bias-linear \
        --add-qkv-bias \
        --normalization RMSNorm \
        --norm-epsilon 1e-6 \
        --rotary-base 1000000 \
        --group-query-attention \
        --num-query-groups 2 \
        --vocab-size 151936 \
        --actor-num-nodes 1 \
        --actor-num-gpus-per-node 2 \
        --hf-checkpoint /root/rs/model \
        --ref-load /root/rs/model \
        --rollout-max-response-len 1024 \
        --max-tokens-per-gpu 1088 \
        --debug-train-only \
        --load-debug-rollout-data '/tmp/cpverify-runs/h200x2-rounds/work/train-only/s1k/rollout_{rollout_id}.pt' \
        --ci-load-grad-norm '/tmp/cpverify-runs/h200x2-rounds/work/train-only/s1k/grad-norm-{role}-{rollout_id}-{step_id}.pt' \
        --context-parallel-size 2
    ) ;;
    *) echo "unknown arm: $1 (arms: ${all_arms[*]})" >&2; return 2 ;;
  esac
}

# The rollouts the train-only arms read: seeded, so the same files every time (a set already
# written is reused).
prepare_data() {
  (cd /root/rs/slime && /opt/torch/.venv/bin/python3 -m cpverify.slime_hooks.make_rollouts \
    --out '/tmp/cpverify-runs/h200x2-rounds/work/train-only/s1k/rollout_{rollout_id}.pt' \
    --num-rollout 12 \
    --rollout-batch-size 2 \
    --n-samples-per-prompt 4 \
    --prompt-len 64 \
    --response-len 1024 \
    --seed 1234)
}
prepare_data

arms=("$@"); [ ${#arms[@]} -gt 0 ] || arms=("${all_arms[@]}")
for arm in "${arms[@]}"; do run_arm "$arm"; done
