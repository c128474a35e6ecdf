"""Profiles and plans: the arms a verification runs, what differs between them, commands.sh."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpverify.argv import options as argv_options
from cpverify.cli import plan as plan_cli
from cpverify.errors import InputError
from cpverify.model import Arm
from cpverify.overrides import load_overrides, resolve_profile, with_overrides
from cpverify.plan import arm_diff, build_plan, cp_only_diff, render
from cpverify.profiles import PROFILES, QWEN25_05B_MODEL_ARGS, get_profile

ROOT = Path(__file__).resolve().parents[1]


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cpverify")
    plan_cli.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


def options(argv) -> dict[str, list[str]]:
    return argv_options(tuple(argv))[1]


# --- profiles -------------------------------------------------------------------------------


def test_smoke_is_the_seed_run_corrected():
    smoke = get_profile("smoke")
    args = options(smoke.train_args)
    assert smoke.kind == "slime" and smoke.gpus == 2 and smoke.cp_sizes == (1, 2) and smoke.baseline_cp == 1
    assert "--rollout-num" not in args and args["--num-rollout"] == ["16"]
    rbs, n, gbs = (int(args[f][0]) for f in ("--rollout-batch-size", "--n-samples-per-prompt", "--global-batch-size"))
    assert rbs * n >= gbs and (rbs * n) % gbs == 0  # dp_schedule: at least one whole step per rollout
    assert "--sequence-parallel" not in args  # TP=1: Megatron would switch it off anyway
    assert args["--custom-rm-path"] == ["cpverify.slime_hooks.reward.length_reward"]
    assert args["--custom-megatron-init-path"] == ["cpverify.slime_hooks.layout.log_layout"]
    assert args["--attention-dropout"] == ["0.0"] and args["--hidden-dropout"] == ["0.0"]
    assert "--ci-test" in args and "--ci-disable-kl-checker" in args
    # as slime runs it: no apex outside slime's image; SGLang's KV cache as slime's own 0.5B test sizes it
    assert "--no-gradient-accumulation-fusion" in args and args["--sglang-mem-fraction-static"] == ["0.7"]
    env = smoke.env_dict
    assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["RAY_DEDUP_LOGS"] == "0"
    assert env["PYTHONPATH"] == "/root/Megatron-LM"
    assert smoke.model_repo == "Qwen/Qwen2.5-0.5B-Instruct"
    assert re.fullmatch(r"[0-9a-f]{40}", smoke.model_revision)
    assert smoke.pass_ratio == 1.3 and smoke.metric == "perf/actor_train_time"
    assert smoke.min_counted_steps == 6 and smoke.confidence == 0.95
    # each round's warm-up is found in its data (real slime: rollout 0, sometimes 1); 14 counted steps remain
    assert smoke.warmup_steps is None and int(args["--num-rollout"][0]) - 2 >= 14


def test_model_args_are_slimes_qwen25_05b_script():
    # slime scripts/models/qwen2.5-0.5B.sh at 624b824a
    assert options(QWEN25_05B_MODEL_ARGS) == {
        "--swiglu": [], "--num-layers": ["24"], "--hidden-size": ["896"], "--ffn-hidden-size": ["4864"],
        "--num-attention-heads": ["14"], "--use-rotary-position-embeddings": [], "--disable-bias-linear": [],
        "--add-qkv-bias": [], "--normalization": ["RMSNorm"], "--norm-epsilon": ["1e-6"],
        "--rotary-base": ["1000000"], "--group-query-attention": [], "--num-query-groups": ["2"],
        "--vocab-size": ["151936"],
    }


def test_long_differs_from_smoke_in_response_length_and_generation_only():
    smoke, long = options(get_profile("smoke").train_args), options(get_profile("long").train_args)
    changed = {f for f in smoke.keys() | long.keys() if smoke.get(f) != long.get(f)}
    assert changed == {"--rollout-max-response-len", "--max-tokens-per-gpu", "--custom-generate-function-path",
                       "--ci-test", "--ci-disable-kl-checker"}
    assert long["--rollout-max-response-len"] == ["8192"]
    # one whole response (+ prompt) must fit one micro-batch
    assert int(long["--max-tokens-per-gpu"][0]) > 8192
    assert long["--custom-generate-function-path"] == ["cpverify.slime_hooks.generate.generate_to_max_len"]


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(InputError) as err:
        get_profile("smok")
    assert "smok" in str(err.value) and all(name in err.value.fix for name in PROFILES)


def test_overrides_convert_cli_strings_and_validate():
    p = with_overrides(get_profile("smoke"), pass_ratio="1.5", cp_sizes="1,2", env="A=1,B=2", train_args="--x 1 --y")
    assert p.pass_ratio == 1.5 and p.cp_sizes == (1, 2)
    assert p.env == (("A", "1"), ("B", "2")) and p.train_args == ("--x", "1", "--y")
    with pytest.raises(InputError, match="unknown profile field"):
        with_overrides(get_profile("smoke"), pass_ration=1.5)
    with pytest.raises(InputError, match="does not fit"):
        with_overrides(get_profile("smoke"), gpus="two")
    with pytest.raises(InputError, match="baseline_cp 4"):
        with_overrides(get_profile("smoke"), baseline_cp=4)
    with pytest.raises(InputError, match="do not divide"):
        with_overrides(get_profile("smoke"), cp_sizes=(1, 3))
    with pytest.raises(InputError, match="the plan sets them"):
        with_overrides(get_profile("smoke"), train_args=("--context-parallel-size", "2"))


@pytest.mark.parametrize("profile, field, given, expected", [
    ("train-only", "train_only", "yes", True), ("smoke", "train_only", "off", False),
    ("smoke", "deterministic", "TRUE", True), ("smoke", "deadline_s", "60", 60.0), ("smoke", "gpus", 4.0, 4),
    ("smoke", "model_args", "--num-layers 24", ("--num-layers", "24")),
    ("probe", "seq_lens", "1024 2048", (1024, 2048)), ("probe", "kind", "probe", "probe"),
])
def test_an_override_is_read_as_the_type_the_field_declares(profile, field, given, expected):
    changed = with_overrides(get_profile(profile), **{field: given})
    assert getattr(changed, field) == expected and type(getattr(changed, field)) is type(expected)


@pytest.mark.parametrize("field, given", [("train_only", "ture"), ("deterministic", "maybe"), ("kind", "slim"),
                                          ("gpus", 2.5), ("cp_sizes", "1,two")])
def test_an_override_that_does_not_fit_its_field_is_refused_not_guessed(field, given):
    """A value the field cannot hold is bad input naming the field: `--set train_only=ture` is no
    "no" (which would plan an ordinary slime run)."""
    with pytest.raises(InputError, match=f"override {field}=") as err:
        with_overrides(get_profile("smoke"), **{field: given})
    assert field in err.value.fix


def test_the_verdict_takes_every_threshold_from_the_profile():
    """One mapping from a profile to the verdict's thresholds, so `--set deterministic=true` gates
    numerics in `cpverify run` as `--deterministic` does in `cpverify verdict`."""
    from cpverify.verdict import Thresholds, decision_rule

    profile = resolve_profile("smoke", assignments=["deterministic=true", "pass_ratio=1.7", "warmup_steps=2",
                                                    "min_counted_steps=5", "confidence=0.9", "metric=perf/step_time"])
    t = Thresholds.of(profile)
    assert (t.deterministic, t.pass_ratio, t.warmup, t.min_counted_steps, t.confidence, t.primary_metric) == (
        True, 1.7, 2, 5, 0.9, "perf/step_time")
    assert "(deterministic mode)" in decision_rule(t)
    assert not Thresholds.of(get_profile("smoke")).deterministic


def test_toml_overrides(tmp_path):
    toml = tmp_path / "o.toml"
    toml.write_text('[profile]\npass_ratio = 1.2\ncp_sizes = [1, 2]\n[profile.env]\nNCCL_DEBUG = "WARN"\n')
    assert load_overrides(toml) == {"pass_ratio": 1.2, "cp_sizes": [1, 2], "env": {"NCCL_DEBUG": "WARN"}}
    p = resolve_profile("smoke", toml=toml, assignments=["pass_ratio=1.4"])
    assert p.pass_ratio == 1.4 and p.env == (("NCCL_DEBUG", "WARN"),)  # --set wins over the file
    (tmp_path / "bad.toml").write_text("pass_ratio = = 1")
    with pytest.raises(InputError, match="not valid TOML"):
        load_overrides(tmp_path / "bad.toml")
    with pytest.raises(InputError, match="does not exist"):
        load_overrides(tmp_path / "missing.toml")


def test_profile_limits_and_dataset_path():
    smoke = get_profile("smoke")
    limits = smoke.limits()
    assert (limits.deadline_s, limits.hang_s, limits.stall_s) == (smoke.deadline_s, smoke.hang_s, smoke.stall_s)
    assert smoke.dataset_path().name == "cp_smoke.jsonl" and smoke.dataset_path().is_file()


# --- plans ----------------------------------------------------------------------------------


def test_slime_plan_arms_differ_only_in_cp():
    plan = build_plan(get_profile("smoke"), run_id="r1", gpus=[2, 3], model_dir="/m", data_path="/d/p.jsonl")
    assert [a.name for a in plan.arms] == ["cp1", "cp2"] and plan.comparisons == (("cp1", "cp2"),)
    cp1, cp2 = plan.arms
    assert cp1.argv[:2] == ("python3", "train.py") and cp1.workdir == "/root/slime"
    opts = options(cp2.argv)
    assert opts["--context-parallel-size"] == ["2"] and opts["--actor-num-gpus-per-node"] == ["2"]
    assert opts["--hf-checkpoint"] == opts["--ref-load"] == ["/m"] and opts["--prompt-data"] == ["/d/p.jsonl"]
    assert opts["--num-layers"] == ["24"]  # MODEL_ARGS are in every arm
    assert not any("=" in word and word.split("=")[0].isupper() for word in cp1.argv)  # env stays out of argv
    assert arm_diff(cp1, cp2) == ["--context-parallel-size: 1 -> 2"]
    assert plan.gpus == (2, 3)


def test_probe_plan_has_one_arm_per_cp_and_seq_len():
    plan = build_plan(get_profile("probe"), run_id="r1")
    assert [a.name for a in plan.arms] == ["cp1-s16k", "cp2-s16k", "cp1-s64k", "cp2-s64k"]
    assert plan.comparisons == (("cp1-s16k", "cp2-s16k"), ("cp1-s64k", "cp2-s64k"))
    arm = plan.arm("cp2-s64k")
    assert arm.argv == tuple(
        "python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m cpverify.probe.workload "
        "--cp 2 --seq-len 65536 --steps 20 --warmup 3".split()
    )
    assert arm.seq_len == 65536 and arm_diff(plan.arm("cp1-s64k"), arm) == ["--cp: 1 -> 2"]
    custom = build_plan(with_overrides(get_profile("probe"), seq_lens=(32768, 5000)), run_id="r")
    assert [a.name for a in custom.arms] == ["cp1-s32k", "cp2-s32k", "cp1-s5000", "cp2-s5000"]


def test_pair_that_differs_in_more_than_cp_is_refused():
    base = Arm("cp1", 1, ("python3", "train.py", "--context-parallel-size", "1", "--lr", "1e-6"), (("A", "1"),), "/s")
    other = Arm("cp2", 2, ("python3", "train.py", "--context-parallel-size", "2", "--lr", "2e-6"), (("A", "2"),), "/s")
    diff = arm_diff(base, other)
    assert diff == ["--context-parallel-size: 1 -> 2", "--lr: 1e-6 -> 2e-6", "env A: 1 -> 2"]
    with pytest.raises(InputError) as err:
        cp_only_diff(base, other, allowed={"--context-parallel-size"})
    assert "--lr: 1e-6 -> 2e-6" in str(err.value) and "env A" in str(err.value)
    with pytest.raises(InputError, match="do not differ in the CP size"):
        cp_only_diff(base, base, allowed={"--context-parallel-size"})
    moved = Arm("cp2", 2, ("python3", "train.py", "--context-parallel-size=2", "--lr", "1e-6"), (("A", "1"),), "/t")
    assert arm_diff(base, moved) == ["--context-parallel-size: 1 -> 2", "workdir: /s -> /t"]


def test_wrong_gpu_count_is_refused():
    with pytest.raises(InputError, match="runs on 2 GPUs") as err:
        build_plan(get_profile("smoke"), run_id="r", gpus=[0])
    assert "--gpus 0,1" in err.value.fix
    with pytest.raises(InputError):
        build_plan(get_profile("smoke"), run_id="r", gpus=[1, 1])


# --- commands.sh -------------------------------------------------------------------------------


def _plan_with_secret():
    profile = with_overrides(
        get_profile("smoke"),
        env=get_profile("smoke").env + (("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz0123"), ("WANDB_API_KEY", "w4nd8s3cr3t")),
        train_args=get_profile("smoke").train_args + ("--wandb-key", "k3y-v4lu3", "--use-wandb"),
    )
    return build_plan(profile, run_id="r-secret", model_dir="/models/qwen dir", data_path="/d/p.jsonl")


def test_commands_sh_never_contains_secret_values():
    plan = _plan_with_secret()
    script = plan.commands_sh()
    for value in ("hf_abcdefghijklmnopqrstuvwxyz0123", "w4nd8s3cr3t", "k3y-v4lu3"):
        assert value not in script
        assert value not in json.dumps(plan.to_json())
    assert 'export HF_TOKEN="${HF_TOKEN}"' in script
    assert '--wandb-key "${WANDB_KEY}"' in script
    assert ': "${WANDB_KEY:?' in script and ': "${HF_TOKEN:?' in script
    assert "--input-key messages" in script  # a dataset column, not a credential


def _arms_from_script(script: str, tmp_path, arm: str, extra_env: dict) -> tuple[list[str], dict]:
    """Run commands.sh with `python3` replaced by a recorder of argv and env."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    recorder = bin_dir / "python3"
    recorder.write_text(
        "#!/bin/sh\n"
        f'exec {shlex.quote(__import__("sys").executable)} -c "import json,os,sys; '
        f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ), 'cwd': os.getcwd()}}, open(os.environ['REC'], 'w'))\" \"$@\"\n"
    )
    recorder.chmod(0o755)
    sh = tmp_path / "commands.sh"
    sh.write_text(script.replace("cd /root/slime", f"cd {shlex.quote(str(tmp_path))}"))
    rec = tmp_path / f"{arm}.json"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "REC": str(rec), **extra_env}
    subprocess.run(["bash", str(sh), arm], check=True, env=env, timeout=30)
    out = json.loads(rec.read_text())
    return out["argv"], out["env"]


