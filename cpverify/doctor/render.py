"""The doctor's report as the terminal shows it: the facts, the checks and their fixes, in tables
that fit the terminal."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from cpverify.doctor.checks import shown_size
from cpverify.doctor.probes import COULD_NOT_COLLECT
from cpverify.terminal import fill_cells
from cpverify.terminal import width as terminal_width


def _clip(text: str, limit: int = 60) -> str:
    """Long values (NVIDIA_REQUIRE_CUDA runs to 3 kB) are cut in the table; --json keeps them whole."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fact_rows(facts: dict, notes: _Notes) -> list[tuple[str, str]]:
    def show(name: str, render: Callable[[Any], str]) -> tuple[str, str] | None:
        fact = facts.get(name)
        if fact is None:  # workload_python: only where an interpreter was chosen
            return None
        return name, notes.cite(fact["error"]) if fact["error"] else render(fact["value"])

    def gpus(v):
        return "; ".join(f"GPU{g['index']} {g['name']} sm{g['compute_capability'] or '?'} "
                         f"{(g['memory_mib'] or 0) / 1024:.0f} GiB driver {g['driver_version']} "
                         f"MIG {g['mig_mode'] or 'n/a'}" for g in v["gpus"]) + \
            f" | CUDA (driver) {v.get('cuda_driver_version') or '?'}"

    rows = [
        show("host", lambda v: f"{v['os']}, python {v['python']}, {v['cpus']} CPUs"),
        show("gpus", gpus),
        show("workload_python", lambda v: f"{v['path']} ({v['chosen_by']})"
             + (f"; cannot import {', '.join(v['missing'])}" if v["missing"] else "")),
        show("torch", lambda v: f"torch {v['torch']}, CUDA runtime {v.get('cuda_runtime')}, NCCL {v.get('nccl')}, "
                                f"{v.get('device_count')} visible GPUs"),
        show("nccl_log", str),
        show("topology", lambda v: ", ".join(f"{p} {c}" for p, c in v["pairs"].items()) or f"{v['gpus']} GPU(s)"),
        show("infiniband", lambda v: f"devices: {', '.join(v['devices']) or 'none'}; "
                                     f"/dev/infiniband {'present' if v['dev_infiniband'] else 'absent'}"),
        show("shm", lambda v: f"{shown_size(v['total_bytes'])} total"),
        show("docker", lambda v: f"engine {v['server_version']}, runtimes {', '.join(v['runtimes']) or 'none'}, "
                                 f"default {v['default_runtime']}, root {v['root_dir']}"),
        show("disk", lambda v: "; ".join(f"{d['purpose']}: {shown_size(d['free_bytes'])} free at {d['measured_at']}"
                                         for d in v)),
        show("packages", lambda v: ", ".join(f"{k} {ver}" for k, ver in v.items()) or "none found"),
        show("env", lambda v: " ".join(f"{k}={_clip(val)}" for k, val in v.items()) or "none set"),
    ]
    return [row for row in rows if row is not None]


# The tables fit the terminal (cpverify.terminal.width(): COLUMNS, else the terminal, else 100):
# long texts wrap, collection errors become notes.


class _Notes:
    """Collection errors as numbered notes under the tables: the same error (the GPU probe's, cited by
    five checks) is one note, and a cell says `could not collect [1]` instead of 200 characters."""

    def __init__(self) -> None:
        self.texts: dict[str, int] = {}

    def cite(self, error: str) -> str:
        reason = error.removeprefix(COULD_NOT_COLLECT)
        number = self.texts.setdefault(reason, len(self.texts) + 1)
        return f"{COULD_NOT_COLLECT.rstrip(': ')} [{number}]"

    def in_text(self, text: str, errors: list[str]) -> str:
        """`text` with every collection error in it replaced by its note."""
        for error in errors:
            if error in text:
                text = text.replace(error, self.cite(error))
        return text

    def render(self, width: int) -> list[str]:
        return [_wrap(reason, f"[{n}] ", width) for reason, n in self.texts.items()]


def _wrap(text: str, lead: str, width: int) -> str:
    return textwrap.fill(text, width=width, initial_indent=lead, subsequent_indent=" " * len(lead),
                         break_on_hyphens=False)


def _table(rows: list, headers: list[str], widths: list[int]) -> str:
    """A GitHub-style table whose cells wrap at `widths` (github format: 3 characters per column + 1)."""
    from tabulate import tabulate

    return tabulate(fill_cells(rows, widths), headers=headers, tablefmt="github", disable_numparse=True)


def render(report: dict, columns: int | None = None) -> str:
    """The report as the terminal shows it, `columns` wide (default: the terminal's)."""
    width = columns or terminal_width()
    notes = _Notes()
    errors = sorted({f["error"] for f in report["facts"].values() if f["error"]}, key=len, reverse=True)
    fact_rows = _fact_rows(report["facts"], notes)
    name_w = max(len(name) for name, _ in fact_rows)
    facts = _table(fact_rows, ["fact", "value"], [name_w, width - 7 - name_w])
    checks = report["checks"]
    rows = [[c["name"], c["status"].upper() if c["status"] == "fail" else c["status"], notes.in_text(c["value"], errors),
             c["need"]] for c in checks]
    # tabulate makes a column at least its header + 2 wide ("status" -> 8)
    name_w, status_w = max(len(c["name"]) for c in checks), len("status") + 2
    value_w = (width - 13 - name_w - status_w) * 2 // 5  # the rest is the need's, the longer text
    table = _table(rows, ["check", "status", "value", "needs"],
                   [name_w, status_w, value_w, width - 13 - name_w - status_w - value_w])
    fixes = [_wrap(notes.in_text(_why_fix(c), errors), f"  {c['name']}: ", width) for c in checks
             if c["status"] != "pass" and c["fix"]]
    verdict = ("BLOCKED: a required check failed" if report["status"] == "blocked"
               else "ok: no required check failed")
    parts = [facts, "", table]
    if notes.texts:
        parts += ["", *notes.render(width)]
    if fixes:
        parts += ["", "to fix:", *fixes]
    return "\n".join([*parts, "", f"{verdict} (CP={report['cp']})"])


def _why_fix(check: dict) -> str:
    return f"{check['why']}. Fix: {check['fix']}" if check.get("why") else check["fix"]


