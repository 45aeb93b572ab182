"""benchmarks/compare_sdists.py: two sdists' llama.cpp trees compared file by file."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from ..helpers import load_benchmark

compare_sdists = load_benchmark("compare_sdists")


def sdist(path: Path, files: dict[str, tuple[bytes, int]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(f"hiraishin_llama-1.0/{name}")
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return path


BASE = {"llama.cpp/ggml/src/mmvq.cu": (b"kernel\n", 0o644), "llama.cpp/CMakeLists.txt": (b"project\n", 0o644),
        "hiraishin_llama/stack.json": (b'{"patches": 43}', 0o644)}


def test_identical_trees_pass_though_files_outside_llama_cpp_differ(tmp_path: Path) -> None:
    old = sdist(tmp_path / "old.tar.gz", BASE)
    new = sdist(tmp_path / "new.tar.gz", {**BASE, "hiraishin_llama/stack.json": (b'{"patches": 17}', 0o644)})
    tree_old, other_old = compare_sdists.members(old)
    tree_new, other_new = compare_sdists.members(new)
    assert set(tree_old) == {"llama.cpp/ggml/src/mmvq.cu", "llama.cpp/CMakeLists.txt"}
    assert not any(compare_sdists.compare(tree_old, tree_new).values())
    assert other_old != other_new


def test_a_changed_byte_a_missing_file_and_a_mode_are_each_reported(tmp_path: Path) -> None:
    old = sdist(tmp_path / "old.tar.gz", BASE)
    changed = {"llama.cpp/ggml/src/mmvq.cu": (b"kernel!\n", 0o644), "llama.cpp/CMakeLists.txt": (b"project\n", 0o755),
               "llama.cpp/new.cu": (b"x", 0o644)}
    result = compare_sdists.compare(compare_sdists.members(old)[0],
                                    compare_sdists.members(sdist(tmp_path / "new.tar.gz", changed))[0])
    assert result == {"only_in_old": [], "only_in_new": ["llama.cpp/new.cu"],
                      "content_differs": ["llama.cpp/ggml/src/mmvq.cu"], "mode_differs": ["llama.cpp/CMakeLists.txt"]}
