"""Render a Verdict: verdict.md (GitHub-flavoured, pasteable), verdict.json, a terminal summary,
the plots; and write the bundle (verdict.md, verdict.json, commands.sh, env.json, the plots)
atomically and redacted.

  markdown.py  verdict.md, with the failed arms' evidence from their logs
  data.py      verdict.json's data, JSON-safe
  summary.py   the terminal summary
  plots.py     the PNGs (matplotlib, optional)
  write.py     the bundle on disk: the only part that writes
"""

from cpverify.report.data import render_json
from cpverify.report.markdown import EVIDENCE_LINES, failure_lines, render_markdown
from cpverify.report.plots import render_plot
from cpverify.report.summary import render_summary
from cpverify.report.write import write_report

__all__ = ["EVIDENCE_LINES", "failure_lines", "render_json", "render_markdown", "render_plot", "render_summary",
           "write_report"]
