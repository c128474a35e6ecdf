"""lint: findings for pasted slime command lines and for cpverify's own plans."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpverify import lint
from cpverify.cli import lint as lint_cli
from cpverify.errors import InputError
from cpverify.lint import (
    ERROR,
    WARNING,
    lint_argv,
    lint_plan,
    parallel_layout,
    parse_command,
    shell,
)
from cpverify.overrides import with_overrides
from cpverify.plan import build_plan
from cpverify.profiles import get_profile

DATA = Path(__file__).parent / "data"
SEED001_CP2 = (DATA / "seed001_cp2_command.txt").read_text(encoding="utf-8")
SEED001_CP1 = (DATA / "seed001_cp1_command.txt").read_text(encoding="utf-8")
SEED000_CP2 = (DATA / "seed000_cp2_script.txt").read_text(encoding="utf-8")


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cpverify")
    lint_cli.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


def good_args(**changes: str | None) -> list[str]:
    """The smoke profile's CP=2 arm as flags; `changes` replace (or with None remove) flag values."""
    plan = build_plan(get_profile("smoke"), run_id="t")
    argv = list(plan.arm("cp2").argv)
    for flag, value in changes.items():
        flag = "--" + flag.replace("_", "-")
        i = argv.index(flag)
        if value is None:
            has_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            del argv[i:i + 1 + has_value]
        else:
            argv[i + 1] = value
    return argv


SMOKE_ENV = get_profile("smoke").env_dict


def by_flag(findings, flag):
    return [f for f in findings if f.flag == flag]


# --- the seeds ---------------------------------------------------------------------------------


def test_seed_001_cp2_names_the_typo_and_the_batch_assertion():
    findings = lint_argv(SEED001_CP2)
    typo = by_flag(findings, "--rollout-num")
    assert len(typo) == 1 and typo[0].severity == ERROR and typo[0].fix == "--num-rollout 8"
    assert "--rollout-num-gpus-per-engine" in typo[0].why  # what SGLang's parser does with it
    batch = by_flag(findings, "--global-batch-size")
    assert len(batch) == 1 and batch[0].severity == ERROR
    assert "AssertionError: num_rollouts (2) < global_batch_size (8)" in batch[0].why  # slime's own words, quoted
    assert "--n-samples-per-prompt 4" in batch[0].fix
    # CP=2 without CUDA_DEVICE_MAX_CONNECTIONS=1 (the command sets CUDA_VISIBLE_DEVICES and NCCL_DEBUG only)
    assert by_flag(findings, "CUDA_DEVICE_MAX_CONNECTIONS")[0].severity == ERROR
    assert by_flag(findings, "--sequence-parallel")[0].severity == WARNING
    assert {f.flag for f in findings if f.severity == ERROR} >= {"--rm-type or --custom-rm-path", "--num-layers"}
    # the missing --num-rollout is the typo: reported once, not twice
    assert not by_flag(findings, "--num-rollout or --num-epoch")


def test_seed_001_cp1_passes_the_env_check_but_not_the_rest():
    findings = lint_argv(SEED001_CP1)
    assert not by_flag(findings, "CUDA_DEVICE_MAX_CONNECTIONS")  # CP=1, TP=1: Megatron does not assert
    assert by_flag(findings, "--rollout-num") and by_flag(findings, "--global-batch-size")


def test_seed_000_script_with_exports_and_shell_variables():
    findings = lint_argv(SEED000_CP2, gpus=2)
    assert not by_flag(findings, "--rollout-num")  # seed 000 spells --num-rollout right
    assert not by_flag(findings, "--hf-checkpoint")  # "$MODEL" expanded from MODEL=... in the script
    assert by_flag(findings, "--global-batch-size")[0].severity == ERROR
    assert by_flag(findings, "CUDA_DEVICE_MAX_CONNECTIONS")  # exports CUDA_VISIBLE_DEVICES, not this
    cmd = parse_command(SEED000_CP2)
    assert cmd.env["CUDA_VISIBLE_DEVICES"] == "0,1" and cmd.value("--prompt-data") == "/root/datasets/cp_smoke.jsonl"


def test_cli_seed_001_pasted_whole_exits_1(capsys):
    """`cpverify lint -- <the command>`, as one quoted paste with its backslash-newlines."""
    assert run_cli(["lint", "--", SEED001_CP2]) == 1
    out = capsys.readouterr().out
    assert "--rollout-num" in out and "--num-rollout 8" in out
    assert "num_rollouts (2) < global_batch_size (8)" in " ".join(out.split())
    assert "layout: world=2 tp=1 pp=1 cp=2 dp=1" in out


def test_cli_seed_001_as_shell_words_exits_1(capsys):
    """The same command split on whitespace, its continuation backslashes left in as words."""
    words = SEED001_CP2.split()
    assert "\\" in words
    assert run_cli(["lint", "--", *words]) == 1
    assert "--num-rollout 8" in capsys.readouterr().out


def test_cli_profiles_lint_clean(capsys):
    for name in ("smoke", "long", "probe"):
        assert run_cli(["lint", "--profile", name]) == 0, capsys.readouterr().out
    assert "0 error(s)" in capsys.readouterr().out


def test_cli_lint_file_and_json(tmp_path, capsys):
    script = tmp_path / "run.sh"
    script.write_text(SEED001_CP2)
    assert run_cli(["lint", "--file", str(script), "--json"]) == 1
    findings = json.loads(capsys.readouterr().out)
    assert {"severity", "flag", "why", "fix", "where"} <= set(findings[0])
    assert findings[0]["severity"] == "error"  # errors first
    with pytest.raises(InputError, match="missing.sh does not exist"):
        run_cli(["lint", "--file", str(tmp_path / "missing.sh")])


def test_cli_inherit_env(monkeypatch):
    argv = good_args()
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1")
    assert run_cli(["lint", "--inherit-env", "--", *argv]) == 0
    assert run_cli(["lint", "--", *argv]) == 1  # the command alone does not set it


# --- flags ------------------------------------------------------------------------------------------


def test_good_command_has_no_findings():
    assert lint_argv(good_args(), env=SMOKE_ENV, gpus=2) == []


