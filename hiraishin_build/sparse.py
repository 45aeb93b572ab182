"""Which upstream paths a work tree leaves out.

One list of patterns drives both git's sparse checkout (so the files are never
written) and the cache's blob prefetch (so only the blobs a checkout needs are
fetched). Patterns are anchored at the repository root; ``*`` and ``?`` stay
within one path component; a trailing ``/`` names a directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import PurePosixPath


def _check(pattern: str) -> str:
    if not pattern or pattern.strip() != pattern:
        raise ValueError(f"empty pattern or surrounding blanks: {pattern!r}")
    if pattern.startswith(("/", "!")):
        raise ValueError(f"{pattern!r}: patterns are anchored at the root already; drop the leading '{pattern[0]}'")
    if "**" in pattern or "\\" in pattern or "[" in pattern:
        raise ValueError(f"{pattern!r}: only '*' and '?' wildcards within one path component are supported")
    return pattern


@dataclass(frozen=True)
class SparseRules:
    excludes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for pattern in self.excludes:
            _check(pattern)

    def excluded(self, path: str) -> bool:
        parts = PurePosixPath(path).parts
        for pattern in self.excludes:
            directory_only = pattern.endswith("/")
            wanted = PurePosixPath(pattern.rstrip("/")).parts
            # A directory pattern needs something below the matched prefix.
            if len(parts) < len(wanted) + (1 if directory_only else 0):
                continue
            if all(fnmatchcase(part, want) for part, want in zip(parts, wanted)):
                return True
        return False

    def git_patterns(self) -> list[str]:
        """Non-cone sparse-checkout patterns: everything, minus the excludes."""
        return ["/*", *(f"!/{pattern}" for pattern in self.excludes)]
