"""The bad-input harness: what every command must do with input a user gets wrong.

A failing command must
- exit with its documented code (docs/commands.md, Exit codes; click's usage errors are 2),
- print no traceback, on either stream,
- print one error message (one ``error:`` line, or click's one ``Error:`` line) that says what is wrong
  and where, and how to fix it (a ``hint:`` line, or click's ``Try ... for help``),
- and leave what it guards exactly as it was: every file under the project's patches/ and recipes/,
  and the upstream cache's refs and source configuration, byte for byte.

Each test module of this package holds a catalogue of bad inputs for one area and runs every entry
through :func:`assert_fails_cleanly` inside :func:`unchanged`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

GUARDED_DIRS = ("patches", "recipes")


@dataclass(frozen=True)
class Ran:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return (f"hiraishin {' '.join(self.args)} -> exit {self.returncode}\n--- stdout\n{self.stdout}"
                f"\n--- stderr\n{self.stderr}")


def run(*args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 300,
        program: Sequence[str] = (sys.executable, "-m", "hiraishin_build.cli")) -> Ran:
    """``hiraishin ARGS`` (or ``program ARGS``) in a process of its own, as a user runs it."""
    completed = subprocess.run([*program, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                               env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    return Ran(tuple(args), completed.returncode, completed.stdout, completed.stderr)


def assert_fails_cleanly(ran: Ran, *, exit_code: int, mentions: Sequence[str] = (), hint: bool = True) -> None:
    """The rules above for one run; ``mentions`` are what the message must name (the path, the key...)."""
    assert ran.returncode == exit_code, f"expected exit {exit_code}\n{ran}"
    for stream in (ran.stdout, ran.stderr):
        assert "Traceback (most recent call last)" not in stream, f"a traceback\n{ran}"
    errors = [line for line in ran.stderr.splitlines() if line.startswith(("error:", "Error:"))]
    assert len(errors) == 1, f"expected one error line on stderr, got {len(errors)}\n{ran}"
    if hint:
        assert "hint:" in ran.stderr or "for help" in ran.stderr, f"no hint saying how to fix it\n{ran}"
    for needle in mentions:
        assert needle in ran.stderr, f"the message does not name {needle!r}\n{ran}"


@dataclass
class Guarded:
    """What a failing command must not change: the project's patches/ and recipes/, the cache's refs."""

    project_root: Path
    cache_root: Path | None = None
    extra: Sequence[Path] = field(default_factory=tuple)

    def snapshot(self) -> dict[str, object]:
        files: dict[str, bytes] = {}
        for top in [*(self.project_root / name for name in GUARDED_DIRS), *self.extra]:
            if top.is_file():
                files[str(top)] = top.read_bytes()
            elif top.is_dir():
                for path in sorted(top.rglob("*")):
                    if path.is_file():
                        files[str(path.relative_to(self.project_root) if path.is_relative_to(self.project_root)
                                  else path)] = path.read_bytes()
        state: dict[str, object] = {"files": files}
        git_dir = self.cache_root / "upstream.git" if self.cache_root else None
        if git_dir is not None and (git_dir / "HEAD").is_file():
            def git(*args: str) -> str:
                return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True,
                                      check=True).stdout
            state["cache_refs"] = git("for-each-ref", "--format=%(refname) %(objectname)")
            state["cache_config"] = (git_dir / "config").read_bytes()
        return state


@contextlib.contextmanager
def unchanged(guarded: Guarded) -> Iterator[None]:
    before = guarded.snapshot()
    yield
    after = guarded.snapshot()
    if after != before:
        changed = sorted({*before["files"], *after["files"]}  # type: ignore[misc]
                         - {k for k in before["files"] if after["files"].get(k) == before["files"][k]})  # type: ignore[index,union-attr]
        refs = "" if before.get("cache_refs") == after.get("cache_refs") else "; the cache's refs changed"
        config = "" if before.get("cache_config") == after.get("cache_config") else "; the cache's config changed"
        raise AssertionError(f"a failing command changed what it guards: files {changed}{refs}{config}")


@dataclass(frozen=True)
class BadInput:
    """One entry of a catalogue: the arguments, the exit code they must give, what the message names."""

    id: str
    args: tuple[str, ...]
    exit_code: int
    mentions: tuple[str, ...] = ()
    hint: bool = True
