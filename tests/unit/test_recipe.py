from pathlib import Path

import pytest

from hiraishin_build.errors import ConfigError
from hiraishin_build.recipe import COMMON_DEFINES, find_recipe, load_recipe, load_recipes
from hiraishin_build.wheelbuild import pip_wheel_command

from ..helpers import hiraishin

REPO = Path(__file__).resolve().parents[2]

CUDA = '''description = "CUDA 13, sm 9.0"
backend = "cuda"
cuda = 13
architectures = ["90-real"]
extra = "cu13"
size-budget-mb = 250
'''


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_repository_recipes_load() -> None:
    names = [recipe.name for recipe in load_recipes(REPO / "recipes")]
    assert set(names) == {"cpu", *(f"cu{major}-sm{sm}" for major in (12, 13) for sm in (86, 89, 90, 120))}
    cuda = find_recipe(REPO / "recipes", "cu13-sm90")
    assert cuda.compute_capabilities == ("90",)
    defines = cuda.cmake_defines()
    assert defines["GGML_CUDA"] == "ON" and defines["CMAKE_CUDA_ARCHITECTURES"] == "90-real;90-virtual"
    assert defines["LLAMA_BUILD_UI"] == "OFF" and defines["LLAMA_USE_PREBUILT_UI"] == "OFF" and defines["GGML_BACKEND_DL"] == "ON"


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
        (CUDA.replace("size-budget-mb = 250\n", ""), "missing required key 'size-budget-mb'"),
        (CUDA.replace("size-budget-mb = 250", "size-budget-mb = 0"), "'size-budget-mb' must be a positive"),
        (CUDA.replace("size-budget-mb = 250", 'size-budget-mb = "big"'), "'size-budget-mb' must be a positive"),
        (CUDA.replace("size-budget", "size-budjet"), "unknown key 'size-budjet-mb'.*did you mean 'size-budget-mb'"),
        (CUDA.replace('["90-real"]', '["91-real"]'), "'91' is not an architecture this tool knows"),
        (CUDA.replace("cuda = 13", "cuda = 11").replace('"cu13"', '"cu11"'), "the name says CUDA 13"),
        (CUDA.replace('["90-real"]', '["89-real", "90-real"]'), "the first of 'architectures' is sm_89"),
        (CUDA.replace('"cu13"', '"cu12"'), "'extra' must be 'cu13'"),
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


def test_pip_wheel_command_hands_over_every_define(tmp_path: Path) -> None:
    recipe = find_recipe(REPO / "recipes", "cu13-sm90")
    command = pip_wheel_command(tmp_path / "s.tar.gz", recipe, tmp_path / "out", tmp_path / "build", isolated=False)
    assert command[1:4] == ["-m", "pip", "wheel"]
    assert "--no-build-isolation" in command
    settings = [command[i + 1] for i, arg in enumerate(command) if arg == "-C"]
    assert f"build-dir={tmp_path / 'build'}" in settings
    for key, value in {**COMMON_DEFINES, "GGML_CUDA": "ON", "CMAKE_CUDA_ARCHITECTURES": "90-real;90-virtual",
                       "GGML_CUDA_NCCL": "OFF", "HIRAISHIN_RECIPE": "cu13-sm90"}.items():
        assert f"cmake.define.{key}={value}" in settings
    assert command[-1] == str(tmp_path / "s.tar.gz")


def test_extra_cmake_defines_are_added_but_never_override_the_recipe(tmp_path: Path) -> None:
    from hiraishin_build.wheelbuild import WheelBuildError

    recipe = find_recipe(REPO / "recipes", "cu13-sm90")
    command = pip_wheel_command(tmp_path / "s.tar.gz", recipe, tmp_path / "out", tmp_path / "build", isolated=True,
                                extra_defines={"HIRAISHIN_BUILD_TESTS": "ON"})
    assert "cmake.define.HIRAISHIN_BUILD_TESTS=ON" in command
    assert "cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real;90-virtual" in command
    with pytest.raises(WheelBuildError, match="CMAKE_CUDA_ARCHITECTURES would override what recipe cu13-sm90 sets"):
        pip_wheel_command(tmp_path / "s.tar.gz", recipe, tmp_path / "out", tmp_path / "build", isolated=True,
                          extra_defines={"CMAKE_CUDA_ARCHITECTURES": "80-real"})


