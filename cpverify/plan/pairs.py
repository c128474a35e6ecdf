"""Two arms side by side: what differs between them, and the proof that a compared pair differs
only in the CP flag (plus, for train-only arms, slime's grad-norm handoff)."""

from __future__ import annotations

import shlex

from cpverify.argv import options
from cpverify.errors import InputError
from cpverify.model import Arm
from cpverify.plan.flags import GRAD_NORM_LOAD, GRAD_NORM_SAVE
from cpverify.plan.render import is_secret


def arm_diff(a: Arm, b: Arm) -> list[str]:
    """Printable differences between two arms: argv flags, leading words, env, workdir."""
    diff = []
    lead_a, opts_a = options(a.argv)
    lead_b, opts_b = options(b.argv)
    if lead_a != lead_b:
        diff.append(f"command: {shlex.join(lead_a)} -> {shlex.join(lead_b)}")
    for flag in [*opts_a, *(f for f in opts_b if f not in opts_a)]:
        va, vb = opts_a.get(flag), opts_b.get(flag)
        if va != vb:
            diff.append(f"{flag}: {_show(va)} -> {_show(vb)}")
    env_a, env_b = a.env_dict, b.env_dict
    for key in [*env_a, *(k for k in env_b if k not in env_a)]:
        if env_a.get(key) != env_b.get(key):
            shown = (("<secret>", "<secret>") if is_secret(key, env_a.get(key) or env_b.get(key) or "")
                     else (env_a.get(key, "(unset)"), env_b.get(key, "(unset)")))
            diff.append(f"env {key}: {shown[0]} -> {shown[1]}")
    if a.workdir != b.workdir:
        diff.append(f"workdir: {a.workdir} -> {b.workdir}")
    return diff


def grad_norm_handoff(a: Arm, b: Arm) -> set[str]:
    """The flags of slime's grad-norm check wired from baseline `a` to candidate `b`, if it is wired
    exactly so: `a` saves to one path and loads nothing, `b` loads that same path and saves nothing."""
    _, opts_a = options(a.argv)
    _, opts_b = options(b.argv)
    saved, loaded = opts_a.get(GRAD_NORM_SAVE), opts_b.get(GRAD_NORM_LOAD)
    if saved and len(saved) == 1 and saved == loaded and GRAD_NORM_LOAD not in opts_a and GRAD_NORM_SAVE not in opts_b:
        return {GRAD_NORM_SAVE, GRAD_NORM_LOAD}
    return set()


def cp_only_diff(a: Arm, b: Arm, *, allowed: set[str]) -> list[str]:
    """The diff of a compared pair; raises InputError unless it is exactly a change of CP (plus,
    for train-only arms, the grad-norm handoff from a to b)."""
    diff = arm_diff(a, b)
    changed = {line.split(":", 1)[0] for line in diff}
    handoff = grad_norm_handoff(a, b)
    wired = {GRAD_NORM_SAVE, GRAD_NORM_LOAD} & {*options(a.argv)[1], *options(b.argv)[1]}
    if wired and not handoff:  # both save, the baseline loads, one side only: no check, or a check of nothing
        raise InputError(f"arms {a.name} and {b.name} wire slime's grad-norm check wrongly ({', '.join(sorted(wired))})",
                         f"the baseline saves ({GRAD_NORM_SAVE} P) and the candidate loads the same P "
                         f"({GRAD_NORM_LOAD} P), as the train-only profile wires it; or neither uses them")
    permitted = allowed | handoff
    extra = [line for line in diff if line.split(":", 1)[0] not in permitted]
    if extra or not changed & allowed:
        problem = (
            f"arms {a.name} and {b.name} differ in more than the CP size: " + "; ".join(extra)
            if extra else f"arms {a.name} and {b.name} do not differ in the CP size ({', '.join(sorted(allowed))})"
        )
        raise InputError(problem, "a CP comparison must change only the CP flag; fix the profile overrides")
    return diff


def _show(values: list[str] | None) -> str:
    if values is None:
        return "(absent)"
    return shlex.join(values) if values else "(set)"
