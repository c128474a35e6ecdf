"""CP x sequence-length matrices and the A/B of two slime revisions.

slime cannot run here: the end-to-end runs use tests/fake_slime/train.py (slime's real log
formats; its CP cost is steered by FAKE_SLIME_CP_FACTOR, whose default each "revision" sets
differently) under the real local runner, orchestrator, verdict and report. The statistics
are checked on logs built by tests/helpers/slime_log.py in slime's real formats.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpverify import revisions, run_spec, workspace
from cpverify.cli import build_parser, main
from cpverify.errors import EXIT_FAIL, InputError
from cpverify.model import round_name
from cpverify.overrides import resolve_profile
from cpverify.parse import parse_file
from cpverify.plan import PROBE_CP_FLAG, arm_diff, build_plan
from cpverify.plan import ab as plan_ab
from cpverify.profiles import get_profile
from cpverify.verdict import ArmEvidence, Thresholds, ab, across, decide, stats
from helpers.hfcache import make_model_cache
from helpers.rounds import ROUNDS
from helpers.slime_log import synthetic_arm

HERE = Path(__file__).resolve().parent
FAKE_SLIME = HERE / "fake_slime"
SCHEMA = json.loads(resources.files("cpverify").joinpath("data/verdict.schema.json").read_text())


@pytest.fixture(autouse=True)
def private_gpu_locks(tmp_path, monkeypatch):
    # the pipeline takes GPU lock files; other test sessions on this host must not collide with these
    monkeypatch.setenv("CPVERIFY_LOCK_DIR", str(tmp_path / "locks"))
    (tmp_path / "locks").mkdir()


def run_args(*argv: str):
    return build_parser().parse_args(["run", *argv])


def profile_for(*argv: str):
    args = run_args(*argv)
    return resolve_profile(args.profile, toml=args.config,
                           assignments=[*args.assignments, *run_spec.matrix_assignments(args)])


# -- matrices ---------------------------------------------------------------------------------


def test_cp_and_seq_len_flags_make_a_probe_matrix_compared_against_cp1():
    profile = profile_for("--profile", "probe", "--set", "gpus=4", "--cp", "1,2,4", "--seq-len", "8K,32768,128k")
    assert profile.cp_sizes == (1, 2, 4) and profile.seq_lens == (8192, 32768, 131072)
    plan = build_plan(profile, run_id="m")
    assert [a.name for a in plan.arms] == [f"cp{cp}-s{s}k" for s in (8, 32, 128) for cp in (1, 2, 4)]
    assert list(plan.comparisons) == [(f"cp1-s{s}k", f"cp{cp}-s{s}k") for s in (8, 32, 128) for cp in (2, 4)]
    for baseline, candidate in plan.comparisons:  # each pair differs in the CP flag only
        assert [line.split(":")[0] for line in arm_diff(plan.arm(baseline), plan.arm(candidate))] == [PROBE_CP_FLAG]
    assert all(arm.argv[arm.argv.index("--nproc-per-node") + 1] == "4" for arm in plan.arms)  # same GPUs each


def test_matrix_flags_win_over_set_and_are_checked():
    assert profile_for("--profile", "smoke", "--set", "cp_sizes=1,2", "--set", "gpus=4", "--cp", "1 4").cp_sizes == (1, 4)
    with pytest.raises(InputError, match="--cp"):
        run_spec.matrix_assignments(run_args("--cp", "1,two"))
    with pytest.raises(InputError, match="do not divide gpus=2"):  # CP 4 on the profile's 2 GPUs
        profile_for("--profile", "probe", "--cp", "1,2,4")
    assert main(["run", "--profile", "smoke", "--seq-len", "8K", "--runner", "local", "--only", "lint"]) == 2


def test_a_cp_sweep_runs_baseline_then_candidates_and_compares_each_with_cp1(tmp_path, capsys):
    """--cp 1,2,4 through the real pipeline: the cp1 step runs CP=1 only, the cp2 step every other CP."""
    common = ["run", "--profile", "smoke", "--runner", "local", "--gpus", "none", "--set", "gpus=4", "--cp", "1,2,4",
              "--slime-dir", str(FAKE_SLIME), "--out", str(tmp_path), "--run-id", "sweep"]
    run_dir = tmp_path / "sweep"
    assert main([*common, "--only", "cp1"]) == 0
    assert sorted(json.loads((run_dir / "state.json").read_text())["arms"]) == ["cp1"]
    assert main([*common, "--only", "cp2"]) == 0
    order = json.loads((run_dir / "state.json").read_text())["rounds"]["order"]
    # round 1 (the cp1 step, then the cp2 step), then every arm per round, each round the reverse of the last
    assert order[:6] == ["cp1", "cp2", "cp4", "cp4.r2", "cp2.r2", "cp1.r2"] and len(order) % 3 == 0
    code = main([*common, "--only", "verdict"])
    verdict = json.loads((run_dir / "verdict.json").read_text())
    jsonschema.validate(verdict, SCHEMA)
    assert [(c["baseline"], c["candidate"]) for c in verdict["comparisons"]] == [("cp1", "cp2"), ("cp1", "cp4")]
    ratios = [c["metrics"]["perf/actor_train_time"]["ratio"] for c in verdict["comparisons"]]
    assert all(1.0 < r < 1.1 for r in ratios)  # fake slime's default CP cost: 1.05
    assert code == 0 and verdict["status"] == "PASS"
    assert "ab" not in verdict  # one revision: no A/B section
    assert "cp.png" in (run_dir / "verdict.md").read_text()  # three CPs: time vs CP is plotted
    assert "CP=4 / CP=1" in (run_dir / "verdict.md").read_text()


# -- A/B: statistics ----------------------------------------------------------------------------


def test_ratio_of_ratios_across_rounds():
    rounds = [[[1.0, 1.02, 0.98]] * 2, [[1.6, 1.63, 1.58]] * 2, [[1.0, 0.97, 1.02]] * 2, [[1.1, 1.12, 1.08]] * 2]
    est = across.ratio_of_ratios(rounds, confidence=0.95)
    assert [e.statistic for e in est.estimates] == list(stats.STATISTICS) and est.rounds == (2, 2)
    for e in est.estimates:
        assert e.ratio == pytest.approx((1.1 / 1.0) / (1.6 / 1.0), rel=0.02)
        assert e.ci[0] < e.ratio < e.ci[1]
    assert across.least_changed(est) in est.estimates
    assert across.ratio_of_ratios(rounds, confidence=0.95) == est  # the same logs, the same interval
    missing = across.ratio_of_ratios([[[1.0]], [], [[1.0]], [[1.0]]], confidence=0.95)
    assert missing.ratio is None and missing.ci is None
    assert across.least_changed(missing) is None


bounds = st.tuples(st.floats(0.2, 5.0), st.floats(1.0, 3.0)).map(lambda b: (b[0], b[0] * b[1]))


@given(median=bounds, mean=bounds)
def test_an_ab_reports_a_change_only_when_both_statistics_show_it(median, mean):
    """least_changed: of the median's and the mean's ratio of ratios, the one that says less: an
    interval holding 1 whenever either does, else the one coming nearer to 1."""
    est = stats.RatioEstimate(tuple(stats.Estimate(s, math.sqrt(low * high), (low, high)) for s, (low, high)
                                    in zip(stats.STATISTICS, (median, mean), strict=True)), None, 6, 6, 0.95)
    chosen = across.least_changed(est)
    holds = [e for e in est.estimates if e.ci[0] <= 1.0 <= e.ci[1]]
    if holds:
        assert chosen in holds
    else:
        def distance(e):
            return min(abs(math.log(e.ci[0])), abs(math.log(e.ci[1])))

        assert distance(chosen) == min(map(distance, est.estimates))


def _ab_verdict(tmp_path, base_factor: float, cand_factor: float, *, rollouts: int = 8, jitter: float = 0.03):
    """Four arms of ROUNDS rounds each in slime's real log format; the candidate changes only the CP=2 cost."""
    factors = {"base-cp1": 1.0, "base-cp2": base_factor, "cand-cp1": 1.0, "cand-cp2": cand_factor}
    evidence = []
    for seed, (name, factor) in enumerate(factors.items(), start=1):
        for k in range(1, ROUNDS + 1):
            log = synthetic_arm(cp=int(name[-1]), actor_train_time=factor, rollouts=rollouts, jitter=jitter,
                                seed=seed + 1000 * k)
            evidence.append(ArmEvidence(round_name(name, k), int(name[-1]), parse_file(log.write(tmp_path / f"{name}.{k}")),
                                        arm=name, round=k))
    verdict = decide(evidence, comparisons=[("base-cp1", "base-cp2"), ("cand-cp1", "cand-cp2")],
                     thresholds=Thresholds(pass_ratio=1.3))
    design = plan_ab.Design(1, {1: "base-cp1", 2: "base-cp2"}, {1: "cand-cp1", 2: "cand-cp2"}, "main@1111", "pr-1102@2222")
    verdict.ab = ab.analyze(verdict, design)
    return verdict


