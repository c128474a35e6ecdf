"""Render a Verdict: verdict.md (GitHub-flavoured, pasteable), verdict.json, a terminal summary,
the plots; and write the bundle (verdict.md, verdict.json, commands.sh, env.json, the plots, an
archive to attach) atomically and redacted.

  story.py     what a verdict says before its tables: setup, per-phase meaning, reading, root cause
  gfm.py       inert GitHub markdown: code spans, code blocks, prose, tables, details
  markdown.py  verdict.md, with the failed arms' evidence from their logs, under GitHub's size limit
  data.py      verdict.json's data, JSON-safe
  summary.py   the terminal summary and the lines that say what to paste and attach
  plots.py     the PNGs (matplotlib, optional)
  write.py     the bundle on disk and its archive: the only part that writes
"""

from cpverify.report.data import render_json
from cpverify.report.markdown import BUDGET, EVIDENCE_LINES, LIMIT, failure_lines, render_markdown, size
from cpverify.report.summary import render_summary, share_lines
from cpverify.report.write import write_report

__all__ = ["BUDGET", "EVIDENCE_LINES", "LIMIT", "failure_lines", "render_json", "render_markdown", "render_summary",
           "share_lines", "size", "write_report"]
