"""Version strings as tools print them ("2.28.9+cuda12.9", "580.159.04"), compared with packaging."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version


def parse_version(text: str | None) -> Version | None:
    """`2.28.9+cuda12.9` -> Version('2.28.9'); None for missing or unparseable text."""
    if not text:
        return None
    try:
        return Version(str(text).split("+")[0])
    except InvalidVersion:
        return None