@pytest.mark.parametrize("base, cand, conclusion", [(1.8, 1.2, "smaller"), (1.2, 1.8, "larger"),
                                                    (1.5, 1.5, "no clear difference")])
def test_ab_verdict_states_whether_the_candidate_overhead_is_smaller(tmp_path, base, cand, conclusion):
    verdict = _ab_verdict(tmp_path, base, cand)
    section = verdict.ab
    assert section["conclusion"] == conclusion
    primary = next(r for r in section["rows"] if r["metric"] == "perf/actor_train_time")
    low, high = primary["ratio_of_ratios"]["ci"]
    assert low <= primary["ratio_of_ratios"]["ratio"] <= high
    assert low < cand / base * 1.05 and high > cand / base * 0.95  # the interval holds the true ratio
    assert primary["base_overhead"]["ratio"] == pytest.approx(base, rel=0.05)
    assert primary["candidate_overhead"]["ratio"] == pytest.approx(cand, rel=0.05)
    # every timing is tabulated, the primary metric decides
    assert {r["metric"] for r in section["rows"]} >= {"perf/log_probs_time", "perf/ref_log_probs_time"}
    data = json.loads(json.dumps(verdict.to_json()))
    jsonschema.validate(data, SCHEMA)
    assert {"schema_version", "status", "ratio", "ratio_ci", "comparisons", "checks"} <= set(data)
    assert data["ab"]["candidate"]["label"] == "pr-1102@2222"