def test_commands_sh_reproduces_each_arm_exactly(tmp_path):
    """Runs the generated script with a recording stand-in for python3 (no slime here)."""
    plan = _plan_with_secret()
    for arm in plan.arms:
        argv, env = _arms_from_script(plan.commands_sh(), tmp_path, arm.name,
                                      {"HF_TOKEN": "tok", "WANDB_API_KEY": "w", "WANDB_KEY": "k"})
        expected = [("k" if a == "k3y-v4lu3" else a) for a in arm.argv[1:]]
        assert argv == expected  # sys.argv[1:] of python3 = train.py + flags, quoting intact
        for key, value in arm.env:
            assert env[key] == {"HF_TOKEN": "tok", "WANDB_API_KEY": "w"}.get(key, value)
        assert env["CUDA_VISIBLE_DEVICES"] == "0,1"


_PLANTED = ["$(touch PWNED)", "`touch PWNED`", ";touch PWNED;", "\ntouch PWNED\n", "'", '"', "\\", "${IFS}",
            "*", "&& touch PWNED", "#", "\r", "$HOME", "!!"]
_HOSTILE = st.lists(st.one_of(st.text(st.characters(codec="utf-8", exclude_characters="\0/"), max_size=6),
                              st.sampled_from(_PLANTED)), max_size=4).map("".join)


