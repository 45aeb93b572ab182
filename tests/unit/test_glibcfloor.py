"""The glibc floor check, on shared libraries compiled here against this machine's glibc.

The fault it exists to catch is a library built against a newer glibc than
the recipe promises: compiled on glibc 2.34 or later, ``pthread_create`` binds
to ``GLIBC_2.34`` (it moved from libpthread into libc there), which a
manylinux_2_28 system does not have. ``strlen`` binds to ``GLIBC_2.2.5``,
which every x86-64 glibc has.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hiraishin_build import glibcfloor, repair
from hiraishin_build.errors import GlibcFloorExceeded, RepairError
from hiraishin_build.recipe import find_recipe

from ..helpers import PLAIN, make_wheel

REPO = Path(__file__).resolve().parents[2]


def _glibc() -> tuple[int, int]:
    major, minor = os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")[:2]  # "glibc 2.36"
    return int(major), int(minor)


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to make test ELF files")
    if _glibc() < (2, 34):
        pytest.skip(f"glibc {_glibc()} links pthread_create at an old version: no too-new symbol to make here")
    work = tmp_path_factory.mktemp("floor")
    (work / "new.c").write_text("#include <pthread.h>\nstatic void *run(void *a) { return a; }\n"
                                "int start(void) { pthread_t t; return pthread_create(&t, 0, run, 0); }\n")
    (work / "old.c").write_text("#include <string.h>\nint length(const char *s) { return (int)strlen(s); }\n")
    for name in ("new", "old"):
        subprocess.run(["cc", "-shared", "-fPIC", "-o", f"{name}.so", f"{name}.c", "-Wl,--disable-new-dtags",
                        "-Wl,-rpath,$ORIGIN"], cwd=work, check=True, capture_output=True)
    return {name: (work / f"{name}.so").read_bytes() for name in ("new", "old")}


def test_a_symbol_above_the_floor_is_named(libraries: dict[str, bytes]) -> None:
    found = glibcfloor.too_new_symbols("hiraishin_llama/lib/libllama.so", libraries["new"], "manylinux_2_28")
    assert found == [glibcfloor.TooNewSymbol("hiraishin_llama/lib/libllama.so", "pthread_create", "GLIBC_2.34",
                                             "libc.so.6")]
    assert str(found[0]) == "libllama.so needs GLIBC_2.34 (symbol pthread_create@GLIBC_2.34, from libc.so.6)"


def test_a_library_within_the_floor_passes(libraries: dict[str, bytes]) -> None:
    assert glibcfloor.too_new_symbols("libold.so", libraries["old"], "manylinux_2_28") == []
    # and the same new symbol is within a floor that has it
    assert glibcfloor.too_new_symbols("libnew.so", libraries["new"], "manylinux_2_34") == []


def test_a_wheel_above_its_floor_fails_naming_library_symbol_and_version(tmp_path: Path,
                                                                         libraries: dict[str, bytes]) -> None:
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/libllama.so": (libraries["new"], PLAIN),
                                         "hiraishin_llama/lib/libggml.so": (libraries["old"], PLAIN)})
    with pytest.raises(GlibcFloorExceeded) as info:
        glibcfloor.check_wheel(wheel, "manylinux_2_28", "cpu")
    assert info.value.exit_code == 8 and isinstance(info.value, RepairError)
    assert info.value.message == (
        "libllama.so needs GLIBC_2.34 (symbol pthread_create@GLIBC_2.34, from libc.so.6), above the cpu recipe's "
        f"floor manylinux_2_28; {wheel.name} imports 1 symbol version(s) manylinux_2_28 does not allow:\n"
        "  libllama.so needs GLIBC_2.34 (symbol pthread_create@GLIBC_2.34, from libc.so.6)")
    assert info.value.hint is not None and "build against glibc 2.28" in info.value.hint
    assert "docs/wheels.md" in info.value.hint and "recipes/cpu.toml" in info.value.hint


def test_a_wheel_within_its_floor_passes(tmp_path: Path, libraries: dict[str, bytes]) -> None:
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/libggml.so": (libraries["old"], PLAIN)})
    glibcfloor.check_wheel(wheel, "manylinux_2_28", "cpu")
    assert glibcfloor.wheel_violations(wheel, "manylinux_2_28") == []


def test_our_answer_agrees_with_auditwheels(tmp_path: Path, libraries: dict[str, bytes]) -> None:
    """auditwheel's own analysis puts the new library above manylinux_2_28 and the old one within it."""
    from auditwheel.wheel_abi import analyze_wheel_abi

    for name, within in (("new", False), ("old", True)):
        wheel = make_wheel(tmp_path / name, {"hiraishin_llama/lib/libx.so": (libraries[name], PLAIN)})
        info = analyze_wheel_abi(None, None, wheel, frozenset(), disable_isa_ext_check=True, allow_graft=True)
        assert (info.sym_policy.priority >= glibcfloor.policy("manylinux_2_28").priority) is within, name
        assert (glibcfloor.wheel_violations(wheel, "manylinux_2_28") == []) is within, name


def test_repair_refuses_a_wheel_above_the_floor_before_auditwheel_runs(tmp_path: Path, libraries: dict[str, bytes],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repair, "run_auditwheel", lambda *a, **k: pytest.fail("auditwheel ran"))
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/libllama.so": (libraries["new"], PLAIN)})
    with pytest.raises(GlibcFloorExceeded, match=r"^libllama\.so needs GLIBC_2\.34 \(symbol pthread_create@GLIBC_2\.34"):
        repair.repair_wheel(wheel, find_recipe(REPO / "recipes", "cpu"), tmp_path / "out")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.whl"))


