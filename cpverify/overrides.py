"""A profile's fields replaced from the command line (`--set KEY=VALUE`) and an override file
(`--config FILE`, TOML), each value read as the type its field declares (`resolve_profile`).

The coercion is these few lines rather than a library's (pydantic, cattrs): every field is a
scalar, a tuple of one scalar or the env pairs, and each refusal names the field, the value and
a value that fits.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from cpverify.errors import InputError
from cpverify.inputs import read_user_text
from cpverify.profiles import Profile, get_profile

_FIELDS = {f.name: f for f in dataclasses.fields(Profile)}


def with_overrides(profile: Profile, **overrides: Any) -> Profile:
    """A copy of `profile` with fields replaced; values may be strings (from the CLI)."""
    unknown = sorted(set(overrides) - set(_FIELDS))
    if unknown:
        raise InputError(
            f"unknown profile field(s): {', '.join(unknown)}",
            f"use one of: {', '.join(_FIELDS)}",
        )
    converted = {key: _convert(key, value, getattr(profile, key)) for key, value in overrides.items()}
    return dataclasses.replace(profile, **converted)


def parse_assignments(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`["pass_ratio=1.5", "gpus=4"]` -> {"pass_ratio": "1.5", "gpus": "4"} (CLI `--set`)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"override {pair!r} is not KEY=VALUE", "write it like --set pass_ratio=1.5")
        out[key.strip()] = value.strip()
    return out


def load_overrides(path: str | Path) -> dict[str, Any]:
    """Read a TOML file of field = value overrides (a `[profile]` table, or top level)."""
    try:
        import tomllib  # Python >= 3.11
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise InputError(
                f"cannot read {path}: TOML support needs Python 3.11+ or the tomli package",
                "pip install tomli, or pass the overrides with --set KEY=VALUE",
            ) from None
    text = read_user_text(str(path), what="override file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"override file {path} is not valid TOML: {exc}", "fix the TOML syntax") from None
    table = data.get("profile", data)
    if not isinstance(table, dict):
        # `profile = "probe"`: a profile is chosen on the command line, not overridden like a field
        raise InputError(f"override file {path} sets profile = {table!r}, which is not a field: the file overrides "
                         "fields of the profile that --profile names",
                         f"delete that line and pass --profile {table}, or put the overrides in a [profile] table")
    return dict(table)


def resolve_profile(name: str, *, toml: str | Path | None = None, assignments=()) -> Profile:
    """Profile `name`, then TOML overrides, then `--set` overrides (later wins)."""
    profile = get_profile(name)
    if toml:
        profile = with_overrides(profile, **load_overrides(toml))
    if assignments:
        profile = with_overrides(profile, **parse_assignments(assignments))
    return profile


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _convert(key: str, value: Any, current: Any) -> Any:
    """Coerce an override to the type the field is declared with: "1.5" -> 1.5 (float), "1,2" -> (1, 2)
    (tuple[int, ...]), "--lr 1e-6" -> ("--lr", "1e-6") (tuple[str, ...]: shell words), "A=1,B=2" or a
    TOML table -> env pairs, "yes" -> True (bool: one of true/false, yes/no, on/off, 1/0)."""
    hint = _HINTS[key]
    try:
        if key == "env":
            if isinstance(value, str):
                value = dict(item.split("=", 1) for item in value.split(",") if item)
            items = value.items() if isinstance(value, dict) else value
            return tuple((str(k), str(v)) for k, v in items)
        if get_origin(hint) is tuple:
            item_type = get_args(hint)[0]
            if isinstance(value, str):
                value = shlex.split(value) if item_type is str else value.replace(",", " ").split()
            return tuple(_scalar(item_type, v) for v in value)
        if type(None) in get_args(hint):  # `int | None`: "auto" (or "none", "") is None
            if value is None or str(value).strip().lower() in ("", "auto", "none"):
                return None
            hint = next(a for a in get_args(hint) if a is not type(None))
        if get_origin(hint) is Literal:
            if value not in get_args(hint):
                raise ValueError(f"not one of {', '.join(get_args(hint))}")
            return value
        return _scalar(hint, value)
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"override {key}={value!r} does not fit the field (currently {current!r}): {exc}",
            f"give {key} a value like {current!r}",
        ) from None


def _scalar(kind: type, value: Any) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        word = str(value).strip().lower()
        if word not in _TRUE + _FALSE:
            raise ValueError(f"not a yes or no ({'/'.join(_TRUE)} or {'/'.join(_FALSE)})")
        return word in _TRUE
    if kind is int and isinstance(value, float) and not value.is_integer():
        raise ValueError("not a whole number")
    return kind(value)


_HINTS = get_type_hints(Profile)
