"""How cpverify writes a sequence length: 16384 tokens are `16K` (in prose, tables and plots) and
`s16k` in an arm's name; a length that is no multiple of 1024 is written whole."""

from __future__ import annotations


def length_label(tokens: int) -> str:
    """16384 -> '16K', 1000 -> '1000'."""
    return f"{tokens // 1024}K" if tokens >= 1024 and tokens % 1024 == 0 else str(tokens)
