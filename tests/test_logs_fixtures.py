"""Ground truth of tests/data/real-logs/INDEX.md, one test per real log.

The logs are excerpts that users pasted into public GitHub issues (ANSI remnants, Ray
prefixes, cut tracebacks and web-viewer noise kept on purpose). Some tests go through the
command line (`python -m cpverify parse FILE --json`, the contract outside checks use), the
rest through the API.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cpverify.parse import ParsedLog, parse_file

DATA = Path(__file__).parent / "data" / "real-logs"
REPO = Path(__file__).resolve().parents[1]


def cli_json(name: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "cpverify", "parse", str(DATA / name), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def api(name: str) -> ParsedLog:
    return parse_file(DATA / name)


def errors_of(doc: dict) -> dict[str, int]:
    """class -> line, from a --json document."""
    return {e["class"]: e["line"] for e in doc["errors"]}


def test_every_fixture_is_indexed_and_has_a_ground_truth_test():
    """INDEX.md holds the ground truth: each log has its entry there and a test here, each entry its log."""
    logs = {p.name for p in DATA.glob("*.log*")}
    indexed = set(re.findall(r"^### (\S+\.log\S*)$", (DATA / "INDEX.md").read_text(encoding="utf-8"), re.M))
    assert logs == indexed, f"not indexed: {sorted(logs - indexed)}; no file: {sorted(indexed - logs)}"
    tested = {name for name in globals() if name.startswith("test_")}
    prefixes = {f"test_{p.split('_')[0]}_" for p in logs}
    missing = [p for p in prefixes if not any(t.startswith(p) for t in tested)]
    assert not missing, missing


@pytest.mark.parametrize("path", sorted(DATA.glob("*.log*")), ids=lambda p: p.name[:2])
def test_no_class_is_reported_twice(path):
    classes = [e.cls for e in parse_file(path).errors]
    assert len(classes) == len(set(classes))


def test_02_cp_step11_train_metrics_via_cli():
    doc = cli_json("02_slime-issue1136-cp-step11-train-metrics.log")
    assert [(s["step"], s["line"], s["kind"]) for s in doc["steps"]] == [(11, 17, "step")]
    m = doc["steps"][0]["metrics"]
    assert m["train/loss"] == -6.05359673500061e-09
    assert m["train/pg_loss"] == -6.05359673500061e-09
    assert m["train/entropy_loss"] == 0.18443581461906433
    assert m["train/pg_clipfrac"] == 0.0 and m["train/ppo_kl"] == 0.0
    assert m["train/train_rollout_logprob_abs_diff"] == 0.018386833369731903
    assert m["train/kl_loss"] == 0.002021021908149123
    assert m["train/grad_norm"] == 0.07986056034213801
    assert m["train/lr-pg_0"] == m["train/lr-pg_1"] == m["train/lr-pg_2"] == 1e-06
    assert m["train/step"] == 11
    assert doc["timers"] == [{"name": "actor_train", "elapsed_s": 81.3, "line": 18}]
    assert doc["perf"] == []
    assert doc["errors"] == []  # the OOM of the title is not in the excerpt
    assert doc["lines"] == 22


def test_03_update_weights_never_completes():
    parsed = api("03_slime-issue1305-update-weights-before-nccl-failure.log")
    assert parsed.timers == []
    assert parsed.timers_open == [("update_weights", 1)]
    (mem,) = parsed.memory
    assert (mem.label, mem.line, mem.rank) == ("before update_weights", 3, 0)
    assert mem.metrics == {
        "total_GB": 79.11,
        "free_GB": 60.0,
        "used_GB": 19.11,
        "allocated_GB": 23.99,
        "reserved_GB": 25.04,
    }
    assert parsed.errors == [] and parsed.steps == [] and parsed.perf == []


def test_05_nccl_version_and_cuda_failure_via_cli():
    doc = cli_json("05_slime-issue1106-nccl-sm120-debug-info.log")
    assert doc["nccl"]["version"] == "2.27.5" and doc["nccl"]["cuda"] == "12.9"
    assert doc["nccl"]["transports"] == [] and doc["nccl"]["network"] is None
    errors = errors_of(doc)
    assert errors["nccl_cuda_failure"] == 7
    assert errors["nccl_warn"] == 7
    # slime logs memory "after torch distributed error" (line 5) when c10d raised: the first
    # sign of the NCCL error, so the coarse class starts there.
    assert errors["torch_distributed_error"] == 5 and errors["nccl_error"] == 5
    cuda_failure = next(e for e in doc["errors"] if e["class"] == "nccl_cuda_failure")
    assert cuda_failure["detail"]["reason"] == "named symbol not found"
    assert cuda_failure["coarse"] == "nccl_error"
    assert [(m["label"], m["line"]) for m in doc["memory"]] == [("after torch distributed error", 5)]


def test_06_hang_in_update_weights():
    parsed = api("06_slime-issue950-hang-update-weights.log")
    hang = parsed.first_error("hang")
    assert hang is not None and hang.line == 1
    assert hang.detail["s_per_it"] == 661.36 and (hang.detail["done"], hang.detail["total"]) == (1, 16)
    assert "661.36s/it" in hang.text
    (tb,) = parsed.tracebacks
    assert tb.line == 2 and tb.exception is None  # cut before the exception
    frame = tb.frames[1]
    assert (frame.file, frame.lineno, frame.func, frame.code) == (
        "/root/slime/train.py",
        34,
        "train",
        "actor_model.update_weights()",
    )
    assert parsed.first_error("python_traceback").line == 2


def test_07_traceback_through_web_viewer_noise():
    parsed = api("07_slime-issue1739-actor-unavailable-ray-traceback-with-ui-timestamps.log")
    (tb,) = parsed.tracebacks
    assert tb.line == 1
    assert [f.lineno for f in tb.frames] == [100, 69, 22, 104, 2981]
    failing = tb.frames[1]
    assert (failing.file, failing.func) == ("/root/slime_siqi/train.py", "train")
    assert failing.code == "rollout_data_ref = ray.get(rollout_manager.generate.remote(rollout_id))"
    # Only the title names ActorUnavailableError; nothing in the file says it.
    assert parsed.error_classes() == {"python_traceback"}
    assert parsed.lines == 56


def test_09_cuda_oom_tried_58_gib():
    parsed = api("09_slime-issue1951-oom-compute-log-probs.log")
    oom = parsed.first_error("cuda_oom")
    assert oom.line == 1
    assert oom.detail["tried"] == "58.15 GiB"
    assert oom.detail["capacity"] == "139.81 GiB" and oom.detail["free"] == "47.69 GiB"
    assert oom.detail["allocated_by_pytorch"] == "82.55 GiB" and oom.detail["gpu"] == 0
    assert len(oom.text) <= 300 and oom.text.startswith("torch.OutOfMemoryError: CUDA out of memory.")
    frames = [f for tb in parsed.tracebacks for f in tb.frames]
    assert ("calculate_log_probs_and_entropy", 672) in [(f.func, f.lineno) for f in frames]
    assert frames[0].file.endswith("slime/utils/ppo_utils.py")


def test_10_rollout_perf13_is_not_a_train_step_via_cli():
    doc = cli_json("10_slime-issue1497-rollout-perf13-before-cuda-oom.log")
    (perf,) = doc["perf"]
    assert (perf["rollout"], perf["side"], perf["line"]) == (13, "rollout", 6)
    assert perf["metrics"] == {
        "perf/rollout_time": 1756.2989201545715,
        "perf/tokens_per_gpu_per_sec": 35.01197848176559,
        "perf/longest_sample_tokens_per_sec": 9.140243620139092,
        "rollout/response_len/mean": 1921.609375,
        "rollout/response_len/median": 784.0,
        "rollout/zero_std/count_1.1": 4,
        "rollout/zero_std/count_0.1": 1,
        "rollout/repetition_frac": 0.0,
        "rollout/truncated_ratio": 0.04296875,
    }
    assert "perf/step_time" not in perf["metrics"]
    assert doc["steps"] == []
    assert doc["errors"] == []  # 1.52 s/it is a working bar, not a hang


def test_12_using_network_socket_alone_is_not_tcp_fallback():
    parsed = api("12_nccl-issue1267-debug-info-net-socket.log")
    assert (parsed.nccl.version, parsed.nccl.cuda) == ("2.19.3", "12.3")  # old bare form, line 6
    assert parsed.nccl.network == "Socket"
    assert parsed.nccl.transports == []  # nranks 1: no channel lines
    assert parsed.tcp_fallback is False and parsed.nccl_transport_warning() is None
    assert parsed.errors == []  # "NET/IB : No device found." and plugin chatter are INFO


def test_14_ib_gdrdma_and_p2p_cumem_via_cli():
    doc = cli_json("14_nccl-issue1189-h20-net-ib-gdrdma-and-p2p-cumem.log")
    assert doc["nccl"]["transports"] == ["NET/IB/GDRDMA", "P2P/CUMEM"]
    assert doc["nccl"]["version"] is None
    assert doc["nccl"]["tcp_fallback"] is False


def test_15_ib_roce():
    parsed = api("15_nccl-tests-issue185-debug-info-net-ib-roce.log")
    assert parsed.nccl.version == "2.19.3"
    assert parsed.nccl.network == "IB" and parsed.nccl.ib_link == "RoCE"
    assert parsed.nccl.transports == []
    assert parsed.errors == []


def test_17_sglang_http_500():
    parsed = api("17_slime-issue1514-sglang-http-500-after-rollout.log")
    assert [(e.cls, e.line) for e in parsed.errors] == [("sglang_http_500", 1), ("sglang_error", 1)]
    assert parsed.errors[0].detail["actor"] == "SGLangEngine"


def test_18_sglang_server_startup_failure():
    parsed = api("18_sglang-issue2193-server-init-failed-warmup.log")
    assert parsed.first_error("sglang_server_startup_failure").line == 7
    assert parsed.first_error("sglang_startup_failure").line == 7
    assert parsed.tracebacks[0].frames[0].func == "_wait_and_warmup"
    assert parsed.first_error("hang") is None  # "0/1 [00:00<?, ?it/s]" is a bar starting


def test_19_sglang_startup_caused_by_nccl_unhandled_system_error_via_cli():
    errors = errors_of(cli_json("19_sglang-issue4289-startup-nccl-unhandled-system-error.log"))
    assert errors == {
        "sglang_server_startup_failure": 13,
        "sglang_startup_failure": 13,
        "nccl_unhandled_system_error": 13,
        "nccl_error": 13,
        "python_traceback": 13,  # the paste starts at the first frame: its header was cut
    }


def test_20_ray_prefixed_watchdog_timeout_via_cli():
    doc = cli_json("20_openrlhf-issue624-ray-prefixed-nccl-watchdog-timeout.log")
    assert [(e["class"], e["line"]) for e in doc["errors"]] == [("nccl_timeout", 2)]
    detail = doc["errors"][0]["detail"]
    assert detail["op"] == "_ALLGATHER_BASE" and detail["seq"] == 17284
    assert detail["timeout_ms"] == 7200000 and detail["ran_ms"] == 7200031
    assert detail["repeated"] == 14 and detail["actor"] == "ReferenceModelRayActor"
    text = doc["errors"][0]["text"]
    assert text.startswith("[rank0]:[E1225 12:58:32") and "repeated" not in text


def test_23_heartbeat_stuck_and_allgather_timeout_are_two_classes():
    parsed = api("23_arctictraining-issue219-nccl-heartbeat-stuck-and-allgather-timeout.log")
    stuck, timeout = parsed.first_error("nccl_heartbeat_stuck"), parsed.first_error("nccl_timeout")
    assert (stuck.line, stuck.detail["stuck_s"]) == (1, 480)
    assert (timeout.line, timeout.detail["seq"], timeout.detail["timeout_ms"], timeout.detail["ran_ms"]) == (
        2,
        120049,
        1800000,
        1800065,
    )
    assert timeout.detail["op"] == "_ALLGATHER_BASE"
    assert parsed.first_error("hang").line == 1  # heartbeat_stuck's coarse class


def test_24_actor_died_in_rollout_manager_init():
    parsed = api("24_slime-pr419-actordied-rolloutmanager-init.log")
    died = parsed.first_error("ray_actor_died")
    assert died.line == 1 and "RolloutManager.__init__" in died.text
    root = parsed.tracebacks[0].frames[-1]
    assert (root.file.endswith("slime/utils/http_utils.py"), root.lineno, root.func) == (True, 124, "init_http_client")


def test_25_megatron_iteration_table_via_cli():
    doc = cli_json("25_megatron-llm-issue11-iteration-lines.log")
    table = [
        (i["iteration"], i["line"], i["elapsed_ms"], i["metrics"]["lm loss"], i["metrics"]["grad norm"])
        for i in doc["iterations"]
    ]
    assert table == [
        (122, 1, 86545.2, 2.504220, 0.231),
        (123, 2, 87871.6, 2.493043, 0.236),
        (124, 3, 89474.8, 2.559583, 0.242),
        (125, 4, 89075.2, 2.477393, 0.356),
    ]
    for it in doc["iterations"]:
        assert it["total"] == 250000
        assert it["metrics"]["global batch size"] == 1024
        assert it["metrics"]["number of skipped iterations"] == 0
        assert it["metrics"]["number of nan iterations"] == 0
    assert doc["steps"] == [] and doc["errors"] == []


def test_27_rollout_perf0_debug_rollout_only():
    parsed = api("27_slime-issue1837-rollout-perf0-debug-rollout-only.log")
    (perf,) = parsed.perf
    assert (perf.rollout, perf.side, perf.line, perf.salvaged) == (0, "rollout", 2, False)
    m = perf.metrics
    assert m["perf/rollout_time"] == 371.1796889305115
    assert m["perf/tokens_per_gpu_per_sec"] == 239.12643295688667
    assert m["perf/longest_sample_tokens_per_sec"] == 11.035086568992766
    assert m["perf/effective_tokens_per_gpu_per_sec"] == 239.12643295688667
    assert [m[f"rollout/response_len/{k}"] for k in ("mean", "median", "max", "min")] == [
        2773.71484375,
        2837.5,
        4096,
        593,
    ]
    assert m["rollout/truncated_ratio"] == 0.46484375
    assert (m["rollout/zero_std/count_0"], m["rollout/zero_std/count_1"]) == (12, 14)
    assert "perf/step_time" not in m and parsed.perf_for("train") == [] and parsed.steps == []


def test_28_wake_up_host_memory_then_traceback():
    parsed = api("28_slime-via-vime-issue56-wake-up-host-mem-then-traceback.log")
    assert parsed.timers_open == [("wake_up", 1)]
    (mem,) = parsed.memory
    assert (mem.label, mem.line, mem.rank) == ("before wake_up model", 2, 0)
    assert (mem.metrics["total_GB"], mem.metrics["free_GB"]) == (79.25, 71.8)
    assert (mem.metrics["host_total_GB"], mem.metrics["host_available_GB"], mem.metrics["host_used_GB"]) == (
        1003.08,
        214.89,
        788.19,
    )
    (tb,) = parsed.tracebacks
    assert tb.line == 3
    assert (tb.frames[1].lineno, tb.frames[1].code) == (
        85,
        "ray.get(actor_model.async_train(rollout_id, rollout_data_ref))",
    )
    # ray_host_oom is inferred by the commenter, never printed: not reported.
    assert parsed.error_classes() == {"python_traceback"}


def test_30_ray_prefixed_p2p_ipc_read():
    parsed = api("30_ray-issue46795-ray-prefixed-nccl-p2p-ipc-read.log")
    assert parsed.nccl.transports == ["P2P/IPC"]
    assert parsed.nccl.version is None and parsed.errors == []


def test_31_argparse_unrecognized_arguments():
    parsed = api("31_pai-megatron-patch-issue21-argparse-unrecognized-arguments.log")
    unrecognized = parsed.first_error("argparse_unrecognized_arguments")
    assert unrecognized.line == 1 and unrecognized.detail["arguments"] == "--DDP-impl local"
    assert parsed.first_error("argparse_error").line == 1
    launcher = parsed.first_error("launcher_failed")
    assert (launcher.line, launcher.detail["exit_code"]) == (2, 2)
    (tb,) = parsed.tracebacks
    assert tb.exception_line == 16 and tb.exception.endswith("ChildFailedError:")


def test_32_argparse_ambiguous_option_via_cli():
    doc = cli_json("32_lora-scripts-issue18-argparse-ambiguous-option.log")
    errors = errors_of(doc)
    assert errors["argparse_ambiguous_option"] == 1 and errors["argparse_error"] == 1
    ambiguous = next(e for e in doc["errors"] if e["class"] == "argparse_ambiguous_option")
    assert ambiguous["detail"]["option"].startswith("--lr_scheduler=cosine_with_restarts could match")
    subprocess_failed = next(e for e in doc["errors"] if e["class"] == "subprocess_failed")
    assert (subprocess_failed["line"], subprocess_failed["detail"]["exit_code"]) == (14, 2)


def test_34_old_total_train_time_fragment_via_cli():
    doc = cli_json("34_slime-issue385-old-total-train-time-fragment-vs-verl.log")
    by_side = {p["side"]: p for p in doc["perf"]}
    assert set(by_side) == {"rollout", "train"}
    rollout, train = by_side["rollout"], by_side["train"]
    # line 1 has no opening quote, line 2 ends with `", "`: salvaged, rollout id not printed
    assert (rollout["line"], rollout["rollout"], rollout["salvaged"]) == (1, -1, True)
    assert rollout["metrics"] == {"perf/rollout_time": 245.61117100715637}
    assert (train["line"], train["rollout"], train["salvaged"]) == (2, -1, True)
    assert train["metrics"] == {
        "perf/total_train_time": 287.2645092010498,
        "perf/step_time": 287.2645092010498,  # the old name, normalised
    }
    # verl's timing_s/step is not slime's step
    assert doc["steps"] == [] and doc["iterations"] == [] and doc["errors"] == []


# ---------------------------------------------------------------------------- what real logs said


SIGKILL_OOM = "killed by SIGKILL, likely the host OOM killer"


def test_35_ray_actor_dead_without_prefix_then_job_failed_via_cli():
    doc = cli_json("35_simplerl-issue98-ray-actor-dead-then-job-failed.log")
    errors = {e["class"]: e for e in doc["errors"]}
    died = errors["ray_actor_died"]
    assert died["line"] == 1 and died["detail"]["exit_type"] == "SYSTEM_ERROR"
    assert died["detail"]["exit_detail"] == "Worker unexpectedly exits with a connection error code 2. End of file."
    assert "SIGKILL" in died["detail"]["cause"] and "OOM killer" in died["detail"]["cause"]
    assert errors["ray_job_failed"]["line"] == 4
    # The RayActorError further down is the same death, already reported; Ray printed its traceback
    # without a header (the job's last logs start mid-traceback).
    assert [e["class"] for e in doc["errors"]] == ["ray_actor_died", "ray_job_failed", "python_traceback"]
    assert errors["python_traceback"]["detail"] == {"exception": "ray.exceptions.RayActorError", "frames_from": 8}


def test_36_ray_actor_dead_after_actor_context_lines():
    parsed = api("36_verl-issue472-actor-context-then-actor-dead.log")
    died = parsed.first_error("ray_actor_died")
    assert died.line == 4 and died.text.startswith("The actor is dead because its worker process has died.")
    assert died.detail["exit_type"] == "SYSTEM_ERROR" and "SIGKILL" in died.detail["cause"]
    assert parsed.error_classes() == {"ray_actor_died"}


def test_37_actordied_first_then_newer_ray_wording_adds_the_exit_type():
    parsed = api("37_verl-issue4921-actordied-then-newer-ray-worker-death-wording.log")
    died = parsed.first_error("ray_actor_died")
    assert died.line == 5 and "ActorDiedError" in died.text  # reported where it was raised
    # Ray 2.4x words it "Some common causes include: (1) the process was killed by the OOM killer".
    assert died.detail["exit_type"] == "SYSTEM_ERROR"
    assert died.detail["exit_detail"] == "Worker unexpectedly exits with a connection error code 2. End of file."
    assert "SIGKILL" in died.detail["cause"]


def test_38_childfailederror_table_root_cause_is_sigkill_via_cli():
    doc = cli_json("38_cppo-issue6-torchrun-childfailederror-sigkill-table.log")
    traceback, failed = doc["errors"]  # the traceback's header was cut from the paste
    assert (traceback["class"], traceback["line"]) == ("python_traceback", 3)
    assert (failed["class"], failed["line"]) == ("launcher_failed", 3)
    assert failed["detail"]["exit_code"] == -9 and failed["detail"]["signal"] == "SIGKILL"
    assert failed["detail"]["cause"].startswith(SIGKILL_OOM)


def test_39_sigsegv_from_the_launcher_line_and_the_table_rows():
    parsed = api("39_megatron-issue1880-sigsegv-launcher-line-and-table-rows.log")
    failed = parsed.first_error("launcher_failed")
    assert failed.line == 3 and "failed (exitcode: -11)" in failed.text
    assert (failed.detail["exit_code"], failed.detail["signal"]) == (-11, "SIGSEGV")
    assert "segmentation fault" in failed.detail["cause"]
    assert parsed.first_error("python_traceback").line == 5
    assert parsed.lines == 14


def test_40_pytorch_shape_mismatch_is_a_cp_shape_failure_via_cli():
    doc = cli_json("40_pai-megatron-patch-issue131-rotary-shape-mismatch.log")
    errors = {e["class"]: e for e in doc["errors"]}
    assert set(errors) == {"tensor_shape_mismatch", "collective_shape_mismatch", "python_traceback"}
    assert errors["python_traceback"]["detail"] == {"exception": "RuntimeError", "frames_from": 1}
    shape = errors["tensor_shape_mismatch"]
    assert shape["line"] == 3 and shape["coarse"] == "collective_shape_mismatch"
    assert shape["detail"] == {"a": 120, "b": 119, "dim": 2}


def test_41_shape_mismatch_hard_wrapped_by_a_terminal():
    parsed = api("41_pai-megatron-patch-issue131-shape-mismatch-wrapped-at-80-columns.log")
    shape = parsed.first_error("tensor_shape_mismatch")
    assert shape.line == 5  # where the message starts
    assert (shape.detail["a"], shape.detail["b"], shape.detail["dim"]) == (120, 119, 2)
    assert shape.text.endswith("at non-singleton dimension 2")
    assert parsed.first_error("collective_shape_mismatch").line == 5


def test_42_gzip_log_is_read_by_its_magic_bytes_via_cli(tmp_path):
    plain = cli_json("25_megatron-llm-issue11-iteration-lines.log")
    doc = cli_json("42_megatron-llm-issue11-iteration-lines-gzip.log.gz")
    assert doc["iterations"] == plain["iterations"] and len(doc["iterations"]) == 4
    assert doc["source"]["compression"] == "gzip" and plain["source"]["compression"] is None
    # The magic bytes decide, not the name.
    renamed = tmp_path / "arm.log"
    renamed.write_bytes((DATA / "42_megatron-llm-issue11-iteration-lines-gzip.log.gz").read_bytes())
    assert parse_file(renamed).to_json()["iterations"] == plain["iterations"]


def test_43_utf16_log_with_bom_reads_like_the_utf8_original():
    original = api("02_slime-issue1136-cp-step11-train-metrics.log").to_json()
    utf16 = api("43_slime-issue1136-step11-as-windows-utf16.log").to_json()
    assert utf16["source"]["encoding"] == "utf-16"
    for key in ("steps", "timers", "errors", "lines"):
        assert utf16[key] == original[key], key


def test_44_megatron_argument_dump_confirms_cp2_without_the_hook_line_via_cli():
    doc = cli_json("44_slime-h200x2-cp2-megatron-arguments-dump.log")
    assert doc["layout"] == {
        "cp": 2, "dp": 1, "tp": 1, "pp": 1, "world": 2, "ranks": [0], "source": "megatron-arguments"
    }
    assert doc["errors"] == [] and doc["lines"] == 877


def test_45_megatron_argument_dump_of_the_cp1_run_says_cp1():
    layout = api("45_slime-h200x2-cp1-megatron-arguments-dump.log").layout
    assert (layout.cp, layout.dp, layout.tp, layout.pp, layout.world) == (1, 2, 1, 1, 2)
    assert layout.source == "megatron-arguments"


def test_46_torch_memory_saver_retry_notice_is_no_error_its_oom_is_via_cli():
    doc = cli_json("46_torch-memory-saver-issue99-retry-notice-then-oom.log")
    assert [(e["class"], e["line"]) for e in doc["errors"]] == [("cuda_oom", 2)]
    assert doc["errors"][0]["detail"] == {"reason": "out of memory", "code": 2, "library": "torch_memory_saver"}


def test_47_old_torch_memory_saver_curesult_without_its_string():
    parsed = api("47_torch-memory-saver-issue35-curesult-resume-children-failed.log")
    assert [(e.cls, e.line) for e in parsed.errors] == [
        ("cuda_error", 1), ("sglang_child_process_failed", 5), ("sglang_error", 5)]
    assert parsed.errors[0].detail == {"code": 1, "library": "torch_memory_saver"}
    assert parsed.first_error("sglang_child_process_failed").detail["exit_code"] == 256


def test_48_transformer_engine_cudnn_error_from_interleaved_ranks():
    parsed = api("48_transformerengine-issue651-cudnn-frontend-error-interleaved-ranks.log")
    assert [(e.cls, e.line, e.coarse) for e in parsed.errors] == [("cudnn_error", 1, "cuda_error"),
                                                                  ("cuda_error", 1, "cuda_error")]
    assert parsed.errors[0].detail["reason"] == "No execution plans built successfully."


def test_49_uncaught_cpp_exception_is_a_native_crash():
    parsed = api("49_prime-diloco-issue68-terminate-gloo-enforce-fail.log")
    assert [(e.cls, e.line) for e in parsed.errors] == [("native_crash", 1), ("crash", 1)]
    assert (parsed.errors[0].detail["exception"], parsed.errors[0].detail["signal"]) == ("gloo::EnforceNotMet", "SIGABRT")


def test_50_watchdog_exception_that_terminates_the_process():
    errors = {e.cls: e for e in api("50_megatron-issue935-terminate-distbackenderror-watchdog-timeout.log").errors}
    assert {cls: e.line for cls, e in errors.items()} == {"nccl_error": 1, "native_crash": 1, "crash": 1,
                                                          "nccl_timeout": 2}
    assert errors["native_crash"].detail["exception"] == "c10::DistBackendError"
    assert (errors["nccl_timeout"].detail["seq"], errors["nccl_timeout"].detail["ran_ms"]) == (199, 882725)


def test_51_a_traceback_pasted_without_its_header_via_cli():
    doc = cli_json("51_miles-issue308-headerless-traceback-accelerator-error.log")
    assert errors_of(doc) == {"python_traceback": 15, "cuda_illegal_memory_access": 15}
    (tb,) = doc["tracebacks"]
    assert (tb["line"], tb["exception_line"], len(tb["frames"])) == (1, 15, 5)
    traceback = next(e for e in doc["errors"] if e["class"] == "python_traceback")
    assert traceback["detail"] == {"exception": "torch.AcceleratorError", "frames_from": 1}


def test_52_slimes_ep_error_quoted_without_its_header():
    parsed = api("52_slime-issue1818-headerless-world-size-not-divisible-by-ep.log")
    assert [(e.cls, e.line) for e in parsed.errors] == [
        ("python_traceback", 3), ("megatron_world_size_not_divisible", 3), ("assertion_error", 3)]
    assert parsed.errors[0].detail["exception"] == "RuntimeError"


def test_53_the_watchdogs_timeout_line_alone_behind_a_launcher_prefix_via_cli():
    doc = cli_json("53_milabench-pr269-stderr-prefixed-timeout-at-nccl-work.log")
    assert errors_of(doc) == {"nccl_timeout": 9}
    # the line is hard-wrapped after `last enqueued `: the queue's numbers are on the next line
    assert doc["errors"][0]["detail"]["seq"] == 2070


def test_54_perf_dicts_hard_wrapped_by_the_terminal_keep_their_step_time():
    parsed = api("54_slime-pr1102-cp2-perf-dicts-hard-wrapped.log")
    assert [(p.rollout, p.side, p.line) for p in parsed.perf] == [(2, "train", 3), (5, "train", 9)]
    two, five = parsed.perf
    assert two.metrics["perf/step_time"] == 14.182998418807983
    assert two.metrics["perf/wake_up_time"] == 1.9440078735351562  # `'perf/wake_up_ti` + `me': 1.94...`
    assert two.salvaged  # the paste's own damage (`':_1.40...`, `'perf/train_timeT: 2.84...`) is left out
    # perf 5 is cut by the excerpt: the pairs a comma closed, the cut last one left out
    assert five.metrics["perf/log_probs_time"] == 0.22948408126831055
    assert "perf/cp_seq_kl_prep_time" not in five.metrics and "perf/step_time" not in five.metrics
    assert parsed.errors == [] and parsed.steps == []


def test_55_torch_oom_naming_two_processes_after_py311_carets():
    parsed = api("55_verl-issue5840-torch-oom-two-processes-py311-carets.log")
    assert [(e.cls, e.line) for e in parsed.errors] == [("python_traceback", 5), ("cuda_oom", 5)]
    oom = parsed.errors[1].detail
    assert (oom["tried"], oom["gpu"], oom["capacity"], oom["free"], oom["allocated_by_pytorch"]) == (
        "23.93 GiB", 0, "95.08 GiB", "22.35 GiB", "55.13 GiB")
    (tb,) = parsed.tracebacks
    assert (tb.line, tb.exception_line, [f.lineno for f in tb.frames]) == (2, 5, [118])


def test_56_heartbeat_monitor_message_wrapped_at_116_columns():
    parsed = api("56_vlm-r1-issue257-heartbeat-stuck-wrapped-at-116-columns.log")
    assert [(e.cls, e.line) for e in parsed.errors] == [("nccl_heartbeat_stuck", 2), ("hang", 2)]
    assert parsed.errors[0].detail["stuck_s"] == 480


def test_57_watchdog_timeout_after_interleaved_what_lines():
    parsed = api("57_open-r1-issue620-interleaved-what-watchdog-timeout-wrapped.log")
    assert [(e.cls, e.line) for e in parsed.errors] == [("nccl_timeout", 11)]
    detail = parsed.errors[0].detail
    assert (detail["op"], detail["seq"], detail["timeout_ms"]) == ("BROADCAST", 4, 1800000)


def test_58_raylet_kills_workers_for_memory_pressure_wrapped():
    parsed = api("58_wmpo-issue3-raylet-memory-pressure-kill-wrapped.log")
    assert [(e.cls, e.line) for e in parsed.errors] == [("ray_host_oom", 2), ("ray_actor_died", 2)]


def test_59_ray_job_status_then_the_tail_of_an_accelerator_error_via_cli():
    doc = cli_json("59_slime-issue1297-ray-job-status-then-accelerator-error.log")
    assert errors_of(doc) == {"ray_job_failed": 1, "python_traceback": 9, "cuda_illegal_memory_access": 9}
    assert doc["errors"][0]["detail"]["exit_code"] == 1
    (tb,) = doc["tracebacks"]
    assert (tb["line"], tb["exception_line"], len(tb["frames"])) == (3, 9, 2)


def test_60_py313_traceback_with_a_blank_line_after_every_line():
    parsed = api("60_sglang-jax-pr738-py313-traceback-double-spaced.log")
    assert [(e.cls, e.line) for e in parsed.errors] == [("python_traceback", 1)]
    (tb,) = parsed.tracebacks
    assert tb.exception is None and len(tb.frames) == 8  # cut after the last frame's header
    assert tb.frames[1].code == "return runner.run(main)"  # the `~~~^^^` line is no code


def test_61_sglang_scheduler_killed_at_start_up_via_cli():
    doc = cli_json("61_sglang-issue15235-scheduler-dead-exit-code-minus-9.log")
    assert errors_of(doc) == {"sglang_server_startup_failure": 1, "sglang_startup_failure": 1, "python_traceback": 3}
    detail = doc["errors"][0]["detail"]
    assert (detail["rank"], detail["exit_code"], detail["signal"]) == (0, -9, "SIGKILL")


def test_62_a_bare_exception_ends_the_sglang_schedulers_start_up_traceback():
    parsed = api("62_sglang-issue4205-bare-exception-capture-cuda-graph-failed.log")
    assert [(e.cls, e.line) for e in parsed.errors] == [
        ("python_traceback", 3), ("sglang_server_startup_failure", 18), ("sglang_startup_failure", 18)]
    (tb,) = parsed.tracebacks
    assert (tb.exception_line, len(tb.frames), tb.frames[-1].func) == (18, 7, "__init__")
    assert tb.exception.startswith("Exception: Capture cuda graph failed")


def test_63_nested_exception_group_tracebacks_behind_their_margins():
    parsed = api("63_anyio-issue863-nested-exception-group-tracebacks.log")
    assert [(e.cls, e.line) for e in parsed.errors] == [("python_traceback", 5)]
    assert parsed.errors[0].detail == {"exception": "ExceptionGroup", "frames_from": 1}
    assert [(tb.line, tb.exception_line, len(tb.frames)) for tb in parsed.tracebacks] == [
        (1, 5, 2), (7, 12, 2), (14, 17, 1), (22, None, 1)]
    assert parsed.tracebacks[2].exception == "Exception: Something went wrong"
    assert parsed.tracebacks[2].frames[0].code == 'raise Exception("Something went wrong")'
