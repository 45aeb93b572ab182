"""The real CPU wheel, repaired and labelled as `hiraishin wheel` does it.

Needs the CPU wheel as pip wrote it, before repair (HIRAISHIN_CPU_WHEEL_UNREPAIRED,
or dist/wheels/cpu/unrepaired/ from `hiraishin wheel --recipe cpu`: see conftest.py);
skips, saying so, otherwise. The wheel is
copied first: nothing under dist/ is touched.
"""

from __future__ import annotations

import dataclasses
import shutil
import zipfile
from pathlib import Path

import pytest

from hiraishin_build import glibcfloor, repair
from hiraishin_build.recipe import find_recipe
from tests.helpers import fresh_venv, pip_install

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def repaired(tmp_path_factory: pytest.TempPathFactory, unrepaired_cpu_wheel: Path) -> repair.RepairResult:
    source = unrepaired_cpu_wheel
    work = tmp_path_factory.mktemp("release")
    copy = work / "in" / source.name
    copy.parent.mkdir()
    shutil.copy2(source, copy)
    # As `hiraishin wheel --manylinux auto` repairs it on the machine that built it: the recipe's floor in a
    # manylinux_2_28 image, this machine's glibc where it is newer.
    recipe = find_recipe(REPO / "recipes", "cpu")
    floor = glibcfloor.resolve_floor(recipe.manylinux, recipe.name, "auto")
    return repair.repair_wheel(copy, dataclasses.replace(recipe, manylinux=floor.manylinux), work / "out")


def test_repaired_cpu_wheel_is_manylinux_labelled_and_linked_by_rpath(repaired: repair.RepairResult) -> None:
    assert repaired.version.endswith("+cpu")
    assert repaired.tags and all("manylinux" in tag for tag in repaired.tags), repaired.tags
    assert "+cpu-py3-none-manylinux" in repaired.path.name
    elves = repair.wheel_elves(repaired.path)
    assert len(elves) > 10
    assert repair.elf_problems(repaired.path, elves) == []
    ours = [elf for elf in elves if ".libs/" not in elf.path]
    for elf in ours:
        assert elf.rpath and not elf.runpath, elf
        assert any(entry.startswith("$ORIGIN") for entry in elf.rpath), elf
        assert "$ORIGIN/../../nvidia/cu13/lib" in elf.rpath, elf  # the same RPATH serves the CUDA wheels
    with zipfile.ZipFile(repaired.path) as archive:
        names = archive.namelist()
    assert not any("libcuda" in n or "libcudart" in n or "libcublas" in n for n in names)
    # The floor it was held to, and no newer tag (repair fails a wheel above it).
    recipe = find_recipe(REPO / "recipes", "cpu")
    floor = glibcfloor.resolve_floor(recipe.manylinux, recipe.name, "auto").manylinux
    assert f"py3-none-{floor}_x86_64" in repaired.tags, repaired.tags
    # OpenMP is not a manylinux system library: libgomp is grafted where the wheel was built with it (gcc).
    assert all(name.startswith("libgomp") for name in repaired.grafted), repaired.grafted
    assert repaired.size <= find_recipe(REPO / "recipes", "cpu").size_budget_mb * 1e6


def test_pip_installs_the_repaired_wheel_from_its_file_index(repaired: repair.RepairResult, tmp_path: Path) -> None:
    import subprocess
    import sys

    from hiraishin_build.index import build_index

    site = tmp_path / "site"
    build_index(repaired.path.parent, site)
    # The wheel's dependencies (numpy, gguf and theirs) come from PyPI, through
    # this machine's pip configuration, into a plain directory; the install
    # itself then sees only that directory and the file:// index.
    deps = tmp_path / "deps"
    downloaded = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary", ":all:",
                                 "--dest", str(deps), str(repaired.path)], check=False, capture_output=True, text=True)
    if downloaded.returncode != 0:
        pytest.skip("cannot download the wheel's dependencies (no package index reachable):\n"
                    + downloaded.stderr[-500:])
    for copy in deps.glob("hiraishin_llama-*.whl"):
        copy.unlink()
    venv = fresh_venv(tmp_path / "venv")
    install = pip_install(venv, "--index-url", (site / "cpu" / "simple").as_uri(), "--find-links", str(deps),
                          "hiraishin-llama")
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    version = subprocess.run([str(venv / "bin" / "hiraishin-llama"), "--version"], capture_output=True, text=True,
                             check=True).stdout
    assert f"hiraishin-llama {repaired.version}\n" in version and "recipe:   cpu" in version
