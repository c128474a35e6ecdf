"""A/B of two slime revisions: is the candidate's CP overhead smaller than the base's?

The question a CP performance patch (slime PR #1102, "Optimize CP loss communication")
has to answer: with everything else the same, does CP=2 cost less against CP=1 on the
candidate revision than on the base? So both revisions run at CP=1 and CP=2 on the same
GPUs (4 arms: base-cp1, base-cp2, cand-cp1, cand-cp2; more with `--cp 1,2,4`), each
revision's overhead is the ratio of medians cpN/cp1, and the answer is the ratio of those
ratios, candidate/base, with a percentile-bootstrap interval that resamples all four arms
independently (the same method and seed as cpverify.stats uses for one ratio):

    < 1 with the whole interval below 1  ->  the candidate's CP overhead is smaller
    > 1 with the whole interval above 1  ->  larger
    an interval that contains 1          ->  no clear difference at this sample size

The revisions come either as two git refs of one checkout (`--slime-ref BASE
--slime-ref-candidate HEAD`: each exported with `git archive` into the run directory, so
the user's checkout is only read) or as two checkouts (`--slime-dir A
--slime-dir-candidate B`, e.g. main and a patched clone).
"""

from __future__ import annotations

import contextlib
import io
import random
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cpverify import stats
from cpverify.errors import InputError

BASE, CANDIDATE = "base", "cand"
_EXPORT_MARKER = ".cpverify-export"


# -- the two revisions ------------------------------------------------------------------------

@dataclass(frozen=True)
class Revision:
    """One slime revision under test: where its checkout is on this machine, and its name."""

    role: str  # BASE or CANDIDATE
    host_dir: Path  # the checkout (or export) on this machine; for Ray, as the cluster sees it
    label: str  # what the verdict calls it: "main@1a2b3c4d5e6f", or the checkout's directory name
    commit: str | None = None


def _git(repo: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not binary, check=False)


def _commit_of(repo: Path, ref: str) -> str:
    try:
        out = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except FileNotFoundError:
        raise InputError("git is not installed, so slime refs cannot be resolved",
                         "install git, or pass two checkouts: --slime-dir A --slime-dir-candidate B") from None
    if out.returncode != 0:
        raise InputError(f"{ref!r} is not a commit in the slime checkout {repo}",
                         f"check `git -C {repo} log --oneline {ref}`; fetch it first if it is a remote branch or PR "
                         f"(`git -C {repo} fetch origin pull/1102/head:pr-1102`)")
    return out.stdout.strip()


def export_ref(repo: Path | str, ref: str, dest_root: Path | str, *, role: str = BASE) -> Revision:
    """The tree of `ref` in `repo`, written once to dest_root/slime-<commit12> (`git archive`).

    Reads the repository only: no checkout, no worktree, nothing changes in the user's clone.
    An export that exists already (same commit) is reused, so every step of a run sees one tree.
    """
    repo = Path(repo).expanduser().resolve()
    if not (repo / ".git").exists():
        raise InputError(f"{repo} is not a git checkout, so --slime-ref cannot be resolved in it",
                         "point --slime-dir at a git clone of slime (git clone https://github.com/THUDM/slime)")
    commit = _commit_of(repo, ref)
    dest = Path(dest_root) / f"slime-{commit[:12]}"
    label = f"{ref}@{commit[:12]}" if not commit.startswith(ref) else commit[:12]
    marker = dest / _EXPORT_MARKER
    if marker.is_file() and marker.read_text().strip() == commit:
        return Revision(role, dest, label, commit)
    archive = _git(repo, "archive", "--format=tar", commit, binary=True)
    if archive.returncode != 0:
        raise InputError(f"`git archive {commit[:12]}` failed in {repo}: {archive.stderr.decode(errors='replace')[-500:]}",
                         "check that the repository is readable and not shallow at that commit")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout), mode="r:") as tar:
            _extract(tar, staging)
        (staging / _EXPORT_MARKER).write_text(commit + "\n")
        if dest.exists():  # a half-written export from an interrupted run
            shutil.rmtree(dest)
        staging.rename(dest)  # atomic: a reader sees no tree or the whole tree
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return Revision(role, dest, label, commit)


