"""What the lint reports: a finding (severity, flag, why, fix, the arm), and the table of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    severity: str  # "error" | "warning"
    flag: str
    why: str
    fix: str
    where: str = ""  # the arm, when a plan is linted


def has_errors(findings: Sequence[Finding]) -> bool:
    return any(f.severity == ERROR for f in findings)


def format_findings(findings: Sequence[Finding]) -> str:
    from tabulate import tabulate  # heavy: only for the table

    with_where = any(f.where for f in findings)
    rows = [([f.where] if with_where else []) + [f.severity, f.flag, f.why, f.fix] for f in findings]
    headers = (["arm"] if with_where else []) + ["severity", "flag", "why", "fix"]
    widths = ([None] if with_where else []) + [None, 32, 70, 44]
    return tabulate(rows, headers=headers, tablefmt="grid", maxcolwidths=widths)
