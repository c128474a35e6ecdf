"""The slime and probe flags a plan writes and reads back: CP, the rollouts of a train-only arm,
and the grad-norm handoff of slime's own numerics check."""

SLIME_CP_FLAG = "--context-parallel-size"
PROBE_CP_FLAG = "--cp"
GRAD_NORM_SAVE, GRAD_NORM_LOAD = "--ci-save-grad-norm", "--ci-load-grad-norm"
ROLLOUT_DATA_FLAG = "--load-debug-rollout-data"
