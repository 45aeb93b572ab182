"""`hiraishin doctor`: verdicts per recipe from a detected (here: faked) toolchain."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from pathlib import Path

import pytest

from hiraishin_build import doctor
from hiraishin_build.doctor import Environment, Library, Nvcc, Tool
from hiraishin_build.recipe import find_recipe

from ..helpers import hiraishin, stand_in

REPO = Path(__file__).resolve().parents[2]


def machine(nvcc: Nvcc | None = None, **changes: object) -> Environment:
    env = Environment(
        python=Tool("python", "/usr/bin/python3", "3.11.7"),
        git=Tool("git", "/usr/bin/git", "2.39.5"),
        cmake=Tool("cmake", "/usr/bin/cmake", "3.25.1"),
        ninja=Tool("ninja", "/usr/bin/ninja", "1.11.1"),
        c_compiler=Tool("C compiler", "/usr/bin/cc", "12.2.0"),
        cxx_compiler=Tool("C++ compiler", "/usr/bin/c++", "12.2.0"),
        nvcc=nvcc or Nvcc("nvcc", "/usr/local/cuda/bin/nvcc", "13.0", 13, 0),
        libraries=(Library("libcudart", ("/usr/local/cuda/lib64/libcudart.so.13",)), Library("libcublas")),
        gpus=("NVIDIA H200, 9.0, 580.159.04",),
    )
    return dataclasses.replace(env, **changes)


def recipe(name: str):  # type: ignore[no-untyped-def]
    return find_recipe(REPO / "recipes", name)


def test_cuda_13_machine_builds_cu13_and_cpu_but_not_cu12() -> None:
    env = machine()
    assert doctor.check_recipe(recipe("cpu"), env).can_build
    assert doctor.check_recipe(recipe("cu13-sm90"), env).can_build
    cu12 = doctor.check_recipe(recipe("cu12-sm89"), env)
    assert not cu12.can_build
    assert cu12.reasons == ("needs CUDA 12's nvcc; /usr/local/cuda/bin/nvcc is CUDA 13.0",)
    assert "CUDA 12 devel container" in cu12.how[0] and "nvidia-cuda-nvcc-cu12 ships only ptxas" in cu12.how[0]


def test_no_nvcc_names_the_way_to_get_it_per_cuda_major() -> None:
    env = machine(Nvcc("nvcc"))
    cu13 = doctor.check_recipe(recipe("cu13-sm86"), env)
    assert cu13.reasons == ("needs CUDA 13's nvcc; none found",)
    assert "pip install nvidia-cuda-nvcc" in cu13.how[0]
    assert "CUDA 12 toolkit" in doctor.check_recipe(recipe("cu12-sm86"), env).how[0]
    assert doctor.check_recipe(recipe("cpu"), env).can_build


def test_sm120_needs_cuda_12_9_for_gb10() -> None:
    # The recipe builds sm_120a (CUDA 12.8) and sm_121a (12.9): the message names each architecture the nvcc lacks.
    old = machine(Nvcc("nvcc", "/opt/cuda-12.4/bin/nvcc", "12.4", 12, 4))
    verdict = doctor.check_recipe(recipe("cu12-sm120"), old)
    assert verdict.reasons == (
        "needs CUDA 12.9 or newer for sm_120a (12.8), sm_121a (12.9); /opt/cuda-12.4/bin/nvcc is CUDA 12.4",)
    assert verdict.how[0].startswith("install a CUDA 12.9+ toolkit (")
    assert doctor.check_recipe(recipe("cu12-sm89"), old).can_build
    nearly = doctor.check_recipe(recipe("cu12-sm120"), machine(Nvcc("nvcc", "/x/nvcc", "12.8", 12, 8)))
    assert nearly.reasons == ("needs CUDA 12.9 or newer for sm_121a (12.9); /x/nvcc is CUDA 12.8",)
    assert doctor.check_recipe(recipe("cu12-sm120"), machine(Nvcc("nvcc", "/x/nvcc", "12.9", 12, 9))).can_build


def test_pip_nvcc_off_path_and_missing_compiler() -> None:
    env = machine(Nvcc("nvcc", "/site/nvidia/cu13/bin/nvcc", "13.0", 13, 0, on_path=False),
                  cxx_compiler=Tool("C++ compiler"), ninja=Tool("ninja"))
    verdict = doctor.check_recipe(recipe("cu13-sm90"), env)
    assert not verdict.can_build
    assert any("not on PATH" in reason for reason in verdict.reasons)
    assert "export PATH=/site/nvidia/cu13/bin:$PATH" in verdict.how
    assert any("no C/C++ compiler" in reason for reason in verdict.reasons)
    assert any("no ninja on PATH" in note for note in verdict.notes)  # isolated builds fetch it: not blocking


def test_report_lists_tools_libraries_gpu_and_verdicts() -> None:
    env = machine()
    text = "\n".join(doctor.report_lines(env, [doctor.check_recipe(recipe("cu12-sm90"), env)]))
    for expected in ("nvcc:          13.0  /usr/local/cuda/bin/nvcc", "libcudart:     /usr/local/cuda/lib64/libcudart.so.13",
                     "libcublas:     not found", "GPU:           NVIDIA H200", "cu12-sm90  cannot build", "why:", "how:"):
        assert expected in text


@pytest.fixture
def toolkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in CUDA 13.0 toolkit (nvcc answering --version and --dryrun, cuBLAS headers and libraries)
    and an nvidia-smi naming one H200, first on PATH; returns the toolkit's root."""
    root = tmp_path / "cuda-13.0"
    target = root / "targets" / "x86_64-linux"
    for name in ("include/cublas_v2.h", "lib/libcublas.so", "lib/libcublas.so.13", "lib/libcudart.so.13",
                 "lib/stubs/libcuda.so"):
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_bytes(b"")
    stand_in(root / "bin", "nvcc", f"""
case "$1" in
  --version) echo "nvcc: NVIDIA (R) Cuda compiler driver"; echo "Cuda compilation tools, release 13.0, V13.0.88" ;;
  --dryrun) echo '#$ TOP={root}/bin/..' >&2
            echo '#$ INCLUDES="-I{root}/bin/../targets/x86_64-linux/include"  ' >&2
            echo '#$ LIBRARIES=  "-L{root}/bin/../targets/x86_64-linux/lib/stubs" "-L{root}/bin/../targets/x86_64-linux/lib"' >&2 ;;
  *) exit 2 ;;
esac""")
    stand_in(tmp_path / "driver", "nvidia-smi", 'echo "NVIDIA H200, 9.0, 580.159.04"')
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join([str(root / "bin"), str(tmp_path / "driver"), os.environ["PATH"]]))
    return root