def _extract(tar: tarfile.TarFile, dest: Path) -> None:
    try:
        tar.extractall(dest, filter="data")  # no absolute paths, no links out of dest
    except TypeError:  # Python without extraction filters (3.10 < 3.10.12)
        tar.extractall(dest)


def checkout(path: Path | str, role: str, *, must_exist: bool = True) -> Revision:
    """A checkout given as a directory; labelled with its commit when it is a git clone here."""
    directory = Path(path).expanduser()
    if must_exist:
        directory = directory.resolve()
        if not directory.is_dir():
            flag = "--slime-dir" if role == BASE else "--slime-dir-candidate"
            raise InputError(f"{flag} {directory} is not a directory", f"pass the path of a slime checkout to {flag}")
    label, commit = directory.name, None
    with contextlib.suppress(OSError):
        head = _git(directory, "rev-parse", "HEAD")
        if head.returncode == 0:
            commit = head.stdout.strip()
            dirty = _git(directory, "status", "--porcelain", "--untracked-files=no").stdout.strip()
            label = f"{directory.name}@{commit[:12]}" + ("+dirty" if dirty else "")
    return Revision(role, directory, label, commit)


def revisions(*, slime_dir: str | None, slime_ref: str | None = None, slime_ref_candidate: str | None = None,
              slime_dir_candidate: str | None = None, export_root: Path | str,
              local: bool = True) -> tuple[Revision, Revision | None] | None:
    """(base, candidate or None) from the CLI's four flags; None when none of them asks for a revision.

    `local=False` (the Ray runner): directories are paths on the cluster and are not checked here.
    """
    if slime_ref_candidate and slime_dir_candidate:
        raise InputError("both --slime-ref-candidate and --slime-dir-candidate were given",
                         "compare either two refs of one checkout or two checkouts, not both")
    if slime_ref_candidate and not slime_ref:
        raise InputError("--slime-ref-candidate needs --slime-ref (the base revision)",
                         "pass both, e.g. --slime-ref main --slime-ref-candidate HEAD")
    if slime_dir_candidate and slime_ref:
        raise InputError("--slime-dir-candidate cannot be combined with --slime-ref",
                         "compare two checkouts (--slime-dir A --slime-dir-candidate B), or two refs of one "
                         "(--slime-ref BASE --slime-ref-candidate HEAD)")
    if slime_ref and not slime_dir:
        raise InputError("--slime-ref needs --slime-dir (the git checkout that has the ref)",
                         "pass --slime-dir /path/to/slime-clone")
    if slime_dir_candidate and not slime_dir:
        raise InputError("--slime-dir-candidate needs --slime-dir (the base checkout)",
                         "pass --slime-dir /path/to/base-slime")
    if slime_ref and slime_dir:
        base = export_ref(slime_dir, slime_ref, export_root, role=BASE)
        candidate = export_ref(slime_dir, slime_ref_candidate, export_root, role=CANDIDATE) if slime_ref_candidate \
            else None
    elif slime_dir_candidate and slime_dir:
        base = checkout(slime_dir, BASE, must_exist=local)
        candidate = checkout(slime_dir_candidate, CANDIDATE, must_exist=local)
    else:
        return None
    if candidate is not None and (candidate.host_dir == base.host_dir or
                                  (candidate.commit and candidate.commit == base.commit and
                                   not candidate.label.endswith("+dirty") and not base.label.endswith("+dirty"))):
        raise InputError(f"base and candidate are the same revision ({base.label}): the A/B would compare it with "
                         "itself", "name two different commits (or two different checkouts)")
    return base, candidate


# -- the plan -----------------------------------------------------------------------------------

