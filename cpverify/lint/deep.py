"""Deep lint, the host side: slime's own parser on every arm, turned into lint findings.

The static lint (cpverify.lint) knows slime 624b824a from a list; the slime under test may be
another version. So after the static lint, `cpverify run` asks the slime under test itself:
cpverify.slime_hooks.deep_lint runs slime's real `parse_args()` on each arm's arguments (with the
arm's environment) and slime's `build_dp_schedule` on one worst-case rollout, in the workload's
Python and without a GPU -- in a throwaway container of the image for the Docker runner, as a
subprocess in this environment for local and Ray. What it reports becomes findings:

  * slime refuses the arguments (argparse, its validation, Megatron's, the batch scheduler):
    an error quoting slime's own message, with the fix the verdict would give for it;
  * a flag that no parser consumed: an error (train.py would ignore it silently), unless the
    static lint already reported that flag; a static "not a flag of slime 624b824a" warning for
    a flag this slime does consume is dropped: where slime's parsers ran, they decide;
  * the arguments need something this environment lacks (apex's fused kernel): an error;
  * slime cannot be imported there, or the tool did not run: one warning, and the static lint
    stands alone (the fallback).
A host with no GPU cannot answer Megatron's question about the GPU architecture; the request
carries the answer from the doctor's facts about the plan's GPUs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from cpverify.fixes import ERROR_FIXES
from cpverify.lint.findings import ERROR, WARNING, Finding
from cpverify.lint.flags import PASS_THROUGH_PREFIXES
from cpverify.lint.shell import TRAIN_SCRIPTS
from cpverify.slime_hooks.deep_lint import MARKER

if TYPE_CHECKING:
    from cpverify.plan import Plan

# The error classes the log parser reads in a message, each with its coarse class, the finest first
# (cpverify.pipeline.error_classes). Passed in: the lint runs before the parse stage and does not import it.
Classify = Callable[[str], list[tuple[str, str]]]

TOOL = ("-m", "cpverify.slime_hooks.deep_lint")  # after the arms' interpreter
ASSUMED_ARCH = 9  # Hopper: Megatron's CUDA_DEVICE_MAX_CONNECTIONS rule applies below 10 (Blackwell)
STAGE_FLAG = {"argparse": "slime parse_args()", "validation": "slime parse_args()",
              "dp_schedule": "--global-batch-size", "environment": "--no-gradient-accumulation-fusion"}
_TRAIN_ONLY_FLAGS = ("--debug-train-only", "--load-debug-rollout-data")


def train_args(argv) -> list[str]:
    """The arguments after train.py (what slime's parse_args reads from sys.argv)."""
    words = [str(w) for w in argv]
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] in TRAIN_SCRIPTS:
            return words[i + 1:]
    return words


def request(plan: Plan, arch: int | None) -> dict:
    """What the workload side needs: every arm's train.py arguments and environment."""
    return {"arch": arch, "arms": [{"name": arm.name, "argv": train_args(arm.argv), "env": dict(arm.env)}
                                   for arm in plan.arms]}


def arch_from_doctor(report: dict | None, gpus) -> int | None:
    """The major compute capability of the plan's GPUs, from `cpverify doctor`'s facts."""
    fact = ((report or {}).get("facts") or {}).get("gpus") or {}
    listed = (fact.get("value") or {}).get("gpus") or []
    chosen = [g for g in listed if g.get("index") in set(gpus)] or listed
    majors = {str(g.get("compute_capability") or "").split(".")[0] for g in chosen}
    majors.discard("")
    return min(int(m) for m in majors) if majors and all(m.isdigit() for m in majors) else None


def results_from(output: str) -> list[dict]:
    """The workload side's per-arm results, from its output (slime prints plenty around them)."""
    results = []
    for line in output.splitlines():
        start = line.find(MARKER)
        if start >= 0:
            try:
                results.append(json.loads(line[start + len(MARKER):]))
            except ValueError:
                continue
    return results