@pytest.mark.parametrize(
    "bad, expected_fix",
    [
        ("--context_parallel_size", "--context-parallel-size 2"),
        ("--cp", "--context-parallel-size 2"),
        ("--context-paralel-size", "did you mean --context-parallel-size?"),
        ("--sglang_mem_fraction_static", "--sglang-mem-fraction-static 2"),
    ],
)
def test_misspelled_cp_flag_is_an_error(bad, expected_fix):
    argv = good_args()
    argv[argv.index("--context-parallel-size")] = bad
    findings = lint_argv(argv, env=SMOKE_ENV)
    assert by_flag(findings, bad)[0].severity == ERROR
    assert by_flag(findings, bad)[0].fix == expected_fix


def test_unknown_flag_far_from_any_is_a_warning_and_passthrough_is_quiet():
    argv = good_args() + ["--frobnicate-widgets", "3", "--sglang-mem-fraction-static", "0.7",
                          "--router-policy", "round_robin", "--no-load-optim"]
    findings = lint_argv(argv, env=SMOKE_ENV)
    assert [(f.flag, f.severity) for f in findings] == [("--frobnicate-widgets", WARNING)]


def test_removed_flags():
    findings = lint_argv(good_args(train_backend="fsdp") + ["--megatron-to-hf-mode", "bridge"], env=SMOKE_ENV)
    backend = by_flag(findings, "--train-backend")[0]
    assert backend.severity == ERROR and "invalid choice: 'fsdp'" in backend.why  # argparse's own words, quoted
    assert by_flag(findings, "--megatron-to-hf-mode")[0].severity == WARNING


def test_duplicate_flag_with_different_values_warns():
    findings = lint_argv(good_args() + ["--context-parallel-size", "1"], env=SMOKE_ENV)
    assert by_flag(findings, "--context-parallel-size")[0].severity == WARNING
    assert parallel_layout(parse_command(good_args() + ["--context-parallel-size", "1"]))["cp"] == 1  # last wins


def test_function_path_must_be_dotted():
    findings = lint_argv(good_args(custom_rm_path="length_reward"), env=SMOKE_ENV)
    assert by_flag(findings, "--custom-rm-path")[0].severity == ERROR


# --- required flags -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag, finding_flag",
    [
        ("hf_checkpoint", "--hf-checkpoint"),
        ("prompt_data", "--prompt-data"),
        ("num_rollout", "--num-rollout or --num-epoch"),
        ("rollout_max_response_len", "--rollout-max-response-len"),
        ("custom_rm_path", "--rm-type or --custom-rm-path"),
        ("num_layers", "--num-layers"),
        ("rollout_batch_size", "--rollout-batch-size"),
    ],
)
def test_missing_required_flag_is_an_error(flag, finding_flag):
    findings = lint_argv(good_args(**{flag: None}), env=SMOKE_ENV, gpus=2)
    assert [(f.flag, f.severity) for f in findings] == [(finding_flag, ERROR)]


def test_num_epoch_and_rm_type_satisfy_the_requirements():
    argv = good_args(num_rollout=None, custom_rm_path=None) + ["--num-epoch", "1", "--rm-type", "math"]
    assert lint_argv(argv, env=SMOKE_ENV, gpus=2) == []


def test_opaque_model_args_downgrade_required_to_warnings():
    argv = [a for a in good_args(num_layers=None)] + ["${MODEL_ARGS[@]}"]
    findings = lint_argv(argv, env=SMOKE_ENV, gpus=2)
    assert {(f.flag, f.severity) for f in findings} == {("--num-layers", WARNING), ("${MODEL_ARGS[@]}", WARNING)}


# --- batch arithmetic -------------------------------------------------------------------------------


def test_rollout_smaller_than_global_batch():
    f = by_flag(lint_argv(good_args(n_samples_per_prompt="1"), env=SMOKE_ENV), "--global-batch-size")
    assert f[0].severity == ERROR and f[0].fix.startswith("--n-samples-per-prompt 4 ")
    assert "num_rollouts (2) < global_batch_size (8)" in f[0].why  # slime's own assertion, quoted


def test_rollout_not_a_multiple_of_global_batch_warns():
    f = by_flag(lint_argv(good_args(n_samples_per_prompt="6"), env=SMOKE_ENV), "--global-batch-size")
    assert [x.severity for x in f] == [WARNING] and f[0].fix.startswith("--global-batch-size 4 ")  # 12 samples


def test_global_batch_not_divisible_by_data_parallel():
    # CP=1 on 2 GPUs: DP=2; a global batch of 3 (3 samples per rollout) cannot split
    argv = good_args(context_parallel_size="1", global_batch_size="3", rollout_batch_size="3", n_samples_per_prompt="1")
    f = by_flag(lint_argv(argv, env=SMOKE_ENV), "--global-batch-size")
    assert [x.severity for x in f] == [ERROR]
    assert f[0].fix == "a --global-batch-size that is a multiple of 2"
    # Megatron's own assertion, quoted: what the run would have stopped with
    assert "global batch size (3) is not divisible by micro batch size (1) times data parallel size (2)" in f[0].why


def test_num_steps_per_rollout_must_agree_with_global_batch():
    f = by_flag(lint_argv(good_args() + ["--num-steps-per-rollout", "2"], env=SMOKE_ENV), "--global-batch-size")
    assert f[0].severity == ERROR and "--global-batch-size 4" in f[0].fix


def test_dynamic_batch_needs_max_tokens():
    findings = lint_argv(good_args(max_tokens_per_gpu=None), env=SMOKE_ENV)
    assert by_flag(findings, "--use-dynamic-batch-size")[0].severity == ERROR


# --- GPU arithmetic and layout -----------------------------------------------------------------------


def test_layout_is_computed_like_megatron():
    assert parallel_layout(parse_command(good_args())) == {"world": 2, "tp": 1, "pp": 1, "cp": 2, "dp": 1, "ep": 1, "etp": 1}
    assert parallel_layout(parse_command(good_args(context_parallel_size="1")))["dp"] == 2
    assert parallel_layout(parse_command(good_args(context_parallel_size="$CP"))) is None


