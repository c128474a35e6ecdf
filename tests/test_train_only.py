"""The train-only profile and the deep lint: slime's trainer on rollouts cpverify writes, slime's own
grad-norm check as the numerics gate, and slime's own parser as a lint stage.

slime itself cannot run here (GPUs, Megatron, SGLang); tests/fake_slime stands in for it: its
parse_args has slime's structure and messages, its Sample and rollout writer slime's format (pickled:
no torch here), its train.py slime's grad-norm save/load/assert. The same code ran against the real
slime 624b824a on a CPU host (benchmarks/deep-lint-real-slime.md).
"""

from __future__ import annotations

import json
import os
import pickle
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpverify import fixes
from cpverify.argv import options as argv_options
from cpverify.errors import InputError
from cpverify.lint import ERROR, WARNING, Finding
from cpverify.lint import deep as deep_lint
from cpverify.model import Arm
from cpverify.overrides import with_overrides
from cpverify.steps.lint import error_classes
from cpverify.plan import (
    GRAD_NORM_LOAD,
    GRAD_NORM_SAVE,
    SLIME_CP_FLAG,
    TRAIN_ONLY_PROMPT_LEN,
    build_plan,
    cp_only_diff,
)
from cpverify.profiles import SMOKE_TRAIN_ARGS, TRAIN_ONLY_TRAIN_ARGS, get_profile
from cpverify.runners.workload_env import workload_env
from cpverify.verdict.pair_checks import FIX_GRAD_NORM_CHECK
from helpers.hfcache import make_model_cache

ROOT = Path(__file__).resolve().parent.parent
FAKE_SLIME = ROOT / "tests" / "fake_slime"
TRAIN_ONLY = get_profile("train-only")


def options(argv) -> dict[str, list[str]]:
    return argv_options(tuple(argv))[1]


# --- the profile and its plan ---------------------------------------------------------------------


def test_train_only_is_smoke_without_what_only_rollout_uses():
    smoke, train = options(SMOKE_TRAIN_ARGS), options(TRAIN_ONLY_TRAIN_ARGS)
    dropped = set(smoke) - set(train)
    assert dropped == {"--colocate", "--input-key", "--apply-chat-template", "--rollout-shuffle",
                       "--rollout-num-gpus-per-engine", "--sglang-mem-fraction-static", "--custom-rm-path",
                       "--ci-test", "--ci-disable-kl-checker", "--rollout-max-response-len", "--max-tokens-per-gpu"}
    assert set(train) - set(smoke) == {"--attention-backend"} and train["--attention-backend"] == ["fused"]
    assert {f: v for f, v in train.items() if f in smoke and smoke[f] != v} == {"--num-rollout": ["24"]}
    assert TRAIN_ONLY.train_only and TRAIN_ONLY.seq_lens == (1024,) and TRAIN_ONLY.warmup_steps is None


def test_train_only_arms_read_the_rollouts_and_hand_the_grad_norms_over():
    plan = build_plan(with_overrides(TRAIN_ONLY, seq_lens="1024,8192"), run_id="r1", model_dir="/m", work_dir="/w")
    assert [a.name for a in plan.arms] == ["cp1-s1k", "cp2-s1k", "cp1-s8k", "cp2-s8k"]
    assert plan.comparisons == (("cp1-s1k", "cp2-s1k"), ("cp1-s8k", "cp2-s8k"))
    cp1, cp2 = (options(plan.arm(n).argv) for n in ("cp1-s8k", "cp2-s8k"))
    assert cp1["--load-debug-rollout-data"] == cp2["--load-debug-rollout-data"] == [
        "/w/train-only/s8k/rollout_{rollout_id}.pt"]
    assert cp1[GRAD_NORM_SAVE] == cp2[GRAD_NORM_LOAD] == ["/w/train-only/s8k/grad-norm-{role}-{rollout_id}-{step_id}.pt"]
    assert GRAD_NORM_LOAD not in cp1 and GRAD_NORM_SAVE not in cp2
    assert cp2["--rollout-max-response-len"] == ["8192"] and cp2["--max-tokens-per-gpu"] == [str(8192 + 64)]
    assert "--debug-train-only" in cp2 and "--prompt-data" not in cp2  # no prompts: the rollouts are given
    # one data command per length, made from the arms' own numbers
    data = {c.name: options(c.argv) for c in plan.data_commands}
    assert set(data) == {"rollouts-s1k", "rollouts-s8k"}
    assert data["rollouts-s8k"]["--out"] == cp1["--load-debug-rollout-data"]
    assert data["rollouts-s8k"]["--response-len"] == ["8192"]
    assert data["rollouts-s8k"]["--num-rollout"] == cp1["--num-rollout"] == ["24"]
    assert data["rollouts-s8k"]["--prompt-len"] == [str(TRAIN_ONLY_PROMPT_LEN)]


