"""Writing the bundle: verdict.md, verdict.json, commands.sh, env.json and the plots, each atomically
and redacted (the only part of the report that touches files)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cpverify.artifacts import RunDir, atomic_write_bytes, atomic_write_json, atomic_write_text
from cpverify.redact import Redactor
from cpverify.report import plots as plotting
from cpverify.report.data import finite, render_json
from cpverify.report.markdown import failure_lines, render_markdown
from cpverify.verdict import Verdict


def write_report(run_dir: RunDir | str | Path, verdict: Verdict, *, env: dict | None, commands_sh: str | None,
                 redact: bool = True, extra_secrets: tuple[str, ...] = (), plot: bool = True,
                 plan_arms: Sequence | None = None, redactor: Redactor | None = None) -> dict[str, Path]:
    """Write verdict.md, verdict.json, commands.sh, env.json (and plot.png plus the cpverify.report.plots
    PNGs when matplotlib is there) atomically, every one redacted; returns file name -> path.
    `redactor`: the run's (its placeholders are the terminal's and the other steps'); else one is
    made from `redact` (False: --no-redact keeps host names, paths and IPs; credentials go always)
    and `extra_secrets`. `plan_arms` (the plan's Arm objects) tell the plots each arm's sequence
    length and revision."""
    run_dir = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    scrub = redactor or Redactor(extra_secrets, identity=redact)
    commands = commands_sh or "#!/usr/bin/env bash\n# No commands were recorded for this verdict.\n"
    env = scrub.json(env or {})
    commands = scrub(commands)
    rendered, plot_note = plotting.render(verdict, plan_arms, scrub=scrub) if plot else ([], "")
    evidence = {arm.name: lines for arm in verdict.arms if (lines := failure_lines(arm))}
    markdown = render_markdown(verdict, env=env, commands=commands, scrub=scrub,
                               plots=[(p.title, p.file) for p, _ in rendered], plot_note=plot_note,
                               evidence=evidence)
    data = scrub.json(render_json(verdict))
    # env and commands first: verdict.md is the file users look for, written once the rest exists.
    written = {
        "env.json": atomic_write_json(run_dir.env_json, finite(env)),
        "commands.sh": atomic_write_text(run_dir.commands_sh, commands, mode=0o755),
    }
    png = plotting.render_plot(verdict, scrub) if plot else None
    if png:
        written["plot.png"] = atomic_write_bytes(run_dir.plot_png, png)
    for figure, image in rendered:
        written[figure.file] = atomic_write_bytes(run_dir.root / figure.file, image)
    written["verdict.json"] = atomic_write_json(run_dir.verdict_json, data)
    written["verdict.md"] = atomic_write_text(run_dir.verdict_md, markdown)
    return written