def test_repair_tags_a_wheel_within_the_floor_with_the_recipes_tag(tmp_path: Path,
                                                                   libraries: dict[str, bytes]) -> None:
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/libllama.so": (libraries["old"], PLAIN)})
    result = repair.repair_wheel(wheel, find_recipe(REPO / "recipes", "cpu"), tmp_path / "out")
    assert "py3-none-manylinux_2_28_x86_64" in result.tags, result.tags
    # a recipe that promises glibc 2.34 takes the new library, and its wheel says 2.34 or older
    newer = dataclasses.replace(find_recipe(REPO / "recipes", "cpu"), manylinux="manylinux_2_34")
    wheel = make_wheel(tmp_path / "in2", {"hiraishin_llama/lib/libllama.so": (libraries["new"], PLAIN)})
    result = repair.repair_wheel(wheel, newer, tmp_path / "out2")
    assert "py3-none-manylinux_2_34_x86_64" in result.tags, result.tags


def test_a_tag_above_the_promise_is_refused(tmp_path: Path) -> None:
    recipe = find_recipe(REPO / "recipes", "cpu")
    repair.check_promised_tags(tmp_path / "hiraishin_llama-1.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                               recipe)
    with pytest.raises(RepairError, match="not the cpu recipe's manylinux_2_28_x86_64"):
        repair.check_promised_tags(tmp_path / "hiraishin_llama-1.0-py3-none-manylinux_2_35_x86_64.whl", recipe)
    with pytest.raises(RepairError, match="tagged .* with linux_x86_64"):
        repair.check_promised_tags(tmp_path / "hiraishin_llama-1.0-py3-none-linux_x86_64.whl", recipe)


def test_tags_and_policies() -> None:
    assert glibcfloor.parse_manylinux("manylinux_2_28") == (2, 28)
    assert glibcfloor.platform_tag("manylinux_2_28") == "manylinux_2_28_x86_64"
    allowed = glibcfloor.policy("manylinux_2_28").symbol_versions
    assert "2.28" in allowed["GLIBC"] and "2.29" not in allowed["GLIBC"]
    with pytest.raises(ValueError, match="not a manylinux"):
        glibcfloor.parse_manylinux("manylinux2014")


# --- the floor one build holds its wheel to (--manylinux) ---

def test_recipe_mode_holds_every_build_to_the_recipes_floor() -> None:
    for host in ("manylinux_2_17", "manylinux_2_28", "manylinux_2_36", None):
        assert glibcfloor.resolve_floor("manylinux_2_28", "cpu", "recipe", host) == glibcfloor.Floor("manylinux_2_28")


def test_auto_keeps_the_recipes_floor_in_a_manylinux_image_and_says_why_it_does_not_elsewhere() -> None:
    # the release builds: an image whose glibc is the floor (or older)
    assert glibcfloor.resolve_floor("manylinux_2_28", "cpu", "auto", "manylinux_2_28").note == ""
    assert glibcfloor.resolve_floor("manylinux_2_28", "cpu", "auto", "manylinux_2_17").manylinux == "manylinux_2_28"
    # a developer's machine (Debian 12): its own glibc, said with the way to keep the recipe's
    floor = glibcfloor.resolve_floor("manylinux_2_28", "cpu", "auto", "manylinux_2_36")
    assert floor.manylinux == "manylinux_2_36"
    assert "above the cpu recipe's floor (manylinux_2_28)" in floor.note
    assert "--manylinux recipe" in floor.note and "manylinux_2_28 image" in floor.note
    # no glibc to read (musl): the recipe's, which the check then enforces
    assert glibcfloor.resolve_floor("manylinux_2_28", "cpu", "auto", None) == glibcfloor.Floor("manylinux_2_28")


def test_host_mode_takes_this_machines_glibc_either_way() -> None:
    assert glibcfloor.resolve_floor("manylinux_2_28", "cpu", "host", "manylinux_2_36").manylinux == "manylinux_2_36"
    older = glibcfloor.resolve_floor("manylinux_2_28", "cpu", "host", "manylinux_2_17")
    assert older.manylinux == "manylinux_2_17" and "below" in older.note
    with pytest.raises(ValueError, match="give one of auto, recipe, host"):
        glibcfloor.resolve_floor("manylinux_2_28", "cpu", "newest", "manylinux_2_36")


def test_this_machines_glibc_reads_as_a_tag_auditwheel_knows() -> None:
    host = glibcfloor.host_manylinux()
    libc, version = os.confstr("CS_GNU_LIBC_VERSION").split()
    assert libc == "glibc" and host == "manylinux_" + "_".join(version.split(".")[:2])
    glibcfloor.policy(host)


def test_a_wheel_above_the_recipes_floor_passes_at_this_machines(tmp_path: Path, libraries: dict[str, bytes]) -> None:
    # What `hiraishin build --manylinux auto` does on a machine above the floor: the same library the recipe's
    # floor refuses (test_repair_refuses_...) is repaired and tagged at this machine's glibc.
    host = glibcfloor.host_manylinux()
    recipe = dataclasses.replace(find_recipe(REPO / "recipes", "cpu"), manylinux=host)
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/libllama.so": (libraries["new"], PLAIN)})
    result = repair.repair_wheel(wheel, recipe, tmp_path / "out")
    assert not any(tag.split("-")[-1] > f"{host}_x86_64" for tag in result.tags if "manylinux_" in tag), result.tags
