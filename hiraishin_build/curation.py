"""Keeping the stack curated: one patch per concern, never a patch that rewrites another's lines.

A patch that changes or removes lines an earlier patch of the stack added is
a fix-up of that patch: a reviewer must read both to see what the stack does,
and a rebase resolves the same lines twice. Such a change belongs folded into
the earlier patch. The check runs on an applied work tree, where each patch
is one commit: every line a commit removes is blamed within the stack; a line
last written by an earlier commit of the stack (not by the upstream) is a
rewrite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from . import git

_FILE = re.compile(r"^--- (?:a/(?P<path>.+)|/dev/null)$")
_HUNK = re.compile(r"^@@ -(?P<start>\d+)(?:,(?P<count>\d+))? \+\d+(?:,\d+)? @@")


@dataclass(frozen=True)
class Rewrite:
    """Lines of ``path`` that ``patch`` removes or changes although ``earlier`` added them."""

    patch: str
    earlier: str
    path: str
    lines: tuple[int, ...]

    def __str__(self) -> str:
        return (f"{self.patch} rewrites {len(self.lines)} line(s) that {self.earlier} added: "
                f"{self.path}:{_ranges(self.lines)}; fold the change into {self.earlier}")


def _ranges(lines: tuple[int, ...]) -> str:
    """1,2,3,7 as "1-3,7"."""
    spans: list[list[int]] = []
    for line in lines:
        if spans and line == spans[-1][1] + 1:
            spans[-1][1] = line
        else:
            spans.append([line, line])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)


def removed_ranges(diff: str) -> list[tuple[str, int, int]]:
    """(path, first line, count) of every run of lines a zero-context diff removes, in the old file's numbers."""
    ranges: list[tuple[str, int, int]] = []
    path: str | None = None
    for line in diff.splitlines():
        file_header = _FILE.match(line)
        if file_header:
            path = file_header.group("path")  # None for a file the diff creates: it removes nothing
            continue
        hunk = _HUNK.match(line)
        if hunk and path is not None:
            count = 1 if hunk.group("count") is None else int(hunk.group("count"))
            if count:
                ranges.append((path, int(hunk.group("start")), count))
    return ranges


def find_rewrites(workdir: Path, base: str, commits: list[str], names: list[str]) -> list[Rewrite]:
    """Every place where a commit of base..commits[-1] removes lines an earlier commit of it added.

    ``commits`` are the stack's commits oldest first, ``names`` the patch each one is.
    """
    patch_of = dict(zip(commits, names))
    rewrites: list[Rewrite] = []
    parent = base
    for commit, name in zip(commits, names):
        found: dict[tuple[str, str], list[int]] = {}
        # the first patch can only change upstream lines (and blame base..base would blame HEAD)
        removed = removed_ranges(git.diff_zero_context(workdir, parent, commit)) if parent != base else []
        for path, start, count in removed:
            blamed = git.blame_commits(workdir, base, parent, path, start, count)
            for offset, author in enumerate(blamed):
                if author in patch_of:
                    found.setdefault((patch_of[author], path), []).append(start + offset)
        rewrites += [Rewrite(name, earlier, path, tuple(lines)) for (earlier, path), lines in found.items()]
        parent = commit
    return rewrites
