"""The engines a block scan can use on this machine: Hyperscan where its wheel installs, else one
`bytes.find` pass per word (no wheels for Linux on ARM). The parse's scan and the redaction's block
redactor both choose from these; the redaction sits below the parse, so this sits below both."""

from __future__ import annotations

try:
    import hyperscan
except ImportError:
    hyperscan = None  # type: ignore[assignment]

ENGINES = ("find",) if hyperscan is None else ("hyperscan", "find")
