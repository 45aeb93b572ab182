"""Upstream sources: the repositories whose tags and branches the cache holds.

The pin's own repository, its forks, and local mirrors of either are each a
*source*: a git remote of the bare cache with a name. Each source's refs live
in a namespace of their own, ``refs/sources/<name>/tags/`` and
``refs/sources/<name>/heads/``, so that fetching (and pruning) one source
never touches another's refs, and every tag is known by where it came from.

A source records two places:

- ``location``: where it is fetched from (``remote.<name>.url``), the
  repository itself or a mirror of it;
- ``url``: the repository it stands for, which the pin records when a rebase
  moves onto one of its tags (the pin always names where its ref lives). For
  a mirror that is the public URL given with ``upstream fetch --from MIRROR
  --url URL``; a mirror that carries the pinned tag at the pinned commit is
  taken for a mirror of the pin's url; any other source stands for its own
  location. A mirror fetched again keeps what it was recorded to stand for.

Caches made before sources existed have one remote, ``origin``, whose tags
are directly under ``refs/tags/``; they are read as the source ``origin``
here, and moved to the layout above by the next fetch (see cache.py).
"""

from __future__ import annotations

import difflib
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from . import git
from .errors import SourcesDisagree, UpstreamError
from .git import ObjectStore

SOURCES_REFS = "refs/sources/"
LEGACY_REMOTE = "origin"
LEGACY_TAGS = "refs/tags/"
LEGACY_HEADS = f"refs/remotes/{LEGACY_REMOTE}/"
LEGACY_TAG_REFSPEC = "+refs/tags/*:refs/tags/*"
# Our own config section (git ignores it): the repository a source stands for.
URL_SECTION = "hiraishin-source"

# A source name is one ref-name component; keeping it to these characters
# also keeps it usable unquoted in a shell and in `SOURCE/TAG`.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Path components that say nothing about which repository it is
# (/work/.mirror/OWNER+NAME/repo, /srv/NAME/.git).
_GENERIC = {"repo", "repository", "git", ".git", "mirror"}


class RefKind(str, Enum):
    TAG = "tag"
    BRANCH = "branch"
    COMMIT = "commit"


@dataclass(frozen=True)
class Source:
    name: str
    url: str
    """The repository it stands for: what the pin records for a tag from it."""
    location: str
    """Where it is fetched from (a URL; file:// for a local path)."""
    legacy: bool = False
    """A cache made before sources: this remote's refs are refs/tags/* and refs/remotes/origin/*."""

    @property
    def tags_prefix(self) -> str:
        return LEGACY_TAGS if self.legacy else f"{SOURCES_REFS}{self.name}/tags/"

    @property
    def heads_prefix(self) -> str:
        return LEGACY_HEADS if self.legacy else f"{SOURCES_REFS}{self.name}/heads/"

    @property
    def mirrored(self) -> bool:
        """Fetched from somewhere else than the repository it stands for."""
        return not same_repository(self.url, self.location)

    def describe(self) -> str:
        return self.url if not self.mirrored else f"{self.url} (fetched from {display_location(self.location)})"


def fetch_refspecs(name: str) -> tuple[str, str]:
    return (f"+refs/tags/*:{SOURCES_REFS}{name}/tags/*", f"+refs/heads/*:{SOURCES_REFS}{name}/heads/*")


NAME_RULE = "letters, digits, '.', '_' and '-', starting with a letter or digit (e.g. owner-repo)"


def name_is_valid(name: str) -> bool:
    return bool(_NAME.match(name)) and not name.endswith((".lock", ".")) and ".." not in name


def validate_name(name: str) -> str:
    if not name_is_valid(name):
        raise UpstreamError(f"'{name}' cannot name a source", hint=f"use {NAME_RULE}")
    return name


# A URL scheme as RFC 3986 spells it; git runs a remote helper for any it has no transport of its own for.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")


