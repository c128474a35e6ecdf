"""Judge a recorded `cpverify run` directory's arm logs again with this checkout's verdict and report,
writing a fresh bundle (what `cpverify run --only verdict` does, for run directories recorded before
state.json's schema: their plan is rebuilt from the profile the run's env.json records).

    python benchmarks/verdict-screenshots/rejudge.py RUN_DIR OUT_DIR
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from cpverify.artifacts import RunDir
from cpverify.parse import parse_file
from cpverify.plan import build_plan
from cpverify.profiles import Profile
from cpverify.redact import Redactor
from cpverify.report import render_summary, share_lines, write_report
from cpverify.verdict import ArmEvidence, Thresholds, decide


def main(run: Path, out: Path) -> int:
    env = json.loads((run / "env.json").read_text())
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in env["profile"].items()
              if k in Profile.__dataclass_fields__}
    profile = Profile(**fields)
    plan = build_plan(profile, run_id=run.name)
    run_dir = RunDir.create(out)
    scrub = Redactor()
    evidence = []
    for arm in plan.arms:
        copy = run_dir.log_path(arm.name)
        copy.write_bytes((run / "logs" / f"{arm.name}.log").read_bytes())
        evidence.append(ArmEvidence(arm.name, arm.cp, parse_file(copy), expected_rollouts=profile.planned_rollouts,
                                    log_path=copy))
    verdict = decide(evidence, comparisons=list(plan.comparisons), thresholds=Thresholds.of(profile),
                     workload=profile.kind)
    command = (f"cpverify run --profile {profile.name} --runner {env['runner']} --cp "
               f"{','.join(map(str, profile.cp_sizes))} --seq-len {','.join(map(str, profile.seq_lens))} "
               f"--gpus {','.join(map(str, env['gpus']))}")
    written = write_report(run_dir, verdict, env=env, commands_sh=(run / "commands.sh").read_text(),
                           redactor=scrub, plan_arms=plan.arms, command=command)
    print(render_summary(verdict))
    print(share_lines(written), file=sys.stderr)
    print(shlex.join(sys.argv), file=sys.stderr)
    return verdict.exit_code


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]), Path(sys.argv[2])))
