from pathlib import Path

import pytest

from hiraishin_build.errors import ConfigError
from hiraishin_build.recipe import COMMON_DEFINES, find_recipe, load_recipe, load_recipes
from hiraishin_build.toolchain import Machine, recipe_for
from hiraishin_build.wheelbuild import pip_wheel_command

REPO = Path(__file__).resolve().parents[2]

CUDA = '''description = "CUDA 13, sm 9.0"
backend = "cuda"
cuda = 13
architectures = ["90-real"]
extra = "cu13"
'''


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_repository_recipes_load() -> None:
    names = [recipe.name for recipe in load_recipes(REPO / "recipes")]
    assert "cpu" in names and "cu13-sm90" in names
    cuda = find_recipe(REPO / "recipes", "cu13-sm90")
    assert cuda.compute_capabilities == ("90",)
    defines = cuda.cmake_defines()
    assert defines["GGML_CUDA"] == "ON" and defines["CMAKE_CUDA_ARCHITECTURES"] == "90-real"
    assert defines["LLAMA_BUILD_WEBUI"] == "OFF" and defines["GGML_BACKEND_DL"] == "ON"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (CUDA.replace("architectures", "architecture"), "unknown key 'architecture'.*did you mean 'architectures'"),
        (CUDA.replace('["90-real"]', '["sm_90"]'), "not a CUDA architecture"),
        (CUDA.replace('["90-real"]', "[]"), "'architectures' is empty"),
        (CUDA.replace('backend = "cuda"', 'backend = "rocm"'), "'backend' must be one of cpu, cuda"),
        (CUDA.replace("cuda = 13\n", ""), "missing required key 'cuda'"),
        ('description = "x"\nbackend = "cpu"\ncuda = 13\n', "'cuda' is only for cuda recipes"),
        (CUDA + '[cmake]\nGGML_BACKEND_DL = "OFF"\n', "cannot change"),
        (CUDA + "[cmake]\nGGML_CUDA_FA_ALL_QUANTS = true\n", "must be a string"),
    ],
)
def test_bad_recipes(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "cu13-sm90", text)
    with pytest.raises(ConfigError, match="(?s)" + message) as info:
        load_recipe(path)
    assert str(path) in str(info.value)


def test_unknown_recipe_name_suggests(tmp_path: Path) -> None:
    write(tmp_path, "cu13-sm90", CUDA)
    with pytest.raises(ConfigError, match="did you mean 'cu13-sm90'"):
        find_recipe(tmp_path, "cu13-sm89")


def test_recipe_for_this_machine() -> None:
    recipes = load_recipes(REPO / "recipes")
    assert recipe_for(Machine(("90",), 13), recipes).name == "cu13-sm90"
    assert recipe_for(Machine(("90",), None), recipes).name == "cpu"  # no nvcc: cannot build CUDA
    assert recipe_for(Machine((), 13), recipes).name == "cpu"  # no GPU
    assert recipe_for(Machine(("75",), 13), recipes).name == "cpu"  # no recipe for that GPU


def test_pip_wheel_command_hands_over_every_define(tmp_path: Path) -> None:
    recipe = find_recipe(REPO / "recipes", "cu13-sm90")
    command = pip_wheel_command(tmp_path / "s.tar.gz", recipe, tmp_path / "out", tmp_path / "build", isolated=False)
    assert command[1:4] == ["-m", "pip", "wheel"]
    assert "--no-build-isolation" in command
    settings = [command[i + 1] for i, arg in enumerate(command) if arg == "-C"]
    assert f"build-dir={tmp_path / 'build'}" in settings
    for key, value in {**COMMON_DEFINES, "GGML_CUDA": "ON", "CMAKE_CUDA_ARCHITECTURES": "90-real",
                       "HIRAISHIN_RECIPE": "cu13-sm90"}.items():
        assert f"cmake.define.{key}={value}" in settings
    assert command[-1] == str(tmp_path / "s.tar.gz")


def test_cuda_wheel_without_the_matching_nvcc_is_refused_up_front(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hiraishin_build import toolchain
    from hiraishin_build.wheelbuild import WheelBuildError, build_wheel

    sdist = tmp_path / "hiraishin_llama-1.1.tar.gz"
    sdist.write_bytes(b"")
    recipe = find_recipe(REPO / "recipes", "cu13-sm90")
    monkeypatch.setattr(toolchain, "nvcc_major", lambda: None)
    with pytest.raises(WheelBuildError, match="needs CUDA 13's nvcc, but no nvcc is on PATH"):
        build_wheel(sdist, recipe, tmp_path / "out", build_dir=tmp_path / "build")
    monkeypatch.setattr(toolchain, "nvcc_major", lambda: 12)
    with pytest.raises(WheelBuildError, match="the nvcc on PATH is CUDA 12"):
        build_wheel(sdist, recipe, tmp_path / "out", build_dir=tmp_path / "build")
    assert not (tmp_path / "out").exists()