def url_problem(url: str) -> str | None:
    """What keeps ``url`` from being a repository URL git understands, or None.

    Accepted: ``scheme://host/path`` (``file:///path`` for a repository on this
    machine), scp-like ``[user@]host:path``, and a remote helper's
    ``transport::address``. A bare path is refused: a source's url says which
    repository it stands for to anyone, not where this machine keeps a copy.
    """
    if not url.strip():
        return "it is empty"
    helper, separator, address = url.partition("::")
    if separator and "/" not in helper and ":" not in helper:
        return None if _SCHEME.match(helper) and address else "it names no remote helper and address (transport::address)"
    if any(character.isspace() for character in url):
        return "it contains white space (a URL spells a space %20)"
    scheme, separator, rest = url.partition("://")
    if separator:
        if not _SCHEME.match(scheme):
            return f"'{scheme}' is not a URL scheme"
        parsed = urllib.parse.urlparse(url)
        if scheme.lower() != "file" and not parsed.netloc:
            return "it names no host (scheme://host/path)"
        if not parsed.path.strip("/"):
            return "it names no repository: nothing follows the host (scheme://host/path)"
        return None
    scp = _scp_like(url)
    if scp:
        return None if scp.group(2).strip("/") else "it names no repository: nothing follows the ':' ([user@]host:path)"
    if url.startswith(("/", "~", ".")):
        return "it is a path, not a URL (a repository on this machine is file:///path)"
    return "it is neither scheme://host/path nor scp-like [user@]host:path"


def display_location(url: str) -> str:
    """A file:// URL as the local path it is; any other URL unchanged."""
    if url.startswith("file://"):
        return urllib.parse.unquote(urllib.parse.urlparse(url).path)
    return url


def is_local(url: str) -> bool:
    """A path on this machine (or a file:// URL): other machines cannot fetch it."""
    return url.startswith("file://") or url.startswith("/") or ("://" not in url and not _scp_like(url))


def _scp_like(url: str) -> re.Match[str] | None:
    # git@github.com:owner/name.git (but not C:\path, nor a local path with a colon later on)
    return re.match(r"^(?:[^@/:]+@)?([^/:]{2,}):(?!//)(.*)$", url)


def _host_and_path(url: str) -> tuple[str, str]:
    """(host, path) of a URL; host is empty for a local repository."""
    if is_local(url):
        return "", str(Path(display_location(url)).expanduser().resolve(strict=False)) if url else ""
    scp = _scp_like(url) if "://" not in url else None
    if scp:
        return scp.group(1).lower(), "/" + scp.group(2)
    parsed = urllib.parse.urlparse(url)
    return (parsed.hostname or "").lower(), urllib.parse.unquote(parsed.path)


def repository_key(url: str) -> str:
    """What identifies a repository: host and path, whatever the scheme or
    user, without a trailing ``.git`` or slash; hosted paths ignore case
    (GitHub's do)."""
    host, path = _host_and_path(url)
    path = path.rstrip("/").removesuffix(".git").rstrip("/")
    return f"{host}{path}".lower() if host else f"file:{path}"


def same_repository(a: str, b: str) -> bool:
    return bool(a) and bool(b) and repository_key(a) == repository_key(b)


def derive_name(url: str) -> str:
    """A source name from a URL or path: OWNER-NAME for a hosted repository
    (github.com/TheTom/llama-cpp-turboquant -> TheTom-llama-cpp-turboquant),
    the last telling path component for a local one (.../TheTom+llama-cpp-turboquant/repo
    -> TheTom-llama-cpp-turboquant)."""
    host, path = _host_and_path(url)
    parts = [part for part in path.split("/") if part]
    if parts:
        parts[-1] = parts[-1].removesuffix(".git")
    while len(parts) > 1 and parts[-1].lower() in _GENERIC | {""}:
        parts.pop()
    chosen = parts[-2:] if host and len(parts) >= 2 else parts[-1:]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(chosen)).strip("-.")
    name = re.sub(r"\.{2,}", ".", name).removesuffix(".lock")
    return name if name and _NAME.match(name) else "upstream"


