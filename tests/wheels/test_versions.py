"""One version story: `hiraishin-llama --version` and `hiraishin-replay --version`
both report the wheel's version (with its variant label) and the patched commit."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hiraishin_llama import info, runtime

REPO = Path(__file__).resolve().parents[2]
PATCHED = "0123456789abcdef0123456789abcdef01234567"
UPSTREAM = "69d8e4be47243e83b3d0d71e932bc7aa61c644dc"
PATCH_SHA = "f" * 64


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime.build_info.cache_clear()
    monkeypatch.setattr(runtime, "build_info", lambda: {
        "version": "9079.6+cu13.sm90", "recipe": "cu13-sm90", "patched_commit": PATCHED,
        "upstream": {"url": "https://github.com/TheTom/llama-cpp-turboquant", "ref": "b9079", "commit": UPSTREAM},
        "patches": [{"name": "a.patch", "subject": "ggml-cuda: the switch", "sha256": PATCH_SHA}]})
    monkeypatch.setattr(runtime, "gpus", lambda: [])
    monkeypatch.setattr(runtime, "environment_warnings", lambda: [])


def test_version_names_the_patched_commit_and_labels_the_file_hashes(built: None,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    info.main(["--version"])
    out = capsys.readouterr().out
    assert f"commit:   {PATCHED} (upstream {UPSTREAM[:12]} + 1 patch)" in out
    # The 12 hex digits beside a patch are its file's sha256, not a commit: the line says so.
    assert "patch:    file sha256 ffffffffffff  ggml-cuda: the switch" in out


def configure_replay(tmp_path: Path, recipe: str | None) -> tuple[dict, str]:
    """Configure the replay tool as the wheel project does, with a stand-in llama target; its compile command
    and what CMake printed."""
    if shutil.which("cmake") is None or shutil.which("c++") is None:
        pytest.skip("cmake and a C++ compiler are needed to configure the replay tool")
    stack = tmp_path / "stack.json"
    # A fork's release name whose number is not the build number: the commit count
    # `hiraishin sdist` records is what llama.cpp's --version must show.
    stack.write_text(json.dumps({"version": "10400.6", "patched_commit": PATCHED,
                                 "upstream": {"ref": "b10018-1.2.0", "build_number": 10400}}))
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(f"""cmake_minimum_required(VERSION 3.21)
project(replay_version LANGUAGES CXX)
add_library(llama INTERFACE)
list(APPEND CMAKE_MODULE_PATH "{REPO / 'wheels' / 'cmake'}")
include(HiraishinVersion)
hiraishin_read_stack("{stack}" "{recipe or ''}")
message(STATUS "LLAMA_BUILD_NUMBER=${{LLAMA_BUILD_NUMBER}}")
add_subdirectory("{REPO / 'wheels' / 'src' / 'replay'}" replay)
""")
    build = tmp_path / "build"
    completed = subprocess.run(["cmake", "-S", str(project), "-B", str(build), "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"],
                               capture_output=True, text=True)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    commands = json.loads((build / "compile_commands.json").read_text())
    return next(c for c in commands if c["file"].endswith("hiraishin_replay.cpp")), completed.stdout


def test_the_replay_tool_is_compiled_with_the_wheels_version_and_commit(tmp_path: Path) -> None:
    from hiraishin_build.recipe import find_recipe
    from hiraishin_build.repair import local_version

    compiled, _ = configure_replay(tmp_path, "cu13-sm90")
    command = compiled["command"]
    # The version the repaired wheel gets, from the same public version and recipe.
    wheel_version = local_version("10400.6", find_recipe(REPO / "recipes", "cu13-sm90").variant)
    assert wheel_version == "10400.6+cu13.sm90"
    assert f'-DHIRAISHIN_VERSION=\\"{wheel_version}\\"' in command
    assert f'-DHIRAISHIN_PATCHED_COMMIT=\\"{PATCHED}\\"' in command


def test_a_build_without_a_recipe_carries_the_public_version(tmp_path: Path) -> None:
    assert '-DHIRAISHIN_VERSION=\\"10400.6\\"' in configure_replay(tmp_path, None)[0]["command"]


def test_llama_build_number_is_the_recorded_commit_count_not_the_tags_number(tmp_path: Path) -> None:
    _, printed = configure_replay(tmp_path, None)
    assert "LLAMA_BUILD_NUMBER=10400" in printed


def test_the_replay_source_holds_no_version_of_its_own() -> None:
    source = (REPO / "wheels" / "src" / "replay" / "hiraishin_replay.cpp").read_text()
    assert re.search(r"kToolVersion\s*=\s*HIRAISHIN_VERSION;", source)
    assert '"0.1.0"' not in source
