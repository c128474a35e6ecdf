"""The torch-native CP probe: its pure logic (no torch), its CLI, and logs recorded on 2×H200.

Recorded logs (tests/data/probe/, from benchmarks/run_probe_device.sh on nvidia-h200-x2; most
`NCCL INFO` lines cut, the version and channel lines kept): CP=1 and CP=2 at 16K and 64K, the
deliberate bypass (--bypass-cp) and a bandwidth run with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1.
The last tests launch the real workload on CPU (gloo) and skip where torch is missing.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cpverify import probe
from cpverify.cli import main
from cpverify.cli import probe as probe_cli
from cpverify.errors import InputError
from cpverify.overrides import with_overrides
from cpverify.parse import LogParser, ParsedLog, parse_file
from cpverify.plan import build_plan
from cpverify.probe import bandwidth, rules, workload
from cpverify.profiles import get_profile

DATA = Path(__file__).parent / "data" / "probe"
REPO = Path(__file__).resolve().parents[1]
# slime's metric-line header, as cpverify's parser searches for it (slime-notes: parsing hints)
SLIME_HEADER = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] ([\w.-]+\.py):(\d+) - ")


def recorded_lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


def read(lines: list[str]) -> ParsedLog:
    """Lines as cpverify's one log parser reads them (`cpverify probe` and `cpverify run` alike)."""
    parser = LogParser()
    for number, line in enumerate(lines, 1):
        parser.feed(line, number)
    return parser.result()


# ------------------------------------------------------------------------------------ pure logic


@pytest.mark.parametrize("seq_len, cp, padded", [
    (4096, 2, 4096), (4099, 2, 4100), (4099, 4, 4104), (5, 4, 8), (7, 1, 7), (131072, 8, 131072), (1, 2, 4),
])
def test_padding_to_a_multiple_of_two_cp(seq_len, cp, padded):
    assert rules.padded_length(seq_len, cp) == padded
    if cp > 1:
        assert padded % (2 * cp) == 0 and 0 <= padded - seq_len < 2 * cp


@pytest.mark.parametrize("seq_len, cp", [(0, 2), (16, 0)])
def test_padding_rejects_nonsense(seq_len, cp):
    with pytest.raises(ValueError):
        rules.padded_length(seq_len, cp)


