"""benchmarks/device/wheel_files.py: the newest wheel's files, largest in the zip first, and no wheel older than
the build asking (so a failed build never reports an earlier one)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from tests.helpers import load_benchmark

wheel_files = load_benchmark("device/wheel_files")


def make_wheel(path: Path, members: dict[str, bytes], mtime: float) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    os.utime(path, (mtime, mtime))
    return path


def test_the_newest_wheel_is_listed_largest_first(tmp_path: Path) -> None:
    make_wheel(tmp_path / "hiraishin_llama-1.0-py3-none-any.whl", {"old.so": b"x"}, 1000)
    newest = make_wheel(tmp_path / "hiraishin_llama-1.1-py3-none-any.whl",
                        {"small.txt": b"a", "big.so": os.urandom(4096), "mid.so": os.urandom(512)}, 2000)
    result = wheel_files.listing(tmp_path)
    assert result["wheel"] == newest.name and result["bytes"] == newest.stat().st_size
    assert [f["file"] for f in result["files"]] == ["big.so", "mid.so", "small.txt"]
    assert result["files"][0]["bytes"] == 4096


def test_a_wheel_older_than_the_build_is_not_reported(tmp_path: Path) -> None:
    make_wheel(tmp_path / "hiraishin_llama-1.0-py3-none-any.whl", {"a.so": b"x"}, 1000)
    assert wheel_files.listing(tmp_path, since=1500) == {}
    assert wheel_files.listing(tmp_path / "absent-dir") == {}