def read_sources(git_dir: Path) -> list[Source]:
    """The sources configured in the cache, in the order they were added."""
    settings: dict[str, dict[str, list[str]]] = {}
    urls: dict[str, str] = {}
    for key, value in git.config_get_regexp(git_dir, rf"^(remote|{URL_SECTION})\."):
        section, _, rest = key.partition(".")
        name, _, field = rest.rpartition(".")
        if not name:
            continue
        if section == URL_SECTION:
            if field == "url":
                urls[name] = value
        else:
            settings.setdefault(name, {}).setdefault(field, []).append(value)
    found: list[Source] = []
    for name, fields in settings.items():
        location = (fields.get("url") or [""])[0]
        if not location:
            continue
        legacy = name == LEGACY_REMOTE and LEGACY_TAG_REFSPEC in fields.get("fetch", [])
        found.append(Source(name, urls.get(name) or display_location(location), location, legacy=legacy))
    return found


def names_hint(sources: Iterable[Source]) -> str:
    names = [source.name for source in sources]
    return ", ".join(names) if names else "none yet"


@dataclass(frozen=True)
class SourceRef:
    source: str
    kind: RefKind
    name: str
    """The tag or branch name within its source."""
    commit: str


@dataclass(frozen=True)
class ResolvedRef:
    name: str
    """What a pin records: the tag or branch name (without a source prefix), or the full commit."""
    commit: str
    kind: RefKind
    sources: tuple[str, ...]
    """The sources whose ref of that name names the commit; empty for a commit hash."""


