"""The plan of an A/B of two slime revisions: every CP arm twice, `base-cpN` and `cand-cpN`, each
compared within its revision; and, given a plan, which arm is which (`design`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from cpverify.errors import InputError
from cpverify.model import BASE, CANDIDATE
from cpverify.plan.build import DEFAULT_WORK_DIR, Plan, arm_name, build_plan
from cpverify.plan.flags import GRAD_NORM_LOAD, GRAD_NORM_SAVE
from cpverify.plan.pairs import arm_diff
from cpverify.profiles import Profile


def build_ab_plan(profile: Profile, *, run_id: str, gpus: tuple[int, ...] | list[int] | None, model_dir: str,
                  data_path: str | None, base_dir: str, base_label: str, candidate_dir: str, candidate_label: str,
                  python: str = "python3", work_dir: str | None = None) -> Plan:
    """One plan with every CP arm twice, `base-cpN` and `cand-cpN`, compared within each revision; with one
    CP size (a host of one GPU: `--cp 1`), the candidate's arm against the base's at that CP instead."""
    work_dir = work_dir or DEFAULT_WORK_DIR

    if profile.kind != "slime":
        raise InputError(f"an A/B of slime revisions needs a slime profile, not {profile.name!r} ({profile.kind})",
                         "use --profile smoke or --profile long")
    plans = {role: build_plan(profile, run_id=run_id, gpus=gpus, model_dir=model_dir, data_path=data_path,
                              slime_dir=directory, slime_ref=label, python=python, work_dir=work_dir, one_cp=True)
             for role, directory, label in ((BASE, base_dir, base_label), (CANDIDATE, candidate_dir, candidate_label))}
    # each revision's arms under their A/B names, by their names in the revision's own plan
    renamed = {role: {arm.name: replace(arm, name=arm_name(arm.cp, arm.seq_len, role=role), role=role)
                      for arm in plan.arms} for role, plan in plans.items()}
    arms = tuple(arm for by_name in renamed.values() for arm in by_name.values())
    comparisons = tuple((renamed[role][b].name, renamed[role][c].name)
                        for role, plan in plans.items() for b, c in plan.comparisons)
    if not profile.candidate_cps:  # one CP: what the candidate revision changes at it
        comparisons = tuple((renamed[BASE][name].name, renamed[CANDIDATE][name].name) for name in renamed[BASE])
    for base_arm, cand_arm in zip(plans[BASE].arms, plans[CANDIDATE].arms, strict=True):
        # The two revisions must run the very same command: only where it runs may differ, and
        # (train-only) where each revision keeps its own CP=1 grad norms for its own check.
        own = ("workdir:", f"{GRAD_NORM_SAVE}:", f"{GRAD_NORM_LOAD}:")
        extra = [line for line in arm_diff(base_arm, cand_arm) if not line.startswith(own)]
        if extra:
            raise InputError(f"the base and candidate {base_arm.name} arms differ in more than the slime checkout: "
                             + "; ".join(extra), "an A/B must change only the slime revision")
    first = plans[BASE]
    return Plan(run_id, profile, arms, comparisons, first.gpus, first.model_dir, first.data_path, base_dir, work_dir)


@dataclass(frozen=True)
class Design:
    """Which arm is which in an A/B plan: {cp: arm name} per revision."""

    baseline_cp: int
    base: dict[int, str]
    candidate: dict[int, str]
    base_label: str
    candidate_label: str


def design(plan: Plan) -> Design | None:
    """The A/B layout of `plan`, or None when it is not an A/B (no arms of both roles at the same CPs)."""
    arms: dict[str, dict] = {BASE: {}, CANDIDATE: {}}
    labels = {BASE: BASE, CANDIDATE: CANDIDATE}
    for arm in plan.arms:
        if arm.role in arms:
            arms[arm.role][arm.cp] = arm.name
            labels[arm.role] = arm.slime_ref or arm.role
    baseline = plan.profile.baseline_cp
    if baseline not in arms[BASE] or baseline not in arms[CANDIDATE] or set(arms[BASE]) != set(arms[CANDIDATE]) \
            or len(arms[BASE]) < 2:
        return None
    return Design(baseline, arms[BASE], arms[CANDIDATE], labels[BASE], labels[CANDIDATE])