def test_commands_sh_writes_the_rollouts_before_the_arms(tmp_path):
    script = build_plan(TRAIN_ONLY, run_id="r1", work_dir="/w").commands_sh()
    assert script.index("prepare_data() {") < script.index("\nprepare_data\n") < script.index('run_arm "$arm"')
    assert "-m cpverify.slime_hooks.make_rollouts" in script
    # not the profile's hub revision: a local directory (--model-dir) is named as what it is
    assert "# Model: the local directory /root/models/Qwen2.5-0.5B-Instruct" in script
    hub = build_plan(TRAIN_ONLY, run_id="r1", model_dir=f"/c/snapshots/{TRAIN_ONLY.model_revision}").commands_sh()
    assert f"# Model {TRAIN_ONLY.model_repo}@{TRAIN_ONLY.model_revision} in /c/snapshots/" in hub
    (tmp_path / "c.sh").write_text(script)
    assert subprocess.run(["bash", "-n", str(tmp_path / "c.sh")], check=False).returncode == 0


def test_the_plan_owns_the_train_only_flags():
    with pytest.raises(InputError, match="the plan sets them"):
        with_overrides(TRAIN_ONLY, train_args=(*TRAIN_ONLY_TRAIN_ARGS, "--max-tokens-per-gpu", "4096"))
    with pytest.raises(InputError, match="positive seq_lens"):
        with_overrides(TRAIN_ONLY, seq_lens="")
    with pytest.raises(InputError, match="seq_lens applies to the probe and train-only"):
        with_overrides(get_profile("smoke"), seq_lens="1024")


def _pair(save_a=None, load_a=None, save_b=None, load_b=None, extra_b=()):
    def arm(name, cp, save, load, extra=()):
        argv = ["python3", "train.py", "--num-rollout", "8"]
        argv += [GRAD_NORM_SAVE, save] if save else []
        argv += [GRAD_NORM_LOAD, load] if load else []
        return Arm(name, cp, (*argv, *extra, SLIME_CP_FLAG, str(cp)), (), "/s")
    return arm("cp1", 1, save_a, load_a), arm("cp2", 2, save_b, load_b, extra_b)


def test_the_grad_norm_handoff_is_the_one_extra_difference_a_pair_may_have():
    assert len(cp_only_diff(*_pair(save_a="/p", load_b="/p"), allowed={SLIME_CP_FLAG})) == 3
    for wrong in ({"save_a": "/p", "load_b": "/q"},  # loads another file
                  {"save_a": "/p", "save_b": "/p"},  # both save
                  {"load_a": "/p", "load_b": "/p"},  # the baseline loads
                  {"save_a": "/p"},  # saved, never checked
                  {"load_b": "/p"},  # loads what nobody saved
                  {"save_a": "/p", "load_b": "/p", "save_b": "/p"},  # the candidate saves too
                  {"save_a": "/p", "load_b": "/p", "extra_b": ("--lr", "1e-5")}):  # and something else changes
        with pytest.raises(InputError, match="differ in more than the CP size|grad-norm check wrongly"):
            cp_only_diff(*_pair(**wrong), allowed={SLIME_CP_FLAG})


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["save_a", "load_a", "save_b", "load_b"]), st.sampled_from(["/p", "/q"])))
def test_only_save_then_load_of_one_path_passes(wiring):
    exact = wiring.keys() == {"save_a", "load_b"} and wiring["save_a"] == wiring["load_b"]
    if exact or not wiring:
        assert cp_only_diff(*_pair(**wiring), allowed={SLIME_CP_FLAG})
    else:
        with pytest.raises(InputError):
            cp_only_diff(*_pair(**wiring), allowed={SLIME_CP_FLAG})


def test_a_local_slime_environment_keeps_its_pythonpath_first():
    """The profile's PYTHONPATH=/root/Megatron-LM is slime's image layout; on the user's own slime
    environment (the device kit puts Megatron, TE, Ray and cpverify on PYTHONPATH) it must not
    replace theirs, or slime cannot import Megatron. Failed before: the plan's value replaced it."""
    env, _ = workload_env(TRAIN_ONLY.env, base={"PYTHONPATH": "/kit/site:/kit/megatron:/repo", "PATH": "/bin"})
    assert env["PYTHONPATH"] == "/kit/site:/kit/megatron:/repo:/root/Megatron-LM"
    assert workload_env(TRAIN_ONLY.env, base={"PATH": "/bin"})[0]["PYTHONPATH"] == "/root/Megatron-LM"