class RefTable:
    """Every tag and branch of every source in the cache, peeled to commits."""

    def __init__(self, store: ObjectStore, sources: Sequence[Source], refs: Sequence[SourceRef]) -> None:
        self.store = store
        self.sources = {source.name: source for source in sources}
        self.refs = tuple(refs)

    @classmethod
    def read(cls, store: ObjectStore, sources: Sequence[Source]) -> RefTable:
        known = list(sources)
        # A namespace without a remote (left by an interrupted migration, or
        # a remote removed by hand) is still read: its refs are not lost.
        configured = {source.name for source in known}
        for name in sorted({ref.removeprefix(SOURCES_REFS).split("/", 1)[0]
                            for ref, _, _ in store.references(SOURCES_REFS)} - configured):
            known.append(Source(name, "", ""))
        if not any(source.legacy for source in known) and store.references(LEGACY_TAGS):
            # Tags in refs/tags/ whose old remote is gone: still the cache's.
            known.append(Source(LEGACY_REMOTE if LEGACY_REMOTE not in configured else "legacy", "", "", legacy=True))
        refs: list[SourceRef] = []
        for source in known:
            for prefix, kind in ((source.tags_prefix, RefKind.TAG), (source.heads_prefix, RefKind.BRANCH)):
                for ref, _, commit in store.references(prefix):
                    if commit is not None:
                        refs.append(SourceRef(source.name, kind, ref.removeprefix(prefix), commit))
        return cls(store, known, refs)

    def source(self, name: str) -> Source:
        found = self.sources.get(name)
        if found is None:
            close = difflib.get_close_matches(name, list(self.sources), n=1, cutoff=0.5)
            raise UpstreamError(
                f"no source named '{name}' in the upstream cache (sources: {names_hint(self.sources.values())})",
                hint=(f"did you mean '{close[0]}'? " if close else "")
                + f"`hiraishin upstream fetch --from PATH_OR_URL --name {name}` adds a source; "
                "`hiraishin upstream show` lists them",
            )
        return found

    def holders(self, name: str, kind: RefKind, *, source: str | None = None) -> dict[str, str]:
        """source -> commit, for every source that has a ``kind`` ref called ``name``."""
        return {
            ref.source: ref.commit for ref in self.refs
            if ref.kind is kind and ref.name == name and (source is None or ref.source == source)
        }

    def tags(self, source: str | None = None) -> list[SourceRef]:
        return [ref for ref in self.refs if ref.kind is RefKind.TAG and (source is None or ref.source == source)]

    def lookup(self, name: str) -> tuple[RefKind, dict[str, str]] | None:
        """The tag called ``name`` in any source, else the branch; None if neither."""
        for kind in (RefKind.TAG, RefKind.BRANCH):
            found = self.holders(name, kind)
            if found:
                return kind, found
        return None

    def resolve(self, ref: str) -> ResolvedRef:
        """The commit ``ref`` names: a tag or branch of any source, ``SOURCE/NAME``
        for one source's, or a full or abbreviated commit hash.

        Refuses a name that two sources give different commits.
        """
        found = self.lookup(ref)
        if found is not None:
            return _agreed(ref, *found)
        prefix, slash, rest = ref.partition("/")
        if slash and prefix in self.sources:
            for kind in (RefKind.TAG, RefKind.BRANCH):
                holders = self.holders(rest, kind, source=prefix)
                if holders:
                    return ResolvedRef(rest, holders[prefix], kind, (prefix,))
        commit = self.store.resolve(ref) if re.fullmatch(r"[0-9a-f]{7,40}", ref) else None
        if commit is not None:
            return ResolvedRef(commit if commit.startswith(ref) else ref, commit, RefKind.COMMIT, ())
        raise self._unknown(ref, prefix if slash else None)

    def _unknown(self, ref: str, prefix: str | None) -> UpstreamError:
        if prefix is not None and prefix in self.sources:
            names = sorted({t.name for t in self.tags(prefix)})
            close = difflib.get_close_matches(ref.partition("/")[2], names, n=3, cutoff=0.6)
            where = f"the source '{prefix}' has no tag or branch '{ref.partition('/')[2]}'"
            close = [f"{prefix}/{name}" for name in close]
        else:
            names = sorted({t.name for t in self.tags()})
            close = difflib.get_close_matches(ref, names, n=3, cutoff=0.6)
            where = "no source in the upstream cache has such a tag or branch, and it is no commit there"
            if prefix is not None:
                where += f" (nor is '{prefix}' a source: the sources are {names_hint(self.sources.values())})"
        return UpstreamError(
            f"unknown ref '{ref}': {where}",
            hint=(f"did you mean {' or '.join(close)}? " if close else "")
            + "`hiraishin upstream tags` lists the tags newer than the pin and their sources; "
            "`hiraishin upstream fetch` (or `--from PATH_OR_URL`) brings new ones",
        )


def _agreed(name: str, kind: RefKind, holders: dict[str, str]) -> ResolvedRef:
    by_commit: dict[str, list[str]] = {}
    for source, commit in sorted(holders.items()):
        by_commit.setdefault(commit, []).append(source)
    if len(by_commit) > 1:
        raise SourcesDisagree(
            f"the sources disagree on the {kind.value} '{name}':\n"
            + "\n".join(f"    {commit}  in {', '.join(names)}" for commit, names in by_commit.items()),
            hint="name the one you mean with its source, "
            + " or ".join(f"`{names[0]}/{name}`" for names in by_commit.values())
            + "; compare the two commits before trusting either",
        )
    (commit, names), = by_commit.items()
    return ResolvedRef(name, commit, kind, tuple(names))


def disagreements(table: RefTable, source: str) -> list[tuple[str, dict[str, str]]]:
    """Tags of ``source`` that another source gives another commit: (name, source -> commit)."""
    found: list[tuple[str, dict[str, str]]] = []
    for ref in table.tags(source):
        holders = table.holders(ref.name, RefKind.TAG)
        if len(set(holders.values())) > 1:
            found.append((ref.name, holders))
    return found