def test_detection_reads_the_toolkit_its_libraries_and_the_gpu(toolkit: Path) -> None:
    env = doctor.detect()
    lib = toolkit / "targets" / "x86_64-linux" / "lib"
    assert (env.nvcc.path, env.nvcc.version, env.nvcc.major, env.nvcc.minor, env.nvcc.on_path) == \
        (str(toolkit / "bin" / "nvcc"), "13.0", 13, 0, True)
    assert env.nvcc.include_dirs == (str(toolkit / "targets" / "x86_64-linux" / "include"),)
    assert env.nvcc.library_dirs == (str(lib),)  # the stubs directory is left out
    assert env.cublas_dev == (str(toolkit / "targets" / "x86_64-linux" / "include" / "cublas_v2.h"),
                              str(lib / "libcublas.so"))
    found = {library.name: library.paths for library in env.libraries}
    assert list(found) == ["libcudart", "libcublas", "libcublasLt", "libcuda"]
    assert str(lib / "libcudart.so.13") in found["libcudart"]
    assert {str(lib / "libcublas.so"), str(lib / "libcublas.so.13")} <= set(found["libcublas"])
    assert not any("/stubs/" in path for paths in found.values() for path in paths)
    assert env.gpus == ("NVIDIA H200, 9.0, 580.159.04",)


def test_libraries_are_found_under_cuda_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "cuda"
    (home / "lib64").mkdir(parents=True)
    (home / "lib64" / "libcudart.so.12").write_bytes(b"")
    monkeypatch.setenv("CUDA_HOME", str(home))
    found = {library.name: library.paths for library in doctor.find_libraries(Nvcc("nvcc"), ("libcudart",))}
    assert str(home / "lib64" / "libcudart.so.12") in found["libcudart"]


