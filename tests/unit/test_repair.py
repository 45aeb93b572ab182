"""Repair and labelling of wheels, on small wheels made here (no real build needed)."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from hiraishin_build import repair
from hiraishin_build.recipe import find_recipe

REPO = Path(__file__).resolve().parents[2]
EXEC = (0o100755 << 16)
PLAIN = (0o100644 << 16)


def make_wheel(directory: Path, files: dict[str, tuple[bytes, int]], version: str = "9079.2",
               tag: str = "py3-none-linux_x86_64", metadata: str = "") -> Path:
    """A minimal valid wheel: the given files plus METADATA (with ``metadata`` lines appended),
    WHEEL and a correct RECORD."""
    info = f"hiraishin_llama-{version}.dist-info"
    entries = dict(files)
    entries.setdefault("hiraishin_llama/__init__.py", (b"", PLAIN))
    entries.setdefault("hiraishin_llama/_version.py", (f'__version__ = "{version}"\n'.encode(), PLAIN))
    entries[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: hiraishin-llama\nVersion: {version}\n"
                                   f"Requires-Python: >=3.10\n{metadata}".encode(), PLAIN)
    entries[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(), PLAIN)
    path = directory / f"hiraishin_llama-{version}-{tag}.whl"
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, (data, mode) in entries.items():
            zinfo = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            zinfo.external_attr = mode
            archive.writestr(zinfo, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{name},sha256={digest},{len(data)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*rows, f"{info}/RECORD,,"]) + "\n")
    return path


def record_is_consistent(wheel: Path) -> bool:
    with zipfile.ZipFile(wheel) as archive:
        record_name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(archive.read(record_name).decode())))
        listed = {row[0] for row in rows}
        if listed != set(archive.namelist()):
            return False
        for name, digest, size in rows:
            if name == record_name:
                continue
            data = archive.read(name)
            expected = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if digest != expected or int(size) != len(data):
                return False
    return True


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
    return {name: (work / name).read_bytes() for name in ("good.so", "runpath.so", "norpath.so", "noncuda.so",
                                                           "libcudart.so.13")}


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


def test_build_wheel_repairs_what_pip_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hiraishin_build import proc, wheelbuild

    sdist = tmp_path / "hiraishin_llama-9079.2.tar.gz"
    sdist.write_bytes(b"")
    recipe = find_recipe(REPO / "recipes", "cpu")
    out = tmp_path / "out"

    def fake_pip(command, *, log_path, **_):  # type: ignore[no-untyped-def]
        log_path.write_text("built\n")
        make_wheel(Path(command[command.index("--wheel-dir") + 1]), {})

    calls = []

    def fake_repair(wheel: Path, recipe_, out_dir: Path, **_):  # type: ignore[no-untyped-def]
        calls.append((wheel, recipe_.name, out_dir))
        final = repair.retag(wheel, recipe_.variant, out_dir)
        return repair.RepairResult(final, "9079.2+cpu", ("py3-none-manylinux_2_35_x86_64",), final.stat().st_size, ())

    monkeypatch.setattr(proc, "run_logged", fake_pip)
    monkeypatch.setattr(repair, "repair_wheel", fake_repair)
    result = wheelbuild.build_wheel(sdist, recipe, out, build_dir=tmp_path / "build")
    assert calls == [(out / "unrepaired" / "hiraishin_llama-9079.2-py3-none-linux_x86_64.whl", "cpu", out)]
    assert result.path == out / "hiraishin_llama-9079.2+cpu-py3-none-linux_x86_64.whl"
    assert result.version == "9079.2+cpu" and result.unrepaired == calls[0][0]
