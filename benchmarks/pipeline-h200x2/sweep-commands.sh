#!/usr/bin/env bash
# cpverify sweep: profile 'probe' (probe), arms: cp1-s4k cp2-s4k cp1-s16k cp2-s16k cp1-s64k cp2-s64k cp1-s128k cp2-s128k
# Reproduces each arm exactly as cpverify ran it. Usage: bash commands.sh [ARM ...]
set -euo pipefail

# GPUs as numbered on the host; inside a container that sees only these, they are 0..N-1.
export CUDA_VISIBLE_DEVICES=0,1

run_arm() {
  case "$1" in
    cp1-s4k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 2 -m cpverify.probe.workload \
        --cp 1 \
        --seq-len 4096 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp2-s4k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 2 -m cpverify.probe.workload \
        --cp 2 \
        --seq-len 4096 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp1-s16k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 2 -m cpverify.probe.workload \
        --cp 1 \
        --seq-len 16384 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp2-s16k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 2 -m cpverify.probe.workload \
        --cp 2 \
        --seq-len 16384 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp1-s64k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 2 -m cpverify.probe.workload \
        --cp 1 \
        --seq-len 65536 \
        --steps 15 \
        --warmup 3
    ) ;;
    cp2-s64k) (
      export NCCL_NVLS_ENABLE=0
      export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
      export NVSHMEM_DISABLE_NVLS=1
      export NCCL_DEBUG=INFO
      export NCCL_DEBUG_SUBSYS=INIT,P2P,NET
      export PYTHONUNBUFFERED=1
      python3 -m torch.distributed.run \
        --standalone \
        --nproc-per-node 2 -m cpverify.probe.workload \
        --cp 2 \
        --seq-len 65536 \
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
        --nproc-per-node 2 -m cpverify.probe.workload \
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
        --nproc-per-node 2 -m cpverify.probe.workload \
        --cp 2 \
        --seq-len 131072 \
        --steps 15 \
        --warmup 3
    ) ;;
    *) echo "unknown arm: $1 (arms: cp1-s4k cp2-s4k cp1-s16k cp2-s16k cp1-s64k cp2-s64k cp1-s128k cp2-s128k)" >&2; return 2 ;;
  esac
}

arms=("$@"); [ ${#arms[@]} -gt 0 ] || arms=(cp1-s4k cp2-s4k cp1-s16k cp2-s16k cp1-s64k cp2-s64k cp1-s128k cp2-s128k)
for arm in "${arms[@]}"; do run_arm "$arm"; done