# --- the rollouts -------------------------------------------------------------------------------------


def _make_rollouts(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cpverify.slime_hooks.make_rollouts", "--out", f"{out}/rollout_{{rollout_id}}.pt",
         "--num-rollout", "3", "--rollout-batch-size", "2", "--n-samples-per-prompt", "4", "--prompt-len", "8",
         "--response-len", "32", *extra],
        cwd=FAKE_SLIME, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60,
        check=False)


def test_rollouts_are_slimes_format_seeded_and_written_once(tmp_path):
    assert _make_rollouts(tmp_path / "a").returncode == 0
    assert _make_rollouts(tmp_path / "b").returncode == 0
    for i in range(3):  # the same request writes the same data anywhere
        assert (tmp_path / "a" / f"rollout_{i}.pt").read_bytes() == (tmp_path / "b" / f"rollout_{i}.pt").read_bytes()
    data = pickle.loads((tmp_path / "a" / "rollout_1.pt").read_bytes())  # the stand-in pickles what torch.save would
    assert data["rollout_id"] == 1 and len(data["samples"]) == 8
    groups = {}
    for sample in data["samples"]:
        assert len(sample["tokens"]) == 8 + 32 and sample["response_length"] == 32 and sample["status"] == "completed"
        assert 0 <= sample["reward"] < 1 and all(4 <= t < 4096 for t in sample["tokens"])
        groups.setdefault(sample["group_index"], set()).add(tuple(sample["tokens"][:8]))
    assert len(groups) == 2 and all(len(prompts) == 1 for prompts in groups.values())  # a group shares its prompt
    written = [(tmp_path / "a" / f"rollout_{i}.pt").stat().st_mtime_ns for i in range(3)]
    assert _make_rollouts(tmp_path / "a").returncode == 0
    assert [(tmp_path / "a" / f"rollout_{i}.pt").stat().st_mtime_ns for i in range(3)] == written  # reused
    assert _make_rollouts(tmp_path / "a", "--seed", "7").returncode == 0
    assert (tmp_path / "a" / "rollout_0.pt").read_bytes() != (tmp_path / "b" / "rollout_0.pt").read_bytes()


# --- deep lint: turning slime's answers into findings -------------------------------------------------


def _plan():
    return build_plan(TRAIN_ONLY, run_id="r1", work_dir="/w")


def _result(name="cp2-s1k", **fields):
    return {"name": name, "ok": not fields.get("stage"), "stage": None, "error": None, "unknown": [], "schedule": None,
            "needs": [], **fields}


def test_slimes_refusal_is_an_error_quoting_slime_with_the_verdicts_fix():
    found = deep_lint.findings(_plan(), [_result(stage="validation", error=(
        "AssertionError: num_epoch is not set, but num_rollout is not set, please set --num-rollout or --num-epoch"))],
        exit_code=0, output="", arch_assumed=False, classify=error_classes)
    assert [(f.severity, f.where) for f in found] == [(ERROR, "cp2-s1k")]
    assert found[0].fix == fixes.for_error("slime_num_rollout_not_set")
    assert "num_rollout is not set" in found[0].why  # slime's own assertion, quoted
    hf = deep_lint.findings(_plan(), [_result(stage="validation", error=(
        "AssertionError: hf_validate_args failed: hidden_size in hf config 896 is not equal to hidden_size None, "
        "please check the config."))], exit_code=0, output="", arch_assumed=False, classify=error_classes)
    assert "MODEL_ARGS" in hf[0].fix  # the fine class's fix, not the generic one for any assertion
    argparse_error = deep_lint.findings(_plan(), [_result(stage="argparse", error=(
        "train.py: error: argument --train-backend: invalid choice: 'fsdp' (choose from 'megatron')"))],
        exit_code=0, output="", arch_assumed=False, classify=error_classes)
    assert argparse_error[0].flag == "--train-backend"


def test_unconsumed_flags_are_errors_except_sglang_flags_in_train_only_mode():
    found = deep_lint.findings(_plan(), [_result(unknown=["--seq-lenght", "--sglang-mem-fraction-static"])],
                               exit_code=0, output="", arch_assumed=False, classify=error_classes)
    assert {(f.flag, f.severity) for f in found} == {("--seq-lenght", ERROR), ("--sglang-mem-fraction-static", WARNING)}