@pytest.mark.parametrize("op, world, factor", [
    ("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5), ("all_reduce", 8, 1.75),
    ("all_gather", 2, 0.5), ("all_gather", 4, 0.75), ("sendrecv", 4, 1.0), ("reduce_scatter", 8, 0.875),
])
def test_busbw_factors_are_nccl_tests(op, world, factor):
    assert rules.busbw_factor(op, world) == pytest.approx(factor)


def test_bandwidth_numbers():
    algbw, busbw = rules.bandwidth_gbps("all_reduce", 256 * 2**20, 1e-3, 4)
    assert algbw == pytest.approx(268.435456)
    assert busbw == pytest.approx(268.435456 * 1.5)
    with pytest.raises(ValueError, match="unknown collective"):
        rules.busbw_factor("all_to_everyone", 2)
    with pytest.raises(ValueError):
        rules.bandwidth_gbps("all_reduce", 1, 0.0, 2)


def test_recorded_busbw_is_consistent_with_the_formulas():
    """On the recorded socket run: busbw / algbw is each op's factor for 2 GPUs."""
    rows = parse_file(DATA / "h200x2-bw-p2p-shm-off.log").bandwidth
    assert {b.op for b in rows} == {"all_reduce", "all_gather", "sendrecv"}
    for b in rows:
        assert b.busbw_gbps / b.algbw_gbps == pytest.approx(rules.busbw_factor(b.op, 2), rel=0.01)
    assert any("via NET/Socket" in line for line in recorded_lines("h200x2-bw-p2p-shm-off.log"))


def test_gate_decisions():
    assert rules.gate("x", 2e-3, 1e-2).status == "pass"
    assert rules.gate("x", 1e-2, 1e-2).status == "pass"
    assert rules.gate("x", 0.63, 1e-2).status == "fail"  # the bypass error measured on H200
    assert rules.gate("x", float("nan"), 1e-2).status == "fail"
    assert rules.gate("x", float("inf"), 1e-2).status == "fail"


def test_dispatch_gate_catches_the_bypass():
    assert rules.dispatch_gate(patched=True, ring_calls=2).status == "pass"
    assert rules.dispatch_gate(patched=False, ring_calls=0).status == "fail"
    assert rules.dispatch_gate(patched=True, ring_calls=0).status == "fail"
    unobservable = rules.dispatch_gate(patched=True, ring_calls=None)
    assert unobservable.status == "pass" and "not observable" in unobservable.detail
    assert rules.dispatch_gate(patched=False, ring_calls=None).status == "fail"


def test_check_line_format_round_trips():
    line = rules.format_check("cp_output_vs_reference", "pass", 0.00217551, 0.01, 'padded "4100"; ok\\no')
    assert line.startswith("cpverify-check name=cp_output_vs_reference status=pass value=0.00217551 bound=0.01 detail=")
    (check,) = read([line]).checks
    assert (check.name, check.status, check.value, check.bound, check.detail) == (
        "cp_output_vs_reference", "pass", 0.00217551, 0.01, 'padded "4100"; ok\\no')
    with pytest.raises(ValueError):
        rules.format_check("x", "maybe", 0, 0)


def test_busbw_and_layout_line_formats():
    assert rules.format_busbw("all_reduce", 268435456, 296.594, 296.594) == \
        "cpverify-busbw op=all_reduce bytes=268435456 busbw_gbps=296.59 algbw_gbps=296.59"
    assert rules.format_layout(1, 4, 2) == "cpverify-layout rank=1 world=4 tp=1 pp=1 cp=2 dp=2"
    with pytest.raises(ValueError):
        rules.format_layout(0, 3, 2)


def test_prose_mentioning_a_prefix_is_not_a_record():
    prose = "cpverify probe: error: the CP correctness gate failed (see the cpverify-check lines); not timing"
    parsed = read([prose, "no cpverify-busbw lines were printed"])
    assert parsed.checks == [] and parsed.bandwidth == []


def test_perf_line_is_slime_format(capsys):
    metrics = rules.perf_metrics(step_s=0.0088, compute_s=0.0061, tokens=16384, cp=2)
    assert metrics == {"perf/actor_train_time": 0.0061, "perf/train_time": 0.0088, "perf/step_time": 0.0088,
                       "perf/tokens_per_gpu_per_sec": round(8192 / 0.0088, 1)}
    logger = logging.getLogger("cpverify.probe.workload")
    old_handlers = list(logger.handlers)
    try:
        workload._setup_logging()
        workload.log_perf(7, metrics)
    finally:
        logger.handlers = old_handlers
    line = capsys.readouterr().out.strip()
    header = SLIME_HEADER.search(line)
    assert header and header.group(2) == "workload.py"
    (perf,) = read([line]).perf
    assert (perf.rollout, perf.side, perf.metrics) == (7, "train", metrics)


def test_recorded_h200_logs_read_back():
    lines = recorded_lines("h200x2-cp2-s16k.log")
    parsed = parse_file(DATA / "h200x2-cp2-s16k.log")
    assert [p.rollout for p in parsed.perf] == list(range(5, 35))  # 30 measured steps after 5 warm-up
    assert all(SLIME_HEADER.search(line) for line in lines if " - perf " in line)
    assert {c.name: c.status for c in parsed.checks} == {
        "cp_output_vs_reference": "pass", "cp_input_grads_vs_reference": "pass", "cp_ring_attention_ran": "pass"}
    assert (parsed.layout.cp, sorted(parsed.layout.ranks)) == (2, [0, 1])


def test_recorded_bypass_fails_and_never_times():
    lines = recorded_lines("h200x2-cp2-s16k-bypass.log")
    parsed = parse_file(DATA / "h200x2-cp2-s16k-bypass.log")
    checks = {c.name: c for c in parsed.checks}
    assert {c.status for c in checks.values()} == {"fail"}
    assert checks["cp_output_vs_reference"].value > 0.5
    assert "BYPASSED" in checks["cp_ring_attention_ran"].detail
    assert parsed.perf == [] and "cp_correctness" in parsed.error_classes()
    assert lines[-1] == "# exit 1"


def test_spread():
    s = rules.spread([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s.median, s.q1, s.q3, s.n) == (3.0, 2.0, 4.0, 5)
    assert s.iqr_over_median == pytest.approx(2 / 3)
    assert rules.spread([2.0]).median == 2.0
    with pytest.raises(ValueError):
        rules.spread([])


# ------------------------------------------------------------------------------ workload's CLI


def test_workload_flags_the_plan_uses():
    args = workload.build_parser().parse_args(["--cp", "2", "--seq-len", "16384", "--steps", "20", "--warmup", "5"])
    assert (args.cp, args.seq_len, args.steps, args.warmup) == (2, 16384, 20, 5)
    assert (args.heads, args.kv_heads, args.head_dim) == (14, 2, 64)
    assert (args.gqa, args.sdpa_backend, args.rotate, args.bypass_cp) == ("native", "flash", "allgather", False)
    assert args.check_seq_len == 4099 and rules.padded_length(4099, 2) != 4099  # the gate exercises padding


@pytest.mark.parametrize("argv, world, problem", [
    (["--cp", "2", "--seq-len", "64"], 2, None),
    (["--cp", "2", "--seq-len", "64"], 3, "does not divide the world size 3"),
    (["--cp", "1", "--seq-len", "64", "--heads", "14", "--kv-heads", "4"], 1, "not a multiple"),
    (["--cp", "1", "--seq-len", "0"], 1, "--seq-len must be >= 1"),
    (["--cp", "1", "--seq-len", "8", "--warmup", "-1"], 1, "--warmup must be >= 0"),
])
def test_workload_validation(argv, world, problem):
    found = workload._validate(workload.build_parser().parse_args(argv), world)
    assert (found is None) if problem is None else (problem in found)


def test_probe_modules_import_without_torch():
    code = ("import sys, cpverify.probe, cpverify.probe.workload, cpverify.probe.bandwidth; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("text, size", [("1M", 2**20), ("256M", 256 * 2**20), ("1G", 2**30), ("4096", 4096),
                                        ("16MiB", 16 * 2**20)])
def test_bandwidth_sizes(text, size):
    assert bandwidth.parse_size(text) == size


def test_bandwidth_rejects_bad_input():
    parser = bandwidth.build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["--sizes", "lots"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--ops", "all_reduce,broadcast_everything"])
    assert parser.parse_args(["--ops", "sendrecv"]).ops == ["sendrecv"]


# ------------------------------------------------------------------------------ `cpverify probe`


@pytest.mark.parametrize("seq_len", [16384, 4099])
def test_arm_commands_match_the_probe_profile(seq_len):
    """`cpverify probe` runs what `cpverify run --profile probe` plans: the same arms, argv for argv."""
    profile = with_overrides(get_profile("probe"), seq_lens=(seq_len,))
    plan = build_plan(profile, run_id="p", python="python")
    arms = probe.arm_commands(cp=2, seq_len=seq_len, steps=profile.steps, warmup=profile.warmup_steps,
                              nproc=profile.gpus, python="python")
    assert [(a.name, a.cp, a.seq_len, a.argv, a.env) for a in arms] == \
        [(a.name, a.cp, a.seq_len, a.argv, a.env) for a in plan.arms]


def test_the_probe_command_defaults_to_the_probe_profile(capsys):
    """`cpverify probe` and `cpverify run --profile probe` plan the same warm-up and measured
    steps by default: two fronts of one measurement."""
    profile = get_profile("probe")
    assert main(["probe", "--dry-run", "--seq-len", "16384"]) == 0
    printed = capsys.readouterr().out
    plan = build_plan(with_overrides(profile, seq_lens=(16384,)), run_id="p", python="python")
    for arm in plan.arms:
        flags = list(arm.argv)
        for flag in ("--warmup", "--steps"):
            assert f"{flag} {flags[flags.index(flag) + 1]}" in printed, (flag, printed)


def test_bypass_breaks_only_the_cp_arm():
    bypass = {a.cp: a.argv for a in probe.arm_commands(cp=2, seq_len=4096, steps=1, warmup=0, bypass_cp=True,
                                                        python="python")}
    plain = {a.cp: a.argv for a in probe.arm_commands(cp=2, seq_len=4096, steps=1, warmup=0, python="python")}
    assert bypass[2] == (*plain[2], "--bypass-cp") and bypass[1] == plain[1]


@pytest.mark.parametrize(("numbers", "flag"), [({"steps": 0}, "--steps"), ({"warmup": -1}, "--warmup"),
                                               ({"seq_len": 0}, "--seq-len")])
def test_arm_commands_refuse_a_number_the_workload_cannot_run_naming_its_flag(numbers, flag):
    with pytest.raises(InputError) as refused:
        probe.arm_commands(**{"cp": 2, "seq_len": 16, "steps": 1, "warmup": 0, **numbers})
    assert refused.value.problem.startswith(f"{flag} ") and refused.value.fix.startswith(f"pass e.g. {flag} ")


def test_arm_commands_refuse_nonsense():
    with pytest.raises(InputError, match="compares nothing"):
        probe.arm_commands(cp=1, seq_len=16, steps=1, warmup=0)
    with pytest.raises(InputError, match="not a multiple"):
        probe.arm_commands(cp=2, seq_len=16, steps=1, warmup=0, nproc=3)


def test_probe_dry_run_prints_commands(capsys):
    assert main(["probe", "--dry-run", "--cp", "2", "--seq-len", "65536", "--bandwidth"]) == 0
    out = capsys.readouterr().out
    assert "# bandwidth" in out and "# cp1-s64k" in out and "# cp2-s64k" in out
    probe_profile = get_profile("probe")
    assert (f"-m cpverify.probe.workload --cp 2 --seq-len 65536 --steps {probe_profile.steps} "
            f"--warmup {probe_profile.warmup_steps}") in out


def test_run_arm_streams_to_the_log(tmp_path):
    """A real subprocess standing in for torchrun (no GPU here): lines reach the log as they come."""
    script = ("print('cpverify-check name=a status=pass value=0.001 bound=0.01 detail=\"ok\"'); "
              "print('[2026-01-01 00:00:00] workload.py:1 - perf 5: {\"perf/actor_train_time\": 0.5, "
              "\"perf/step_time\": 0.6}'); print('noise'); raise SystemExit(3)")
    result = probe.run_arm(probe.probe_arm("arm", 2, [sys.executable, "-c", script]), tmp_path / "arm.log")
    assert result["returncode"] == 3
    log = (tmp_path / "arm.log").read_text()
    assert "noise" in log
    parsed = parse_file(result["log"])  # what summarize() reads
    assert [c.name for c in parsed.checks] == ["a"] and [p.rollout for p in parsed.perf_for("train")] == [5]


HF_TOKEN = "hf_" + "Pq3Rs6Tu9Vw2Xy5Za8Bc1De4Fg7Hi0Jk3L"
DB_PASSWORD = "planted-" + "probe-pw-2f7c"  # no credential's shape: only its name gives it away
PRINTED_KEY = "9f8e7d6c" + "5b4a39281706f5e4d3c2b1a0fedcba98"
# What the workload reports of its environment, and prints of secrets it found elsewhere.
_ENV_REPORT = ("import json, os; print('ENV ' + json.dumps({n: n in os.environ for n in "
               "('HF_TOKEN', 'MY_DB_PASSWORD', 'NCCL_NVLS_ENABLE', 'PATH')})); "
               f"print('token {HF_TOKEN} and pw {DB_PASSWORD}'); "
               f"print('  wandb_key ....................................... {PRINTED_KEY}')")


def _planted(monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    monkeypatch.setenv("MY_DB_PASSWORD", DB_PASSWORD)


def _env_report(text: str) -> dict[str, bool]:
    return json.loads(next(line for line in text.splitlines() if line.startswith("ENV "))[4:])


def test_an_arm_gets_the_runners_environment_and_writes_a_scrubbed_log(tmp_path, monkeypatch):
    """The probe's arms run as every runner's do: this machine's credentials never reach the
    workload (the allow-list of cpverify.runners.workload_env), the probe profile's settings do, and the
    log is scrubbed as it streams."""
    _planted(monkeypatch)
    result = probe.run_arm(probe.probe_arm("arm", 1, [sys.executable, "-c", _ENV_REPORT]), tmp_path / "arm.log")
    log = (tmp_path / "arm.log").read_text()
    assert result["returncode"] == 0
    assert _env_report(log) == {"HF_TOKEN": False, "MY_DB_PASSWORD": False, "NCCL_NVLS_ENABLE": True, "PATH": True}
    assert [s for s in (HF_TOKEN, DB_PASSWORD, PRINTED_KEY) if s in log] == []


def test_the_probe_command_leaks_no_credential_to_its_arms_logs_or_terminal(tmp_path, monkeypatch, capsys):
    """`cpverify probe` end to end, its interpreter a stand-in for torchrun (no GPU here)."""
    _planted(monkeypatch)
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\n"
                      "if [ \"$1\" = -c ]; then echo 'CPVERIFY-IMPORTS {}'; exit 0; fi\n"  # the import check
                      f"exec {sys.executable} -c \"{_ENV_REPORT}\"\n")
    python.chmod(0o755)
    out = tmp_path / "out"
    code = main(["probe", "--python", str(python), "--out", str(out), "--steps", "1", "--warmup", "0"])
    printed = "".join(capsys.readouterr())
    logs = {p.name: p.read_text() for p in (out / "logs").iterdir()}
    assert code == 0 and sorted(logs) == ["cp1-s16k.log", "cp2-s16k.log"]
    for text in (*logs.values(), printed, (out / "probe-summary.json").read_text()):
        assert [s for s in (HF_TOKEN, DB_PASSWORD, PRINTED_KEY) if s in text] == []
    assert {name: _env_report(text)["HF_TOKEN"] for name, text in logs.items()} == dict.fromkeys(logs, False)


def test_summary_of_recorded_h200_arms():
    summary = probe.summarize({"cp1-s16k": {"cp": 1, "returncode": 0, "log": str(DATA / "h200x2-cp1-s16k.log")},
                               "cp2-s16k": {"cp": 2, "returncode": 0, "log": str(DATA / "h200x2-cp2-s16k.log")}},
                              cp=2)
    assert summary["ok"]
    assert summary["arms"]["cp1-s16k"]["steps"] == 30
    base = summary["arms"]["cp1-s16k"]["actor_train_time_median_s"]
    cand = summary["arms"]["cp2-s16k"]["actor_train_time_median_s"]
    assert summary["ratio_actor_train_time"] == pytest.approx(cand / base)
    assert 0.5 < summary["ratio_actor_train_time"] < 1.5  # 0.92 measured at 16K on 2xH200
    text = probe_cli.render(summary)
    assert "CP=2 / CP=1" in text and "cp_ring_attention_ran" in text
    assert {c["name"]: c["status"] for c in summary["checks"] if c["arm"] == "cp2-s16k"} == {
        "cp_output_vs_reference": "pass", "cp_input_grads_vs_reference": "pass", "cp_ring_attention_ran": "pass"}
    bypass = probe.summarize({"cp2-s16k": {"cp": 2, "returncode": 1, "log": str(DATA / "h200x2-cp2-s16k-bypass.log")}},
                             cp=2)
    assert not bypass["ok"] and bypass["ratio_actor_train_time"] is None
    assert {c["status"] for c in bypass["checks"]} == {"fail"}



def test_the_probe_ratio_is_taken_between_the_arms_cps_whatever_their_names():
    """The ratio is CP=cp's median over CP=1's, by the CP each result carries; an arm of no CP (the
    bandwidth measurement, cp 0) is in no ratio."""
    logs = {1: str(DATA / "h200x2-cp1-s16k.log"), 2: str(DATA / "h200x2-cp2-s16k.log")}
    summary = probe.summarize({"bandwidth": {"cp": 0, "returncode": 0, "log": logs[1]},
                               "ring": {"cp": 2, "returncode": 0, "log": logs[2]},
                               "cp2-s16k": {"cp": 1, "returncode": 0, "log": logs[1]}}, cp=2)
    medians = {name: arm["actor_train_time_median_s"] for name, arm in summary["arms"].items()}
    assert summary["ratio_actor_train_time"] == pytest.approx(medians["ring"] / medians["cp2-s16k"])


# ---------------------------------------------------------- the real workload, on CPU, with gloo


def _torchrun_cpu(tmp_path, *args, nproc=2):
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           "-m", "cpverify.probe.workload", "--device", "cpu", "--check-seq-len", "131", *args]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)


