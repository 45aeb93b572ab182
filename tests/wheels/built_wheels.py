"""Where the wheel tests find a built wheel, and its tools: conftest.py's fixtures use this.

`hiraishin wheel --recipe R` and `hiraishin build` (which picks the recipe for this machine: a CUDA one
on a GPU machine with nvcc, else cpu) write the repaired wheel to dist/wheels/<recipe>/ and pip's own
wheel to dist/wheels/<recipe>/unrepaired/. The tests of "the CPU wheel" need a wheel whose CPU backend
runs here: the cpu recipe's, or any CUDA recipe's, whose backends are loadable modules, so that without
its GPU (or without NVIDIA's runtime wheels, which a fresh venv lacks) it runs the same CPU backend.
Fault builds (`hiraishin sdist --without`, dist/without-*/wheels/) are never taken.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

CPU_RECIPE = "cpu"
# Where the programs sit inside a wheel: the tools in bin/ beside the backend modules, the libraries
# they load by RPATH ($ORIGIN/../lib) in lib/, and what auditwheel grafted (libgomp) in .libs/.
WHEEL_TOOL_PARTS = ("hiraishin_llama/bin/", "hiraishin_llama/lib/", "hiraishin_llama.libs/")


@dataclass(frozen=True)
class Found:
    wheel: Path | None
    looked: tuple[str, ...]
    """Each place searched, in order, with what it held, for a skip message."""

    def where(self) -> str:
        return "; ".join(self.looked)


def _wheels_in(directory: Path, *, labelled: bool) -> list[Path]:
    """hiraishin_llama wheels directly in ``directory``: repaired ones carry the variant label (+cpu,
    +cu13.sm90), pip's unrepaired ones the public version only."""
    if not directory.is_dir():
        return []
    return [p for p in directory.glob("hiraishin_llama-*.whl") if p.is_file() and ("+" in p.name) == labelled]


def _newest(wheels: list[Path]) -> Path:
    return max(wheels, key=lambda p: (p.stat().st_mtime, p.name))


def find_repaired_wheel(dist_wheels: Path) -> Found:
    """The repaired wheel for the CPU wheel tests: the newest in dist/wheels/cpu/, else the newest of
    every other recipe's directory (the wheel `hiraishin build` made on a GPU machine)."""
    looked = []
    cpu_dir = dist_wheels / CPU_RECIPE
    cpu_wheels = _wheels_in(cpu_dir, labelled=True)
    if cpu_wheels:
        return Found(_newest(cpu_wheels), (str(cpu_dir),))
    looked.append(f"{cpu_dir} ({'no repaired wheel' if cpu_dir.is_dir() else 'no such directory'})")
    others = sorted(d for d in dist_wheels.iterdir() if d.is_dir() and d.name != CPU_RECIPE) \
        if dist_wheels.is_dir() else []
    wheels = [w for d in others for w in _wheels_in(d, labelled=True)]
    if wheels:
        return Found(_newest(wheels), tuple(looked))
    if others:
        looked.append(f"{', '.join(str(d) for d in others)} (no repaired wheel)")
    else:
        looked.append(f"{dist_wheels}/<recipe>/ ({'no recipe directory' if dist_wheels.is_dir() else 'no such directory'})")
    return Found(None, tuple(looked))


def find_unrepaired_cpu_wheel(dist_wheels: Path) -> Found:
    """pip's CPU wheel before repair, from dist/wheels/cpu/unrepaired/. Only the cpu recipe's will do:
    the tests repair it as the cpu recipe and expect its +cpu label and its CPU-only libraries."""
    directory = dist_wheels / CPU_RECIPE / "unrepaired"
    wheels = _wheels_in(directory, labelled=False)
    if wheels:
        return Found(_newest(wheels), (str(directory),))
    state = "no unrepaired wheel" if directory.is_dir() else "no such directory"
    others = sorted(str(d / "unrepaired") for d in dist_wheels.iterdir()
                    if d.is_dir() and d.name != CPU_RECIPE and _wheels_in(d / "unrepaired", labelled=False)) \
        if dist_wheels.is_dir() else []
    note = f"; {', '.join(others)} hold other recipes' wheels, which these tests cannot repair as cpu" if others else ""
    return Found(None, (f"{directory} ({state}){note}",))


def unpack_tools(wheel: Path, into: Path) -> Path:
    """The wheel's bin/ (with lib/ and the grafted libraries beside it, as installed) unpacked into
    ``into``, executables executable; returns the bin/ directory."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            if member.is_dir() or not member.filename.startswith(WHEEL_TOOL_PARTS):
                continue
            target = Path(archive.extract(member, into))
            # A wheel keeps each file's Unix mode in the high bits of external_attr; zipfile drops it.
            mode = (member.external_attr >> 16) & 0o777
            if mode:
                os.chmod(target, mode)
    return into / "hiraishin_llama" / "bin"
