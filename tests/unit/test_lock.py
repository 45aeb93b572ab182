"""The flock-based lock: refuses a second holder, names the first, and never outlives its process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hiraishin_build import lock
from hiraishin_build.errors import Locked


class Refused(Locked):
    def __init__(self, holder: lock.Holder | None) -> None:
        super().__init__(f"held by {holder.describe() if holder else 'nobody known'}")
        self.holder = holder


def test_a_second_holder_is_refused_and_told_who_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with lock.exclusive(path, Refused) as me:
        assert me.pid == os.getpid() and lock.read_holder(path) == me
        # Another open of the same file, even in this process, is refused at once.
        with pytest.raises(Refused) as info, lock.exclusive(path, Refused):
            pass
        assert info.value.holder == me
    assert lock.read_holder(path) is None  # cleared on release
    with lock.exclusive(path, Refused):
        pass


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    ready = tmp_path / "ready"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import pathlib, sys, time\n"
        "from hiraishin_build import lock\n"
        "from hiraishin_build.errors import Locked\n"
        f"with lock.exclusive(pathlib.Path({str(path)!r}), lambda h: Locked('held')):\n"
        f"    pathlib.Path({str(ready)!r}).touch()\n"
        "    time.sleep(300)\n"
    )])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert holder.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(Refused) as info, lock.exclusive(path, Refused):
            pass
        assert info.value.holder is not None and info.value.holder.pid == holder.pid
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # Its file still names it, but the lock died with it.
    assert lock.read_holder(path) is not None
    with lock.exclusive(path, Refused) as me:
        assert lock.read_holder(path) == me
