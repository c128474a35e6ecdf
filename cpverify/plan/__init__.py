"""The plan: the exact command line and environment of every arm, before anything runs.

A plan is pure data built from a profile and a few paths. It guarantees the one property an
A/B of CP needs: paired arms differ only in the CP size (`--context-parallel-size` for slime,
`--cp` for the probe). `build_plan` refuses to return a plan that breaks it, and
`Plan.commands_sh()` writes the bash script that reproduces every arm exactly.

Train-only arms (profile `train-only`) read rollouts the plan's data commands write
(`Plan.data_commands`: cpverify.slime_hooks.make_rollouts, in the workload's Python) and carry
slime's own numerics check: the baseline arm saves its grad norm at every step
(`--ci-save-grad-norm P`), every other arm loads the same P (`--ci-load-grad-norm P`) and slime
asserts they agree within 1%. That handoff is the one difference besides CP a pair may have.

  build.py   a profile and paths -> the Plan (its arms, the pairs to compare, the data commands)
  pairs.py   what differs between two arms; the proof that a pair differs only in CP
  render.py  the plan as people see it: plan.json's arms and commands.sh, secret values as ${NAME}
  flags.py   the slime and probe flags a plan writes and reads back
  ab.py      the A/B of two slime revisions: the plan, and which arm is which
"""

from cpverify.plan.ab import Design, build_ab_plan, design
from cpverify.plan.build import (
    DEFAULT_MODEL_DIR,
    DEFAULT_SLIME_DIR,
    DEFAULT_WORK_DIR,
    ROLLOUT_SEED,
    TRAIN_ONLY_PROMPT_LEN,
    Plan,
    build_plan,
    parse_gpus,
    rollout_dir,
)
from cpverify.plan.flags import GRAD_NORM_LOAD, GRAD_NORM_SAVE, PROBE_CP_FLAG, ROLLOUT_DATA_FLAG, SLIME_CP_FLAG
from cpverify.plan.pairs import arm_diff, cp_only_diff, grad_norm_handoff
from cpverify.plan.render import arm_json, commands_sh

__all__ = [
    "DEFAULT_MODEL_DIR", "DEFAULT_SLIME_DIR", "DEFAULT_WORK_DIR", "GRAD_NORM_LOAD", "GRAD_NORM_SAVE", "PROBE_CP_FLAG",
    "ROLLOUT_DATA_FLAG", "ROLLOUT_SEED", "SLIME_CP_FLAG", "TRAIN_ONLY_PROMPT_LEN", "Design", "Plan", "arm_diff",
    "arm_json", "build_ab_plan", "build_plan", "commands_sh", "cp_only_diff", "design", "grad_norm_handoff",
    "parse_gpus", "rollout_dir",
]
