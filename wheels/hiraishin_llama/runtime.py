"""What this installation can run on: the wheel's build, the GPU, the CUDA runtime."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


@cache
def build_info() -> dict:
    """Upstream, patches (from the sdist) and recipe, compilers (from CMake)."""
    info: dict = {}
    for name in ("stack.json", "build_info.json"):
        path = PACKAGE_DIR / name
        if path.is_file():
            info.update(json.loads(path.read_text(encoding="utf-8")))
    return info


def site_dirs() -> list[Path]:
    """Where NVIDIA's runtime wheels may be: this environment's purelib/platlib (split
    layouts), the directory holding this package, then every directory on sys.path, which
    is where a venv made with --system-site-packages (or a .pth file) sees the system's."""
    dirs = [Path(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")]
    dirs.append(PACKAGE_DIR.parent)
    dirs += [Path(entry) for entry in sys.path if entry and Path(entry).is_dir()]
    unique: list[Path] = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def nvidia_library_dirs() -> list[Path]:
    """lib/ directories of NVIDIA runtime wheels (CUDA 13 shares nvidia/cu13/lib)."""
    found = []
    for site in site_dirs():
        for sub in ("cu13/lib", "cuda_runtime/lib", "cublas/lib"):
            candidate = site / "nvidia" / sub
            if candidate.is_dir() and candidate not in found:
                found.append(candidate)
    return found


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: str


@cache
def gpus() -> list[Gpu]:
    """GPUs the driver reports, through libcuda's driver API (no CUDA runtime needed)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return []
    count = ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return []
    result = []
    for index in range(count.value):
        device = ctypes.c_int()
        if cuda.cuDeviceGet(ctypes.byref(device), index) != 0:
            continue
        major, minor = ctypes.c_int(), ctypes.c_int()
        cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, device)  # COMPUTE_CAPABILITY_MAJOR
        cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, device)  # COMPUTE_CAPABILITY_MINOR
        name = ctypes.create_string_buffer(256)
        cuda.cuDeviceGetName(name, 256, device)
        result.append(Gpu(name.value.decode(errors="replace"), f"{major.value}{minor.value}"))
    return result


def built_architectures() -> list[str]:
    raw = build_info().get("cuda_architectures", "")
    return [arch.split("-")[0] for arch in raw.replace(",", ";").split(";") if arch]


def built_backends() -> list[str]:
    """The backends this wheel was built with: the CPU backend always, CUDA when its build info names
    CUDA architectures (build_info.json, written by CMake)."""
    return ["cpu", *(["cuda"] if built_architectures() else [])]


def exact_backends() -> list[str]:
    """The backends whose verify batches are exact in this wheel: those the patch stack makes exact
    (stack.json's list, the same for every wheel of the stack) that this wheel was built with."""
    built = built_backends()
    return [backend for backend in build_info().get("exact_backends", []) if backend in built]


def environment_warnings() -> list[str]:
    """Problems a user should hear about before a program starts."""
    archs = built_architectures()
    if not archs:
        return []
    warnings = []
    found = gpus()
    if not found:
        warnings.append("no CUDA GPU found: the CPU backend is in use")
        return warnings
    for gpu in found:
        if gpu.compute_capability not in archs:
            major = build_info().get("recipe", "cu13").split("-")[0]
            warnings.append(
                f"{gpu.name} has compute capability {gpu.compute_capability[:-1]}.{gpu.compute_capability[-1]}, "
                f"but this wheel is built for {', '.join(archs)}; install the wheel from the "
                f"{major}-sm{gpu.compute_capability} index instead"
            )
    if not nvidia_library_dirs():
        extra = build_info().get("recipe", "cu13").split("-")[0]
        warnings.append(f"the CUDA runtime wheels are missing: pip install 'hiraishin-llama[{extra}]'")
    return warnings


def warn_about_environment(program: str) -> None:
    for message in environment_warnings():
        print(f"{program}: warning: {message}", file=sys.stderr)


def cache_dir() -> Path:
    """Where the programs keep what they make once and reuse, e.g. synthetic models."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hiraishin-llama"


def driver_versions() -> dict:
    """The NVIDIA driver's version and the CUDA version its driver API supports; empty without a driver."""
    versions: dict = {}
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int()
        if cuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
            versions["cuda_driver_api"] = f"{version.value // 1000}.{version.value % 1000 // 10}"
    except OSError:
        return versions
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi:
        query = subprocess.run([nvidia_smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True)
        if query.returncode == 0 and query.stdout.strip():
            versions["driver"] = query.stdout.strip().splitlines()[0]
    if "driver" not in versions:
        proc_version = Path("/proc/driver/nvidia/version")
        if proc_version.is_file():
            versions["driver"] = proc_version.read_text().splitlines()[0]
    return versions