def test_doctor_command_exit_status(toolkit: Path) -> None:
    lib = toolkit / "targets" / "x86_64-linux" / "lib"
    shown = hiraishin("--project", str(REPO), "doctor", cwd=REPO)
    assert shown.returncode == 0, shown.stderr
    assert f"nvcc:          13.0  {toolkit / 'bin' / 'nvcc'}\n" in shown.stdout
    assert f"libcudart:     {lib / 'libcudart.so.13'}" in shown.stdout
    assert "GPU:           NVIDIA H200, 9.0, 580.159.04\n" in shown.stdout
    assert re.search(r"^cu12-sm86 +cannot build", shown.stdout, re.M) and re.search(r"^cu13-sm120 +can build", shown.stdout, re.M)
    one = hiraishin("--project", str(REPO), "doctor", "--recipe", "cu13-sm89", cwd=REPO)
    assert one.returncode == 0 and re.search(r"^cu13-sm89 +can build", one.stdout, re.M)
    refused = hiraishin("--project", str(REPO), "doctor", "--recipe", "cu12-sm89", cwd=REPO)
    assert refused.returncode == 11 and "cannot build cu12-sm89" in refused.stderr
    assert "hint:" in refused.stderr and "Traceback" not in refused.stderr
    unknown = hiraishin("--project", str(REPO), "doctor", "--recipe", "cu13-sm91", cwd=REPO)
    assert unknown.returncode == 2 and "did you mean" in unknown.stderr


def test_detection_runs_here() -> None:
    env = doctor.detect()  # whatever this machine has; it must not raise
    assert env.python.found and env.git.found
    assert {lib.name for lib in env.libraries} >= {"libcudart", "libcublas"}


def test_a_toolkit_without_cublas_development_files_cannot_build_cuda_recipes() -> None:
    nvcc = Nvcc("nvcc", "/usr/local/bin/nvcc", "13.0", 13, 0, include_dirs=("/usr/local/cuda-13.0/include",),
                library_dirs=("/usr/local/cuda-13.0/lib64",))
    env = machine(nvcc, cublas_dev=(None, None))
    verdict = doctor.check_recipe(recipe("cu13-sm90"), env)
    assert not verdict.can_build
    assert verdict.reasons[0].startswith("the CUDA 13.0 toolkit of /usr/local/bin/nvcc has no cuBLAS development "
                                         "files (cublas_v2.h, libcublas.so not in /usr/local/cuda-13.0/include")
    assert "libcublas-dev-13-0" in verdict.how[0] and "CUDA 13 devel container" in verdict.how[0]
    assert doctor.check_recipe(recipe("cpu"), env).can_build
    with_cublas = machine(nvcc, cublas_dev=("/usr/local/cuda-13.0/include/cublas_v2.h",
                                            "/usr/local/cuda-13.0/lib64/libcublas.so"))
    assert doctor.check_recipe(recipe("cu13-sm90"), with_cublas).can_build


def test_nvcc_search_dirs_come_from_its_dry_run(toolkit: Path) -> None:
    target = str(toolkit / "targets" / "x86_64-linux")
    assert doctor._nvcc_search_dirs(str(toolkit / "bin" / "nvcc")) == ((f"{target}/include",), (f"{target}/lib",))


def test_the_main_job_picks_the_cuda_recipe_this_machine_can_build() -> None:
    from hiraishin_build.recipe import load_recipes

    recipes = load_recipes(REPO / "recipes")
    assert doctor.compute_capabilities(machine()) == ("90",)
    assert doctor.recipe_for(machine(), recipes) == (recipe("cu13-sm90"), ())
    assert doctor.recipe_for(machine(gpus=()), recipes)[0].name == "cpu"  # no GPU
    assert doctor.recipe_for(machine(gpus=("Tesla T4, 7.5, 580.1",)), recipes)[0].name == "cpu"  # no recipe for sm_75
    chosen, passed_over = doctor.recipe_for(machine(Nvcc("nvcc")), recipes)  # a GPU but no nvcc
    assert chosen.name == "cpu"
    assert passed_over == ("cu13-sm90: needs CUDA 13's nvcc; none found", "cu12-sm90: needs CUDA 12's nvcc; none found")
    no_cublas = machine(cublas_dev=(None, None))
    chosen, passed_over = doctor.recipe_for(no_cublas, recipes)
    assert chosen.name == "cpu" and "no cuBLAS development files" in passed_over[0]


def test_wheel_refuses_a_recipe_this_machine_cannot_build_before_making_the_sdist(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from hiraishin_build import cli

    made: list[object] = []
    monkeypatch.setattr(cli, "build_sdist", lambda *args, **kwargs: made.append(args))
    monkeypatch.setattr(doctor, "detect", lambda: machine())  # CUDA 13 only: cu12 recipes cannot build
    monkeypatch.setattr(sys, "argv", ["hiraishin", "--project", str(REPO), "wheel", "--recipe", "cu12-sm89"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 11
    assert "cannot build cu12-sm89" in capsys.readouterr().err
    assert made == []  # refused before the sdist (minutes of work) was written
