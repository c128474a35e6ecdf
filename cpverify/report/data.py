"""verdict.json: the verdict's data (cpverify/data/verdict.schema.json), JSON-safe."""

from __future__ import annotations

import math
from typing import Any

from cpverify.verdict import Verdict


def finite(value: Any) -> Any:
    """JSON has no NaN/Infinity: a nan grad norm from a log becomes the string "nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def render_json(verdict: Verdict) -> dict:
    return finite(verdict.to_json())