def test_world_not_divisible_by_model_size():
    argv = good_args(actor_num_gpus_per_node="3")
    f = by_flag(lint_argv(argv, env=SMOKE_ENV), "--context-parallel-size")
    assert f[0].severity == ERROR
    assert "world size (3) is not divisible by total_model_size (2)" in f[0].why  # Megatron's own assertion, quoted


def test_default_eight_gpus_per_node_trap():
    argv = good_args(actor_num_gpus_per_node=None)
    on_two = by_flag(lint_argv(argv, env=SMOKE_ENV, gpus=2), "--actor-num-gpus-per-node")
    assert [f.severity for f in on_two] == [ERROR] and on_two[0].fix == "--actor-num-gpus-per-node 2"
    unknown_host = by_flag(lint_argv(argv, env=SMOKE_ENV), "--actor-num-gpus-per-node")
    assert [f.severity for f in unknown_host] == [WARNING]


def test_more_gpus_than_the_host_has():
    f = lint_argv(good_args(actor_num_gpus_per_node="4"), env=SMOKE_ENV, gpus=2)
    assert by_flag(f, "--actor-num-gpus-per-node")[0].severity == ERROR
    f = lint_argv(good_args(context_parallel_size="4", actor_num_gpus_per_node="4"), env=SMOKE_ENV, gpus=2)
    assert by_flag(f, "--context-parallel-size")[0].severity == ERROR


def test_seq_length_must_be_a_multiple_of_2cp():
    f = by_flag(lint_argv(good_args() + ["--seq-length", "4098"], env=SMOKE_ENV), "--seq-length")
    assert f[0].severity == ERROR and f[0].fix == "--seq-length 4100"
    assert not by_flag(lint_argv(good_args() + ["--seq-length", "4100"], env=SMOKE_ENV), "--seq-length")


def test_allgather_cp_only_for_dsa_models():
    f = by_flag(lint_argv(good_args() + ["--allgather-cp"], env=SMOKE_ENV), "--allgather-cp")
    assert f[0].severity == ERROR
    dsa = good_args(hf_checkpoint="/models/DeepSeek-V3.2-Exp") + ["--allgather-cp"]
    assert not by_flag(lint_argv(dsa, env=SMOKE_ENV), "--allgather-cp")
    assert not by_flag(lint_argv(good_args(context_parallel_size="1") + ["--allgather-cp"], env=SMOKE_ENV), "--allgather-cp")


