"""The versions already released, and the rule that a new sdist sorts above them.

``pip install -U`` only moves to a version that sorts higher than the one
installed. ``recipes/releases.toml`` records every released version with the
upstream commit it was built on; an sdist on a pin that descends from a
released commit must carry a version above that release, or users of the
release would never be offered it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from . import git, tomlfile
from .errors import ConfigError, VersionNotNewer
from .pin import UpstreamPin, validate_commit

RELEASES_FILE = Path("recipes") / "releases.toml"


@dataclass(frozen=True)
class Release:
    version: Version
    upstream_commit: str


def load_releases(path: Path) -> list[Release]:
    """The releases ``path`` lists; no file means nothing was released yet."""
    if not path.exists():
        return []
    data = tomlfile.load(path)
    tomlfile.reject_unknown_keys(path, data, ["release"])
    entries = data.get("release", [])
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: 'release' must be an array of tables ([[release]])")
    releases = []
    for number, entry in enumerate(entries, start=1):
        where = f"release[{number}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: '{where}' must be a table ([[release]])")
        tomlfile.reject_unknown_keys(path, entry, ["version", "upstream-commit"], where)
        text = tomlfile.require(path, entry, "version", str, where)
        try:
            version = Version(text)
        except InvalidVersion:
            raise ConfigError(f"{path}: '{where}.version' is not a version: {text!r}",
                              hint="write the released sdist's version, e.g. \"10354.13\"") from None
        commit = validate_commit(path, f"{where}.upstream-commit",
                                 tomlfile.require(path, entry, "upstream-commit", str, where))
        releases.append(Release(version, commit))
    return releases


def require_newer(version: str, pin: UpstreamPin, releases: Sequence[Release], store: git.ObjectStore,
                  *, releases_file: Path = RELEASES_FILE) -> None:
    """Refuse ``version`` when it does not sort above every release the pin descends from.

    On the released commit itself an equal version is a rebuild and is
    allowed; a lower one is not. A release whose commit the cache lacks is not
    in the pin's history (the cache holds every commit of the pin's history),
    so no rule applies to it.
    """
    candidate = Version(version)
    for release in releases:
        if not store.commit_exists(release.upstream_commit):
            continue
        if not store.is_ancestor(release.upstream_commit, pin.commit):
            continue
        same_base = release.upstream_commit == pin.commit
        if candidate > release.version or (same_base and candidate == release.version):
            continue
        where = (f"{release.upstream_commit[:12]} ({pin.ref}), the pinned commit itself" if same_base else
                 f"{release.upstream_commit[:12]}, an ancestor of the pinned commit {pin.short} ({pin.ref})")
        raise VersionNotNewer(
            f"version {version} does not sort above {release.version}, released on upstream {where}: "
            f"pip install -U would never move a user of {release.version} to it",
            hint=("raise [tool.hiraishin] stack-revision in wheels/pyproject.toml" if same_base else
                  "the first part of the version is the upstream's commit count and grows with every descendant; "
                  f"check the pin and {releases_file}"),
        )
