"""The words a verdict says, recorded: the headline and every row that is not a plain pass.

The other verdict tests assert what must hold on structured fields (a check's name, status,
effect, fix; the check the headline tells, `Verdict.told`); the wording a maintainer reads is
recorded here once, per scenario, in tests/golden/wording/<scenario>.json. A change that MEANS to
reword the verdict rewrites them on purpose, and the diff shows the new wording:

    CPVERIFY_UPDATE_GOLDEN=1 python3 -m pytest -q tests/test_verdict_wording.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cpverify import report
from cpverify import verdict as v
from cpverify.model import ArmResult
from cpverify.parse import ParsedLog
from helpers.slime_log import synthetic_arm

GOLDEN = Path(__file__).resolve().parent / "golden" / "wording"
UPDATE = os.environ.get("CPVERIFY_UPDATE_GOLDEN") == "1"
ROUNDS = 4
ARGS = {"seq_length": 4096, "rollout_max_response_len": 1024, "max_tokens_per_gpu": 1088, "num_layers": 24,
        "tensor_model_parallel_size": 1, "load": "/ckpt/qwen", "seed": 1234, "wandb_project": "cp"}


def arm(name, cp, factor, *, seed, rounds=ROUNDS, log=None, result=None, **kwargs):
    """The arm's rounds, each from its own seeded synthetic log (the same `log` each round when given)."""
    return [v.ArmEvidence(name if k == 1 else f"{name}.r{k}", cp,
                          (log or synthetic_arm(cp=cp, actor_train_time=factor, seed=seed + 1000 * (k - 1),
                                                **kwargs)).expected(), result, arm=name, round=k)
            for k in range(1, rounds + 1)]


def watchdog():
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2)
    log.nccl_watchdog_timeout()
    return log


def damaged():
    parsed = synthetic_arm(cp=2, actor_train_time=1.0, seed=2).expected()
    [p for p in parsed.perf if p.side == "train"][3].metrics["perf/actor_train_time"] = float("nan")
    return [v.ArmEvidence("cp2", 2, parsed)]


def cut():
    log = synthetic_arm(cp=2, actor_train_time=1.0, seed=2, rollouts=7)
    log.cut_mid_step(7)
    return log


BLOCKED = ArmResult("cp2", "blocked", None, Path("cp2.log"), 0.0, reason="no NVIDIA container runtime",
                    fix="install nvidia-container-toolkit and restart Docker")
CP1 = arm("cp1", 1, 1.0, seed=1)

SCENARIOS = {
    "pass": lambda: (CP1, arm("cp2", 2, 1.05, seed=2)),
    "slow": lambda: (CP1, arm("cp2", 2, 2.0, seed=2)),
    "slow_over_sockets": lambda: (CP1, arm("cp2", 2, 2.0, seed=2, transport="NET/Socket/0")),
    "straddles": lambda: (arm("cp1", 1, 1.0, seed=1, jitter=0.2), arm("cp2", 2, 1.3, seed=2, jitter=0.2)),
    "few_steps": lambda: (arm("cp1", 1, 1.0, seed=1, rollouts=3), arm("cp2", 2, 1.0, seed=2, rollouts=3)),
    "watchdog": lambda: (CP1, arm("cp2", 2, 1.0, seed=2, log=watchdog())),
    "cp_not_effective": lambda: (CP1, arm("cp2", 2, 1.0, seed=2, layout_cp=1)),
    "cp_unconfirmed": lambda: (CP1, arm("cp2", 2, 1.0, seed=2, layout_cp=None)),
    "blocked": lambda: (CP1, [v.ArmEvidence("cp2", 2, ParsedLog(), BLOCKED)]),
    "not_durations": lambda: ([v.ArmEvidence("cp1", 1, CP1[0].parsed)], damaged()),
    "different_gpus": lambda: (arm("cp1", 1, 1.0, seed=1, dp=2), arm("cp2", 2, 0.5, seed=2, dp=2)),
    "different_job": lambda: (arm("cp1", 1, 1.0, seed=1, arguments=ARGS),
                              arm("cp2", 2, 1.0, seed=2, arguments={**ARGS, "seq_length": 32768})),
    "unfinished": lambda: (arm("cp1", 1, 1.0, seed=1, arguments={**ARGS, "num_rollout": 8}),
                           arm("cp2", 2, 1.0, seed=2, rollouts=5, arguments={**ARGS, "num_rollout": 8})),
    "cut_mid_step": lambda: (CP1, arm("cp2", 2, 1.0, seed=2, log=cut())),
}


def said(verdict: v.Verdict) -> dict:
    """What a reader of the verdict is told, in words."""
    rows = [{"name": c.name, "arm": c.arm, "status": c.status, "effect": c.effect, "detail": c.detail, "fix": c.fix}
            for c in verdict.checks if c.status not in ("pass", "skip")]
    return {"headline": verdict.headline, "summary": report.render_summary(verdict), "rows": rows}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_verdict_says_what_is_recorded(scenario, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # the summary wraps at the terminal's width: recorded at one
    evidence = [ev for rounds in SCENARIOS[scenario]() for ev in rounds]
    verdict = v.decide(evidence, comparisons=[("cp1", "cp2")], thresholds=v.Thresholds())
    got = json.loads(json.dumps(said(verdict)))
    path = GOLDEN / f"{scenario}.json"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert got == json.loads(path.read_text(encoding="utf-8"))


def test_every_recording_has_a_scenario():
    assert {p.stem for p in GOLDEN.glob("*.json")} == set(SCENARIOS)
