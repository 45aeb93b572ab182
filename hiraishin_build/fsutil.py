"""File writes that never leave a half-written result behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from .errors import PathError


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    # mkstemp creates 0600; a committed or published file gets the usual mode.
    os.chmod(tmp, 0o666 & ~_umask())
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    # LF only, whatever the platform: these files are committed.
    atomic_write_bytes(path, text.encode("utf-8"))


# The signals that stop the tool (Ctrl-C, a service manager's stop, a closed terminal).
STOPPING_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back while a short step that must not be cut in half runs (removing a
    scratch tree, swapping a directory in); one that came meanwhile is delivered, and stops the tool,
    right after. Outside the main thread, where no handler runs, there is nothing to hold."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def scratch_directory(prefix: str) -> Iterator[Path]:
    """A temporary directory, removed however the block ends; the removal is not cut short by Ctrl-C or
    SIGTERM, so no half-deleted tree is left in TMPDIR."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        with held_signals():
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """Yield an empty sibling directory; on success it replaces ``target``.

    The old directory is moved aside before the new one is moved in, and
    removed only afterwards, so an interruption leaves either the old or the
    new content in place (the other one under a ``.hiraishin-*`` name next to
    it), never a mixture.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.hiraishin-new-", dir=target.parent))
    # mkdtemp makes 0700; the directory that replaces target keeps target's mode (patches/ stays readable to
    # the group that could read it, a site's directories to the web server), or gets the usual one.
    os.chmod(staging, target.stat().st_mode & 0o7777 if target.is_dir() else 0o777 & ~_umask())
    try:
        yield staging
    except BaseException:
        with held_signals():
            shutil.rmtree(staging, ignore_errors=True)
        raise
    # The swap and the removal of the old tree as one step: a stop in between would leave the
    # .hiraishin-old- tree beside the target.
    with held_signals():
        retired = None
        if target.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{target.name}.hiraishin-old-", dir=target.parent))
            os.rmdir(retired)
            os.rename(target, retired)
        os.rename(staging, target)
        if retired is not None:
            shutil.rmtree(retired, ignore_errors=True)


def writable_directory(path: Path, *, what: str, given_as: str) -> Path:
    """``path`` as a directory this process can write into, made if absent; checked before any work,
    so a bad output path fails at once instead of after a build. ``what`` names the directory for the
    message ("the sdist's output directory"), ``given_as`` the option or variable that set it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(prefix=".hiraishin-write-check-", dir=path)
        probe.close()
    except OSError as exc:
        raise PathError(
            f"{what} {path} cannot be written: {exc.strerror or exc}",
            hint=f"give {given_as} a directory you can write to",
        ) from None
    return path


def writable_file(path: Path, *, what: str, given_as: str) -> Path:
    """``path`` as a file this process can create or replace (its directory is checked as above)."""
    if path.is_dir():
        raise PathError(f"{what} {path} is a directory", hint=f"give {given_as} a file name")
    writable_directory(path.parent, what=f"the directory of {what}", given_as=given_as)
    return path
