"""What this machine has for building wheels, and which recipes it can build.

Detection (``detect``) runs the tools; the verdicts (``check_recipe``) are
pure functions of what was detected, so they are tested without any toolkit.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from . import proc
from .errors import ToolchainMissing
from .log import table_lines
from .recipe import MIN_CUDA, Recipe


@dataclass(frozen=True)
class Tool:
    name: str
    path: str | None = None
    version: str | None = None

    @property
    def found(self) -> bool:
        return self.path is not None


@dataclass(frozen=True)
class Nvcc(Tool):
    major: int | None = None
    minor: int | None = None
    on_path: bool = True
    """False for an nvcc found only in site-packages (PyPI's nvidia-cuda-nvcc) whose bin/ is not on PATH."""

    include_dirs: tuple[str, ...] = ()
    library_dirs: tuple[str, ...] = ()
    """Where this nvcc looks for headers and libraries (from its own --dryrun): the toolkit it belongs to,
    even when the nvcc on PATH is a wrapper script elsewhere."""


@dataclass(frozen=True)
class Library:
    name: str
    """The soname stem, e.g. ``libcudart``."""

    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Environment:
    python: Tool
    git: Tool
    cmake: Tool
    ninja: Tool
    c_compiler: Tool
    cxx_compiler: Tool
    nvcc: Nvcc
    libraries: tuple[Library, ...] = ()
    gpus: tuple[str, ...] = ()
    """One line per GPU from nvidia-smi: name, compute capability, driver."""

    cublas_dev: tuple[str | None, str | None] | None = None
    """(cublas_v2.h, libcublas.so) of nvcc's toolkit, None for either not found; None when not looked for."""


@dataclass(frozen=True)
class Verdict:
    recipe: str
    can_build: bool
    reasons: tuple[str, ...] = ()
    """Why not, one line each."""

    how: tuple[str, ...] = ()
    """How to get what is missing."""

    notes: tuple[str, ...] = field(default_factory=tuple)
    """Not blocking, but worth knowing."""


# -- detection ----------------------------------------------------------------

def _version(path: str, args: list[str], pattern: str) -> str | None:
    completed = proc.run([path, *args], check=False)
    match = re.search(pattern, completed.output)
    return match.group(1) if match else None


def find_tool(name: str, candidates: tuple[str, ...], args: list[str], pattern: str) -> Tool:
    for candidate in candidates:
        path = shutil.which(candidate)
        if path:
            return Tool(name, path, _version(path, args, pattern))
    return Tool(name)


def _site_nvcc() -> list[Path]:
    """nvcc from PyPI's nvidia-cuda-nvcc (CUDA 13 puts it in nvidia/cu13/bin)."""
    found = []
    for key in ("purelib", "platlib"):
        for sub in ("cu13/bin/nvcc", "cuda_nvcc/bin/nvcc"):
            path = Path(sysconfig.get_paths()[key]) / "nvidia" / sub
            if path.is_file() and path not in found:
                found.append(path)
    return found


def find_nvcc() -> Nvcc:
    path = shutil.which("nvcc")
    on_path = path is not None
    if path is None:
        site = _site_nvcc()
        path = str(site[0]) if site else None
    if path is None:
        return Nvcc("nvcc")
    completed = proc.run([path, "--version"], check=False)
    match = re.search(r"release (\d+)\.(\d+)", completed.output)
    if not match:
        return Nvcc("nvcc", path, None, on_path=on_path)
    major, minor = int(match.group(1)), int(match.group(2))
    include_dirs, lib_dirs = _nvcc_search_dirs(path)
    return Nvcc("nvcc", path, f"{major}.{minor}", major, minor, on_path, include_dirs, lib_dirs)


def _nvcc_search_dirs(path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The -I and -L directories nvcc passes to its host compiler and linker, without compiling anything."""
    dryrun = proc.run([path, "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull], check=False).output
    include = re.search(r"^#\$ INCLUDES=(.*)$", dryrun, re.MULTILINE)
    libraries = re.search(r"^#\$ LIBRARIES=(.*)$", dryrun, re.MULTILINE)

    def dirs(line: re.Match[str] | None, flag: str) -> tuple[str, ...]:
        if line is None:
            return ()
        found = [os.path.normpath(d) for d in re.findall(rf'"?{flag}([^"\s]+)"?', line.group(1))]
        return tuple(d for d in dict.fromkeys(found) if not d.endswith("stubs"))

    return dirs(include, "-I"), dirs(libraries, "-L")


def find_cublas_dev(nvcc: Nvcc) -> tuple[str | None, str | None]:
    """cublas_v2.h and the libcublas.so link name in the toolkit of `nvcc`: ggml-cuda links cuBLAS."""
    header = next((str(Path(d) / "cublas_v2.h") for d in nvcc.include_dirs if (Path(d) / "cublas_v2.h").is_file()), None)
    library = next((str(Path(d) / "libcublas.so") for d in nvcc.library_dirs if (Path(d) / "libcublas.so").exists()), None)
    return header, library


def library_dirs(nvcc: Nvcc) -> list[Path]:
    """Where a CUDA runtime may be: the NVIDIA wheels, the toolkit, the system."""
    dirs: list[Path] = []
    for key in ("purelib", "platlib"):
        for sub in ("cu13/lib", "cu12/lib", "cuda_runtime/lib", "cublas/lib"):
            dirs.append(Path(sysconfig.get_paths()[key]) / "nvidia" / sub)
    if nvcc.path:
        root = Path(nvcc.path).resolve().parent.parent
        dirs += [root / "lib64", root / "lib", root / "targets" / "x86_64-linux" / "lib"]
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            dirs.append(Path(os.environ[variable]) / "lib64")
    dirs += [Path("/usr/local/cuda/lib64"), Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib64")]
    unique: list[Path] = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [u.resolve() for u in unique]:
            unique.append(d)
    return unique


def find_libraries(nvcc: Nvcc, names: tuple[str, ...] = ("libcudart", "libcublas", "libcublasLt", "libcuda")) -> tuple[Library, ...]:
    dirs = library_dirs(nvcc)
    found = []
    for name in names:
        paths = sorted({p for d in dirs for p in glob.glob(str(d / f"{name}.so*"))})
        found.append(Library(name, tuple(paths)))
    return tuple(found)


def find_gpus() -> tuple[str, ...]:
    if shutil.which("nvidia-smi") is None:
        return ()
    completed = proc.run(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
                         check=False)
    if completed.returncode != 0:
        return ()
    return tuple(line.strip() for line in completed.stdout.splitlines() if line.strip())


def detect() -> Environment:
    nvcc = find_nvcc()
    return Environment(
        python=Tool("python", sys.executable, sys.version.split()[0]),
        git=find_tool("git", ("git",), ["--version"], r"version (\S+)"),
        cmake=find_tool("cmake", ("cmake",), ["--version"], r"version (\S+)"),
        ninja=find_tool("ninja", ("ninja",), ["--version"], r"(\S+)"),
        c_compiler=find_tool("C compiler", ("cc", "gcc", "clang"), ["--version"], r"(\d+\.\d+\.\d+)"),
        cxx_compiler=find_tool("C++ compiler", ("c++", "g++", "clang++"), ["--version"], r"(\d+\.\d+\.\d+)"),
        nvcc=nvcc,
        libraries=find_libraries(nvcc),
        gpus=find_gpus(),
        cublas_dev=find_cublas_dev(nvcc) if nvcc.found else None,
    )


# -- verdicts -----------------------------------------------------------------

def toolkit_hint(major: int) -> str:
    if major == 12:
        return ("install a CUDA 12 toolkit (https://developer.nvidia.com/cuda-downloads) or build in the CUDA 12 "
                "devel container (nvidia/cuda:12.9.1-devel-rockylinux8, which CI builds in), and put its bin/ on PATH; PyPI's "
                "nvidia-cuda-nvcc-cu12 ships only ptxas, not nvcc, so it cannot build these wheels")
    if major == 13:
        return ("`pip install nvidia-cuda-nvcc` (CUDA 13 ships nvcc on PyPI) and put its bin/ "
                "(site-packages/nvidia/cu13/bin) on PATH, or install the CUDA 13 toolkit")
    return f"install the CUDA {major} toolkit and put its bin/ on PATH"


def check_recipe(recipe: Recipe, env: Environment) -> Verdict:
    reasons: list[str] = []
    how: list[str] = []
    notes: list[str] = []
    if not env.c_compiler.found or not env.cxx_compiler.found:
        reasons.append("no C/C++ compiler (cc/gcc/clang and c++/g++/clang++) on PATH")
        how.append("install gcc and g++ (e.g. `apt-get install build-essential`)")
    for tool in (env.cmake, env.ninja):
        if not tool.found:
            notes.append(f"no {tool.name} on PATH: a default (isolated) build fetches it from PyPI; "
                         "--no-build-isolation needs it installed")
    if recipe.backend == "cuda":
        major = recipe.cuda_major or 0
        need_major, need_minor = recipe.min_cuda or (major, 0)
        nvcc = env.nvcc
        if not nvcc.found:
            reasons.append(f"needs CUDA {major}'s nvcc; none found")
            how.append(toolkit_hint(major))
        elif nvcc.major is None:
            reasons.append(f"cannot read the version of {nvcc.path}")
            how.append(toolkit_hint(major))
        elif nvcc.major != major:
            reasons.append(f"needs CUDA {major}'s nvcc; {nvcc.path} is CUDA {nvcc.version}")
            how.append(toolkit_hint(major))
        elif (have := (nvcc.major, nvcc.minor or 0)) < (need_major, need_minor):
            beyond = [f"sm_{cc} ({MIN_CUDA[cc][0]}.{MIN_CUDA[cc][1]})" for cc in recipe.compute_capabilities
                      if MIN_CUDA[cc] > have]
            reasons.append(f"needs CUDA {need_major}.{need_minor} or newer for {', '.join(beyond)}; "
                           f"{nvcc.path} is CUDA {nvcc.version}")
            how.append(toolkit_hint(major).replace(f"CUDA {major} toolkit", f"CUDA {need_major}.{need_minor}+ toolkit"))
        elif not nvcc.on_path and nvcc.path:
            reasons.append(f"nvcc {nvcc.version} is installed at {nvcc.path} but its directory is not on PATH")
            how.append(f"export PATH={Path(nvcc.path).parent}:$PATH")
        if not reasons and env.cublas_dev is not None and None in env.cublas_dev:
            header, library = env.cublas_dev
            missing = [name for name, path in (("cublas_v2.h", header), ("libcublas.so", library)) if path is None]
            where = ", ".join(nvcc.include_dirs + nvcc.library_dirs) or "its directories"
            reasons.append(f"the CUDA {nvcc.version} toolkit of {nvcc.path} has no cuBLAS development files "
                           f"({', '.join(missing)} not in {where}); ggml-cuda links cuBLAS")
            how.append(f"install the toolkit's cuBLAS development package (e.g. `apt-get install "
                       f"libcublas-dev-{nvcc.major}-{nvcc.minor or 0}`, or the whole cuda-toolkit-{nvcc.major}-"
                       f"{nvcc.minor or 0}), or build in the CUDA {major} devel container")
        runtime = {lib.name: lib for lib in env.libraries}
        if not runtime.get("libcudart", Library("libcudart")).paths:
            notes.append(f"no libcudart found: not needed to build, but to run install the wheel with [{recipe.extra}]")
    return Verdict(recipe.name, not reasons, tuple(reasons), tuple(dict.fromkeys(how)), tuple(notes))


def compute_capabilities(env: Environment) -> tuple[str, ...]:
    """Of the GPUs found, as recipes name them: "NVIDIA H200, 9.0, 580.159.04" -> "90"."""
    found = []
    for line in env.gpus:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) >= 2 and re.fullmatch(r"\d+\.\d+", fields[1]):
            found.append(fields[1].replace(".", ""))
    return tuple(dict.fromkeys(found))


def recipe_for(env: Environment, recipes: list[Recipe]) -> tuple[Recipe, tuple[str, ...]]:
    """The CUDA recipe for this machine's GPU that its toolchain can build, else the CPU recipe;
    with why each CUDA recipe for the GPU was passed over."""
    by_name = {recipe.name: recipe for recipe in recipes}
    passed_over: list[str] = []
    for capability in compute_capabilities(env):
        for major in (13, 12):
            recipe = by_name.get(f"cu{major}-sm{capability}")
            if recipe is None:
                continue
            verdict = check_recipe(recipe, env)
            if verdict.can_build:
                return recipe, tuple(passed_over)
            passed_over.append(f"{recipe.name}: " + "; ".join(verdict.reasons))
    return by_name["cpu"], tuple(passed_over)


def require_buildable(recipe: Recipe, env: Environment) -> Verdict:
    verdict = check_recipe(recipe, env)
    if not verdict.can_build:
        raise ToolchainMissing(f"this machine cannot build {recipe.name}: " + "; ".join(verdict.reasons),
                               hint="; ".join(verdict.how))
    return verdict


# -- the report -----------------------------------------------------------------

def _tool_row(tool: Tool) -> tuple[str, str]:
    if not tool.found:
        return f"{tool.name}:", "not found"
    return f"{tool.name}:", f"{tool.version or '(version unknown)'}  {tool.path}"


def report_lines(env: Environment, verdicts: list[Verdict]) -> list[str]:
    rows = [_tool_row(t) for t in (env.python, env.git, env.cmake, env.ninja, env.c_compiler, env.cxx_compiler)]
    name, nvcc = _tool_row(env.nvcc)
    rows.append((name, nvcc + ("  (not on PATH)" if env.nvcc.found and not env.nvcc.on_path else "")))
    if env.cublas_dev is not None:
        header, library = env.cublas_dev
        rows.append(("cuBLAS dev:", ", ".join(path or f"{name} not found" for name, path in
                                             (("cublas_v2.h", header), ("libcublas.so", library)))))
    rows += [(f"{lib.name}:", ", ".join(lib.paths) if lib.paths else "not found") for lib in env.libraries]
    rows.append(("GPU:", "; ".join(env.gpus) if env.gpus else "none (no nvidia-smi, or it found no GPU)"))
    verdict_rows: list[tuple[str, str]] = []
    for verdict in verdicts:
        verdict_rows.append((verdict.recipe, "can build" if verdict.can_build else "cannot build"))
        verdict_rows += [("", f"  why: {reason}") for reason in verdict.reasons]
        verdict_rows += [("", f"  how: {step}") for step in verdict.how]
        verdict_rows += [("", f"  note: {note}") for note in verdict.notes]
    return [*table_lines(rows), "", *table_lines(verdict_rows)]
