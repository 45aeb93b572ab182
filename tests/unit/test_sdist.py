import hashlib
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from hiraishin_build.errors import ConfigError
from hiraishin_build.sdist import build_sdist, stack_revision, upstream_build_number, wheel_version

from ..conftest import StackProject, sh_git

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def wheel_project(stack_project: StackProject) -> StackProject:
    """The synthetic stack project plus a copy of the real wheels/ project, committed."""
    root = stack_project.project.root
    shutil.copytree(REPO / "wheels", root / "wheels", ignore=shutil.ignore_patterns("__pycache__", "build"))
    (root / ".gitignore").write_text("/work/\n/dist/\n")
    sh_git(root, "init", "-q")
    sh_git(root, "add", "-A")
    sh_git(root, "commit", "-q", "-m", "project")
    return stack_project


def test_sdist_is_reproducible(wheel_project: StackProject, tmp_path: Path) -> None:
    project, cache = wheel_project.project, wheel_project.cache
    first = build_sdist(project, cache, tmp_path / "one")
    second = build_sdist(project, cache, tmp_path / "two")
    assert first.path.name == second.path.name == f"hiraishin_llama-{first.version}.tar.gz"
    assert first.sha256 == second.sha256 == hashlib.sha256(second.path.read_bytes()).hexdigest()


def test_sdist_contents(wheel_project: StackProject, tmp_path: Path) -> None:
    result = build_sdist(wheel_project.project, wheel_project.cache, tmp_path)
    root = f"hiraishin_llama-{result.version}"
    with tarfile.open(result.path) as tar:
        names = set(tar.getnames())
        members = tar.getmembers()
        stack = json.loads(tar.extractfile(f"{root}/hiraishin_llama/stack.json").read())
        mmvq = tar.extractfile(f"{root}/llama.cpp/ggml/src/ggml-cuda/mmvq.cu").read().decode()
        version_py = tar.extractfile(f"{root}/hiraishin_llama/_version.py").read().decode()
    assert f"{root}/pyproject.toml" in names and f"{root}/CMakeLists.txt" in names and f"{root}/PKG-INFO" in names
    # The patched source, and nothing a build does not need.
    assert "batch-invariant" in mmvq
    assert f"{root}/llama.cpp/docs/build.md" not in names
    assert f"{root}/llama.cpp/models/ggml-vocab-big.gguf" not in names
    assert f"{root}/llama.cpp/models/templates/chat.jinja" in names
    assert all(m.mtime == members[0].mtime and m.uid == 0 and m.uname == "" for m in members)
    assert version_py == f'__version__ = "{result.version}"\n'
    assert stack["upstream"]["commit"] == wheel_project.upstream.commit
    assert [p["subject"] for p in stack["patches"]] == ["mmvq: batch-invariant block 20", "common: declare the switch"]


def test_version_comes_from_the_pin_and_the_stack_revision(wheel_project: StackProject) -> None:
    from hiraishin_build.pin import UpstreamPin

    project = wheel_project.project
    pin = UpstreamPin("u", "feature-turboquant-kv-cache-b9079-69d8e4b", "a" * 40)
    assert upstream_build_number(pin) == 9079
    assert wheel_version(project, pin) == f"9079.{stack_revision(project)}"
    assert stack_revision(project) >= 1
    with pytest.raises(ConfigError, match="no upstream build number"):
        upstream_build_number(UpstreamPin("u", "main", "a" * 40))


def test_sdist_without_a_patch_for_fault_builds(wheel_project: StackProject, tmp_path: Path) -> None:
    from hiraishin_build.series import read_series

    names = read_series(wheel_project.project.patches_dir).names
    result = build_sdist(wheel_project.project, wheel_project.cache, tmp_path, omit=frozenset({names[0]}))
    root = f"hiraishin_llama-{result.version}"
    with tarfile.open(result.path) as tar:
        stack = json.loads(tar.extractfile(f"{root}/hiraishin_llama/stack.json").read())
        mmvq = tar.extractfile(f"{root}/llama.cpp/ggml/src/ggml-cuda/mmvq.cu").read().decode()
    assert stack["omitted_patches"] == [names[0]]
    assert [p["name"] for p in stack["patches"]] == list(names[1:])
    assert "batch-invariant" not in mmvq  # the omitted patch is the one that changed mmvq.cu
    with pytest.raises(ConfigError, match="cannot leave out nope.patch"):
        build_sdist(wheel_project.project, wheel_project.cache, tmp_path, omit=frozenset({"nope.patch"}))


def test_fault_sdist_directory_names_stay_usable() -> None:
    from hiraishin_build.cli import _without_dir_name

    series = tuple(f"patch-number-{i}-with-a-long-descriptive-subject-line.patch" for i in range(8))
    assert _without_dir_name(series[:1], series) == "without-patch-number-0-with-a-long-descriptive-subject-line"
    assert _without_dir_name(series, series) == "stock"
    many = _without_dir_name(series[:5], series)
    assert many.startswith("without-5-patches-") and len(many) < 40
    assert many != _without_dir_name(series[1:6], series)