@settings(max_examples=40, deadline=None)
@given(text=_HOSTILE, name=_HOSTILE)
def test_commands_sh_runs_nothing_but_the_arms_whatever_the_plan_holds(tmp_path_factory, text, name):
    """Shell metacharacters planted in every value that enters commands.sh (train args, a secret
    flag, env values, paths, the profile name): `bash -n` accepts the script, running it creates
    nothing (no PWNED file anywhere), and each arm's recorded argv, env and cwd are the plan's."""
    tmp = tmp_path_factory.mktemp("sh")
    slime = tmp / f"slime{text}"
    slime.mkdir()
    smoke = get_profile("smoke")
    profile = with_overrides(smoke, name=name or "x", env=(*smoke.env, ("CPV_PLANTED", text)),
                             train_args=(*smoke.train_args, "--planted", text, "--wandb-key", text,
                                         f"--x;touch PWNED;key={text}", f"--tag={text}"))
    plan = build_plan(profile, run_id="r", model_dir=f"/m{text}", data_path=f"/d/{text}.jsonl", slime_dir=str(slime))
    script = tmp / "commands.sh"
    script.write_text(plan.commands_sh())
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0

    bin_dir, work, records = tmp / "bin", tmp / "work", tmp / "records.jsonl"
    bin_dir.mkdir()
    work.mkdir()
    recorder = bin_dir / "python3"
    recorder.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                        "with open(os.environ['REC'], 'a') as f:\n"
                        "    f.write(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ), 'cwd': os.getcwd()}) + '\\n')\n")
    recorder.chmod(0o755)
    needed = sorted({ref for arm in plan.arms for ref in render._secret_refs(arm)})
    exported = {ref: f"secret-{ref}" for ref in needed}
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "REC": str(records), "HOME": str(work), **exported}
    proc = subprocess.run(["bash", str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp.rglob("PWNED")), "a planted command ran"
    assert sorted(p.name for p in work.iterdir()) == []

    ran = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(ran) == len(plan.arms)
    for arm, seen in zip(plan.arms, ran, strict=True):
        expected = []
        for token, masked in zip(arm.argv, render.shown_argv(arm.argv), strict=True):
            expected.append(token if masked == token else re.sub(r"\$\{(\w+)\}", lambda m: exported[m[1]], masked))
        assert seen["argv"] == expected[1:] and seen["cwd"] == str(slime)
        for key, value in arm.env:
            assert seen["env"][key] == (exported[key] if render.is_secret(key, value) else value)


@pytest.mark.parametrize("key", ["X;touch PWNED;Y", "A B", "1ST", "$(x)", "", "É"])
def test_env_names_that_are_not_variable_names_are_refused(key):
    with pytest.raises(InputError, match="are not variable names"):
        with_overrides(get_profile("smoke"), env={key: "1"})


def test_nul_in_an_argument_is_refused():
    with pytest.raises(InputError, match="NUL character"):
        with_overrides(get_profile("smoke"), train_args=("--lr", "1\0"))


def test_commands_sh_refuses_to_run_without_the_secrets(tmp_path):
    plan = _plan_with_secret()
    sh = tmp_path / "c.sh"
    sh.write_text(plan.commands_sh())
    result = subprocess.run(["bash", str(sh), "cp1"], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert result.returncode != 0 and "export HF_TOKEN first" in result.stderr


def test_commands_sh_rejects_unknown_arm(tmp_path):
    sh = tmp_path / "c.sh"
    sh.write_text(build_plan(get_profile("probe"), run_id="r").commands_sh())
    result = subprocess.run(["bash", str(sh), "cp9"], capture_output=True, text=True)
    assert result.returncode == 2 and "unknown arm: cp9" in result.stderr and "cp1-s16k" in result.stderr


# --- CLI -------------------------------------------------------------------------------------------


def test_cli_plan_prints_arms_and_diff(capsys):
    assert run_cli(["plan", "--profile", "smoke", "--gpus", "0,1"]) == 0
    out = capsys.readouterr().out
    assert "cp1" in out and "cp2" in out and "--context-parallel-size: 1 -> 2" in out


def test_cli_plan_json(capsys):
    assert run_cli(["plan", "--profile", "probe", "--json", "--set", "seq_lens=4096"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [a["name"] for a in data["arms"]] == ["cp1-s4k", "cp2-s4k"]
    assert data["comparisons"] == [{"baseline": "cp1-s4k", "candidate": "cp2-s4k", "diff": ["--cp: 1 -> 2"]}]


def test_cli_plan_bad_gpus():
    with pytest.raises(InputError, match="neither a count"):
        run_cli(["plan", "--gpus", "zero"])


def test_probe_arms_parse_with_the_workloads_own_parser():
    """The argv the plan writes is the one cpverify.probe.workload accepts (no torch needed to parse)."""
    from cpverify.probe.workload import build_parser

    plan = build_plan(get_profile("probe"), run_id="r")
    for arm in plan.arms:
        module_at = arm.argv.index("cpverify.probe.workload")
        assert arm.argv[module_at - 1] == "-m"
        parsed = build_parser().parse_args(list(arm.argv[module_at + 1:]))
        assert (parsed.cp, parsed.seq_len, parsed.steps, parsed.warmup) == (arm.cp, arm.seq_len, 20, 3)


# --- what a profile says it runs, and what `plan --sh` says a run runs ---------------------------


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from([n for n, p in PROFILES.items() if p.kind == "slime"]), rollouts=st.integers(1, 64),
       batch=st.integers(1, 8), samples=st.integers(1, 8), length=st.sampled_from([512, 1024, 3000, 8192]))
def test_a_profiles_description_is_read_from_what_its_plan_runs(name, rollouts, batch, samples, length):
    """The numbers a profile states (rollouts, prompts x samples, response length) are the plan's
    arguments, whatever --set changes: one source, so they cannot drift apart."""
    base = get_profile(name)
    given_args = {"--num-rollout": rollouts, "--rollout-batch-size": batch, "--n-samples-per-prompt": samples}
    if not base.train_only:
        given_args["--rollout-max-response-len"] = length
    args = list(base.train_args)
    for flag, value in given_args.items():
        args[args.index(flag) + 1] = str(value)
    profile = with_overrides(base, train_args=tuple(args), **({"seq_lens": (length,)} if base.train_only else {}))
    arm = build_plan(profile, run_id="r").arms[-1]
    ran = {flag: int(options(arm.argv)[flag][-1]) for flag in (*given_args, "--rollout-max-response-len")}
    assert profile.shape() == {"rollouts": ran["--num-rollout"], "prompts": ran["--rollout-batch-size"],
                               "samples": ran["--n-samples-per-prompt"],
                               "response_tokens": (ran["--rollout-max-response-len"],),
                               "exact": profile.train_only or name == "long"}
    assert f"{rollouts} rollouts of {batch} prompts x {samples} samples" in profile.description


def _slime_clone(tmp_path: Path) -> Path:
    """A git clone of the stand-in slime with two commits, for --slime-ref A/Bs."""
    import shutil

    clone = tmp_path / "slime-clone"
    shutil.copytree(ROOT / "tests" / "fake_slime", clone)
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (clone / "CHANGED").write_text("candidate\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "candidate"], check=True)
    return clone


# Option sets a run's plan depends on: the runner and profile, --gpus in each form, --cp, --seq-len, --set,
# and both kinds of A/B (two refs of one clone, two checkouts).
PLAN_OPTION_SETS = {
    "docker-smoke": ["--runner", "docker", "--profile", "smoke", "--gpus", "0,1"],
    "docker-train-only": ["--runner", "docker", "--profile", "train-only", "--gpus", "0,1"],
    "local-smoke": ["--runner", "local", "--profile", "smoke", "--gpus", "0,1"],
    "local-probe": ["--runner", "local", "--profile", "probe", "--gpus", "0,1"],
    "gpu-count": ["--runner", "local", "--profile", "smoke", "--gpus", "2"],
    "gpus-none": ["--runner", "local", "--profile", "smoke", "--gpus", "none"],
    "gpus-default": ["--runner", "docker", "--profile", "smoke"],
    "cp-sweep": ["--runner", "docker", "--profile", "smoke", "--cp", "1,2,4", "--set", "gpus=4", "--gpus", "0,1,2,3"],
    "seq-len": ["--runner", "docker", "--profile", "train-only", "--seq-len", "1K,8K", "--gpus", "1,0"],
    "ab-refs": ["--runner", "docker", "--profile", "smoke", "--slime-ref", "HEAD~1", "--slime-ref-candidate", "HEAD"],
    "ab-refs-local": ["--runner", "local", "--profile", "train-only", "--slime-ref", "HEAD~1",
                      "--slime-ref-candidate", "HEAD", "--cp", "1", "--set", "gpus=1", "--gpus", "1"],
    "ab-dirs": ["--runner", "local", "--profile", "smoke", "--slime-dir-candidate", "{clone}"],
}


@pytest.mark.parametrize("warmup", [None, 0, 3])
@pytest.mark.parametrize("name", [n for n in PROFILES if get_profile(n).kind == "slime"])
def test_a_profiles_description_says_its_warmup_as_the_verdict_counts_it(name, warmup):
    """A slime profile's warm-up is a count it fixes, or (None) the one found in each round's data:
    the description never prints the field's raw value."""
    profile = with_overrides(get_profile(name), warmup_steps=warmup)
    found = re.search(r"\((the first (\d+) warm-up|the warm-up found in each round)\)", profile.description)
    assert found is not None and found.group(2) == (None if warmup is None else str(warmup))


@pytest.mark.parametrize("name", PLAN_OPTION_SETS)
def test_plan_sh_prints_the_commands_sh_a_run_with_the_same_options_writes(tmp_path, capsys, name):
    """`cpverify plan --sh` reads a run's options as the run does (one RunSpec, one Context): given the
    same command line it prints the commands.sh the run writes, byte for byte."""
    from cpverify.cli import main

    clone = _slime_clone(tmp_path)
    options = [word.format(clone=clone) for word in PLAN_OPTION_SETS[name]]
    slime_dir = clone if "--slime-ref" in options else ROOT / "tests" / "fake_slime"
    same = [*options, "--out", str(tmp_path / "artifacts"), "--run-id", "same", "--cache", str(tmp_path / "cache"),
            "--python", sys.executable, "--slime-dir", str(slime_dir)]
    main(["run", *same, "--only", "verdict"])  # no arm ran: a BLOCKED verdict, and its commands.sh
    capsys.readouterr()
    assert main(["plan", *same, "--sh"]) == 0
    printed = capsys.readouterr().out
    assert printed == (tmp_path / "artifacts" / "same" / "commands.sh").read_text()
    assert main(["plan", *same, "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    recorded = json.loads((tmp_path / "artifacts" / "same" / "plan.json").read_text())["plan"]
    assert [a["name"] for a in planned["arms"]] == [a["name"] for a in recorded["arms"]]
    assert planned["gpus"] == recorded["gpus"]


def test_plan_writes_nothing_where_the_run_would(tmp_path, capsys):
    """Planning an A/B of two refs names the exports' paths without exporting: `cpverify plan` runs nothing."""
    from cpverify.cli import main

    clone = _slime_clone(tmp_path)
    assert main(["plan", "--profile", "smoke", "--slime-dir", str(clone), "--slime-ref", "HEAD~1",
                 "--slime-ref-candidate", "HEAD", "--out", str(tmp_path / "artifacts"), "--run-id", "r", "--sh"]) == 0
    assert "slime-" in capsys.readouterr().out
    assert not (tmp_path / "artifacts").exists()
