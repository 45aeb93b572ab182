"""Where the wheel tests look for a built wheel (built_wheels.py, used by conftest.py): the wheel
`hiraishin build` writes to dist/wheels/<recipe>/ is found whatever the recipe, and a skip says each
place it looked. Once only dist/wheels/cpu/ was searched, so after `hiraishin build` made a CUDA wheel
the README's test command skipped every wheel test."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

from tests.helpers import EXEC, PLAIN, make_wheel
from tests.wheels import built_wheels


def built(dist_wheels: Path, recipe: str, version: str, *, unrepaired: bool = False, age: float = 0) -> Path:
    directory = dist_wheels / recipe / ("unrepaired" if unrepaired else "")
    wheel = make_wheel(directory, {}, version=version)
    stamp = time.time() - age
    os.utime(wheel, (stamp, stamp))
    return wheel


def test_the_cpu_recipes_wheel_is_taken_first(tmp_path: Path) -> None:
    dist = tmp_path / "dist" / "wheels"
    cpu = built(dist, "cpu", "10400.13+cpu", age=100)
    built(dist, "cu13-sm90", "10400.13+cu13.sm90")
    assert built_wheels.find_repaired_wheel(dist).wheel == cpu


def test_without_a_cpu_wheel_the_one_hiraishin_build_made_for_the_gpu_is_found(tmp_path: Path) -> None:
    dist = tmp_path / "dist" / "wheels"
    built(dist, "cu12-sm89", "10400.13+cu12.sm89", age=100)
    newest = built(dist, "cu13-sm90", "10400.13+cu13.sm90")
    built(dist, "cu13-sm90", "10400.13", unrepaired=True)  # pip's, before repair: never a repaired one
    found = built_wheels.find_repaired_wheel(dist)
    assert found.wheel == newest


def test_fault_builds_and_unlabelled_wheels_are_not_taken(tmp_path: Path) -> None:
    root = tmp_path / "dist"
    built(root / "without-some-fix" / "wheels", "cpu", "10400.13+cpu")
    built(root / "wheels", "cpu", "10400.13")  # unlabelled: not repaired
    found = built_wheels.find_repaired_wheel(root / "wheels")
    assert found.wheel is None
    assert found.where() == (f"{root / 'wheels' / 'cpu'} (no repaired wheel); "
                             f"{root / 'wheels'}/<recipe>/ (no recipe directory)")


def test_a_skip_names_every_place_searched(tmp_path: Path) -> None:
    dist = tmp_path / "dist" / "wheels"
    assert built_wheels.find_repaired_wheel(dist).where() == (
        f"{dist / 'cpu'} (no such directory); {dist}/<recipe>/ (no such directory)")
    (dist / "cu13-sm90").mkdir(parents=True)
    assert built_wheels.find_repaired_wheel(dist).where() == (
        f"{dist / 'cpu'} (no such directory); {dist / 'cu13-sm90'} (no repaired wheel)")


def test_the_unrepaired_wheel_must_be_the_cpu_recipes_and_the_skip_says_why_others_do_not_do(tmp_path: Path) -> None:
    dist = tmp_path / "dist" / "wheels"
    built(dist, "cu13-sm90", "10400.13", unrepaired=True)
    found = built_wheels.find_unrepaired_cpu_wheel(dist)
    assert found.wheel is None
    assert found.where() == (f"{dist / 'cpu' / 'unrepaired'} (no such directory); {dist / 'cu13-sm90' / 'unrepaired'} "
                             "hold other recipes' wheels, which these tests cannot repair as cpu")
    wheel = built(dist, "cpu", "10400.13", unrepaired=True)
    assert built_wheels.find_unrepaired_cpu_wheel(dist).wheel == wheel


def test_the_tools_are_unpacked_as_installed_and_run(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "dist", {
        "hiraishin_llama/bin/hiraishin-replay": (b'#!/bin/sh\nexec "$(dirname "$0")/../lib/helper"\n', EXEC),
        "hiraishin_llama/lib/helper": (b"#!/bin/sh\necho replay ran\n", EXEC),
        "hiraishin_llama.libs/libgomp-1.so": (b"", PLAIN),
        "hiraishin_llama/smoke.py": (b"", PLAIN),
    }, version="10400.13+cpu")
    bin_dir = built_wheels.unpack_tools(wheel, tmp_path / "unpacked")
    assert bin_dir == tmp_path / "unpacked" / "hiraishin_llama" / "bin"
    replay = bin_dir / "hiraishin-replay"
    assert replay.stat().st_mode & stat.S_IXUSR
    assert not (bin_dir.parent.parent / "hiraishin_llama.libs" / "libgomp-1.so").stat().st_mode & stat.S_IXUSR
    assert not (bin_dir.parent / "smoke.py").exists()  # only what the tools need
    assert subprocess.run([str(replay)], capture_output=True, text=True, timeout=30).stdout == "replay ran\n"


def test_the_fixtures_search_with_the_tested_finder() -> None:
    conftest = (Path(__file__).parent / "conftest.py").read_text()
    assert 'DIST_WHEELS = REPO / "dist" / "wheels"' in conftest
    # cpu_wheel and the tools' fixture both, so that tools and wheel come from the same build.
    assert conftest.count("built_wheels.find_repaired_wheel(DIST_WHEELS)") == 2
    assert conftest.count("built_wheels.find_unrepaired_cpu_wheel(DIST_WHEELS)") == 1
    assert '.glob("hiraishin_llama-*.whl")' not in conftest  # no second search beside the tested one
