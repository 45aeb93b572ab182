"""One rule for every command: a command that fails leaves what a maintainer keeps as it was.

What is kept: every file under the project's patches/ and recipes/ (the stack, its order, the pin, the
recipes, the releases) and the refs of the upstream cache (its sources' tags and branches). Commands
are written to change these only once their work has succeeded (staged directories, atomic writes,
fetches into a scratch namespace); this guard is the one place that holds them to it. It takes a
snapshot before the command runs and, when the command fails with anything but an interrupt, puts
back whatever changed, and says so: a bug in one command can then cost a retry, never the stack.

An interrupt (Ctrl-C, a signal) is left alone: a rebase stopped that way resumes with
``rebase --continue`` from its own state, which a restore here would contradict.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click

from . import git
from .fsutil import atomic_write_bytes
from .log import get_logger

KEPT_DIRS = ("patches", "recipes")


@dataclass(frozen=True)
class Snapshot:
    files: dict[Path, bytes]
    refs: dict[str, str] | None
    """Cache ref name -> the object it stores (None: no cache)."""


def _files(project_root: Path) -> dict[Path, bytes]:
    found: dict[Path, bytes] = {}
    for name in KEPT_DIRS:
        top = project_root / name
        if top.is_dir():
            for path in sorted(top.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    found[path] = path.read_bytes()
    return found


def _refs(cache_git_dir: Path | None) -> dict[str, str] | None:
    if cache_git_dir is None or not (cache_git_dir / "HEAD").is_file():
        return None
    try:
        store = git.ObjectStore(cache_git_dir)
        return {name: target for name, target, _ in store.references("refs/")}
    except Exception:  # an unreadable cache is the command's to report, not the guard's
        return None


def take(project_root: Path | None, cache_git_dir: Path | None) -> Snapshot:
    return Snapshot(_files(project_root) if project_root else {}, _refs(cache_git_dir))


def restore(before: Snapshot, project_root: Path | None, cache_git_dir: Path | None) -> list[str]:
    """Put back what changed since ``before``; return what was put back, for the user."""
    restored: list[str] = []
    if project_root is not None:
        now = _files(project_root)
        for path, data in before.files.items():
            if now.get(path) != data:
                atomic_write_bytes(path, data)
                restored.append(str(path.relative_to(project_root)))
        for path in sorted(set(now) - set(before.files)):
            path.unlink()
            restored.append(f"{path.relative_to(project_root)} (removed: the failed command made it)")
    if before.refs is not None and cache_git_dir is not None:
        now_refs = _refs(cache_git_dir) or {}
        updates: dict[str, str | None] = {name: target for name, target in before.refs.items()
                                          if now_refs.get(name) != target}
        updates.update({name: None for name in set(now_refs) - set(before.refs)})
        if updates:
            git.update_refs(cache_git_dir, updates, what="restoring the upstream cache's refs")
            restored.append(f"{len(updates)} ref(s) of the upstream cache {cache_git_dir}")
    return restored


@contextlib.contextmanager
def kept_on_failure(project_root: Path | None, cache_git_dir: Path | None) -> Iterator[None]:
    before = take(project_root, cache_git_dir)
    try:
        yield
    except (KeyboardInterrupt, click.exceptions.Abort, SystemExit):
        raise
    except Exception:
        try:
            restored = restore(before, project_root, cache_git_dir)
        except Exception as problem:  # never hide the command's own error behind the guard's
            get_logger().error("could not restore what the failed command changed: %s", problem)
        else:
            if restored:
                get_logger().warning("the command failed after changing what it must keep; restored: %s",
                                     ", ".join(restored))
        raise


def locate(project_dir: Path | None, cache_dir: Path | None) -> tuple[Path | None, Path | None]:
    """The project root and the cache's git directory a command will use, where they can be found."""
    from .cache import UpstreamCache
    from .errors import HiraishinError
    from .project import Project

    try:
        root: Path | None = Project.find(project_dir).root
    except HiraishinError:
        root = None
    try:
        # --cache-dir also reads HIRAISHIN_CACHE_DIR; without either the user cache directory.
        git_dir: Path | None = UpstreamCache(cache_dir.resolve() if cache_dir else None).git_dir
    except Exception:
        git_dir = None
    return root, git_dir


class KeptGroup(click.Group):
    """The click group whose every command runs under :func:`kept_on_failure`."""

    def invoke(self, ctx: click.Context) -> object:
        root, git_dir = locate(ctx.params.get("project_dir"), ctx.params.get("cache_dir"))
        with kept_on_failure(root, git_dir):
            return super().invoke(ctx)
