"""verdict.md as a maintainer sees it on GitHub: rendered with cmark-gfm (GitHub's own parser, with its
extensions) in an 800-px comment column with a small stylesheet written after GitHub's (the values
that decide what fits: 14 px text, code at 85%, tables that scroll rather than wrap), screenshotted
by headless Chromium.

    python benchmarks/verdict-screenshots/render_github.py BUNDLE/verdict.md OUT.png [HEIGHT]

Needs `pip install cmarkgfm` (the test extra) and Debian's chromium.
"""

from __future__ import annotations

import html
import subprocess
import sys
import tempfile
from pathlib import Path

import cmarkgfm
from cmarkgfm.cmark import Options

STYLE = """
body { margin: 0; background: #fff; }
.comment { width: 800px; box-sizing: border-box; border: 1px solid #d0d7de; border-radius: 6px; margin: 8px; }
.comment-head { background: #f6f8fa; border-bottom: 1px solid #d0d7de; padding: 8px 16px; font: 14px sans-serif;
                color: #57606a; }
.markdown-body { padding: 16px; font-family: -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif,
                 "Noto Color Emoji"; font-size: 14px; line-height: 1.5; color: #1f2328; word-wrap: break-word; }
.markdown-body > :first-child { margin-top: 0; }
.markdown-body h2 { font-size: 1.5em; font-weight: 600; margin: 24px 0 16px; padding-bottom: .3em;
                    border-bottom: 1px solid #d8dee4; line-height: 1.25; }
.markdown-body p, .markdown-body ul, .markdown-body table, .markdown-body pre, .markdown-body details {
  margin: 0 0 16px; }
.markdown-body ul { padding-left: 2em; }
.markdown-body li + li { margin-top: .25em; }
.markdown-body code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 85%;
                      padding: .2em .4em; background: rgba(175,184,193,.2); border-radius: 6px; }
.markdown-body pre { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 85%; line-height: 1.45;
                     padding: 16px; overflow: auto; background: #f6f8fa; border-radius: 6px; }
.markdown-body pre code { padding: 0; background: transparent; font-size: 100%; white-space: pre; }
.markdown-body table { display: block; width: max-content; max-width: 100%; overflow: auto;
                       border-collapse: collapse; border-spacing: 0; }
.markdown-body th, .markdown-body td { padding: 6px 13px; border: 1px solid #d0d7de; }
.markdown-body th { font-weight: 600; }
.markdown-body tr:nth-child(2n) { background: #f6f8fa; }
.markdown-body summary { cursor: pointer; display: list-item; }
.markdown-body sub { font-size: 75%; }
"""


def page(markdown_text: str, title: str) -> str:
    body = cmarkgfm.github_flavored_markdown_to_html(markdown_text, options=Options.CMARK_OPT_UNSAFE)
    return (f"<!doctype html><meta charset=utf-8><style>{STYLE}</style><div class=comment>"
            f"<div class=comment-head>{html.escape(title)}</div><div class=markdown-body>{body}</div></div>")


def main(source: Path, out: Path, height: int = 2000) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "verdict.html"
        page_path.write_text(page(source.read_text(encoding="utf-8"), f"{source} as a comment"), encoding="utf-8")
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={tmp}/profile", "--hide-scrollbars", f"--screenshot={out.resolve()}",
                        f"--window-size=820,{height}", page_path.as_uri()],
                       check=True, capture_output=True, timeout=120)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 2000)
