"""The `[cu12]` and `[cu13]` extras, on a machine without a GPU or nvcc: the CUDA runtime wheel each extra
names is downloaded from the package index, unpacked as pip installs it, found where the wheel's programs look
for it (runtime.nvidia_library_dirs, then LD_LIBRARY_PATH in the programs' environment), and loaded: its
cudaRuntimeGetVersion answers without a driver, with the CUDA major of the extra.

This is the part of a cu12 wheel's install that no cu12 build is needed for (there is no CUDA 12 nvcc on these
machines). cuBLAS is left out: its wheel is about 600 MB, and it is found by the same directory rule. Skips, saying
why, only where the package index cannot be reached.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from hiraishin_llama import _launch, runtime

REPO = Path(__file__).resolve().parents[2]
UNREACHABLE = re.compile(r"Temporary failure in name resolution|Network is unreachable|Connection refused|"
                         r"Max retries exceeded|ConnectTimeoutError|NewConnectionError", re.I)


def runtime_requirement(extra: str) -> Requirement:
    """The extra's CUDA runtime requirement, as wheels/pyproject.toml gives it."""
    extras = tomllib.loads((REPO / "wheels" / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    found = [Requirement(r) for r in extras[extra] if Requirement(r).name.startswith("nvidia-cuda-runtime")]
    assert len(found) == 1, f"[{extra}] should name one nvidia-cuda-runtime wheel: {extras[extra]}"
    return found[0]


def download(requirement: Requirement, into: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64", "--python-version", "3.12",
         "--dest", str(into), str(requirement)],
        capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        if UNREACHABLE.search(done.stdout + done.stderr):
            pytest.skip(f"the package index cannot be reached to download {requirement}: {done.stderr[-300:]}")
        pytest.fail(f"pip could not download {requirement}, which the extra names:\n{done.stderr[-2000:]}")
    wheels = sorted(into.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64",
                    reason="the wheels are built for x86_64 Linux")
@pytest.mark.parametrize(("extra", "major"), [("cu12", 12), ("cu13", 13)])
def test_the_extra_s_cuda_runtime_is_found_and_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str,
                                                     major: int) -> None:
    requirement = runtime_requirement(extra)
    wheel = download(requirement, tmp_path / "download")
    site = tmp_path / "site-packages"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    monkeypatch.syspath_prepend(str(site))

    found = [d for d in runtime.nvidia_library_dirs() if site in d.parents]
    libraries = [p for d in found for p in d.glob(f"libcudart.so.{major}*")]
    assert libraries, (f"{wheel.name} unpacks no libcudart.so.{major} where the programs look "
                       f"(nvidia/cu13/lib, nvidia/cuda_runtime/lib, nvidia/cublas/lib): "
                       f"{sorted(str(p.relative_to(site)) for p in site.rglob('*.so*'))}")
    # the programs' dynamic loader searches there first
    environment = _launch.program_environment({"LD_LIBRARY_PATH": "/opt/elsewhere"})
    assert environment["LD_LIBRARY_PATH"].split(os.pathsep)[0] in {str(d) for d in found}
    assert environment["LD_LIBRARY_PATH"].endswith("/opt/elsewhere")

    cudart = ctypes.CDLL(str(libraries[0]))
    version = ctypes.c_int()
    assert cudart.cudaRuntimeGetVersion(ctypes.byref(version)) == 0
    assert version.value // 1000 == major, f"{libraries[0].name} is CUDA {version.value}"
    assert requirement.specifier.contains(f"{version.value // 1000}.{version.value % 1000 // 10}",
                                          prereleases=True), (requirement, version.value)