def test_without_slime_the_static_lint_stands_alone_with_a_warning():
    found = deep_lint.findings(_plan(), [_result(stage="import", error="ModuleNotFoundError: No module named 'slime'")],
                               exit_code=0, output="", arch_assumed=True, classify=error_classes)
    assert [(f.severity, f.flag) for f in found] == [(WARNING, "deep lint")]
    crashed = deep_lint.findings(_plan(), [], exit_code=139, output="Segmentation fault", arch_assumed=False,
                                 classify=error_classes)
    assert [(f.severity, f.flag) for f in crashed] == [(WARNING, "deep lint")]
    no_cpverify = deep_lint.findings(_plan(), [], exit_code=1, output="/usr/bin/python3: Error while finding module "
                                     "specification for 'cpverify.slime_hooks.deep_lint' (ModuleNotFoundError: No "
                                     "module named 'cpverify')", arch_assumed=False, classify=error_classes)
    assert [(f.severity, f.flag) for f in no_cpverify] == [(ERROR, "cpverify")]


def test_where_slimes_parsers_ran_they_decide_which_flags_exist():
    static = [Finding(WARNING, "--new-flag", "not a flag of slime 624b824a", "check", where="cp2-s1k"),
              Finding(WARNING, "--gone-flag", "not a flag of slime 624b824a", "check", where="cp2-s1k"),
              Finding(ERROR, "--rollout-num", "slime has no --rollout-num", "--num-rollout 8", where="cp2-s1k")]
    results = [_result(unknown=["--gone-flag", "--rollout-num"])]
    deep = deep_lint.findings(_plan(), results, exit_code=0, output="", arch_assumed=False, classify=error_classes)
    merged = deep_lint.merge(static, deep, results)
    # --new-flag: this slime consumes it, the static warning goes; --gone-flag and --rollout-num once each
    assert sorted((f.flag, f.severity) for f in merged) == [("--gone-flag", WARNING), ("--rollout-num", ERROR)]


def test_the_gpu_architecture_comes_from_the_doctors_facts():
    report = {"facts": {"gpus": {"value": {"gpus": [{"index": 0, "compute_capability": "9.0"},
                                                    {"index": 1, "compute_capability": "10.0"}]}}}}
    assert deep_lint.arch_from_doctor(report, (0,)) == 9 and deep_lint.arch_from_doctor(report, (1,)) == 10
    assert deep_lint.arch_from_doctor(None, (0,)) is None


