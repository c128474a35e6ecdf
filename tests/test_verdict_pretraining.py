"""The verdict on logs users attach: Megatron-LM pretraining logs compared by their
iteration times, gzip-compressed logs, and a launcher's root cause in the verdict's words.

The pretraining logs are written here in Megatron-LM's `training_log` format (megatron/training/
training.py: `iteration {n}/{m} | consumed samples: … | elapsed time per iteration (ms): …`), the
format fixture 25 of tests/data/real-logs holds as printed.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from cpverify import verdict as v
from cpverify.fixes import FIX_CP_NOT_APPLIED
from cpverify.parse import parse_file

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "real-logs"


def megatron_log(ms_per_iteration: float, *, iterations: int = 8, seed: int = 0) -> str:
    rng = random.Random(seed)
    lines = ["using world size: 2, data-parallel size: 1, context-parallel size: 2, tensor-model-parallel size: 1"]
    for n in range(1, iterations + 1):
        ms = ms_per_iteration * (3.0 if n == 1 else rng.uniform(0.97, 1.03))  # the first carries start-up
        lines.append(
            f" [2025-06-04 10:12:{n:02d}] iteration {n:8d}/{iterations:8d} | consumed samples: {n * 64:12d} | "
            f"elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 150.2 | "
            f"learning rate: 1.500000E-04 | global batch size:    64 | lm loss: {9.5 - n / 10:.6E} | "
            "loss scale: 1.0 | grad norm: 3.456 | number of skipped iterations:   0 | number of nan iterations:   0 |"
        )
    return "\n".join(lines) + "\n"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "cpverify", "verdict", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_two_pretraining_logs_are_compared_by_iteration_time(tmp_path):
    cp1, cp2 = tmp_path / "cp1.log", tmp_path / "cp2.log.gz"
    cp1.write_text(megatron_log(1000.0, seed=1))
    cp2.write_bytes(gzip.compress(megatron_log(1100.0, seed=2).encode()))  # attached compressed
    out = tmp_path / "bundle"
    proc = _cli("--baseline", str(cp1), "--candidate", str(cp2), "--out", str(out), "--json", cwd=tmp_path)
    data = json.loads(proc.stdout)
    assert data["primary_comparison"]["metric"] == v.ITERATION_METRIC
    assert 1.05 < data["ratio"] < 1.15  # the 3x start-up iteration is left out, or it would skew nothing here
    counted = {arm["name"]: arm["counted_steps"] for arm in data["arms"]}
    assert counted == {"cp1": 7, "cp2": 7}
    assert [c["status"] for c in data["checks"] if c["name"] == "counted_steps"] == ["pass", "pass"]
    # No cpverify-layout line: CP=2 cannot be confirmed, so the speed alone never makes it PASS.
    assert data["status"] == "INCONCLUSIVE" and proc.returncode == 3
    # The bundle carries the text of the compressed log, not its bytes.
    copied = (out / "logs" / "cp2.log").read_text()
    assert "elapsed time per iteration (ms)" in copied


def test_slime_logs_keep_the_slime_metric_and_one_slime_arm_is_enough():
    pre = parse_file(DATA / "25_megatron-llm-issue11-iteration-lines.log")
    slime = parse_file(DATA / "02_slime-issue1136-cp-step11-train-metrics.log")
    assert v.pretraining_only(pre) and not v.pretraining_only(slime)
    verdict = v.decide([v.ArmEvidence("cp1", 1, pre), v.ArmEvidence("cp2", 2, slime)], comparisons=[("cp1", "cp2")])
    assert verdict.thresholds.primary_metric == v.PRIMARY_METRIC


def test_warm_up_leaves_out_the_first_logged_iterations():
    pre = parse_file(DATA / "25_megatron-llm-issue11-iteration-lines.log")
    assert list(v.counted_iterations(pre, 1)) == [123, 124, 125]
    assert v.counted_iterations(pre, 0)[122][v.ITERATION_METRIC] == 86545.2


def test_a_launcher_killed_by_sigkill_is_named_in_the_verdict():
    parsed = parse_file(DATA / "38_cppo-issue6-torchrun-childfailederror-sigkill-table.log")
    verdict = v.decide([v.ArmEvidence("cp1", 1, parsed), v.ArmEvidence("cp2", 2, parsed)],
                       comparisons=[("cp1", "cp2")])
    check = next(c for c in verdict.checks if c.name == "error:launcher_failed")
    # what the signal means is the row's own text: no field carries it
    assert "killed by SIGKILL, likely the host OOM killer" in check.detail
    assert verdict.status == v.FAIL and verdict.told is check


def test_megatron_argument_dumps_confirm_each_arms_cp(tmp_path):
    """No cpverify-layout line in either log: Megatron's argument dump (the real one of fixtures 44/45,
    printed by slime's Megatron on 2x H200) states the layout."""
    dump = {cp: (DATA / name).read_text() for cp, name in (
        (1, "45_slime-h200x2-cp1-megatron-arguments-dump.log"), (2, "44_slime-h200x2-cp2-megatron-arguments-dump.log"))}
    cp1, cp2 = tmp_path / "cp1.log", tmp_path / "cp2.log"
    cp1.write_text(dump[1] + megatron_log(1000.0, seed=1))
    cp2.write_text(dump[2] + megatron_log(1100.0, seed=2))
    data = json.loads(_cli("--baseline", str(cp1), "--candidate", str(cp2), "--json", cwd=tmp_path).stdout)
    confirmed = {c["arm"]: (c["status"], c["detail"]) for c in data["checks"] if c["name"] == "cp_effective"}
    assert confirmed == {"cp1": ("pass", "cp=1 tp=1 pp=1 dp=2, from Megatron's argument dump"),
                         "cp2": ("pass", "cp=2 tp=1 pp=1 dp=1, from Megatron's argument dump")}
    assert {arm["name"]: arm["layout"]["source"] for arm in data["arms"]} == {
        "cp1": "megatron-arguments", "cp2": "megatron-arguments"}


def test_a_cp2_request_whose_megatron_dump_says_cp1_fails(tmp_path):
    cp1, cp2 = tmp_path / "cp1.log", tmp_path / "cp2.log"
    cp1.write_text((DATA / "45_slime-h200x2-cp1-megatron-arguments-dump.log").read_text() + megatron_log(1000.0))
    cp2.write_text((DATA / "45_slime-h200x2-cp1-megatron-arguments-dump.log").read_text() + megatron_log(1000.0))
    proc = _cli("--baseline", str(cp1), "--candidate", str(cp2), "--json", cwd=tmp_path)
    data = json.loads(proc.stdout)
    check = next(c for c in data["checks"] if c["name"] == "cp_effective" and c["arm"] == "cp2")
    assert check["effect"] == "FAIL" and check["fix"] == FIX_CP_NOT_APPLIED
    assert [(a["cp_requested"], a["cp_effective"]) for a in data["arms"]] == [(1, 1), (2, 1)]
    assert data["status"] == "FAIL" and proc.returncode == 1