def test_a_directory_that_is_not_an_unpacked_sdist_is_refused(tmp_path: Path) -> None:
    from hiraishin_build.wheelbuild import WheelBuildError, build_wheel

    recipe = find_recipe(REPO / "recipes", "cpu")
    with pytest.raises(WheelBuildError, match="is a directory without pyproject.toml"):
        build_wheel(tmp_path, recipe, tmp_path / "out", build_dir=tmp_path / "build")


def test_wheel_cmake_define_must_be_key_value(tmp_path: Path) -> None:
    result = hiraishin("--project", str(REPO), "wheel", "--recipe", "cpu", "-D", "NOT A DEFINE", cwd=tmp_path)
    assert result.returncode == 2
    assert "'NOT A DEFINE' is not KEY=VALUE" in result.stderr


def test_cuda_wheel_without_the_matching_nvcc_is_refused_up_front(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hiraishin_build import doctor
    from hiraishin_build.errors import ToolchainMissing
    from hiraishin_build.wheelbuild import build_wheel

    from tests.unit.test_doctor import machine

    sdist = tmp_path / "hiraishin_llama-1.1.tar.gz"
    sdist.write_bytes(b"")
    recipe = find_recipe(REPO / "recipes", "cu13-sm90")
    monkeypatch.setattr(doctor, "detect", lambda: machine(doctor.Nvcc("nvcc")))
    with pytest.raises(ToolchainMissing, match="needs CUDA 13's nvcc; none found") as raised:
        build_wheel(sdist, recipe, tmp_path / "out", build_dir=tmp_path / "build")
    assert raised.value.exit_code == 11
    monkeypatch.setattr(doctor, "detect", lambda: machine(doctor.Nvcc("nvcc", "/opt/cuda-12.4/bin/nvcc", "12.4", 12, 4)))
    with pytest.raises(ToolchainMissing, match="/opt/cuda-12.4/bin/nvcc is CUDA 12.4"):
        build_wheel(sdist, recipe, tmp_path / "out", build_dir=tmp_path / "build")
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_every_repository_recipe_has_a_budget_and_a_name_that_says_what_it_builds() -> None:
    for recipe in load_recipes(REPO / "recipes"):
        assert recipe.size_budget_mb > 0
        if recipe.backend == "cuda":
            assert recipe.name == f"cu{recipe.cuda_major}-{recipe.gpu_label}"
            assert recipe.extra == f"cu{recipe.cuda_major}"
            # Real SASS for the target always; PTX only where the next GPUs have no recipe and can run it
            # (compute_90 on sm_100/103; ggml builds Blackwell as 12Xa, whose PTX runs on no later GPU).
            assert f"{recipe.compute_capabilities[0]}-real" in recipe.architectures
            assert any(a.endswith("-virtual") for a in recipe.architectures) == (recipe.gpu_label == "sm90")
    sm120 = find_recipe(REPO / "recipes", "cu12-sm120")
    # GB10 (12.1) cannot run sm_120a SASS: the sm120 recipes build its own.
    assert sm120.architectures == ("120a-real", "121a-real") == find_recipe(REPO / "recipes", "cu13-sm120").architectures
    assert sm120.min_cuda == (12, 9) and sm120.gpu_label == "sm120"
    assert find_recipe(REPO / "recipes", "cu12-sm89").min_cuda == (12, 0)
    assert find_recipe(REPO / "recipes", "cu13-sm90").variant == "cu13.sm90"
    assert find_recipe(REPO / "recipes", "cpu").min_cuda is None


@pytest.mark.parametrize(
    ("name", "cuda", "arch", "needs"),
    [("cu11-sm120", 11, "120a", "12.8"), ("cu10-sm86", 10, "86", "11.1"), ("cu10-sm89", 10, "89", "11.8"),
     ("cu10-sm90", 10, "90", "11.8")],
)
def test_an_architecture_the_cuda_major_cannot_build_is_refused(tmp_path: Path, name: str, cuda: int, arch: str,
                                                                 needs: str) -> None:
    text = CUDA.replace("cuda = 13", f"cuda = {cuda}").replace('"90-real"', f'"{arch}-real"').replace('"cu13"', f'"cu{cuda}"')
    path = write(tmp_path, name, text)
    with pytest.raises(ConfigError, match=f"'architectures' entry sm_{arch} cannot be built by CUDA {cuda} "
                                          rf"\(it needs CUDA {needs} or newer\)") as info:
        load_recipe(path)
    assert str(path) in str(info.value)


def test_recipe_file_name_must_match_its_contents(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="the name says sm_89 but the first of 'architectures' is sm_90"):
        load_recipe(write(tmp_path, "cu13-sm89", CUDA))
    with pytest.raises(ConfigError, match="must be cu<CUDA major>-sm<arch>, e.g. cu13-sm90"):
        load_recipe(write(tmp_path, "hopper", CUDA))
    with pytest.raises(ConfigError, match="a cpu recipe's name must be 'cpu'"):
        load_recipe(write(tmp_path, "generic", 'description = "x"\nbackend = "cpu"\nsize-budget-mb = 25\n'))
    assert load_recipe(write(tmp_path, "cpu-avx2", 'description = "x"\nbackend = "cpu"\nsize-budget-mb = 25\n')).variant == "cpu.avx2"


def test_a_too_old_minor_is_refused_before_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hiraishin_build import doctor
    from hiraishin_build.errors import ToolchainMissing
    from hiraishin_build.wheelbuild import build_wheel

    from tests.unit.test_doctor import machine

    sdist = tmp_path / "hiraishin_llama-1.1.tar.gz"
    sdist.write_bytes(b"")
    monkeypatch.setattr(doctor, "detect", lambda: machine(doctor.Nvcc("nvcc", "/opt/cuda/bin/nvcc", "12.4", 12, 4)))
    with pytest.raises(ToolchainMissing, match=r"needs CUDA 12\.9 or newer for sm_120a \(12\.8\), sm_121a \(12\.9\); /opt/cuda/bin/nvcc is CUDA 12\.4"):
        build_wheel(sdist, find_recipe(REPO / "recipes", "cu12-sm120"), tmp_path / "out", build_dir=tmp_path / "b")
    assert not (tmp_path / "out").exists()


def test_recipes_command_shows_needs_budget_and_label() -> None:
    listed = hiraishin("--project", str(REPO), "recipes", cwd=REPO)
    assert listed.returncode == 0, listed.stderr
    assert "size budget: 15 MB; version label +cpu" in listed.stdout
    assert "CUDA 12 nvcc (12.9 or newer); runs with the [cu12] extra" in listed.stdout  # cu12-sm120
    assert "[90-real, 90-virtual]" in listed.stdout and "version label +cu13.sm90" in listed.stdout


def test_every_wheel_gets_the_portable_shared_build_defines() -> None:
    # Shared libraries (one libllama for the tools), backends as modules (a CUDA wheel runs without a GPU),
    # every CPU variant and no -march=native (any x86-64), the RPC backend (rpc-server), no web UI, no network
    # libraries.
    shared = {"BUILD_SHARED_LIBS": "ON", "GGML_BACKEND_DL": "ON", "GGML_CPU_ALL_VARIANTS": "ON",
              "GGML_NATIVE": "OFF", "GGML_RPC": "ON", "LLAMA_BUILD_UI": "OFF", "LLAMA_USE_PREBUILT_UI": "OFF",
              "LLAMA_CURL": "OFF", "LLAMA_OPENSSL": "OFF"}
    assert COMMON_DEFINES == shared
    for recipe in load_recipes(REPO / "recipes"):
        assert shared.items() <= recipe.cmake_defines().items(), recipe.name


@pytest.mark.parametrize(("capability", "major", "oldest"), [
    ("75", 12, (12, 0)), ("80", 12, (12, 0)), ("86", 12, (12, 0)), ("87", 12, (12, 0)), ("89", 12, (12, 0)),
    ("90", 12, (12, 0)), ("90a", 12, (12, 0)), ("100", 12, (12, 8)), ("100a", 12, (12, 8)), ("103", 12, (12, 9)),
    ("120a", 12, (12, 8)), ("121a", 12, (12, 9)), ("110", 13, (13, 0)), ("120a", 13, (13, 0)),
])
def test_the_oldest_cuda_for_each_architecture(tmp_path: Path, capability: str, major: int,
                                               oldest: tuple[int, int]) -> None:
    from hiraishin_build.recipe import MIN_CUDA

    # NVIDIA's release notes: the first nvcc that builds each architecture.
    assert MIN_CUDA == {"75": (10, 0), "80": (11, 0), "86": (11, 1), "87": (11, 4), "89": (11, 8), "90": (11, 8),
                        "90a": (12, 0), "100": (12, 8), "100a": (12, 8), "103": (12, 9), "110": (13, 0),
                        "120a": (12, 8), "121a": (12, 9)}
    path = tmp_path / f"cu{major}-sm{capability}.toml"
    path.write_text(f'description = "x"\nbackend = "cuda"\ncuda = {major}\narchitectures = ["{capability}-real"]\n'
                    f'extra = "cu{major}"\nsize-budget-mb = 100\n')
    assert load_recipe(path).min_cuda == oldest


def test_a_recipe_made_in_code_has_plain_defaults_and_cannot_change() -> None:
    import dataclasses

    from hiraishin_build.recipe import Recipe

    recipe = Recipe("cpu", "CPU only", "cpu")
    assert (recipe.cuda_major, recipe.architectures, recipe.extra, recipe.defines) == (None, (), None, {})
    assert recipe.size_budget_mb == 0.0 and recipe.size_budget_mb is not None
    assert recipe.min_cuda is None and recipe.variant == "cpu" and recipe.compute_capabilities == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.name = "cpu-avx2"  # type: ignore[misc]


def test_cmake_defines_in_full() -> None:
    from hiraishin_build.recipe import Recipe

    cuda = Recipe("cu13-sm90", "d", "cuda", 13, ("90-real", "90-virtual"), "cu13", {"GGML_CUDA_FA_ALL_QUANTS": "ON"})
    assert cuda.cmake_defines() == {
        **COMMON_DEFINES, "HIRAISHIN_RECIPE": "cu13-sm90", "GGML_CUDA": "ON",
        "CMAKE_CUDA_ARCHITECTURES": "90-real;90-virtual", "HIRAISHIN_CUDA_MAJOR": "13", "GGML_CUDA_NCCL": "OFF",
        "GGML_CUDA_FA_ALL_QUANTS": "ON",
    }
    assert Recipe("cpu", "d", "cpu").cmake_defines() == {**COMMON_DEFINES, "HIRAISHIN_RECIPE": "cpu"}


def test_a_loaded_recipe_in_full(tmp_path: Path) -> None:
    from hiraishin_build.recipe import Recipe

    # A define of the recipe's own is kept; a shared define restated with its own value is accepted.
    path = write(tmp_path, "cu13-sm90", CUDA + '[cmake]\nGGML_CUDA_FA_ALL_QUANTS = "ON"\nGGML_NATIVE = "OFF"\n')
    assert load_recipe(path) == Recipe(
        name="cu13-sm90", description="CUDA 13, sm 9.0", backend="cuda", cuda_major=13, architectures=("90-real",),
        extra="cu13", defines={"GGML_CUDA_FA_ALL_QUANTS": "ON", "GGML_NATIVE": "OFF"}, size_budget_mb=250.0)
    # Any positive budget, fractions of a MB too; a cpu recipe has no CUDA major, architectures or extra.
    cpu = load_recipe(write(tmp_path, "cpu", 'description = "x"\nbackend = "cpu"\nsize-budget-mb = 0.5\n'))
    assert cpu == Recipe(name="cpu", description="x", backend="cpu", cuda_major=None, architectures=(), extra=None,
                         defines={}, size_budget_mb=0.5)


CPU = 'description = "x"\nbackend = "cpu"\nsize-budget-mb = 25\n'
KNOWN = "75, 80, 86, 87, 89, 90, 90a, 100, 100a, 103, 110, 120a, 121a"


@pytest.mark.parametrize(("name", "text", "message", "hint"), [
    ("cu13-sm90", CUDA.replace('backend = "cuda"', 'backend = "rocm"'), "'backend' must be one of cpu, cuda, not 'rocm'",
     None),
    ("cu13-sm90", CUDA.replace('["90-real"]', "[]"), "'architectures' is empty", 'list at least one, e.g. ["90-real"]'),
    ("cu13-sm90", CUDA.replace('["90-real"]', '["sm_90"]'), "'architectures' entry 'sm_90' is not a CUDA architecture",
     "use CMAKE_CUDA_ARCHITECTURES syntax: 86-real, 90-virtual, 120a-real"),
    ("cu13-sm90", CUDA.replace('["90-real"]', "[90]"), "'architectures' entry 90 is not a CUDA architecture",
     "use CMAKE_CUDA_ARCHITECTURES syntax: 86-real, 90-virtual, 120a-real"),
    ("cpu", CPU + "cuda = 13\n", "'cuda' is only for cuda recipes (this one is cpu)", None),
    ("cpu", CPU + 'architectures = ["90-real"]\n', "'architectures' is only for cuda recipes (this one is cpu)", None),
    ("cpu", CPU + 'extra = "cu13"\n', "'extra' is only for cuda recipes (this one is cpu)", None),
    ("generic", CPU, "a cpu recipe's name must be 'cpu' or start with 'cpu-', not 'generic'",
     "the name becomes the wheel's local version label and index directory"),
    ("cu13-sm90", CUDA.replace("size-budget-mb = 250\n", ""), "missing required key 'size-budget-mb'",
     "the largest the repaired wheel may be, in MB; the build fails above it"),
    ("cu13-sm90", CUDA.replace("= 250", "= 0"), "'size-budget-mb' must be a positive number of MB, not 0", None),
    ("cu13-sm90", CUDA.replace("= 250", "= -2.5"), "'size-budget-mb' must be a positive number of MB, not -2.5", None),
    ("cu13-sm90", CUDA.replace("= 250", "= true"), "'size-budget-mb' must be a positive number of MB, not True", None),
    ("cu13-sm90", CUDA.replace("= 250", '= "big"'), "'size-budget-mb' must be a positive number of MB, not 'big'",
     None),
    ("cu13-sm90", CUDA + "[cmake]\nGGML_CUDA_FA_ALL_QUANTS = true\n",
     "'cmake.GGML_CUDA_FA_ALL_QUANTS' must be a string (CMake takes strings), not bool", None),
    ("cu13-sm90", CUDA + '[cmake]\nGGML_BACKEND_DL = "OFF"\n',
     "'cmake.GGML_BACKEND_DL' cannot change: every wheel builds with GGML_BACKEND_DL=ON", None),
    ("cu13-sm90", CUDA.replace('["90-real"]', '["91-real"]'),
     "'architectures' entry '91' is not an architecture this tool knows the CUDA needs of",
     f"known: {KNOWN}; add it to MIN_CUDA in recipe.py with the first CUDA that builds it"),
    ("cu11-sm120", CUDA.replace("cuda = 13", "cuda = 11").replace('"90-real"', '"120a-real"').replace('"cu13"', '"cu11"'),
     "'architectures' entry sm_120a cannot be built by CUDA 11 (it needs CUDA 12.8 or newer)",
     "raise 'cuda' to 12 or drop sm_120a"),
    ("cu13-sm120", CUDA.replace('"90-real"', '"120-real"'),
     "'architectures' entry '120-real' would be built as '120a-real': ggml-cuda's CMakeLists.txt turns every plain "
     "12X into 12Xa, whose SASS runs on compute capability 12.0 alone and whose PTX on no other GPU",
     "write '120a-real'; for the other Blackwell consumer GPUs list their own 12Xa-real too (e.g. 121a-real for GB10)"),
    ("cu13-sm121", CUDA.replace('"90-real"', '"121-virtual"'),
     "'architectures' entry '121-virtual' would be built as '121a-virtual': ggml-cuda's CMakeLists.txt turns every "
     "plain 12X into 12Xa, whose SASS runs on compute capability 12.1 alone and whose PTX on no other GPU",
     "write '121a-virtual'; for the other Blackwell consumer GPUs list their own 12Xa-real too (e.g. 121a-real for GB10)"),
    ("hopper", CUDA, "a cuda recipe's name must be cu<CUDA major>-sm<arch>, e.g. cu13-sm90",
     "rename the file to cu13-sm90.toml"),
    ("cu13-sm90", CUDA.replace("cuda = 13", "cuda = 12").replace('"cu13"', '"cu12"'),
     "the name says CUDA 13 but 'cuda' is 12", "rename the file to cu12-sm90.toml or set cuda = 13"),
    ("cu13-sm89", CUDA, "the name says sm_89 but the first of 'architectures' is sm_90",
     "rename the file to cu13-sm90.toml or list the sm_89 architecture first"),
    ("cu13-sm90", CUDA.replace('"cu13"', '"cu12"'), "'extra' must be 'cu13' for a CUDA 13 recipe, not 'cu12'",
     "the extra names the NVIDIA runtime wheels of that CUDA major (wheels/pyproject.toml)"),
    ("cpu", CPU + 'manylinux = "manylinux_2_28_x86_64"\n',
     "'manylinux' 'manylinux_2_28_x86_64' is not a manylinux tag auditwheel knows for x86_64",
     "write manylinux_<glibc major>_<minor> without the architecture, e.g. 'manylinux_2_28'"),
    ("cpu", CPU + 'manylinux = "manylinux2014"\n',
     "'manylinux' 'manylinux2014' is not a manylinux tag auditwheel knows for x86_64",
     "write manylinux_<glibc major>_<minor> without the architecture, e.g. 'manylinux_2_28'"),
    ("cpu", CPU + 'manylinux = "manylinux_2_99"\n',
     "'manylinux' 'manylinux_2_99' is not a manylinux tag auditwheel knows for x86_64",
     "write manylinux_<glibc major>_<minor> without the architecture, e.g. 'manylinux_2_28'"),
    ("cpu", CPU + "manylinux = 2.28\n", "'manylinux' must be a string such as 'manylinux_2_28', not float", None),
])
def test_bad_recipe_messages_in_full(tmp_path: Path, name: str, text: str, message: str, hint: str | None) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(ConfigError) as info:
        load_recipe(path)
    assert info.value.message == f"{path}: {message}"
    assert info.value.hint == hint


def test_the_glibc_floor_defaults_to_manylinux_2_28_and_every_repository_recipe_says_it() -> None:
    from hiraishin_build.recipe import Recipe

    assert Recipe("cpu", "d", "cpu").manylinux == "manylinux_2_28"
    assert Recipe("cpu", "d", "cpu").platform_tag == "manylinux_2_28_x86_64"
    for recipe in load_recipes(REPO / "recipes"):
        assert recipe.manylinux == "manylinux_2_28", recipe.name
        assert 'manylinux = "manylinux_2_28"' in (REPO / "recipes" / f"{recipe.name}.toml").read_text()


def test_a_recipe_may_promise_another_floor(tmp_path: Path) -> None:
    assert load_recipe(write(tmp_path, "cpu", CPU)).manylinux == "manylinux_2_28"  # unsaid: the default
    older = load_recipe(write(tmp_path, "cpu", CPU + 'manylinux = "manylinux_2_17"\n'))
    assert older.manylinux == "manylinux_2_17" and older.platform_tag == "manylinux_2_17_x86_64"


def test_an_unknown_recipe_name_in_full(tmp_path: Path) -> None:
    write(tmp_path, "cu13-sm90", CUDA)
    write(tmp_path, "cpu", CPU)
    (tmp_path / "upstream.toml").write_text("")  # the pin is not a recipe
    with pytest.raises(ConfigError) as close:
        find_recipe(tmp_path, "cu13-sm89")
    assert close.value.message == f"no recipe 'cu13-sm89' in {tmp_path}"
    assert close.value.hint == "did you mean 'cu13-sm90'? known recipes: cpu, cu13-sm90"
    with pytest.raises(ConfigError) as far:
        find_recipe(tmp_path, "rocm")
    assert far.value.message == f"no recipe 'rocm' in {tmp_path}"
    assert far.value.hint == "known recipes: cpu, cu13-sm90"
