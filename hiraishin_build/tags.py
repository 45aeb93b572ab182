"""Upstream tags: which are newer than the pin, and how a ref relates to it.

Ancestry decides when it can: a descendant of the pinned commit is newer, an
ancestor older. The fork's release tags are cut from branches that are
rebased now and then, so two tags may have diverged; they are then ordered by
the llama.cpp build number in their name (``...-b9079-69d8e4b``), or else by
commit date.
"""

from __future__ import annotations

import datetime
import difflib
import re
from dataclasses import dataclass
from enum import Enum

from .errors import UpstreamError
from .git import ObjectStore

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


def resolve(store: ObjectStore, ref: str) -> str:
    """The commit ``ref`` (tag, branch, full or abbreviated hash) names in the cache."""
    commit = store.resolve(ref)
    if commit is None:
        close = difflib.get_close_matches(ref, store.tags(), n=3, cutoff=0.6)
        raise UpstreamError(
            f"unknown ref '{ref}': the upstream cache has no such tag, branch or commit",
            hint=(f"did you mean {' or '.join(close)}? " if close else "")
            + "`hiraishin upstream tags` lists the tags newer than the pin; "
            "`hiraishin upstream fetch` brings new ones",
        )
    return commit


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


def all_tags(store: ObjectStore) -> list[UpstreamTag]:
    """Every tag that names a commit, oldest first."""
    tags: list[UpstreamTag] = []
    for name in store.tags():
        commit = store.resolve(name)
        if commit is None:
            continue
        tags.append(UpstreamTag(name, commit, build_number(name), store.commit_time(commit)))
    return sorted(tags, key=order_key)


def order_key(tag: UpstreamTag) -> tuple[int, int, str]:
    return (tag.time, tag.build if tag.build is not None else -1, tag.name)


def newer_than(store: ObjectStore, reference_name: str, reference: str) -> list[TagPlacement]:
    """Tags newer than ``reference``: its descendants, and diverged tags that
    are later by build number (or date), oldest first."""
    newer: list[TagPlacement] = []
    for tag in all_tags(store):
        found = relation(store, tag.commit, reference)
        if found is Relation.NEWER or (
            found is Relation.DIVERGED and later(store, tag.name, tag.commit, reference_name, reference)
        ):
            newer.append(TagPlacement(tag, found))
    return newer
