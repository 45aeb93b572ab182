"""Wheel recipes: one TOML file per wheel variant in ``recipes/``.

A recipe names the backend, the CUDA major version and architectures it
targets, the CMake defines that build it, and the extra that pulls in its
runtime libraries. Every other file in ``recipes/`` except the pin is a recipe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import glibcfloor, tomlfile
from .errors import ConfigError
from .pin import PIN_FILE
from .releases import RELEASES_FILE

BACKENDS = ("cpu", "cuda")

# Defines every wheel shares, whatever the recipe says: shared libraries so the
# console scripts and the replay use one libllama; backends as loadable modules
# so a CUDA wheel still runs on a machine without a GPU; every CPU variant so
# the CPU backend is fast on any x86-64; the RPC backend, for rpc-server workers
# and --rpc clients (a model split across machines); no web UI assets (no npm
# build, no download).
COMMON_DEFINES: dict[str, str] = {
    "BUILD_SHARED_LIBS": "ON",
    "GGML_BACKEND_DL": "ON",
    "GGML_CPU_ALL_VARIANTS": "ON",
    "GGML_NATIVE": "OFF",
    "GGML_RPC": "ON",
    "LLAMA_BUILD_UI": "OFF",
    "LLAMA_USE_PREBUILT_UI": "OFF",
    "LLAMA_CURL": "OFF",
    "LLAMA_OPENSSL": "OFF",
}

_ARCH = re.compile(r"^\d{2,3}[a-z]?(-real|-virtual)?$")
_NAME = re.compile(r"^cu(\d+)-sm(\d{2,3}[a-z]?)$")

# The first CUDA release whose nvcc builds each architecture (NVIDIA's release
# notes), as (major, minor). A recipe is refused when its CUDA major cannot
# reach the architecture at all; when only a later minor can (sm_120 needs
# 12.8), the recipe loads and `hiraishin doctor` checks the nvcc's minor.
MIN_CUDA: dict[str, tuple[int, int]] = {
    "75": (10, 0), "80": (11, 0), "86": (11, 1), "87": (11, 4), "89": (11, 8),
    "90": (11, 8), "90a": (12, 0), "100": (12, 8), "100a": (12, 8), "103": (12, 9),
    "110": (13, 0), "120a": (12, 8), "121a": (12, 9),
}
# Nothing older than sm_75 is listed: CUDA 13 no longer builds it, and no recipe needs it.
# No plain 12X either: ggml-cuda's CMakeLists.txt rewrites every 12X entry to
# 12Xa ("architecture-specific", for Blackwell's FP4 tensor cores), whose SASS
# runs on that one compute capability and whose PTX on no other GPU. A recipe
# must say what is built, so it lists 12Xa itself (_check_not_rewritten).
_REWRITTEN_BY_GGML = re.compile(r"^12\d$")

# Architectures: each CUDA recipe ships real SASS for its one compute
# capability. SASS of sm_XY also runs on sm_XZ for Z >= Y (same major), so
# sm_86 covers sm_87 - but not SASS of an "a" target: sm_120a runs on 12.0
# alone, so the sm120 recipes list 121a-real for GB10 (sm_121) beside
# 120a-real, as ggml's own default list does. PTX ("-virtual", JIT-compiled by
# the driver on first load) is added only where a newer GPU of another major
# has no recipe of its own: the sm90 recipes carry compute_90 PTX so that
# Blackwell data-centre GPUs (sm_100, sm_103) run from the sm90 index. The
# sm120 recipes carry none: ggml builds Blackwell as 12Xa, and compute_120a
# PTX runs on no later GPU; a GPU after Blackwell needs a recipe of its own.
# Elsewhere PTX would only add size (the next GPU generation has its own recipe). JIT-ed PTX
# runs the compiled kernels, but the kernel choices that follow the real GPU's
# compute capability are the newer GPU's (docs/architectures.md): for sm_100
# running compute_90 PTX those are the choices of sm_90 and later.


@dataclass(frozen=True)
class Recipe:
    name: str
    """The file name without .toml, e.g. ``cu13-sm90``."""

    description: str
    """One line for `hiraishin recipes`."""

    backend: str
    """``cpu`` or ``cuda``."""

    cuda_major: int | None = None
    """The CUDA major version a cuda recipe builds with (12 or 13)."""

    architectures: tuple[str, ...] = ()
    """CMAKE_CUDA_ARCHITECTURES entries, e.g. ``90-real``."""

    extra: str | None = None
    """The wheel extra that installs the CUDA runtime libraries (``cu12``/``cu13``)."""

    defines: dict[str, str] = field(default_factory=dict)
    """CMake defines of this recipe, on top of COMMON_DEFINES."""

    size_budget_mb: float = 0.0
    """The largest the repaired wheel may be, in MB (10**6 bytes); a bigger one fails the build."""

    manylinux: str = glibcfloor.DEFAULT_MANYLINUX
    """The manylinux tag the wheel promises (``manylinux_2_28``: glibc 2.28 and later); repair tags the wheel with
    it and fails the build when a library needs a newer glibc or libstdc++ symbol version (glibcfloor.py)."""

    @property
    def platform_tag(self) -> str:
        """``manylinux_2_28_x86_64``: the tag auditwheel is asked for."""
        return glibcfloor.platform_tag(self.manylinux)

    def cmake_defines(self) -> dict[str, str]:
        defines = {**COMMON_DEFINES, "HIRAISHIN_RECIPE": self.name}
        if self.backend == "cuda":
            defines["GGML_CUDA"] = "ON"
            defines["CMAKE_CUDA_ARCHITECTURES"] = ";".join(self.architectures)
            defines["HIRAISHIN_CUDA_MAJOR"] = str(self.cuda_major)
            # NCCL serves several GPUs only, and is picked up whenever the build
            # machine has it (e.g. from torch's nvidia-nccl wheel): auditwheel then
            # grafts its ~200 MB into the wheel. Measured on the H200: 259.5 MB
            # instead of ~47 MB. A wheel must not depend on what else the builder has.
            defines["GGML_CUDA_NCCL"] = "OFF"
        defines.update(self.defines)
        return defines

    @property
    def compute_capabilities(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(arch.split("-")[0] for arch in self.architectures))

    @property
    def gpu_label(self) -> str:
        """``sm120`` for a recipe whose first architecture is 120a-real: its name's part and its GPU runner's label."""
        return _gpu_label(self.compute_capabilities[0]) if self.compute_capabilities else ""

    @property
    def min_cuda(self) -> tuple[int, int] | None:
        """The oldest CUDA (major, minor) whose nvcc builds every architecture."""
        if self.backend != "cuda":
            return None
        return max([(self.cuda_major or 0, 0), *(MIN_CUDA[cc] for cc in self.compute_capabilities)])

    @property
    def variant(self) -> str:
        """The wheel's local version label: ``cpu``, ``cu13.sm90``."""
        return self.name.replace("-", ".")


