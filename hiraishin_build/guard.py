"""One rule for every command: a command that fails leaves what a maintainer keeps as it was.

What is kept: every file under the project's patches/ and recipes/ (the stack, its order, the pin, the
recipes, the releases) and the refs of the upstream cache (its sources' tags and branches). Commands
are written to change these only once their work has succeeded (staged directories, atomic writes,
fetches into a scratch namespace); this guard is the one place that holds them to it. It takes a
snapshot before the command runs and, when the command fails with anything but an interrupt, puts
back whatever changed, and says so: a bug in one command can then cost a retry, never the stack.

An interrupt (Ctrl-C, a signal) is left alone: a rebase stopped that way resumes with
``rebase --continue`` from its own state, which a restore here would contradict.

Only what the failed command itself changed is put back. A command can run for an hour (a wheel
build) while the maintainer exports patches or fetches upstream in another shell; restoring the
snapshot wholesale would undo that work. So while a command runs, Python's audit events (every
``open`` for writing, rename, remove and rmtree of this process, and every subprocess it starts)
journal which kept paths it touched and whether it ran a program against the upstream cache; a
change the journal does not explain was made by another process and is left as it is, named in a
warning.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
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


def _real(path: object) -> str | None:
    """An audited path argument as an absolute path without symlinks; None for a file descriptor."""
    if isinstance(path, int):
        return None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return os.path.realpath(os.fspath(path))  # type: ignore[arg-type]


def _within(real: str | None, tops: tuple[str, ...] | set[str]) -> bool:
    return real is not None and any(real == top or real.startswith(top + os.sep) for top in tops)


@dataclass
class Journal:
    """What this process changed under the kept directories, and whether it ran a program against the
    upstream cache, while a command ran (fed by :func:`_audit`)."""

    kept_dirs: tuple[str, ...]
    cache_git_dir: str | None
    paths: set[str] = field(default_factory=set)
    cache_touched: bool = False

    def note(self, path: object) -> None:
        real = _real(path)
        if _within(real, self.kept_dirs):
            self.paths.add(real)  # type: ignore[arg-type]

    def note_program(self, argv: object, cwd: object) -> None:
        if self.cache_git_dir is None:
            return
        words = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv or [])
        if cwd is not None:
            words.append(cwd)
        for word in words:
            with contextlib.suppress(TypeError, ValueError):
                if _within(_real(word), (self.cache_git_dir,)):
                    self.cache_touched = True
                    return

    def explains(self, path: Path) -> bool:
        """Whether this process wrote ``path`` or replaced, renamed or removed a directory holding it."""
        return _within(_real(path), self.paths)


_journal: Journal | None = None

# open() flags that write; the mode letters that do.
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_ONE_PATH_EVENTS = {"os.remove", "os.rmdir", "os.truncate", "shutil.rmtree", "os.chmod"}
_TWO_PATH_EVENTS = {"os.rename", "os.link", "os.symlink", "shutil.copyfile", "shutil.copytree", "shutil.move"}


def _audit(event: str, args: tuple[object, ...]) -> None:
    journal = _journal
    if journal is None:
        return
    # An exception here would fail the audited operation itself: nothing may escape.
    try:
        if event == "open":
            path, mode, flags = args
            if (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                    (isinstance(flags, int) and flags & _WRITE_FLAGS):
                journal.note(path)
        elif event in _ONE_PATH_EVENTS:
            journal.note(args[0])
        elif event in _TWO_PATH_EVENTS:
            journal.note(args[0])
            journal.note(args[1])
        elif event == "subprocess.Popen":
            _, argv, cwd, _ = args
            journal.note_program(argv, cwd)
    except Exception:  # noqa: BLE001
        pass


# Audit hooks cannot be removed; this one costs a lookup while no command runs.
sys.addaudithook(_audit)


@contextlib.contextmanager
def journal(project_root: Path | None, cache_git_dir: Path | None) -> Iterator[Journal]:
    """Journal this process's changes to the kept directories and the cache while the block runs."""
    global _journal
    kept = tuple(os.path.realpath(project_root / name) for name in KEPT_DIRS) if project_root else ()
    outer, _journal = _journal, Journal(kept, os.path.realpath(cache_git_dir) if cache_git_dir else None)
    try:
        yield _journal
    finally:
        _journal = outer


def restore(before: Snapshot, project_root: Path | None, cache_git_dir: Path | None,
            done: Journal | None = None) -> tuple[list[str], list[str]]:
    """Put back what the command changed since ``before`` (everything that changed, without a journal);
    return what was put back and what changed without the command's doing and was left as it is."""
    restored: list[str] = []
    left: list[str] = []
    if project_root is not None:
        now = _files(project_root)
        def theirs(path: Path) -> bool:
            return done is not None and not done.explains(path)

        for path, data in before.files.items():
            if now.get(path) == data:
                continue
            if theirs(path):
                left.append(str(path.relative_to(project_root)))
                continue
            atomic_write_bytes(path, data)
            restored.append(str(path.relative_to(project_root)))
        for path in sorted(set(now) - set(before.files)):
            if theirs(path):
                left.append(f"{path.relative_to(project_root)} (new)")
                continue
            path.unlink()
            restored.append(f"{path.relative_to(project_root)} (removed: the failed command made it)")
    if before.refs is not None and cache_git_dir is not None:
        now_refs = _refs(cache_git_dir) or {}
        updates: dict[str, str | None] = {name: target for name, target in before.refs.items()
                                          if now_refs.get(name) != target}
        updates.update({name: None for name in set(now_refs) - set(before.refs)})
        if updates and done is not None and not done.cache_touched:
            left.append(f"{len(updates)} ref(s) of the upstream cache {cache_git_dir}")
        elif updates:
            git.update_refs(cache_git_dir, updates, what="restoring the upstream cache's refs")
            restored.append(f"{len(updates)} ref(s) of the upstream cache {cache_git_dir}")
    return restored, left


@contextlib.contextmanager
def kept_on_failure(project_root: Path | None, cache_git_dir: Path | None) -> Iterator[None]:
    before = take(project_root, cache_git_dir)
    done: Journal | None = None
    try:
        with journal(project_root, cache_git_dir) as done:
            yield
    except (KeyboardInterrupt, click.exceptions.Abort, SystemExit):
        raise
    except Exception:
        try:
            restored, left = restore(before, project_root, cache_git_dir, done)
        except Exception as problem:  # never hide the command's own error behind the guard's
            get_logger().error("could not restore what the failed command changed: %s", problem)
        else:
            if restored:
                get_logger().warning("the command failed after changing what it must keep; restored: %s",
                                     ", ".join(restored))
            if left:
                get_logger().warning("changed while the command ran, by another process (not by this command), "
                                     "and left as it is: %s", ", ".join(left))
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
