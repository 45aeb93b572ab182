"""Strict reading of our TOML files: unknown keys and wrong types are errors
that name the file and the key, with a suggestion for a likely typo."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


def load(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path}: file not found", hint="check the path; the project's files come with its checkout")
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def reject_unknown_keys(path: Path, table: Mapping[str, Any], known: Iterable[str], where: str = "") -> None:
    known = list(known)
    for key in table:
        if key in known:
            continue
        location = f"{where}.{key}" if where else key
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(known)}"
        raise ConfigError(f"{path}: unknown key '{location}'", hint=hint)


def require(path: Path, table: Mapping[str, Any], key: str, kind: type, where: str = "") -> Any:
    location = f"{where}.{key}" if where else key
    if key not in table:
        raise ConfigError(f"{path}: missing required key '{location}'")
    value = table[key]
    if not isinstance(value, kind):
        raise ConfigError(
            f"{path}: key '{location}' must be a {kind.__name__}, not {type(value).__name__}"
        )
    return value


def optional_table(path: Path, table: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = table.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: '{key}' must be a table ([{key}])")
    return value