def test_too_few_steps_leave_the_ab_undetermined(tmp_path):
    verdict = _ab_verdict(tmp_path, 1.8, 1.2, rollouts=3)  # rollout 0 is warm-up: 2 counted steps per arm
    assert verdict.ab["conclusion"] == "unknown"
    primary = next(r for r in verdict.ab["rows"] if r["metric"] == "perf/actor_train_time")
    assert primary["ratio_of_ratios"]["ci"] is None


def test_ab_table_in_verdict_md_and_summary(tmp_path):
    from cpverify import report

    verdict = _ab_verdict(tmp_path, 1.8, 1.2)
    md = report.render_markdown(verdict)
    section = md.split("**A/B of slime revisions:**", 1)[1].split("\n\n_Overhead", 1)[0]
    assert "candidate `pr-1102@2222` vs base `main@1111`" in section
    assert verdict.ab["conclusion"] == "smaller" and f"**{verdict.ab['conclusion']}**" in section
    row = next(line for line in section.splitlines() if "**actor_train**" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    primary = next(r for r in verdict.ab["rows"] if r["metric"] == "perf/actor_train_time")
    shown = [f"{primary[key]['ratio']:.2f}× [{primary[key]['ci'][0]:.2f}–{primary[key]['ci'][1]:.2f}]"
             for key in ("base_overhead", "candidate_overhead", "ratio_of_ratios")]
    assert cells[0] == "CP=2/CP=1" and cells[2:5] == shown and cells[-1] == "smaller"
    assert 0.6 < primary["ratio_of_ratios"]["ratio"] < 0.7  # 1.2 / 1.8
    told = [line for line in report.render_summary(verdict).splitlines() if line.lstrip().startswith("A/B")]
    assert len(told) == 1 and verdict.ab["conclusion"] in told[0].split()  # the summary's one A/B line


# -- A/B: revisions and the plan ------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def slime_repo(tmp_path) -> Path:
    """A git clone of fake slime with two commits: `base` costs 1.6x at CP=2, HEAD 1.1x."""
    repo = tmp_path / "slime"
    shutil.copytree(FAKE_SLIME, repo, ignore=shutil.ignore_patterns("__pycache__"))
    train = repo / "train.py"
    default = '"FAKE_SLIME_CP_FACTOR", "1.05"'
    assert default in train.read_text()
    _git(tmp_path, "init", "-q", str(repo))
    for name, value in (("user.email", "t@example.com"), ("user.name", "t")):
        _git(repo, "config", name, value)
    train.write_text(train.read_text().replace(default, '"FAKE_SLIME_CP_FACTOR", "1.6"'))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "tag", "base")
    train.write_text(train.read_text().replace('"1.6"', '"1.1"'))
    _git(repo, "commit", "-q", "-am", "optimize CP loss communication")
    return repo


