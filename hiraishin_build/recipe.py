"""Wheel recipes: one TOML file per wheel variant in ``recipes/``.

A recipe names the backend, the CUDA major version and architectures it
targets, the CMake defines that build it, and the extra that pulls in its
runtime libraries. Every other file in ``recipes/`` except the pin is a recipe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import tomlfile
from .errors import ConfigError
from .pin import PIN_FILE

BACKENDS = ("cpu", "cuda")

# Defines every wheel shares, whatever the recipe says: shared libraries so the
# console scripts and the replay use one libllama; backends as loadable modules
# so a CUDA wheel still runs on a machine without a GPU; every CPU variant so
# the CPU backend is fast on any x86-64; no web UI (its bundle is not checked out).
COMMON_DEFINES: dict[str, str] = {
    "BUILD_SHARED_LIBS": "ON",
    "GGML_BACKEND_DL": "ON",
    "GGML_CPU_ALL_VARIANTS": "ON",
    "GGML_NATIVE": "OFF",
    "LLAMA_BUILD_WEBUI": "OFF",
    "LLAMA_CURL": "OFF",
    "LLAMA_OPENSSL": "OFF",
}

_ARCH = re.compile(r"^\d{2,3}[a-z]?(-real|-virtual)?$")


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

    def cmake_defines(self) -> dict[str, str]:
        defines = {**COMMON_DEFINES, "HIRAISHIN_RECIPE": self.name}
        if self.backend == "cuda":
            defines["GGML_CUDA"] = "ON"
            defines["CMAKE_CUDA_ARCHITECTURES"] = ";".join(self.architectures)
            defines["HIRAISHIN_CUDA_MAJOR"] = str(self.cuda_major)
        defines.update(self.defines)
        return defines

    @property
    def compute_capabilities(self) -> tuple[str, ...]:
        return tuple(arch.split("-")[0] for arch in self.architectures)


def load_recipe(path: Path) -> Recipe:
    data = tomlfile.load(path)
    tomlfile.reject_unknown_keys(
        path, data, ["description", "backend", "cuda", "architectures", "extra", "cmake"]
    )
    description = tomlfile.require(path, data, "description", str)
    backend = tomlfile.require(path, data, "backend", str)
    if backend not in BACKENDS:
        raise ConfigError(f"{path}: 'backend' must be one of {', '.join(BACKENDS)}, not {backend!r}")
    cuda_major = data.get("cuda")
    architectures = data.get("architectures", [])
    extra = data.get("extra")
    defines = tomlfile.optional_table(path, data, "cmake")
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
                    hint="use CMAKE_CUDA_ARCHITECTURES syntax: 86-real, 90-real, 120-virtual",
                )
    else:
        for key in ("cuda", "architectures", "extra"):
            if key in data:
                raise ConfigError(f"{path}: '{key}' is only for cuda recipes (this one is {backend})")
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
    )


def recipe_paths(recipes_dir: Path) -> list[Path]:
    return sorted(p for p in recipes_dir.glob("*.toml") if p.name != PIN_FILE.name)


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
