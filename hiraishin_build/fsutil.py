"""File writes that never leave a half-written result behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    # mkstemp creates 0600; a committed or published file gets the usual mode.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
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
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    retired = None
    if target.exists():
        retired = Path(tempfile.mkdtemp(prefix=f".{target.name}.hiraishin-old-", dir=target.parent))
        os.rmdir(retired)
        os.rename(target, retired)
    os.rename(staging, target)
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)