def build_ab_plan(profile, *, run_id: str, gpus, model_dir: str, data_path: str | None,
                  base_dir: str, base_label: str, candidate_dir: str, candidate_label: str, python: str = "python3",
                  work_dir: str | None = None):
    """One plan with every CP arm twice, `base-cpN` and `cand-cpN`, compared within each revision."""
    from cpverify.plan import DEFAULT_WORK_DIR, GRAD_NORM_LOAD, GRAD_NORM_SAVE, Plan, arm_diff, build_plan

    work_dir = work_dir or DEFAULT_WORK_DIR

    if profile.kind != "slime":
        raise InputError(f"an A/B of slime revisions needs a slime profile, not {profile.name!r} ({profile.kind})",
                         "use --profile smoke or --profile long")
    plans = {role: build_plan(profile, run_id=run_id, gpus=gpus, model_dir=model_dir, data_path=data_path,
                              slime_dir=directory, slime_ref=label, python=python, work_dir=work_dir)
             for role, directory, label in ((BASE, base_dir, base_label), (CANDIDATE, candidate_dir, candidate_label))}
    arms = tuple(replace(arm, name=f"{role}-{arm.name}") for role, plan in plans.items() for arm in plan.arms)
    comparisons = tuple((f"{role}-{b}", f"{role}-{c}") for role, plan in plans.items() for b, c in plan.comparisons)
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


def design(plan) -> Design | None:
    """The A/B layout of `plan`, or None when it is not an A/B (no base-/cand- arm pairs)."""
    arms: dict[str, dict] = {BASE: {}, CANDIDATE: {}}
    labels = {BASE: BASE, CANDIDATE: CANDIDATE}
    for arm in plan.arms:
        role, _, rest = arm.name.partition("-")
        if role in arms and rest:
            arms[role][arm.cp] = arm.name
            labels[role] = arm.slime_ref or role
    baseline = plan.profile.baseline_cp
    if baseline not in arms[BASE] or baseline not in arms[CANDIDATE] or set(arms[BASE]) != set(arms[CANDIDATE]) \
            or len(arms[BASE]) < 2:
        return None
    return Design(baseline, arms[BASE], arms[CANDIDATE], labels[BASE], labels[CANDIDATE])


# -- the statistics -----------------------------------------------------------------------------

def bootstrap_ratio_of_ratios_ci(base_1: Sequence[float], base_n: Sequence[float], cand_1: Sequence[float],
                                 cand_n: Sequence[float], *, confidence: float = 0.95,
                                 resamples: int = stats.DEFAULT_RESAMPLES,
                                 seed: int = stats.DEFAULT_SEED) -> tuple[float, float]:
    """Percentile-bootstrap interval of (med(cand_n)/med(cand_1)) / (med(base_n)/med(base_1)).

    Each of the four samples is resampled independently (they are four separate runs).
    """
    samples = (base_1, base_n, cand_1, cand_n)
    if any(not s for s in samples):
        raise ValueError("the ratio of ratios needs values in all four arms")
    if min(min(s) for s in samples) <= 0:
        raise ValueError("durations must be positive")
    rng = random.Random(seed)

    def med(sample: Sequence[float]) -> float:
        return stats.median(rng.choices(sample, k=len(sample)))

    values = []
    for _ in range(resamples):
        b1, bn, c1, cn = (med(s) for s in samples)
        values.append((cn / c1) / (bn / b1))
    alpha = 1.0 - confidence
    return stats.quantile(values, alpha / 2), stats.quantile(values, 1 - alpha / 2)


SMALLER, LARGER, UNCLEAR, UNKNOWN = "smaller", "larger", "no clear difference", "unknown"


def _estimate(value: float | None, ci: tuple[float, float] | None, note: str = "") -> dict:
    return {"ratio": value, "ci": list(ci) if ci else None, "note": note}