def test_cpu_data_parallel_arm_passes_and_times(tmp_path):
    out = _torchrun_cpu(tmp_path, "--cp", "1", "--seq-len", "256", "--steps", "3", "--warmup", "1")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert sorted(ln for ln in lines if ln.startswith("cpverify-layout")) == [
        "cpverify-layout rank=0 world=2 tp=1 pp=1 cp=1 dp=2", "cpverify-layout rank=1 world=2 tp=1 pp=1 cp=1 dp=2"]
    parsed = read(lines)
    checks = {c.name: c for c in parsed.checks}
    assert {c.status for c in checks.values()} == {"pass"}
    assert checks["cp_output_vs_reference"].value > 0  # bf16 vs fp32: a real, nonzero error
    assert [p.rollout for p in parsed.perf] == [1, 2, 3]


def test_cpu_bypass_is_caught_before_timing(tmp_path):
    out = _torchrun_cpu(tmp_path, "--cp", "2", "--seq-len", "256", "--steps", "3", "--warmup", "1", "--bypass-cp")
    assert out.returncode != 0
    lines = out.stdout.splitlines()
    parsed = read(lines)
    checks = {c.name: c for c in parsed.checks}
    assert checks["cp_output_vs_reference"].status == "fail"
    assert math.isfinite(checks["cp_output_vs_reference"].value)
    assert checks["cp_ring_attention_ran"].status == "fail"
    assert parsed.perf == []
    assert "not timing a wrong computation" in out.stderr
