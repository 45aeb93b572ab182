"""File writes that never leave a half-written result behind."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .errors import PathError
from .mainthread import signals_left_to_main_thread as held_signals


# A write refused for want of space: the file system is full, or the user's quota on it used up.
_NO_SPACE = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up"}
# How git says the same (git writes the cache; its message is all there is to go on).
NO_SPACE_TEXTS = (*(os.strerror(code) for code in _NO_SPACE), "Out of diskspace")


def no_space(error: BaseException) -> str | None:
    """"the disk is full (No space left on device)" where ``error`` is a write refused for want of space (or
    shutil.copytree's collection of errors holds one), else None."""
    if isinstance(error, OSError) and error.errno in _NO_SPACE:
        return f"{_NO_SPACE[error.errno]} ({error.strerror or os.strerror(error.errno)})"
    if isinstance(error, shutil.Error) and error.args and isinstance(error.args[0], list):
        reasons = " ".join(str(entry[-1]) for entry in error.args[0] if isinstance(entry, tuple) and entry)
        for code, said in _NO_SPACE.items():
            if os.strerror(code) in reasons:
                return f"{said} ({os.strerror(code)})"
    return None


def no_space_hint(directory: Path, elsewhere: str = "choose another directory") -> str:
    return f"free space on the file system that holds {directory}, or {elsewhere}"


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all. A full disk is a PathError naming ``path``; another OSError names it
    too where it named no file (a failed write names none)."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        # mkstemp creates 0600; a committed or published file gets the usual mode.
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        full = no_space(error)
        if full:
            raise PathError(f"cannot write {path}: {full}", hint=no_space_hint(path.parent)) from None
        if isinstance(error, OSError) and not error.filename:
            error.filename = str(path)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    # LF only, whatever the platform: these files are committed.
    atomic_write_bytes(path, text.encode("utf-8"))


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
    def refused(error: BaseException) -> PathError | None:
        full = no_space(error)
        return PathError(f"cannot write the new {target}: {full}",
                         hint=no_space_hint(target.parent) + f"; {target} was not changed") if full else None

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.hiraishin-new-", dir=target.parent))
    except OSError as error:
        raise refused(error) or error from None
    # mkdtemp makes 0700; the directory that replaces target keeps target's mode (patches/ stays readable to
    # the group that could read it, a site's directories to the web server), or gets the usual one.
    os.chmod(staging, target.stat().st_mode & 0o7777 if target.is_dir() else 0o777 & ~_umask())
    try:
        yield staging
    except BaseException as error:
        with held_signals():
            shutil.rmtree(staging, ignore_errors=True)
        # Filling the staging directory (a copy, a file written there) ran out of space.
        full = refused(error)
        if full is not None:
            raise full from None
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
        full = no_space(exc)
        raise PathError(
            f"{what} {path} cannot be written: {full or exc.strerror or exc}",
            hint=no_space_hint(path, f"give {given_as} another directory") if full
            else f"give {given_as} a directory you can write to",
        ) from None
    return path


def writable_file(path: Path, *, what: str, given_as: str) -> Path:
    """``path`` as a file this process can create or replace (its directory is checked as above)."""
    if path.is_dir():
        raise PathError(f"{what} {path} is a directory", hint=f"give {given_as} a file name")
    writable_directory(path.parent, what=f"the directory of {what}", given_as=given_as)
    return path
