"""The slime revisions a run tests, on this machine: two git refs of one checkout, each exported
with `git archive` into the run directory (the user's clone is only read), or two checkouts
(`--slime-dir A --slime-dir-candidate B`). The A/B's plan is cpverify.plan.ab, its statistics
cpverify.verdict.ab."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cpverify.errors import InputError
from cpverify.model import BASE, CANDIDATE

_EXPORT_MARKER = ".cpverify-export"


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


def export_ref(repo: Path | str, ref: str, dest_root: Path | str, *, role: str = BASE,
               export: bool = True) -> Revision:
    """The tree of `ref` in `repo`, written once to dest_root/slime-<commit12> (`git archive`).

    Reads the repository only: no checkout, no worktree, nothing changes in the user's clone.
    An export that exists already (same commit) is reused, so every step of a run sees one tree.
    `export=False` writes nothing: the revision where the export would be (`cpverify plan`).
    """
    repo = Path(repo).expanduser().resolve()
    if not (repo / ".git").exists():
        raise InputError(f"{repo} is not a git checkout, so --slime-ref cannot be resolved in it",
                         "point --slime-dir at a git clone of slime (git clone https://github.com/THUDM/slime)")
    commit = _commit_of(repo, ref)
    dest = Path(dest_root) / f"slime-{commit[:12]}"
    label = f"{ref}@{commit[:12]}" if not commit.startswith(ref) else commit[:12]
    marker = dest / _EXPORT_MARKER
    if not export or (marker.is_file() and marker.read_text().strip() == commit):
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
              local: bool = True, export: bool = True) -> tuple[Revision, Revision | None] | None:
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
        base = export_ref(slime_dir, slime_ref, export_root, role=BASE, export=export)
        candidate = export_ref(slime_dir, slime_ref_candidate, export_root, role=CANDIDATE,
                               export=export) if slime_ref_candidate else None
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
