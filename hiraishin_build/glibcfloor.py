"""The glibc floor a recipe promises: no library of its wheel may need a newer symbol version.

A recipe names a manylinux tag (``manylinux_2_28``): the oldest glibc the wheel
installs on. What decides whether it keeps that promise is the versioned
symbols its ELF files import (``pthread_create@GLIBC_2.34``,
``std::__cxx11::...@GLIBCXX_3.4.30``): the dynamic loader refuses a library
whose versions the system's glibc or libstdc++ lacks. auditwheel knows, per
manylinux tag, which versions are allowed (its policy files); this module reads
the ELF files with pyelftools symbol by symbol, so that a wheel above its floor
fails with the library, the symbol and the version named, not only with
auditwheel's "too-recent versioned symbols" and a set of version strings.

The libraries auditwheel would graft (libgomp from the build machine) are
checked too: they land in the wheel and are loaded with it.
"""

from __future__ import annotations

import io
import os
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType
from typing import TYPE_CHECKING

from .errors import ConfigError, GlibcFloorExceeded

if TYPE_CHECKING:
    from auditwheel.policy import Policy

ARCHITECTURE = "x86_64"
"""The one architecture wheels are built for (README: no aarch64 wheel)."""

DEFAULT_MANYLINUX = "manylinux_2_28"
"""What a recipe promises when it says nothing: glibc 2.28, RHEL/Rocky/Alma 8 and later (docs/wheels.md)."""

_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)$")


@dataclass(frozen=True)
class TooNewSymbol:
    """One imported symbol whose version the floor's policy does not allow."""

    library: str
    """The ELF file that imports it: a path inside the wheel, or a system library auditwheel would graft."""

    symbol: str
    """The symbol's name, e.g. ``pthread_create``; empty where the version is required with no symbol bound to it."""

    version: str
    """The version it is bound to, e.g. ``GLIBC_2.34``."""

    provider: str
    """The library that defines that version, e.g. ``libc.so.6``."""

    def __str__(self) -> str:
        which = f"symbol {self.symbol}@{self.version}" if self.symbol else "its version table requires it, no symbol"
        return f"{Path(self.library).name} needs {self.version} ({which}, from {self.provider})"


def parse_manylinux(tag: str) -> tuple[int, int]:
    """``manylinux_2_28`` -> (2, 28); ValueError for anything else."""
    match = _MANYLINUX.match(tag)
    if not match:
        raise ValueError(f"{tag!r} is not a manylinux_<glibc major>_<minor> tag")
    return int(match[1]), int(match[2])


def glibc_of_platform(platform: str) -> tuple[int, int] | None:
    """The glibc a wheel's platform tag promises: ``manylinux_2_28_x86_64`` and the legacy aliases auditwheel
    adds (``manylinux2014_x86_64`` is 2.17, ``manylinux1_x86_64`` 2.5); None for ``linux_x86_64`` and others."""
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc
    from auditwheel.policy import WheelPolicies

    try:
        name = WheelPolicies(libc=Libc.GLIBC, arch=Architecture(ARCHITECTURE)).get_policy_by_name(platform).name
        return parse_manylinux(name[: -len(ARCHITECTURE) - 1])
    except (LookupError, ValueError):
        return None


FLOOR_MODES = ("auto", "recipe", "host")
"""How a build picks the floor it holds its wheel to (``--manylinux``): ``recipe``, the recipe's promise, above
which the build fails; ``host``, this machine's glibc; ``auto``, the recipe's where this machine's glibc is at or
below it (a manylinux image: the release builds), else this machine's, said in a warning."""


@dataclass(frozen=True)
class Floor:
    """The floor one build holds its wheel to."""

    manylinux: str
    note: str = ""
    """Why it is not the recipe's, for the build's log; empty where it is."""


