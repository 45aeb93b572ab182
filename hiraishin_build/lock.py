"""Exclusive locks between hiraishin processes.

``flock`` rather than a pid file: the kernel drops the lock when the process
that holds it ends, however it ends (``kill -9`` included), so a crash never
leaves a lock behind that blocks the next run. The file stays; while the lock
is held it says who holds it (pid, command line, start time), so the process
that is refused can name the holder.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import Locked


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str
    started: str
    """UTC, ISO 8601, to the second."""

    def describe(self) -> str:
        return f"pid {self.pid}, `{self.command}`, started {self.started}"


def this_process() -> Holder:
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    if program in ("cli.py", "__main__.py"):
        # `python -m hiraishin_build.cli ...`: say what a person would type.
        program = "hiraishin"
    return Holder(
        pid=os.getpid(),
        command=shlex.join([program, *sys.argv[1:]]),
        started=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def read_holder(path: Path) -> Holder | None:
    """Who the lock file says holds it; None when it is empty or unreadable
    (a holder that has just taken the lock may not have written yet)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Holder(pid=int(data["pid"]), command=str(data["command"]), started=str(data["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@contextlib.contextmanager
def exclusive(path: Path, refuse: Callable[[Holder | None], Locked]) -> Iterator[Holder]:
    """Hold the lock on ``path`` for the ``with`` block, or raise ``refuse(holder)``
    at once if another process (or another open of it in this one) holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise refuse(read_holder(path)) from None
        me = this_process()
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(asdict(me)) + "\n").encode("utf-8"), 0)
        try:
            yield me
        finally:
            # Cleared on the way out; after a crash the file still names the
            # dead process, but the lock is free and the next holder rewrites it.
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)