def test_cuda_device_max_connections():
    env = {k: v for k, v in SMOKE_ENV.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    assert by_flag(lint_argv(good_args(), env=env), "CUDA_DEVICE_MAX_CONNECTIONS")[0].severity == ERROR
    assert by_flag(lint_argv(good_args(), env={**env, "CUDA_DEVICE_MAX_CONNECTIONS": "8"}), "CUDA_DEVICE_MAX_CONNECTIONS")
    assert not by_flag(lint_argv(good_args(context_parallel_size="1"), env=env), "CUDA_DEVICE_MAX_CONNECTIONS")
    # set on the command line itself, or through ray job submit's runtime env
    assert not by_flag(lint_argv(["CUDA_DEVICE_MAX_CONNECTIONS=1", "python3", "train.py", *good_args()[2:]]),
                       "CUDA_DEVICE_MAX_CONNECTIONS")
    ray = ["ray", "job", "submit", "--address=http://127.0.0.1:8265",
           '--runtime-env-json={"env_vars": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}}', "--", *good_args()]
    assert not by_flag(lint_argv(ray), "CUDA_DEVICE_MAX_CONNECTIONS")
    assert not by_flag(lint_argv(ray), "--address")  # launcher flags are not slime flags


def test_sequence_parallel_with_tp1_warns_but_not_with_tp2():
    assert by_flag(lint_argv(good_args() + ["--sequence-parallel"], env=SMOKE_ENV), "--sequence-parallel")
    tp2 = good_args(tensor_model_parallel_size="2", context_parallel_size="1") + ["--sequence-parallel"]
    assert not by_flag(lint_argv(tp2, env=SMOKE_ENV), "--sequence-parallel")


def test_kl_coefficients_and_save_interval():
    f = lint_argv(good_args(kl_loss_coef="0.01") + ["--kl-coef", "0.1", "--save-interval", "2"], env=SMOKE_ENV)
    assert by_flag(f, "--kl-coef")[0].severity == ERROR and by_flag(f, "--save-interval")[0].severity == ERROR


def test_unbalanced_quotes_are_an_input_error():
    with pytest.raises(InputError, match="cannot split"):
        lint_argv("python train.py --prompt-data 'oops")


# --- plans ----------------------------------------------------------------------------------------------


def test_lint_plan_tags_findings_with_the_arm():
    bad = with_overrides(get_profile("smoke"), env=(("NCCL_DEBUG", "INFO"),))  # no CUDA_DEVICE_MAX_CONNECTIONS
    findings = lint_plan(build_plan(bad, run_id="t"))
    assert [(f.where, f.flag) for f in findings] == [("cp2", "CUDA_DEVICE_MAX_CONNECTIONS")]


def test_lint_plan_probe_seq_len():
    probe = with_overrides(get_profile("probe"), seq_lens=(4098,))
    findings = lint_plan(build_plan(probe, run_id="t"))
    assert [(f.where, f.flag, f.severity) for f in findings] == [("cp2-s4098", "--seq-len", ERROR)]


def test_known_flags_table_has_slime_and_megatron_flags():
    known = lint.known_flags()
    assert {"--num-rollout", "--context-parallel-size", "--custom-megatron-init-path", "--num-layers",
            "--disable-bias-linear", "--norm-epsilon", "--attention-dropout", "--no-load-optim"} <= known
    assert "--rollout-num" not in known and "--megatron-to-hf-mode" not in known


# --- the generator of the known-flags table ---------------------------------------------------------


def test_generator_lists_exactly_what_slimes_parsers_define():
    """tools/gen_known_flags.py runs slime's own parse_args() and lists every parser's long options.
    Against the stand-in (slime itself needs Megatron and SGLang; benchmarks/deep-lint-real-slime.md
    records the run against the real parsers): its pre-parser, SGLang parser and main parser."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(root / "tools" / "gen_known_flags.py"), "--slime", "abc123",
                           "--megatron", "def456", "--sglang", "0.0"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(root / "tests" / "fake_slime")})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1] == "# slime abc123; Megatron-LM def456; SGLang 0.0."
    specs = {flag: (nargs, kind) for flag, nargs, kind in (line.split() for line in lines if not line.startswith("#"))}
    flags = [line.split()[0] for line in lines if not line.startswith("#")]
    assert flags == sorted(flags) and len(flags) == len(set(flags))
    sys.path.insert(0, str(root / "tests" / "fake_slime"))
    try:
        from slime.utils import arguments as fake
    finally:
        sys.path.remove(str(root / "tests" / "fake_slime"))
    expected = {flag for flag, _ in fake._MAIN_FLAGS} | {
        "--help",  # the main parser's own
        "--train-backend", "--debug-rollout-only", "--debug-train-only", "--load-debug-rollout-data",  # pre-parser
        "--rollout-num-gpus-per-engine", "--sglang-mem-fraction-static", "--sglang-api-key"}  # SGLang's parser
    assert set(flags) == expected
    # how many words each flag takes, and the type its parser converts them with
    for flag, kwargs in fake._MAIN_FLAGS:
        switch = kwargs.get("action") in ("store_true", "store_false")
        kind = "-" if switch else {int: "int", float: "float"}.get(kwargs.get("type"), "str")
        assert specs[flag] == ("0" if switch else "1", kind), flag


def test_known_flags_come_from_the_real_parsers():
    """The shipped list is generated from slime 624b824a's real parsers: it holds the flags they
    define, those with `_` spellings included, and none a text scan of the sources would invent."""
    known = lint.known_flags()
    header = (resources.files("cpverify") / "data" / "known_flags.txt").read_text().splitlines()[1]
    assert "slime 624b824a" in header and "Megatron-LM 1dcf0daf" in header and "SGLang 0.5.15.post1" in header
    assert {"--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler", "--debug-train-only",
            "--load-debug-rollout-data", "--ci-load-grad-norm", "--sglang-mem-fraction-static"} <= known
    assert not {"--apply-rope-fusion", "--add-bias-linear", "--disable-bf16"} & known


def test_sglang_flags_are_checked_once_the_list_has_them():
    findings = lint_argv(good_args() + ["--sglang-mem-fraction-statc", "0.7"], env=SMOKE_ENV, gpus=2)
    typo = by_flag(findings, "--sglang-mem-fraction-statc")
    assert typo and typo[0].severity == ERROR and "--sglang-mem-fraction-static" in typo[0].fix
    assert lint_argv(good_args() + ["--sglang-mem-fraction-static", "0.7"], env=SMOKE_ENV, gpus=2) == []


def test_train_only_and_custom_rollout_modes_need_no_generation_flags():
    base = good_args(rollout_max_response_len=None, custom_rm_path=None)
    assert lint_argv(base + ["--debug-train-only"], env=SMOKE_ENV, gpus=2) == []
    sft = base + ["--rollout-function-path", "slime.rollout.sft_rollout.generate_rollout", "--loss-type", "sft_loss"]
    assert lint_argv(sft, env=SMOKE_ENV, gpus=2) == []
    default = base + ["--rollout-function-path", "slime.rollout.sglang_rollout.generate_rollout"]
    assert {f.flag for f in lint_argv(default, env=SMOKE_ENV, gpus=2)} == {
        "--rollout-max-response-len", "--rm-type or --custom-rm-path"}


def test_a_dropped_line_continuation_loses_the_flags_after_it():
    """A launch line missing its trailing backslash ends the command there; the flags after it
    never reach train.py. Lint sees only what the shell would pass, and names what is missing."""
    text = SEED001_CP2.replace("--global-batch-size 8 \\\n", "--global-batch-size 8\n", 1)
    findings = lint_argv(text)
    assert {"--rm-type or --custom-rm-path", "--num-layers"} <= {f.flag for f in findings}
    cut = parse_command(text).cut_off
    # the lines after it still join each other: one separate command, from --advantage-estimator to the end
    assert len(cut) == 1 and cut[0][:2] == ["--advantage-estimator", "gspo"] and cut[0][-1] == "--ci-disable-kl-checker"
    assert by_flag(findings, "--advantage-estimator")[0].severity == ERROR


ISSUE_SCRIPTS = DATA / "issue-scripts"


def test_a_paste_of_argument_arrays_alone_gives_train_py_their_options():
    """An issue often quotes only a script's arrays: every line in `NAME=(...)` is a word of it, never
    a command of its own, and together the arrays are what train.py is given."""
    text = (ISSUE_SCRIPTS / "slime-issue1321-ppo-argument-arrays.sh").read_text(encoding="utf-8")
    cmd = parse_command(text)
    assert cmd.cut_off == []
    assert [cmd.value(f) for f in ("--hf-checkpoint", "--tensor-model-parallel-size", "--rollout-batch-size",
                                   "--adam-beta2")] == ["GLM/GLM-Z1-9B-0414/", "2", "16", "0.98"]
    assert parallel_layout(cmd)["tp"] == 2
    findings = lint_argv(text)
    assert [f.flag for f in findings if f.severity == ERROR] == []
    # the command itself, its environment and its MODEL_ARGS are not in the paste: lint cannot tell
    assert {"--num-layers", "CUDA_DEVICE_MAX_CONNECTIONS"} <= {f.flag for f in findings if f.severity == WARNING}


def test_argument_arrays_alone_still_show_what_slime_rejects():
    text = (ISSUE_SCRIPTS / "slime-issue1802-sft-argument-arrays.sh").read_text(encoding="utf-8")
    assert [f.flag for f in lint_argv(text) if f.severity == ERROR] == ["--use-dynamic-batch-size"]


def test_a_bash_x_trace_is_read_as_the_commands_it_traces():
    """`bash -x` prints each command behind `+ ` (`++ ` one level in), an array as one line: a pasted trace
    is the script it ran, here cut before its train.py command."""
    text = (ISSUE_SCRIPTS / "slime-issue1569-bash-x-trace-cut.txt").read_text(encoding="utf-8")
    cmd = parse_command(text)
    assert (cmd.value("--num-layers"), cmd.value("--hf-checkpoint"), cmd.value("--rotary-base")) == (
        "36", "/home/user/Qwen3-4B-Instruct-2507", "5000000")  # CKPT_ARGS's comes last, and wins
    assert [f.flag for f in lint_argv(text) if f.severity == ERROR] == []


@pytest.mark.parametrize("layout", ["one line", "many lines"])
def test_an_array_line_is_never_the_command_even_before_a_train_py_line(layout):
    arrays = ("PERF=(--tensor-model-parallel-size 2 --context-parallel-size 2)" if layout == "one line"
              else "PERF=(\n   --tensor-model-parallel-size 2\n   --context-parallel-size 2\n)")
    text = f"{arrays}\npython3 train.py ${{PERF[@]}} --rollout-batch-size 8\n"
    cmd = parse_command(text)
    assert (cmd.value("--context-parallel-size"), cmd.value("--rollout-batch-size"), cmd.opaque) == ("2", "8", [])


# --- the real entry point ---------------------------------------------------------------------------


def _cpverify(*argv: str):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    return subprocess.run([sys.executable, "-m", "cpverify", *argv], capture_output=True, text=True, cwd=root,
                          timeout=120)


def test_entry_point_seed_001_exits_1_and_smoke_exits_0():
    seed = _cpverify("lint", "--", SEED001_CP2)
    assert seed.returncode == 1, seed.stderr
    assert "--num-rollout 8" in seed.stdout and "num_rollouts (2) < global_batch_size (8)" in " ".join(seed.stdout.split())
    smoke = _cpverify("lint", "--profile", "smoke")
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr


def test_runtime_env_lint_cannot_read_downgrades_the_env_check():
    ray = ["ray", "job", "submit", '--runtime-env-json=${RUNTIME_ENV_JSON}', "--", *good_args()]
    f = by_flag(lint_argv(ray), "CUDA_DEVICE_MAX_CONNECTIONS")
    assert [x.severity for x in f] == [WARNING]  # unread, not missing: missing would be an ERROR


def test_pasted_script_with_arrays_exports_and_comments():
    """The shape of slime's own launch scripts: arrays of flags, exports, a comment, ray job submit."""
    model_args = " ".join(get_profile("smoke").model_args)
    script = f"""#!/bin/bash
set -ex
export CUDA_DEVICE_MAX_CONNECTIONS=1
MODEL=/root/models/Qwen2.5-0.5B-Instruct
MODEL_ARGS=(
   {model_args}
)
CKPT_ARGS=(--hf-checkpoint $MODEL --ref-load "$MODEL")
ROLLOUT_ARGS=(
   --prompt-data /root/datasets/cp_smoke.jsonl
   # --rollout-num 8   (a comment: must not count)
   --num-rollout 8 --rollout-batch-size 2 --n-samples-per-prompt 4
   --rollout-max-response-len 1024 --global-batch-size 8 --rm-type math
)
ray job submit --address="http://127.0.0.1:8265" -- python3 train.py \\
   --actor-num-nodes 1 --actor-num-gpus-per-node 2 --colocate \\
   ${{MODEL_ARGS[@]}} ${{CKPT_ARGS[@]}} "${{ROLLOUT_ARGS[@]}}" \\
   --context-parallel-size 2
echo done
"""
    cmd = parse_command(script)
    assert cmd.opaque == [] and cmd.cut_off == []
    assert cmd.value("--hf-checkpoint") == cmd.value("--ref-load") == "/root/models/Qwen2.5-0.5B-Instruct"
    assert cmd.value("--num-layers") == "24" and cmd.value("--num-rollout") == "8"
    assert not cmd.has("--rollout-num")
    assert cmd.env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}  # MODEL is a shell variable, not exported
    assert lint_argv(script, gpus=2) == []


