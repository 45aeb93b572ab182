"""Upstream tags: which are newer than the pin, and how a ref relates to it.

Ancestry decides when it can: a descendant of the pinned commit is newer, an
ancestor older. The fork's release tags are cut from branches that are
rebased now and then, so two tags may have diverged; they are then ordered by
the llama.cpp build number in their name (``...-b9079-69d8e4b``), or else by
commit date.

Tags come from every source in the cache (sources.py); each carries the names
of the sources that have it.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from enum import Enum

from .git import ObjectStore
from .sources import RefKind, RefTable, ResolvedRef

_BUILD = re.compile(r"(?:^|-)b(\d+)(?:-[0-9a-f]{6,40})?$")


class Relation(str, Enum):
    SAME = "same"
    NEWER = "newer"
    """A descendant of the reference commit."""
    OLDER = "older"
    """An ancestor of the reference commit."""
    DIVERGED = "diverged"
    """Neither: the histories split after their merge base."""


@dataclass(frozen=True)
class UpstreamTag:
    name: str
    commit: str
    build: int | None
    """The llama.cpp build number the name carries, if any."""
    time: int
    """Committer time of the tagged commit, seconds since the epoch."""
    sources: tuple[str, ...] = ()
    """The sources whose tag of this name names this commit."""
    disputed: bool = False
    """Another source gives the same name another commit."""

    @property
    def label(self) -> str:
        """The name to pass to ``rebase --onto``: qualified with a source when the name alone is ambiguous."""
        return f"{self.sources[0]}/{self.name}" if self.disputed and self.sources else self.name

    @property
    def date(self) -> str:
        return datetime.datetime.fromtimestamp(self.time, datetime.timezone.utc).strftime("%Y-%m-%d")


@dataclass(frozen=True)
class TagPlacement:
    tag: UpstreamTag
    relation: Relation
    """How the tag's commit relates to the reference commit."""


def build_number(name: str) -> int | None:
    match = _BUILD.search(name)
    return int(match.group(1)) if match else None


def resolve(table: RefTable, ref: str) -> ResolvedRef:
    """What ``ref`` (a tag or branch of any source, SOURCE/NAME, a full or
    abbreviated hash) names in the cache; see :meth:`RefTable.resolve`."""
    return table.resolve(ref)


def relation(store: ObjectStore, commit: str, reference: str) -> Relation:
    if commit == reference:
        return Relation.SAME
    if store.is_ancestor(reference, commit):
        return Relation.NEWER
    if store.is_ancestor(commit, reference):
        return Relation.OLDER
    return Relation.DIVERGED


def describe(store: ObjectStore, name: str, commit: str, reference_name: str, reference: str) -> tuple[Relation, str]:
    """The relation of ``commit`` to ``reference`` and a sentence for a person."""
    found = relation(store, commit, reference)
    if found is Relation.SAME:
        return found, f"{name} is the pinned commit itself"
    if found is Relation.NEWER:
        return found, f"{name} is newer than the pin (a descendant of {reference[:12]})"
    if found is Relation.OLDER:
        return found, f"{name} is OLDER than the pin (an ancestor of {reference[:12]}): the stack moves back in history"
    base = store.merge_base(commit, reference)
    where = f"their histories split at {base[:12]}" if base else "they share no history"
    basis = "build number" if build_number(name) is not None and build_number(reference_name) is not None else "commit date"
    order = "newer" if later(store, name, commit, reference_name, reference) else "older"
    return found, f"{name} is not a descendant of the pin ({where}); by {basis} it is {order}"


def later(store: ObjectStore, name: str, commit: str, reference_name: str, reference: str) -> bool:
    """For refs whose histories diverged: is ``name`` the later one?"""
    mine, theirs = build_number(name), build_number(reference_name)
    if mine is not None and theirs is not None and mine != theirs:
        return mine > theirs
    return store.commit_time(commit) > store.commit_time(reference)


def all_tags(table: RefTable, source: str | None = None) -> list[UpstreamTag]:
    """Every tag that names a commit, oldest first; one entry per name and
    commit, so a name two sources disagree on appears once per commit."""
    by_name: dict[str, dict[str, list[str]]] = {}
    for ref in table.refs:
        if ref.kind is RefKind.TAG:
            by_name.setdefault(ref.name, {}).setdefault(ref.commit, []).append(ref.source)
    tags: list[UpstreamTag] = []
    for name, commits in by_name.items():
        for commit, sources in commits.items():
            if source is not None and source not in sources:
                continue
            tags.append(UpstreamTag(name, commit, build_number(name), table.store.commit_time(commit),
                                    tuple(sorted(sources)), disputed=len(commits) > 1))
    return sorted(tags, key=order_key)


def order_key(tag: UpstreamTag) -> tuple[int, int, str]:
    return (tag.time, tag.build if tag.build is not None else -1, tag.name)


def newer_than(table: RefTable, reference_name: str, reference: str, *, source: str | None = None) -> list[TagPlacement]:
    """Tags newer than ``reference``: its descendants, and diverged tags that
    are later by build number (or date), oldest first."""
    store = table.store
    newer: list[TagPlacement] = []
    for tag in all_tags(table, source):
        found = relation(store, tag.commit, reference)
        if found is Relation.NEWER or (
            found is Relation.DIVERGED and later(store, tag.name, tag.commit, reference_name, reference)
        ):
            newer.append(TagPlacement(tag, found))
    return newer