def _row(verdict, d: Design, cp: int, metric: str) -> dict:
    t = verdict.thresholds
    arms = {a.name: a for a in verdict.arms}
    b1, bn = arms[d.base[d.baseline_cp]].samples.get(metric, []), arms[d.base[cp]].samples.get(metric, [])
    c1, cn = arms[d.candidate[d.baseline_cp]].samples.get(metric, []), arms[d.candidate[cp]].samples.get(metric, [])
    options = {"min_n": t.min_counted_steps, "confidence": t.confidence, "resamples": t.resamples, "seed": t.seed}
    base_overhead = stats.compare(b1, bn, **options)
    cand_overhead = stats.compare(c1, cn, **options)
    cp1_change = stats.compare(b1, c1, **options)  # does the candidate change the CP=1 baseline itself?
    row = {"cp": cp, "metric": metric, "base_overhead": base_overhead.to_json(),
           "candidate_overhead": cand_overhead.to_json(), "baseline_cp_change": cp1_change.to_json()}
    if base_overhead.ratio is None or cand_overhead.ratio is None or base_overhead.ratio <= 0:
        note = base_overhead.note or cand_overhead.note or "no overhead ratio"
        row.update(ratio_of_ratios=_estimate(None, None, note), conclusion=UNKNOWN)
        return row
    value = cand_overhead.ratio / base_overhead.ratio
    if min(len(s) for s in (b1, bn, c1, cn)) < t.min_counted_steps:
        row.update(ratio_of_ratios=_estimate(value, None, f"too few counted steps for an interval (need >= "
                                                          f"{t.min_counted_steps} per arm)"), conclusion=UNKNOWN)
        return row
    ci = bootstrap_ratio_of_ratios_ci(b1, bn, c1, cn, confidence=t.confidence, resamples=t.resamples, seed=t.seed)
    conclusion = SMALLER if ci[1] < 1 else LARGER if ci[0] > 1 else UNCLEAR
    row.update(ratio_of_ratios=_estimate(value, ci), conclusion=conclusion)
    return row


def analyze(verdict, d: Design) -> dict:
    """The `ab` section of verdict.json: per candidate CP and timing metric, both overheads and their ratio.

    The primary metric's rows decide `conclusion`; the other timings show where the change lands.
    """
    from cpverify.verdict import short_metric, timing_metrics

    t = verdict.thresholds
    cps = [cp for cp in sorted(d.base) if cp != d.baseline_cp]
    rows = []
    for cp in cps:
        for metric in timing_metrics(t):
            if any(arm.samples.get(metric) for arm in verdict.arms):
                rows.append(_row(verdict, d, cp, metric))
    primary = [r for r in rows if r["metric"] == t.primary_metric]
    return {
        "base": {"label": d.base_label, "arms": {str(cp): name for cp, name in sorted(d.base.items())}},
        "candidate": {"label": d.candidate_label, "arms": {str(cp): name for cp, name in sorted(d.candidate.items())}},
        "baseline_cp": d.baseline_cp,
        "metric": t.primary_metric,
        "confidence": t.confidence,
        "method": ("ratio of the candidate's to the base's CP overhead, each overhead the ratio of medians "
                   "cpN/cp1; percentile bootstrap resampling the four arms independently"),
        "conclusion": _overall(primary),
        "summary": summary_line(primary, d, t.confidence, short_metric(t.primary_metric)),
        "rows": rows,
    }


def _overall(primary_rows: list[dict]) -> str:
    found = {r["conclusion"] for r in primary_rows}
    if not found or UNKNOWN in found:
        return UNKNOWN
    return found.pop() if len(found) == 1 else UNCLEAR


def _fmt(estimate: dict, confidence: float) -> str:
    if estimate.get("ratio") is None:
        return "–"
    ci = estimate.get("ci")
    return f"{estimate['ratio']:.2f}×" + (f" ({confidence:.0%} CI {ci[0]:.2f}–{ci[1]:.2f})" if ci else " (no CI)")


def summary_line(primary_rows: list[dict], d: Design, confidence: float, metric: str) -> str:
    """One sentence per candidate CP, e.g. for the headline of verdict.md."""
    parts = []
    for r in primary_rows:
        cp = f"CP={r['cp']}/CP={d.baseline_cp}"
        verdict_word = {SMALLER: "smaller", LARGER: "LARGER", UNCLEAR: "no clear difference",
                        UNKNOWN: "undetermined"}[r["conclusion"]]
        parts.append(f"{metric} overhead {cp}: candidate {d.candidate_label} {_fmt(r['candidate_overhead'], confidence)}"
                     f" vs base {d.base_label} {_fmt(r['base_overhead'], confidence)}; candidate/base "
                     f"{_fmt(r['ratio_of_ratios'], confidence)} → {verdict_word}")
    return "; ".join(parts) if parts else "no comparable timings"