def test_lint_profile_against_the_host_gpu_count():
    assert run_cli(["lint", "--profile", "smoke", "--gpus", "4"]) == 0  # a bigger host is fine
    assert run_cli(["lint", "--profile", "smoke", "--gpus", "1"]) == 1
    plan = build_plan(get_profile("smoke"), run_id="t")
    assert [(f.severity, f.flag) for f in lint_plan(plan, gpus=1) if f.flag == "gpus"] == [(ERROR, "gpus")]
    assert lint_plan(plan, gpus=4) == []


@pytest.mark.parametrize(("content", "problem", "fix"), [
    ("python3 train.py --lr 1e-6  # café\n".encode("latin-1"), "is not UTF-8 text (byte 0xe9 at offset 33)",
     "iconv -f LATIN1 -t UTF-8"),
    ("python3 train.py --lr 1e-6\n".encode("utf-16"), "is UTF-16 text, not UTF-8", "iconv -f UTF-16 -t UTF-8"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00--lr", "is a binary file (it holds NUL bytes)", "pass the text file"),
], ids=["latin-1", "utf-16", "binary"])
def test_entry_point_file_that_is_not_utf8_text_is_bad_input(tmp_path, content, problem, fix):
    path = tmp_path / "launch.sh"
    path.write_bytes(content)
    proc = _cpverify("lint", "--file", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"--file {path} {problem}" in proc.stderr and fix in proc.stderr


def test_a_utf8_file_with_a_bom_is_read(tmp_path, capsys):
    script = tmp_path / "run.sh"
    script.write_bytes(SEED001_CP2.encode("utf-8-sig"))
    assert run_cli(["lint", "--file", str(script)]) == 1
    assert "--num-rollout 8" in capsys.readouterr().out


# --- flags with the wrong dash, and splitting pastes ---------------------------------------------


@pytest.mark.parametrize(("dash", "spelled"), [("\u2014", "em dash (U+2014)"), ("\u2013", "en dash (U+2013)"),
                                               ("\u2212", "minus sign (U+2212)"), ("-", "a single '-'")])
def test_a_flag_with_the_wrong_dash_is_an_error_not_a_value(dash, spelled):
    """`—context-parallel-size 2` (a chat app's em dash) or `-context-parallel-size 2`: slime runs CP=1.
    The word is an error of its own, never a second value of the flag before it."""
    argv = [*good_args(context_parallel_size=None), f"{dash}context-parallel-size", "2"]
    assert argv[2:4] == ["--train-backend", "megatron"]
    argv = argv[:4] + argv[-2:] + argv[4:-2]  # behind the value of the first flag
    text = shlex.join(argv)
    for command in (text, argv):
        findings = lint_argv(command, env={"CUDA_DEVICE_MAX_CONNECTIONS": "1"})
        wrong = by_flag(findings, f"{dash}context-parallel-size")
        assert len(wrong) == 1 and wrong[0].severity == ERROR, findings
        assert spelled in wrong[0].why and "--context-parallel-size keeps its default" in wrong[0].why
        assert wrong[0].fix == "--context-parallel-size 2"
        parsed = parse_command(command)
        assert parsed.options[:2] == [("--train-backend", ["megatron"]), (f"{dash}context-parallel-size", ["2"])]


@pytest.mark.parametrize("value", ["-1e-6", "-x", "-not-a-flag", "-", "--"])
def test_a_value_with_one_dash_stays_a_value(value):
    parsed = parse_command(["--lr", value, "--seed", "1"])
    assert parsed.options[0] == ("--lr", [value])  # a bare `--` too: it is no flag


_WORDS = st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=12), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(st.lists(_WORDS, min_size=1, max_size=4), st.sampled_from(["\n", "; ", " && ", " | ", " \\\n;"]))
def test_splitting_a_paste_gives_back_the_words_the_shell_would(commands, separator):
    """Whatever the words (quotes, `#`, `$`, newlines, unicode), quoting them as a shell does and
    splitting the paste gives them back, command by command."""
    text = separator.join(shlex.join(words) for words in commands)
    assert shell._commands(text) == commands


@pytest.mark.parametrize(("text", "words"), [
    ("a \"b \\\"c\\\" $d\" 'e\\f'", ["a", 'b "c" $d', "e\\f"]),
    ("a\\ b c#d # comment\ne", ["a b", "c#d"]),
    ("--lr 1e-6 \\\r\n--seed 1\r\n", ["--lr", "1e-6", "--seed", "1"]),
    ("x=\"a\\\nb\"", ["x=ab"]),
])
def test_splitting_quotes_escapes_comments_and_continuations(text, words):
    assert shell._commands(text)[0] == words


@pytest.mark.parametrize("text", ["--lr '1e-6", '--lr "1e-6', "--lr 1e-6 \\"])
def test_an_unclosed_quote_is_bad_input(text):
    with pytest.raises(InputError, match="cannot split the command line"):
        shell._commands(text)


# --- values as slime's parsers read them ------------------------------------------------------------

_INT_FLAGS = sorted(flag for flag, spec in lint.flag_specs().items() if spec.kind == "int")


@settings(max_examples=200, deadline=None)
@given(flag=st.sampled_from(_INT_FLAGS), word=st.sampled_from(["two", "2.5", "1e3", "0x10", "eight", "4,"]))
def test_a_word_that_is_not_an_integer_for_an_integer_flag_is_an_error(flag, word):
    """argparse converts the value with int() and stops train.py with `invalid int value` otherwise."""
    findings = by_flag(lint_argv(good_args() + [flag, word], env=SMOKE_ENV), flag)
    assert [f.severity for f in findings if f.fix == f"{flag} <integer>"] == [ERROR]


@pytest.mark.parametrize("flag", ["--context-parallel-size", "--tensor-model-parallel-size",
                                  "--pipeline-model-parallel-size", "--expert-model-parallel-size",
                                  "--expert-tensor-parallel-size", "--micro-batch-size", "--global-batch-size",
                                  "--rollout-batch-size", "--n-samples-per-prompt", "--actor-num-gpus-per-node",
                                  "--rollout-num-gpus-per-engine", "--sglang-dp-size", "--sglang-ep-size"])
@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_size_below_one_or_not_a_number_is_an_error(flag, value):
    base = good_args()
    argv = good_args(**{flag[2:]: value}) if flag in base else base + [flag, value]
    findings = lint_argv(argv, env=SMOKE_ENV)
    assert [(f.flag, f.severity) for f in findings if f.fix in (f"{flag} 1 or more", f"{flag} <integer>")] == [
        (flag, ERROR)]
    assert not parse_command(argv).stray


def test_sizes_of_one_or_more_and_switches_without_values_are_clean():
    argv = good_args() + ["--expert-tensor-parallel-size", "1", "--sglang-dp-size", "1", "--sglang-cuda-graph-bs",
                          "1", "2", "4", "--sglang-chunked-prefill-size", "-1"]  # -1: SGLang's "no chunking"
    assert lint_argv(argv, env=SMOKE_ENV, gpus=2) == []


@pytest.mark.parametrize(("tail", "word", "after"), [
    (["--colocate", "false"], "false", "--colocate"),        # a switch takes no value: it stays on
    (["--num-rollout", "3", "4"], "4", "--num-rollout"),    # one value, the second is left over
    (["--use-dynamic-batch-size", "yes"], "yes", "--use-dynamic-batch-size"),
])
def test_a_word_no_parser_takes_is_an_error(tail, word, after):
    findings = by_flag(lint_argv(good_args() + tail, env=SMOKE_ENV), word)
    assert [f.severity for f in findings] == [ERROR]
    assert parse_command(good_args() + tail).stray == [(word, after)]


def test_a_word_before_the_first_flag_is_stray_and_a_redirection_is_not():
    flags = shlex.join(good_args()[2:])  # good_args() starts with `python3 train.py`
    text = "python3 train.py stray " + flags + " 2>&1 | tee train.log"
    cmd = parse_command(text)
    assert cmd.stray == [("stray", "")]
    assert by_flag(lint_argv(text, env=SMOKE_ENV), "stray")[0].severity == ERROR
    quiet = "python3 train.py " + flags + " > train.log 2> err.log"
    assert parse_command(quiet).stray == [] and lint_argv(quiet, env=SMOKE_ENV, gpus=2) == []


def test_words_after_an_array_lint_cannot_see_are_not_called_stray():
    cmd = parse_command("python3 train.py ${EXTRA[@]} 4 " + shlex.join(good_args()[2:]))
    assert cmd.stray == [] and cmd.opaque == ["${EXTRA[@]}"]


# --- expert parallelism -------------------------------------------------------------------------------


def _sizes(tp: int, pp: int, cp: int, ep: int, etp: int | None, gpus: int) -> list[str]:
    sizes = {"tensor_model_parallel_size": str(tp), "context_parallel_size": str(cp), "actor_num_gpus_per_node": str(gpus)}
    argv = good_args(**sizes) + ["--pipeline-model-parallel-size", str(pp), "--expert-model-parallel-size", str(ep),
                                 "--num-experts", "64"]
    return argv + (["--expert-tensor-parallel-size", str(etp)] if etp is not None else [])


@settings(max_examples=300, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4]), cp=st.sampled_from([1, 2]),
       ep=st.sampled_from([1, 2, 4, 8]), etp=st.sampled_from([None, 1, 2]), gpus=st.sampled_from([1, 2, 4, 8, 16]))