def test_refs_are_exported_once_and_the_users_clone_is_left_alone(slime_repo, tmp_path):
    export_root = tmp_path / "run" / "slime"
    base, cand = revisions.revisions(slime_dir=str(slime_repo), slime_ref="base", slime_ref_candidate="HEAD",
                              export_root=export_root)
    sha = {ref: _git(slime_repo, "rev-parse", ref) for ref in ("base", "HEAD")}
    assert base.label == f"base@{sha['base'][:12]}" and cand.label == f"HEAD@{sha['HEAD'][:12]}"
    assert base.host_dir == export_root / f"slime-{sha['base'][:12]}"
    assert '"1.6"' in (base.host_dir / "train.py").read_text() and '"1.1"' in (cand.host_dir / "train.py").read_text()
    again = revisions.revisions(slime_dir=str(slime_repo), slime_ref="base", slime_ref_candidate="HEAD",
                         export_root=export_root)
    assert again == (base, cand)  # reused, not rewritten
    assert _git(slime_repo, "status", "--porcelain") == "" and len(_git(slime_repo, "worktree", "list").splitlines()) == 1
    assert sorted(p.name for p in export_root.iterdir()) == sorted(p.host_dir.name for p in (base, cand))


@pytest.mark.parametrize("flags, message", [
    ({"slime_ref_candidate": "HEAD"}, "needs --slime-ref"),
    ({"slime_ref": "nope", "slime_ref_candidate": "HEAD"}, "is not a commit"),
    ({"slime_ref": "HEAD", "slime_ref_candidate": "HEAD"}, "same revision"),
    ({"slime_ref": "base", "slime_dir_candidate": "/tmp"}, "cannot be combined"),
])
def test_bad_revision_flags_name_the_problem_and_the_fix(slime_repo, tmp_path, flags, message):
    with pytest.raises(InputError, match=message) as info:
        revisions.revisions(slime_dir=str(slime_repo), export_root=tmp_path / "x", **flags)
    assert info.value.fix


def test_ab_plan_runs_the_same_command_in_two_checkouts(tmp_path):
    plan = plan_ab.build_ab_plan(get_profile("smoke"), run_id="ab", gpus=None, model_dir="/m", data_path="/d.jsonl",
                            base_dir="/slime-under-test", base_label="main@1", candidate_dir="/slime-candidate",
                            candidate_label="pr@2")
    assert [a.name for a in plan.arms] == ["base-cp1", "base-cp2", "cand-cp1", "cand-cp2"]
    assert list(plan.comparisons) == [("base-cp1", "base-cp2"), ("cand-cp1", "cand-cp2")]
    assert arm_diff(plan.arm("base-cp2"), plan.arm("cand-cp2")) == ["workdir: /slime-under-test -> /slime-candidate"]
    assert plan_ab.design(plan) == plan_ab.Design(1, {1: "base-cp1", 2: "base-cp2"}, {1: "cand-cp1", 2: "cand-cp2"},
                                        "main@1", "pr@2")
    script = plan.commands_sh()
    assert "cd /slime-under-test" in script and "cd /slime-candidate" in script and "main@1, pr@2" in script
    assert plan_ab.design(build_plan(get_profile("smoke"), run_id="one")) is None
    with pytest.raises(InputError, match="slime profile"):
        plan_ab.build_ab_plan(get_profile("probe"), run_id="ab", gpus=None, model_dir="/m", data_path=None,
                         base_dir="/a", base_label="a", candidate_dir="/b", candidate_label="b")


