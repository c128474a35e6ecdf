"""What the lint reports: a finding (severity, flag, why, fix, the arm), and the table of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cpverify.redact import Redactor
from cpverify.terminal import fill_cells, wrap
from cpverify.terminal import width as terminal_width

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


def redacted(findings: Sequence[Finding], redact: Callable[[str], str]) -> list[Finding]:
    """The findings with every text through `redact` (a flag's value may be a credential)."""
    return [Finding(f.severity, redact(f.flag), redact(f.why), redact(f.fix), redact(f.where)) for f in findings]


def format_findings(findings: Sequence[Finding], columns: int | None = None, *,
                    redact: Callable[[str], str] | None = None) -> str:
    """The findings, `columns` wide (default: the terminal's): a grid where its four columns get room
    enough (GRID_COLUMNS), else one block per finding (`error --flag [arm]`, then why and fix wrapped
    under it), so no word is cut and no line overflows. Each text is redacted first (`redact`; by
    default cpverify.redact's rules with this machine's secrets): a key wrapped over two lines is
    no longer one the terminal's redaction could see beside its name."""
    findings = redacted(findings, redact or Redactor())
    columns = columns or terminal_width()
    if columns < GRID_COLUMNS:
        blocks = []
        for f in findings:
            head = f"{f.severity} {f.flag}" + (f" [{f.where}]" if f.where else "")
            blocks.append("\n".join([wrap(head, first="", indent="    ", columns=columns),
                                     wrap(f.why, first="    why: ", indent="         ", columns=columns),
                                     wrap(f.fix, first="    fix: ", indent="         ", columns=columns)]))
        return "\n".join(blocks)
    from tabulate import tabulate  # heavy: only for the table

    with_where = any(f.where for f in findings)
    rows = [([f.where] if with_where else []) + [f.severity, f.flag, f.why, f.fix] for f in findings]
    headers = (["arm"] if with_where else []) + ["severity", "flag", "why", "fix"]
    arm_w = min(16, max((len(f.where) for f in findings), default=3)) if with_where else 0
    flag_w = min(26, max((len(f.flag) for f in findings), default=4))
    # a grid cell costs its text, 2 of padding, 1 of border; 1 more closes the row
    left = columns - 1 - 3 * len(headers) - len("severity") - flag_w - arm_w - 2 * len(headers)
    why_w = left * 11 // 20
    widths = ([arm_w] if with_where else []) + [len("severity"), flag_w, why_w, left - why_w]
    return tabulate(fill_cells(rows, widths), headers=headers, tablefmt="grid", disable_numparse=True)


GRID_COLUMNS = 120  # narrower than this, the why and fix columns would be a few words wide