def load_recipe(path: Path) -> Recipe:
    data = tomlfile.load(path)
    tomlfile.reject_unknown_keys(
        path, data, ["description", "backend", "cuda", "architectures", "extra", "size-budget-mb", "manylinux", "cmake"]
    )
    description = tomlfile.require(path, data, "description", str)
    backend = tomlfile.require(path, data, "backend", str)
    if backend not in BACKENDS:
        raise ConfigError(f"{path}: 'backend' must be one of {', '.join(BACKENDS)}, not {backend!r}")
    defines = tomlfile.optional_table(path, data, "cmake")
    # What a cpu recipe has; a cuda recipe must give all three (a cpu recipe may give none).
    cuda_major: int | None = None
    architectures: list[str] = []
    extra: str | None = None
    if backend == "cuda":
        cuda_major = tomlfile.require(path, data, "cuda", int)
        architectures = tomlfile.require(path, data, "architectures", list)
        extra = tomlfile.require(path, data, "extra", str)
        if not architectures:
            raise ConfigError(f"{path}: 'architectures' is empty", hint="list at least one, e.g. [\"90-real\"]")
        for arch in architectures:
            if not isinstance(arch, str) or not _ARCH.match(arch):
                raise ConfigError(
                    f"{path}: 'architectures' entry {arch!r} is not a CUDA architecture",
                    hint="use CMAKE_CUDA_ARCHITECTURES syntax: 86-real, 90-virtual, 120a-real",
                )
            _check_not_rewritten(path, arch)
            _check_architecture(path, arch.split("-")[0], cuda_major)
        _check_cuda_name(path, cuda_major, [a.split("-")[0] for a in architectures], extra)
    else:
        for key in ("cuda", "architectures", "extra"):
            if key in data:
                raise ConfigError(f"{path}: '{key}' is only for cuda recipes (this one is {backend})")
        if path.stem != "cpu" and not path.stem.startswith("cpu-"):
            raise ConfigError(f"{path}: a cpu recipe's name must be 'cpu' or start with 'cpu-', not {path.stem!r}",
                              hint="the name becomes the wheel's local version label and index directory")
    if "size-budget-mb" not in data:
        raise ConfigError(f"{path}: missing required key 'size-budget-mb'",
                          hint="the largest the repaired wheel may be, in MB; the build fails above it")
    budget = data["size-budget-mb"]
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget <= 0:
        raise ConfigError(f"{path}: 'size-budget-mb' must be a positive number of MB, not {budget!r}")
    # The floor every recipe has unless it says otherwise; the CI builds each in a manylinux_2_28-based image.
    manylinux = glibcfloor.check_tag(path, "manylinux", data.get("manylinux", glibcfloor.DEFAULT_MANYLINUX))
    for key, value in defines.items():
        if not isinstance(value, str):
            raise ConfigError(f"{path}: 'cmake.{key}' must be a string (CMake takes strings), not {type(value).__name__}")
        if key in COMMON_DEFINES and value != COMMON_DEFINES[key]:
            raise ConfigError(f"{path}: 'cmake.{key}' cannot change: every wheel builds with {key}={COMMON_DEFINES[key]}")
    return Recipe(
        name=path.stem,
        description=description,
        backend=backend,
        cuda_major=cuda_major,
        architectures=tuple(architectures),
        extra=extra,
        defines=dict(defines),
        size_budget_mb=float(budget),
        manylinux=manylinux,
    )