def test_docker_mounts_both_checkouts_read_only_at_their_own_paths(tmp_path):
    base, cand = tmp_path / "main", tmp_path / "patched"
    base.mkdir()
    cand.mkdir()
    args = run_args("--profile", "smoke", "--runner", "docker", "--slime-dir", str(base), "--slime-dir-candidate",
                    str(cand), "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out"))
    from cpverify.artifacts import RunDir
    from cpverify.steps.context import Context

    ctx = Context(spec=run_spec.run_spec(args), run_dir=RunDir.create(base=args.out, run_id="d"))
    plan = ctx.plan
    assert {a.name: a.workdir for a in plan.arms} == {
        "base-cp1": workspace.CONTAINER_SLIME, "base-cp2": workspace.CONTAINER_SLIME,
        "cand-cp1": workspace.CONTAINER_SLIME_CANDIDATE, "cand-cp2": workspace.CONTAINER_SLIME_CANDIDATE}
    mounts = {m.target: m for m in ctx.isolated_mounts()}
    assert mounts[workspace.CONTAINER_SLIME].source == base and mounts[workspace.CONTAINER_SLIME].read_only
    assert mounts[workspace.CONTAINER_SLIME_CANDIDATE].source == cand
    assert mounts[workspace.CONTAINER_SLIME_CANDIDATE].read_only


# -- A/B: end to end ------------------------------------------------------------------------------


def test_ab_of_two_refs_end_to_end(slime_repo, tmp_path, monkeypatch):
    """--slime-ref base --slime-ref-candidate HEAD: four arms on the local runner, one verdict with the A/B."""
    # the model is fetched first: the lint runs slime's own parser, which reads the model's config.json
    profile = get_profile("smoke")
    make_model_cache(tmp_path / "cache" / "hf", profile.model_repo, profile.model_revision)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = main(["run", "--profile", "smoke", "--runner", "local", "--gpus", "none",
                 "--only", "fetch,lint,cp1,cp2,verdict", "--cache", str(tmp_path / "cache"),
                 "--slime-dir", str(slime_repo), "--slime-ref", "base", "--slime-ref-candidate", "HEAD",
                 "--out", str(tmp_path / "out"), "--run-id", "ab"])
    run_dir = tmp_path / "out" / "ab"
    verdict = json.loads((run_dir / "verdict.json").read_text())
    jsonschema.validate(verdict, SCHEMA)
    # base's CP=2 costs 1.6x (> the 1.3 threshold): the CP check of the base fails; the A/B answers the PR's question
    assert code == EXIT_FAIL and verdict["status"] == "FAIL"
    assert [(c["baseline"], c["candidate"], c["status"]) for c in verdict["comparisons"]] == [
        ("base-cp1", "base-cp2", "FAIL"), ("cand-cp1", "cand-cp2", "PASS")]
    section = verdict["ab"]
    assert section["conclusion"] == "smaller"
    primary = next(r for r in section["rows"] if r["metric"] == "perf/actor_train_time")
    assert primary["ratio_of_ratios"]["ratio"] == pytest.approx(1.1 / 1.6, rel=0.05)
    assert primary["ratio_of_ratios"]["ci"][1] < 1
    assert section["base"]["label"].startswith("base@") and section["candidate"]["label"].startswith("HEAD@")
    md = (run_dir / "verdict.md").read_text()
    assert "**A/B of slime revisions:**" in md and "`phases.png`" in md
    assert (run_dir / "phases.png").read_bytes().startswith(b"\x89PNG")
    exports = sorted((run_dir / "slime").iterdir())
    commands = (run_dir / "commands.sh").read_text()
    assert len(exports) == 2 and all(f"cd {e}" in commands for e in exports)
    assert _git(slime_repo, "status", "--porcelain") == ""