def test_each_parallel_product_must_divide_the_training_world(tp, pp, cp, ep, etp, gpus):
    """Megatron (1dcf0daf) stops unless TP x PP x CP and EP x ETP x PP divide the world; ETP, when not
    given, is the TP size (arguments.py, parallel_state.initialize_model_parallel)."""
    findings = lint_argv(_sizes(tp, pp, cp, ep, etp, gpus), env=SMOKE_ENV)
    flagged = {f.flag for f in findings if f.severity == ERROR}
    assert ("--context-parallel-size" in flagged) == (gpus % (tp * pp * cp) != 0)
    assert ("--expert-model-parallel-size" in flagged) == (gpus % (ep * (etp or tp) * pp) != 0)


def test_slimes_glm47_script_on_eight_gpus_names_the_expert_size_that_fits():
    """slime#1818: scripts/run-glm4.7-30B-A3B.sh at 624b824a runs EP 8 x ETP 1 x PP 2 on 8 GPUs."""
    (command,) = _launch_scripts()["scripts/run-glm4.7-30B-A3B.sh"]["commands"]
    (finding,) = by_flag(lint_argv(command["argv"], env=command["env"]), "--expert-model-parallel-size")
    assert finding.severity == ERROR and finding.fix.startswith("--expert-model-parallel-size 4,")  # slime PR #2077
    # Megatron's own assertion, quoted: what the run would have stopped with
    assert "world_size (8) is not divisible by expert_tensor_model_pipeline_parallel size (16)" in finding.why