def _gpu_label(capability: str) -> str:
    """The GPU a capability is built for, without its target suffix: sm120 for 120a (architecture-specific)
    and 120f (family-specific) alike."""
    return "sm" + capability.rstrip("af")


def _check_not_rewritten(path: Path, arch: str) -> None:
    capability, _, kind = arch.partition("-")
    if _REWRITTEN_BY_GGML.match(capability):
        written = f"{capability}a" + (f"-{kind}" if kind else "")
        raise ConfigError(
            f"{path}: 'architectures' entry {arch!r} would be built as {written!r}: ggml-cuda's CMakeLists.txt "
            f"turns every plain 12X into 12Xa, whose SASS runs on compute capability {capability[:2]}.{capability[2]} "
            f"alone and whose PTX on no other GPU",
            hint=f"write {written!r}; for the other Blackwell consumer GPUs list their own 12Xa-real too "
                 "(e.g. 121a-real for GB10)",
        )


def _check_architecture(path: Path, capability: str, cuda_major: int) -> None:
    if capability not in MIN_CUDA:
        raise ConfigError(
            f"{path}: 'architectures' entry {capability!r} is not an architecture this tool knows the CUDA needs of",
            hint=f"known: {', '.join(MIN_CUDA)}; add it to MIN_CUDA in recipe.py with the first CUDA that builds it",
        )
    needed = MIN_CUDA[capability]
    if cuda_major < needed[0]:
        raise ConfigError(
            f"{path}: 'architectures' entry sm_{capability} cannot be built by CUDA {cuda_major} "
            f"(it needs CUDA {needed[0]}.{needed[1]} or newer)",
            hint=f"raise 'cuda' to {needed[0]} or drop sm_{capability}",
        )


def _check_cuda_name(path: Path, cuda_major: int, capabilities: list[str], extra: str) -> None:
    """The name is the wheel's variant label and its index directory: it must say what the file builds."""
    # An "a" target is named by its number: cu13-sm120 builds 120a.
    expected = f"cu{cuda_major}-{_gpu_label(capabilities[0])}"
    match = _NAME.match(path.stem)
    if not match:
        raise ConfigError(f"{path}: a cuda recipe's name must be cu<CUDA major>-sm<arch>, e.g. {expected}",
                          hint=f"rename the file to {expected}.toml")
    if int(match.group(1)) != cuda_major:
        raise ConfigError(f"{path}: the name says CUDA {match.group(1)} but 'cuda' is {cuda_major}",
                          hint=f"rename the file to {expected}.toml or set cuda = {match.group(1)}")
    if f"sm{match.group(2)}" not in (f"sm{capabilities[0]}", _gpu_label(capabilities[0])):
        raise ConfigError(
            f"{path}: the name says sm_{match.group(2)} but the first of 'architectures' is sm_{capabilities[0]}",
            hint=f"rename the file to {expected}.toml or list the sm_{match.group(2)} architecture first",
        )
    if extra != f"cu{cuda_major}":
        raise ConfigError(f"{path}: 'extra' must be 'cu{cuda_major}' for a CUDA {cuda_major} recipe, not {extra!r}",
                          hint="the extra names the NVIDIA runtime wheels of that CUDA major (wheels/pyproject.toml)")


def recipe_paths(recipes_dir: Path) -> list[Path]:
    not_recipes = {PIN_FILE.name, RELEASES_FILE.name}
    return sorted(p for p in recipes_dir.glob("*.toml") if p.name not in not_recipes)


def load_recipes(recipes_dir: Path) -> list[Recipe]:
    return [load_recipe(path) for path in recipe_paths(recipes_dir)]


def find_recipe(recipes_dir: Path, name: str) -> Recipe:
    path = recipes_dir / f"{name}.toml"
    if not path.is_file():
        known = [p.stem for p in recipe_paths(recipes_dir)]
        import difflib

        close = difflib.get_close_matches(name, known, n=1)
        raise ConfigError(
            f"no recipe '{name}' in {recipes_dir}",
            hint=(f"did you mean '{close[0]}'? " if close else "") + f"known recipes: {', '.join(known)}",
        )
    return load_recipe(path)
