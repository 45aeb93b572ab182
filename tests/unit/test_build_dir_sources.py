"""A build directory is reused only for the sources it was built from.

Every file of an sdist carries the same fixed mtime, so ninja cannot tell two unpacked sdists of the same
version apart: without this guard a wheel with a planted fault was linked from the objects of the sdist
built before it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from hiraishin_build.wheelbuild import SOURCE_STAMP, prepare_build_dir, source_fingerprint

SDIST_MTIME = 315532800  # 1980-01-01, as in every sdist


def unpacked_sdist(root: Path, kernel: str) -> Path:
    source = root / "hiraishin_llama-10400.30"
    (source / "llama.cpp" / "ggml").mkdir(parents=True, exist_ok=True)
    (source / "pyproject.toml").write_text("[project]\nname = 'hiraishin-llama'\n")
    (source / "llama.cpp" / "ggml" / "repack.cpp").write_text(kernel)
    for path in source.rglob("*"):
        os.utime(path, (SDIST_MTIME, SDIST_MTIME))
    return source


def built(build_dir: Path) -> Path:
    obj = build_dir / "repack.cpp.o"
    obj.write_text("object code")
    return obj


def test_the_same_sources_keep_the_build_directory(tmp_path: Path) -> None:
    source = unpacked_sdist(tmp_path / "a", "gemm order")
    prepare_build_dir(source, tmp_path / "build")
    obj = built(tmp_path / "build")
    prepare_build_dir(unpacked_sdist(tmp_path / "b", "gemm order"), tmp_path / "build")
    assert obj.is_file()


def test_other_sources_with_the_same_mtimes_clear_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    prepare_build_dir(unpacked_sdist(tmp_path / "a", "gemm order"), tmp_path / "build")
    obj = built(tmp_path / "build")
    faulted = unpacked_sdist(tmp_path / "a", "stock order")  # the same path, the same 1980 mtime
    with caplog.at_level(logging.INFO):
        prepare_build_dir(faulted, tmp_path / "build")
    assert not obj.exists()
    assert (tmp_path / "build" / SOURCE_STAMP).read_text().strip() == source_fingerprint(faulted)
    assert "it was built from other sources" in caplog.text


def test_a_build_directory_that_never_recorded_its_sources_is_cleared(tmp_path: Path) -> None:
    (tmp_path / "build").mkdir()
    obj = built(tmp_path / "build")
    prepare_build_dir(unpacked_sdist(tmp_path / "a", "gemm order"), tmp_path / "build")
    assert not obj.exists() and (tmp_path / "build" / SOURCE_STAMP).is_file()


def test_the_fingerprint_follows_names_and_contents(tmp_path: Path) -> None:
    one = unpacked_sdist(tmp_path / "a", "x")
    assert source_fingerprint(one) == source_fingerprint(unpacked_sdist(tmp_path / "b", "x"))
    assert source_fingerprint(one) != source_fingerprint(unpacked_sdist(tmp_path / "c", "y"))
    (one / "llama.cpp" / "ggml" / "repack.cpp").rename(one / "llama.cpp" / "ggml" / "repack2.cpp")
    assert source_fingerprint(one) != source_fingerprint(unpacked_sdist(tmp_path / "b", "x"))