def test_the_experts_must_split_evenly_over_expert_parallel_ranks():
    argv = _sizes(1, 1, 2, 4, None, 8)
    argv[argv.index("--num-experts") + 1] = "6"
    (finding,) = by_flag(lint_argv(argv, env=SMOKE_ENV), "--expert-model-parallel-size")
    assert finding.severity == ERROR and finding.fix == "--expert-model-parallel-size 3"


# --- one finding per mistake --------------------------------------------------------------------------


@pytest.mark.parametrize(("flag", "typo"), [
    ("--rollout-batch-size", "--rollout-batch-sise"), ("--hf-checkpoint", "--hf_checkpoint"),
    ("--num-rollout", "--num-rollouts"), ("--prompt-data", "\u2014prompt-data"), ("--num-layers", "--num-layer"),
])
def test_a_misspelt_required_flag_is_reported_once_not_also_as_missing(flag, typo):
    argv = [typo if word == flag else word for word in good_args()]
    findings = lint_argv(argv, env=SMOKE_ENV, gpus=2)
    assert [(f.flag, f.severity) for f in findings] == [(typo, ERROR)]


@pytest.mark.parametrize(("removed", "replacement"), [
    ("--sglang-enable-ep-moe", "--sglang-ep-size 2"),  # the engine's TP: --rollout-num-gpus-per-engine
    ("--sglang-enable-deepep-moe", "--sglang-moe-a2a-backend deepep"),
    ("--sglang-enable-flashinfer-cutlass-moe", "--sglang-moe-runner-backend flashinfer_cutlass"),
])
def test_sglangs_removed_moe_flags_name_sglangs_replacement(removed, replacement):
    argv = good_args(rollout_num_gpus_per_engine="2") + [removed]
    assert [(f.flag, f.severity, f.fix) for f in lint_argv(argv, env=SMOKE_ENV, gpus=2)] == [
        (removed, ERROR, replacement)]


# --- rewards ---------------------------------------------------------------------------------------


def test_a_custom_generate_function_may_set_the_reward_itself():
    """slime calls the rule-based reward only for samples whose reward is still None after generation
    (sglang_rollout.generate_and_rm at 624b824a): with a custom generate function that may be none."""
    (command,) = _launch_scripts()["examples/tau-bench/run_qwen3_4B.sh"]["commands"]
    assert not parse_command(command["argv"]).has("--rm-type")
    assert lint_argv(command["argv"], env=command["env"]) == []
    argv = good_args(custom_rm_path=None)
    assert by_flag(lint_argv(argv, env=SMOKE_ENV), "--rm-type or --custom-rm-path")[0].severity == ERROR
    custom = argv + ["--custom-generate-function-path", "my.generate"]
    assert lint_argv(custom, env=SMOKE_ENV, gpus=2) == []


# --- slime's own launch scripts ---------------------------------------------------------------------

LAUNCH_SCRIPTS = DATA / "slime-launch-scripts.json"

# What lint rightly says of slime's own scripts at the pinned commit. Anything else is a lint bug,
# or a new bug of slime's: then add it here with its reason (and tell slime).
_DISPATCHER = ("scripts/models/*.sh sets --moe-token-dispatcher-type alltoall; the script sets flex for DeepEP "
               "after it, and the warning says the last one wins, which is what the script means")