def host_manylinux() -> str | None:
    """This machine's glibc as a manylinux tag (``manylinux_2_36``); None without glibc (musl) or where auditwheel
    has no policy for it."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return None
    match = re.fullmatch(r"glibc (\d+)\.(\d+)(?:\.\d+)?", version.strip())
    if not match:
        return None
    tag = f"manylinux_{match[1]}_{match[2]}"
    try:
        policy(tag)
    except LookupError:
        return None
    return tag


def resolve_floor(recipe_manylinux: str, recipe_name: str, mode: str, host: str | None | EllipsisType = ...) -> Floor:
    """The floor of a build in ``mode`` (FLOOR_MODES) on a machine whose glibc is ``host`` (a manylinux tag, None
    where it has none; default: this machine's, host_manylinux)."""
    if mode not in FLOOR_MODES:
        raise ValueError(f"--manylinux {mode!r}: give one of {', '.join(FLOOR_MODES)}")
    if mode == "recipe":
        return Floor(recipe_manylinux)
    if host is ...:
        host = host_manylinux()
    if host is None or host == recipe_manylinux:
        return Floor(recipe_manylinux)
    if mode == "auto" and parse_manylinux(host) <= parse_manylinux(recipe_manylinux):
        return Floor(recipe_manylinux)
    above = parse_manylinux(host) > parse_manylinux(recipe_manylinux)
    return Floor(host, (
        f"this machine's glibc ({host}) is {'above' if above else 'below'} the {recipe_name} recipe's floor "
        f"({recipe_manylinux}): the wheel is held to {host}, so it installs on this machine "
        + ("and newer systems only; a wheel that keeps the recipe's floor is built in a "
           f"{recipe_manylinux} image (docs/wheels.md), and --manylinux recipe fails a build above it"
           if above else "and systems at least as old")))


def platform_tag(manylinux: str) -> str:
    """``manylinux_2_28`` -> ``manylinux_2_28_x86_64``: what auditwheel's --plat takes."""
    return f"{manylinux}_{ARCHITECTURE}"


def policy(manylinux: str) -> Policy:
    """auditwheel's policy for the tag: the symbol versions it allows. LookupError for a tag auditwheel lacks."""
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc
    from auditwheel.policy import WheelPolicies

    policies = WheelPolicies(libc=Libc.GLIBC, arch=Architecture(ARCHITECTURE))
    return policies.get_policy_by_name(platform_tag(manylinux))


def check_tag(path: Path, key: str, value: object) -> str:
    """A recipe's manylinux value, validated: ConfigError naming the file and key otherwise."""
    if not isinstance(value, str):
        raise ConfigError(f"{path}: '{key}' must be a string such as {DEFAULT_MANYLINUX!r}, not {type(value).__name__}")
    try:
        parse_manylinux(value)
        policy(value)
    except (ValueError, LookupError):
        raise ConfigError(
            f"{path}: '{key}' {value!r} is not a manylinux tag auditwheel knows for {ARCHITECTURE}",
            hint=f"write manylinux_<glibc major>_<minor> without the architecture, e.g. {DEFAULT_MANYLINUX!r}",
        ) from None
    return value


def _allowed(version: str, allowed: dict[str, frozenset[str]]) -> bool:
    # As auditwheel reads them: GLIBC_2.34 is family GLIBC, version 2.34; a
    # family the policy does not list (a library's own, e.g. OPENSSL_3.0) is not its concern.
    family, _, number = version.partition("_")
    return family not in allowed or number in allowed[family]


def too_new_symbols(library: str, data: bytes, manylinux: str) -> list[TooNewSymbol]:
    """Every symbol ``data`` (an ELF file) imports at a version the tag's policy does not allow."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection
    from elftools.elf.sections import SymbolTableSection

    allowed = policy(manylinux).symbol_versions
    elf = ELFFile(io.BytesIO(data))
    needed: dict[int, tuple[str, str]] = {}  # version index -> (provider, version name)
    versym = dynsym = None
    for section in elf.iter_sections():
        if isinstance(section, GNUVerNeedSection):
            for verneed, auxiliaries in section.iter_versions():
                for aux in auxiliaries:
                    needed[aux.entry["vna_other"]] = (verneed.name, aux.name)
        elif isinstance(section, GNUVerSymSection):
            versym = section
        elif isinstance(section, SymbolTableSection) and section.name == ".dynsym":
            dynsym = section
    found: list[TooNewSymbol] = []
    if versym is None or dynsym is None:
        return found  # no versioned imports: nothing can be too new
    seen: set[tuple[str, str]] = set()
    for index, symbol in enumerate(dynsym.iter_symbols()):
        if symbol["st_shndx"] != "SHN_UNDEF" or not symbol.name:
            continue  # defined here: its version is this library's own
        ndx = versym.get_symbol(index)["ndx"]
        if not isinstance(ndx, int):
            continue  # VER_NDX_LOCAL / VER_NDX_GLOBAL: unversioned
        provider, version = needed.get(ndx & 0x7FFF, ("", ""))  # the top bit marks a hidden version
        if version and not _allowed(version, allowed) and (symbol.name, version) not in seen:
            seen.add((symbol.name, version))
            found.append(TooNewSymbol(library, symbol.name, version, provider))
    # A version required with no symbol bound to it (linked with --no-as-needed) still makes the loader check it.
    bound = {v for _, v in seen}
    for provider, version in needed.values():
        if not _allowed(version, allowed) and version not in bound:
            found.append(TooNewSymbol(library, "", version, provider))
    return sorted(found, key=lambda s: (s.library, _version_key(s.version), s.symbol))


def _version_key(version: str) -> tuple[str, tuple[int, ...]]:
    family, _, number = version.partition("_")
    return family, tuple(int(part) for part in re.findall(r"\d+", number))


def _wheel_elves(wheel: Path) -> Iterable[tuple[str, bytes]]:
    with zipfile.ZipFile(wheel) as archive:
        for entry in archive.infolist():
            if entry.is_dir() or entry.file_size < 64:
                continue
            with archive.open(entry) as handle:
                if handle.read(4) != b"\x7fELF":
                    continue
            yield entry.filename, archive.read(entry)


def graft_candidates(wheel: Path, manylinux: str, exclude: Iterable[str]) -> dict[str, Path]:
    """The system libraries auditwheel would copy into the wheel for the tag (soname -> path on this machine),
    from auditwheel's own analysis of the wheel."""
    from auditwheel.wheel_abi import analyze_wheel_abi

    info = analyze_wheel_abi(None, None, wheel, frozenset(exclude), disable_isa_ext_check=True, allow_graft=True)
    reference = info.external_refs.get(platform_tag(manylinux))
    if reference is None:
        return {}
    return {soname: path for soname, path in reference.libs.items() if path is not None}


def wheel_violations(wheel: Path, manylinux: str, *, exclude: Iterable[str] = (),
                     grafted: bool = True) -> list[TooNewSymbol]:
    """Every too-new symbol of the wheel's ELF files and (``grafted``) of the libraries auditwheel would graft."""
    found = [s for name, data in _wheel_elves(wheel) for s in too_new_symbols(name, data, manylinux)]
    if grafted:
        for soname, path in sorted(graft_candidates(wheel, manylinux, exclude).items()):
            found += too_new_symbols(f"{soname} ({path}, which auditwheel would graft)", path.read_bytes(), manylinux)
    return found


def check_wheel(wheel: Path, manylinux: str, recipe_name: str, *, exclude: Iterable[str] = (),
                grafted: bool = True) -> None:
    """GlibcFloorExceeded, naming each library, symbol and version, when the wheel needs more than the floor."""
    found = wheel_violations(wheel, manylinux, exclude=exclude, grafted=grafted)
    if not found:
        return
    # The first line names the newest glibc need (what sets the tag), else the newest of another family
    # (libstdc++'s GLIBCXX); the list names them all.
    glibc = [s for s in found if s.version.startswith("GLIBC_")]
    newest = max(glibc or found, key=lambda s: (_version_key(s.version), bool(s.symbol)))
    shown = found if len(found) <= 20 else found[:20]
    more = "" if len(found) <= 20 else f"\n  ... and {len(found) - 20} more"
    raise GlibcFloorExceeded(
        f"{newest}, above the {recipe_name} recipe's floor {manylinux}; {wheel.name} imports "
        f"{len(found)} symbol version(s) {manylinux} does not allow:\n  " + "\n  ".join(map(str, shown)) + more,
        hint=f"build against glibc {'.'.join(map(str, parse_manylinux(manylinux)))} (a manylinux image, or a "
             f"toolchain that targets it; see docs/wheels.md), or raise 'manylinux' in recipes/{recipe_name}.toml "
             "if the recipe is meant to promise less",
    )
