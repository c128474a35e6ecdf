"""Stand-in for slime/utils/dp_schedule.py (624b824a), for tests only: the batch-count assertion
and the micro-batch count per rank of slime's pack-then-distribute schedule, nothing else."""


def build_dp_schedule(args, train_parallel_config, total_lengths, *, global_batch_size, rollout_indices):
    dp_size, cp_size = train_parallel_config["dp_size"], train_parallel_config["cp_size"]
    rollouts = list(dict.fromkeys(rollout_indices))
    num_steps = len(rollouts) // global_batch_size
    assert num_steps >= 1, (
        f"num_rollouts ({len(rollouts)}) < global_batch_size ({global_batch_size}); "
        f"need at least one rollout per step."
    )
    per_step = len(total_lengths) // num_steps
    if args.use_dynamic_batch_size:
        cap = args.max_tokens_per_gpu * cp_size
        bins = max(1, -(-sum(total_lengths[:per_step]) // cap))
    else:
        bins = -(-per_step // args.micro_batch_size)
    bins = max(dp_size, -(-bins // dp_size) * dp_size)
    return [], [], [bins // dp_size] * num_steps, [global_batch_size] * num_steps