_SP_TP1 = "--sequence-parallel with TP=1 does nothing (Megatron switches it off): true of the script as written"
_KIMI_CUT = ("a missing backslash after `--update-weight-buffer-size $((...))` (line 173) ends the train.py command: "
             "bash runs `${MODEL_ARGS[@]} ...` as a command of its own (`--disable-bias-linear: command not found`), "
             "so train.py gets none of the script's arrays")
EXPECTED_FINDINGS: dict[str, dict[tuple[str, str], str]] = {
    "scripts/run-glm4.7-30B-A3B.sh": {
        (ERROR, "--expert-model-parallel-size"): "slime#1818: EP 8 x ETP 1 x PP 2 = 16 on 8 GPUs (PR #2077: EP 4)"},
    "scripts/run-kimi-k2-Instruct.sh": {(ERROR, flag): _KIMI_CUT for flag in (
        "--hf-checkpoint", "--rollout-batch-size", "--num-rollout or --num-epoch", "--prompt-data",
        "--rollout-max-response-len", "--rm-type or --custom-rm-path", "--num-layers")},
    **{script: {(WARNING, "--moe-token-dispatcher-type"): _DISPATCHER} for script in (
        "scripts/low_precision/run-moonlight-16B-A3B-int4.sh", "scripts/run-deepseek-r1.sh",
        "scripts/run-glm4.7-355B-A32B.sh", "scripts/run-moonlight-16B-A3B.sh", "scripts/run-qwen3-next-80B-A3B.sh",
        "scripts/run-qwen3.5-35B-A3B-sft.sh", "examples/coding_agent_rl/run_qwen36_35b_a3b_swe_8nodes.sh")},
    "scripts/low_precision/run-qwen3-30b-a3b-fp8.sh": {(WARNING, "--moe-token-dispatcher-type"): _DISPATCHER,
                                                       (WARNING, "--sequence-parallel"): _SP_TP1},
    **{script: {(WARNING, "--sequence-parallel"): _SP_TP1} for script in (
        "scripts/run-qwen2.5-0.5B-reproducibility.sh", "scripts/run-qwen3-4B-base-sft.sh",
        "examples/fully_async/run-qwen2.5-0.5B-fully_async.sh")},
    "examples/retool/retool_qwen3_4b_rl.sh": {
        (WARNING, "--rotary-base"): "scripts/models/qwen3-4B.sh sets 1000000, the script 5000000 after it"},
    "examples/retool/retool_qwen3_4b_sft.sh": {
        (WARNING, "--rotary-base"): "scripts/models/qwen3-4B.sh sets 1000000, the script 5000000 after it",
        (WARNING, "--sequence-parallel"): _SP_TP1},
}


def _launch_scripts() -> dict[str, dict]:
    return {entry["script"]: entry for entry in json.loads(LAUNCH_SCRIPTS.read_text(encoding="utf-8"))["scripts"]}


def test_the_launch_script_corpus_is_of_the_pinned_slime():
    corpus = json.loads(LAUNCH_SCRIPTS.read_text(encoding="utf-8"))
    header = (resources.files("cpverify") / "data" / "known_flags.txt").read_text().splitlines()[1]
    assert f"slime {corpus['slime_commit']};" in header  # tools/gen_launch_corpus.py again when the pin moves
    scripts = _launch_scripts()
    assert len(scripts) >= 40 and all(len(entry["commands"]) == 1 for entry in scripts.values())
    assert set(EXPECTED_FINDINGS) <= set(scripts)


@pytest.mark.parametrize("script", sorted(_launch_scripts()))
def test_slimes_own_launch_script_lints_as_expected(script):
    """Each launch script of slime, expanded by bash (tools/gen_launch_corpus.py): no error but the ones
    listed, no warning but the ones listed with their reason."""
    findings = {(f.severity, f.flag) for command in _launch_scripts()[script]["commands"]
                for f in lint_argv(command["argv"], env=command["env"])}
    assert findings == set(EXPECTED_FINDINGS.get(script, {}))


def test_the_corpus_generator_runs_a_script_as_bash_does(tmp_path):
    """tools/gen_launch_corpus.py on a small git repository shaped like slime: the model file is
    sourced, arrays and arithmetic expanded, ray and nvidia-smi stubbed, secret values masked."""
    import subprocess
    import sys

    repo = tmp_path / "slime"
    (repo / "scripts" / "models").mkdir(parents=True)
    (repo / "examples").mkdir()
    (repo / "scripts" / "models" / "tiny.sh").write_text("MODEL_ARGS=(\n  --num-layers 2\n  --swiglu\n)\n")
    (repo / "scripts" / "run-tiny.sh").write_text(
        'set -ex\nSCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"\n'
        'source "${SCRIPT_DIR}/models/tiny.sh"\nexport WANDB_API_KEY=not-a-real-key\n'
        'GPUS=$(nvidia-smi -L | wc -l)\npkill -9 ray\n'
        'ray job submit --address="http://127.0.0.1:8265" \\\n'
        '   --runtime-env-json=\'{"env_vars": {"HF_TOKEN": "not-a-real-token", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}}\' \\\n'
        '   -- python3 train.py --wandb-key not-a-real-key \\\n'
        '   --actor-num-gpus-per-node ${GPUS} --max-tokens-per-gpu $((4 * 1024)) ${MODEL_ARGS[@]}\n')
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "tiny"], check=True)
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(root / "tools" / "gen_launch_corpus.py"), "--slime", str(repo),
                           "--commit", "HEAD"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads(proc.stdout)["scripts"]
    assert (entry["script"], entry["exit_code"]) == ("scripts/run-tiny.sh", 0)
    (command,) = entry["commands"]
    assert command["argv"] == [
        "ray", "job", "submit", "--address=http://127.0.0.1:8265",
        '--runtime-env-json={"env_vars": {"HF_TOKEN": "<masked>", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}}',
        "--", "python3", "train.py", "--wandb-key", "<masked>", "--actor-num-gpus-per-node", "8",
        "--max-tokens-per-gpu", "4096", "--num-layers", "2", "--swiglu"]
    assert command["env"]["WANDB_API_KEY"] == "<masked>" and "not-a-real" not in proc.stdout
