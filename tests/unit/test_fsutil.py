"""The staged and atomic writes: a replaced directory keeps the mode it had."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hiraishin_build.fsutil import staged_directory


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_staged_directory_takes_the_mode_of_the_one_it_replaces(tmp_path: Path) -> None:
    target = tmp_path / "patches"
    target.mkdir()
    os.chmod(target, 0o750)
    with staged_directory(target) as staging:
        (staging / "series").write_text("")
    assert mode(target) == 0o750 and (target / "series").is_file()


def test_a_new_staged_directory_gets_the_usual_mode(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        with staged_directory(tmp_path / "site") as staging:
            (staging / "index.html").write_text("")
    finally:
        os.umask(umask)
    # not mkdtemp's 0700: a web server serving the site must be able to read it
    assert mode(tmp_path / "site") == 0o755