def findings(plan: Plan, results: list[dict], *, exit_code: int, output: str, arch_assumed: bool,
             classify: Classify) -> list[Finding]:
    """Findings from the workload side's results; a warning alone when it could not judge. A refusal
    gets the fix a log with slime's message gets (cpverify.fixes), its class read by `classify`."""
    train_only = {arm.name: any(w in _TRAIN_ONLY_FLAGS for w in arm.argv) for arm in plan.arms}
    if not results:
        if "No module named 'cpverify'" in output or 'No module named "cpverify"' in output:
            return [Finding(ERROR, "cpverify", (
                "the Python that runs train.py cannot import cpverify; slime imports cpverify's hooks "
                "(--custom-megatron-init-path, --custom-rm-path) in every train actor and would fail"),
                "install cpverify where slime runs (pip install <cpverify checkout>), or put the checkout on "
                "PYTHONPATH")]
        tail = " ".join(output.strip().splitlines()[-3:])[-300:] or f"exit code {exit_code}"
        return [_fallback(f"the deep lint did not run ({tail})")]
    if all(r.get("stage") == "import" for r in results):
        return [_fallback(f"slime cannot be imported in the workload's Python: {results[0].get('error')}")]
    found: list[Finding] = []
    for r in results:
        stage, error, arm = r.get("stage"), r.get("error"), r["name"]
        if stage and stage != "import":
            flag = _named_flag(error) if stage == "argparse" else STAGE_FLAG.get(stage, "slime parse_args()")
            found.append(Finding(ERROR, flag, f"slime's own check refuses this arm: `{_excerpt(error)}`",
                                 _fix_for(error, stage, classify), where=arm))
        for flag in r.get("unknown") or []:
            ignored_here = flag.startswith(PASS_THROUGH_PREFIXES) and train_only.get(arm, False)
            found.append(Finding(
                WARNING if ignored_here else ERROR, flag,
                ("SGLang never starts in train-only mode, so slime skips its parser and ignores this flag"
                 if ignored_here else "none of this slime's parsers consumed it: train.py ignores it silently"),
                "remove it" if ignored_here else "check the spelling against `python train.py --help` of this slime",
                where=arm))
    if arch_assumed and any(r.get("stage") != "import" for r in results):
        found.append(Finding(WARNING, "GPU architecture", (
            f"unknown (the doctor found no GPU of the plan): Megatron's checks were answered for sm{ASSUMED_ARCH}x "
            "(Hopper)"), "run `cpverify doctor` on the GPU host first (`--only doctor,...,lint`)"))
    return found


def merge(static: list[Finding], deep: list[Finding], results: list[dict]) -> list[Finding]:
    """Static and deep findings together. Where slime's parsers ran for an arm, a static warning
    about a flag they consumed is dropped, and a deep finding repeats no static one."""
    unknown = {r["name"]: set(r.get("unknown") or []) for r in results if r.get("unknown") is not None}
    kept = [f for f in static
            if not (f.severity == WARNING and f.where in unknown and f.flag.startswith("--")
                    and f.flag not in unknown[f.where])]
    reported = {(f.where, f.flag) for f in kept}
    fresh = [f for f in deep if (f.where, f.flag) not in reported or not f.flag.startswith("--")]
    return sorted(kept + fresh, key=lambda f: f.severity != ERROR)


def _fallback(why: str) -> Finding:
    return Finding(WARNING, "deep lint", why + "; only the static lint checked the arguments",
                   "run where slime imports: the image (--runner docker), or slime's environment for local and Ray")


def _named_flag(error: str | None) -> str:
    match = re.search(r"argument (--[\w-]+)", error or "")
    return match.group(1) if match else "slime parse_args()"


def _fix_for(error: str | None, stage: str, classify: Classify) -> str:
    """The fix a log with the same message gets (cpverify.fixes: one table of fixes)."""
    if stage == "environment":
        return "add --no-gradient-accumulation-fusion (apex's fused kernel is not in this environment)"
    if "FileNotFoundError" in (error or "") and "config.json" in (error or ""):
        return ("the model is not where the arms will read it: run the fetch step first (`cpverify run --only "
                "fetch,...`), or pass --model-dir")
    if stage == "dp_schedule":
        return ("make --rollout-batch-size x --n-samples-per-prompt a multiple of --global-batch-size "
                "(at least one step per rollout)")
    for cls, coarse in classify(error or ""):
        fix = ERROR_FIXES.get(cls) or ERROR_FIXES.get(coarse)
        if fix:
            return fix
    return "fix the arguments slime names in its message (this is what train.py would stop with)"


def _excerpt(text: str | None, limit: int = 400) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