def test_the_workload_side_finds_what_no_parser_consumed(tmp_path):
    """cpverify.slime_hooks.deep_lint on the stand-in's parse_args, as `cpverify run` calls it."""
    model = make_model_cache(tmp_path / "hf", TRAIN_ONLY.model_repo, TRAIN_ONLY.model_revision)
    plan = build_plan(TRAIN_ONLY, run_id="r1", model_dir=str(model), work_dir=str(tmp_path))
    request = deep_lint.request(plan, 9)
    request["arms"][1]["argv"] += ["--seq-length", "4096"]  # Megatron has it; this slime's parsers do not
    request["arms"].append({"name": "noenv", "argv": request["arms"][1]["argv"], "env": {}})
    (tmp_path / "req.json").write_text(json.dumps(request))
    proc = subprocess.run([sys.executable, "-m", "cpverify.slime_hooks.deep_lint", str(tmp_path / "req.json")],
                          cwd=FAKE_SLIME, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    results = {r["name"]: r for r in deep_lint.results_from(proc.stdout)}
    assert results["cp1-s1k"]["ok"] and results["cp1-s1k"]["unknown"] == []
    assert results["cp1-s1k"]["schedule"]["samples"] == 8
    assert results["cp2-s1k"]["unknown"] == ["--seq-length"] and results["cp2-s1k"]["ok"]
    assert results["noenv"]["stage"] == "validation" and "CUDA_DEVICE_MAX_CONNECTIONS" in results["noenv"]["error"]


# --- end to end: cpverify run --profile train-only (local runner, stand-in slime) ------------------


@pytest.fixture
def workspace(tmp_path):
    make_model_cache(tmp_path / "cache" / "hf", TRAIN_ONLY.model_repo, TRAIN_ONLY.model_revision)
    return tmp_path


def run_train_only(workspace: Path, *extra: str, slime: Path = FAKE_SLIME, run_id: str = "t1"):
    cmd = [sys.executable, "-m", "cpverify", "run", "--profile", "train-only", "--runner", "local", "--gpus", "none",
           "--slime-dir", str(slime), "--cache", str(workspace / "cache"), "--out", str(workspace / "artifacts"),
           "--run-id", run_id, "--only", "fetch,compileall,lint,cp1,cp2,verdict", *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CPVERIFY_LOCK_DIR": str(workspace), "FAKE_SLIME_STEP_S": "0.01"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT, check=False)
    return proc, workspace / "artifacts" / run_id


def _check(verdict: dict, prefix: str) -> dict:
    return next(c for c in verdict["checks"] if c["name"].startswith(prefix))


def test_train_only_passes_with_slimes_grad_norm_check_as_the_numerics_gate(workspace):
    proc, run_dir = run_train_only(workspace, "--seq-len", "1K,2K")
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["status"] == "PASS"
    assert [(c["baseline"], c["candidate"]) for c in verdict["comparisons"]] == [("cp1-s1k", "cp2-s1k"),
                                                                                ("cp1-s2k", "cp2-s2k")]
    gate = _check(verdict, "numerics:cp2-s1k")
    assert gate["status"] == "pass"
    assert "all 24 steps" in gate["detail"]  # how many steps slime checked: only the row says
    for length in ("s1k", "s2k"):  # written once, in the run's work directory, read by both arms
        assert len(list((run_dir / "work" / "train-only" / length).glob("rollout_*.pt"))) == 24
        assert len(list((run_dir / "work" / "train-only" / length).glob("grad-norm-actor-*.pt"))) == 24
    state = json.loads((run_dir / "state.json").read_text())
    assert [r["name"] for r in state["deep_lint"]] == ["cp1-s1k", "cp2-s1k", "cp1-s2k", "cp2-s2k"]
    assert all(r["ok"] for r in state["deep_lint"])
    assert "prepare_data" in (run_dir / "commands.sh").read_text()


def test_gradients_that_differ_under_cp_fail_the_verdict(workspace):
    env = ",".join(f"{k}={v}" for k, v in TRAIN_ONLY.env) + ",FAKE_SLIME_GRAD_DRIFT=0.05"
    proc, run_dir = run_train_only(workspace, "--set", f"env={env}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["status"] == "FAIL"
    gate = _check(verdict, "numerics:cp2-s1k")
    assert gate["status"] == "fail" and gate["effect"] == "FAIL" and gate["fix"] == fixes.for_error(
        "slime_grad_norm_mismatch")


def test_a_grad_norm_check_the_arms_logs_do_not_show_is_never_claimed(workspace):
    """The plan passes --ci-load-grad-norm; the slime that ran never got it (its argument dump says
    None, nothing was compared): the gate reports the log, not the plan."""
    env = ",".join(f"{k}={v}" for k, v in TRAIN_ONLY.env) + ",FAKE_SLIME_DROP_CI=1"
    proc, run_dir = run_train_only(workspace, "--set", f"env={env}")
    assert proc.returncode == 3, proc.stderr[-3000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    gate = _check(verdict, "numerics:cp2-s1k")
    assert verdict["status"] == "INCONCLUSIVE" and gate["status"] == "fail" and gate["effect"] == "INCONCLUSIVE"
    assert gate["fix"] == FIX_GRAD_NORM_CHECK  # the check did not run: the fix is to make it run


def test_deep_lint_stops_a_flag_this_slime_does_not_have_before_any_arm(workspace):
    """--seq-length is a Megatron flag (the static list knows it) that the slime under test (the
    stand-in) does not consume: only slime's own parsers can tell."""
    args = shlex.join((*TRAIN_ONLY_TRAIN_ARGS, "--seq-length", "4096"))
    proc, run_dir = run_train_only(workspace, "--set", f"train_args={args}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    lint = json.loads((run_dir / "state.json").read_text())["lint"]
    assert {f["severity"] for f in lint if f["flag"] == "--seq-length"} == {ERROR}  # each arm's finding
    assert not (run_dir / "logs" / "cp1-s1k.log").exists()


def test_deep_lint_falls_back_to_the_static_lint_where_slime_does_not_import(workspace, tmp_path):
    old = tmp_path / "old-slime"
    shutil.copytree(FAKE_SLIME, old)
    (old / "slime" / "utils" / "arguments.py").unlink()
    proc, run_dir = run_train_only(workspace, "--only", "fetch,lint", slime=old)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lint = json.loads((run_dir / "state.json").read_text())["lint"]
    fallback = [f for f in lint if f["flag"] == "deep lint"]
    assert len(fallback) == 1 and fallback[0]["severity"] == WARNING
