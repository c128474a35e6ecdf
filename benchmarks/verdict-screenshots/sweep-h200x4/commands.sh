#!/usr/bin/env bash
# cpverify sweep: profile 'probe' (probe), arms: cp1-s8k cp2-s8k cp4-s8k cp1-s32k cp2-s32k cp4-s32k cp1-s128k cp2-s128k cp4-s128k
# Reproduces each arm exactly as cpverify ran it. Usage: bash commands.sh [ARM ...]
set -euo pipefail

# GPUs as numbered on the host; inside a container that sees only these, they are 0..N-1.
export CUDA_VISIBLE_DEVICES=0,1,2,3

run_arm() {
  case "$1" in
    cp1-s8k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 4 -m cpverify.probe.workload \
        --cp 1 \
        --seq-len 8192 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp2-s8k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 4 -m cpverify.probe.workload \
        --cp 2 \
        --seq-len 8192 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp4-s8k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 4 -m cpverify.probe.workload \
        --cp 4 \
        --seq-len 8192 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp1-s32k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 4 -m cpverify.probe.workload \
        --cp 1 \
        --seq-len 32768 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp2-s32k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 4 -m cpverify.probe.workload \
        --cp 2 \
        --seq-len 32768 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp4-s32k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 4 -m cpverify.probe.workload \
        --cp 4 \
        --seq-len 32768 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp1-s128k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 4 -m cpverify.probe.workload \
        --cp 1 \
        --seq-len 131072 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp2-s128k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 4 -m cpverify.probe.workload \
        --cp 2 \
        --seq-len 131072 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp4-s128k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 4 -m cpverify.probe.workload \
        --cp 4 \
        --seq-len 131072 \
        --steps 15 \
        --warmup 3
    ) ;;
    *) echo "unknown arm: $1 (arms: cp1-s8k cp2-s8k cp4-s8k cp1-s32k cp2-s32k cp4-s32k cp1-s128k cp2-s128k cp4-s128k)" >&2; return 2 ;;
  esac
}

arms=("$@"); [ ${#arms[@]} -gt 0 ] || arms=(cp1-s8k cp2-s8k cp4-s8k cp1-s32k cp2-s32k cp4-s32k cp1-s128k cp2-s128k cp4-s128k)
for arm in "${arms[@]}"; do run_arm "$arm"; done
