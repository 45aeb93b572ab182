"""The CI matrix: one job per recipe, derived from recipes/ and ci/matrix.toml."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from hiraishin_build import matrix
from hiraishin_build.errors import ConfigError, MatrixError
from hiraishin_build.project import Project
from hiraishin_build.recipe import load_recipes, recipe_paths

from ..helpers import hiraishin

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def project_copy(tmp_path: Path) -> Project:
    """recipes/ and ci/matrix.toml of this repository, in a place a test may break."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "recipes", root / "recipes")
    (root / "ci").mkdir(parents=True)
    shutil.copy(REPO / "ci" / "matrix.toml", root / "ci" / "matrix.toml")
    return Project(root)


def test_every_recipe_exactly_once() -> None:
    project = Project(REPO)
    jobs = matrix.build_matrix(project)
    names = [path.stem for path in recipe_paths(project.recipes_dir)]
    assert sorted(job.recipe for job in jobs) == sorted(names)
    assert len(jobs) == len(set(job.recipe for job in jobs)) == len(names)
    assert "upstream" not in names and "cpu" in names


def test_jobs_carry_the_recipe_and_its_ci_settings() -> None:
    jobs = {job.recipe: job for job in matrix.build_matrix(Project(REPO))}
    cpu = jobs["cpu"]
    assert cpu.backend == "cpu" and cpu.extra is None and cpu.architectures == ()
    assert cpu.smoke_runs_on == ("ubuntu-22.04",) and "self-hosted" not in cpu.smoke_runs_on
    recipes = {recipe.name: recipe for recipe in load_recipes(REPO / "recipes")}
    for name, job in jobs.items():
        if job.backend != "cuda":
            continue
        recipe = recipes[name]
        assert job.cuda_major == recipe.cuda_major and job.architectures == recipe.architectures
        assert job.extra == f"cu{recipe.cuda_major}"
        assert job.container.startswith(f"nvidia/cuda:{recipe.cuda_major}.") and "devel" in job.container
        assert job.cuda_version and job.container.startswith(f"nvidia/cuda:{job.cuda_version}-")
        # The smoke job goes to a self-hosted GPU runner labelled with the recipe's architecture.
        assert job.smoke_runs_on[0] == "self-hosted" and "gpu" in job.smoke_runs_on
        assert job.smoke_label == f"sm{recipe.compute_capabilities[0]}" == job.smoke_runs_on[-1]
    assert jobs["cu12-sm120"].smoke_label == "sm120" and jobs["cu13-sm86"].smoke_label == "sm86"


def test_images_are_pinned() -> None:
    for job in matrix.build_matrix(Project(REPO)):
        assert matrix.pinned_image(job.container), job.container
    assert matrix.pinned_image("nvidia/cuda:13.0.1-devel-ubuntu22.04")
    assert matrix.pinned_image("ubuntu@sha256:" + "0" * 64)
    for moving in ("ubuntu", "ubuntu:latest", "ubuntu:jammy", "nvidia/cuda:13-devel", "registry:5000/image"):
        assert not matrix.pinned_image(moving), moving


def test_github_format_round_trips() -> None:
    jobs = matrix.build_matrix(Project(REPO))
    text = matrix.github_json(jobs)
    assert "\n" not in text and " " not in text  # one line, for $GITHUB_OUTPUT
    data = json.loads(text)
    assert list(data) == ["include"]
    assert data["include"] == [job.as_dict() for job in jobs]
    assert all(isinstance(entry["smoke_runs_on"], list) for entry in data["include"])


def test_cli_formats(tmp_path: Path) -> None:
    github = hiraishin("matrix", "--format", "github", cwd=REPO)
    assert github.returncode == 0, github.stderr
    included = json.loads(github.stdout)["include"]
    readable = hiraishin("matrix", "--format", "json", cwd=REPO)
    assert readable.returncode == 0
    data = json.loads(readable.stdout)
    assert data["jobs"] == included and data["config"] == "ci/matrix.toml"
    table = hiraishin("matrix", cwd=REPO)
    assert table.returncode == 0 and all(entry["recipe"] in table.stdout for entry in included)
    one = hiraishin("matrix", "--format", "github", "--recipe", "cpu", cwd=REPO)
    assert [entry["recipe"] for entry in json.loads(one.stdout)["include"]] == ["cpu"]


def test_cli_refuses_unknown_format_and_recipe() -> None:
    unknown = hiraishin("matrix", "--format", "yaml", cwd=REPO)
    assert unknown.returncode == 2
    assert "'yaml' is not one of 'table', 'json', 'github'" in unknown.stderr
    typo = hiraishin("matrix", "--recipe", "cu13-sm91", cwd=REPO)
    assert typo.returncode == 2 and "did you mean 'cu13-sm90'" in typo.stderr and "Traceback" not in typo.stderr


def test_a_new_recipe_without_ci_settings_is_named(project_copy: Project) -> None:
    (project_copy.recipes_dir / "cu14-sm120.toml").write_text(
        'description = "CUDA 14"\nbackend = "cuda"\ncuda = 14\narchitectures = ["120-real"]\n'
        'extra = "cu14"\nsize-budget-mb = 250\n'
    )
    with pytest.raises(MatrixError) as raised:
        matrix.build_matrix(project_copy)
    message = str(raised.value)
    assert "cu14-sm120.toml" in message and "[cuda.14]" in message and "matrix.toml" in message
    assert raised.value.exit_code == 2
    result = hiraishin("matrix", "--format", "github", cwd=project_copy.root)
    assert result.returncode == 2 and "no CI settings for this recipe" in result.stderr


def test_a_new_recipe_of_a_known_kind_joins_the_matrix(project_copy: Project) -> None:
    shutil.copy(project_copy.recipes_dir / "cu13-sm89.toml", project_copy.recipes_dir / "cu13-sm87.toml")
    text = (project_copy.recipes_dir / "cu13-sm87.toml").read_text().replace('"89-real"', '"87-real"')
    (project_copy.recipes_dir / "cu13-sm87.toml").write_text(text)
    jobs = {job.recipe: job for job in matrix.build_matrix(project_copy)}
    assert len(jobs) == len(recipe_paths(project_copy.recipes_dir))
    assert jobs["cu13-sm87"].smoke_label == "sm87"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('container = "nvidia/cuda:13.0.1-devel-ubuntu22.04"\n', "", "missing required key 'cuda.13.container'"),
        ('"nvidia/cuda:13.0.1-devel-ubuntu22.04"', '"nvidia/cuda:latest"', "not pinned to an exact tag"),
        ('cuda-version = "13.0.1"', 'cuda-version = "12.9.1"', "not a CUDA 13 release"),
        ('cuda-version = "13.0.1"', 'cuda-version = "13.0.2"', "does not say CUDA 13.0.2 in its tag"),
        ('[cuda.13]\ncontainer', '[cuda.13]\nimage = "x"\ncontainer', "unknown key 'cuda.13.image'"),
        ('build-runs-on = ["ubuntu-22.04"]\nsmoke-runs-on = ["ubuntu-22.04"]',
         'build-runs-on = []\nsmoke-runs-on = ["ubuntu-22.04"]', "non-empty list of runner labels"),
        ('[cpu]', '[cpu]\ncuda-version = "12.9.1"', "unknown key 'cpu.cuda-version'"),
    ],
)
def test_malformed_ci_settings_name_the_file_and_key(project_copy: Project, old: str, new: str,
                                                     expected: str) -> None:
    path = project_copy.root / "ci" / "matrix.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ConfigError) as raised:
        matrix.build_matrix(project_copy)
    assert expected in str(raised.value) and str(path) in str(raised.value)


def test_cpu_table_missing(project_copy: Project) -> None:
    path = project_copy.root / "ci" / "matrix.toml"
    text = path.read_text()
    start = text.index("[cpu]")
    path.write_text(text[:start] + text[text.index("[cuda.12]"):])
    with pytest.raises(MatrixError, match=r"cpu\.toml: no CI settings .* no \[cpu\] table"):
        matrix.build_matrix(project_copy)


def test_container_too_old_for_an_architecture(project_copy: Project) -> None:
    path = project_copy.root / "ci" / "matrix.toml"
    path.write_text(path.read_text().replace("12.9.1", "12.4.1"))
    with pytest.raises(MatrixError) as raised:
        matrix.build_matrix(project_copy)
    assert "cu12-sm120.toml: needs CUDA 12.8 or newer" in str(raised.value) and "12.4.1" in str(raised.value)


def test_coverage_refuses_duplicates_and_gaps() -> None:
    jobs = list(matrix.build_matrix(Project(REPO)))
    names = [job.recipe for job in jobs]
    matrix.check_coverage(jobs, names)
    with pytest.raises(MatrixError, match="more than one job for recipe.*cu13-sm90"):
        matrix.check_coverage([*jobs, next(job for job in jobs if job.recipe == "cu13-sm90")], names)
    with pytest.raises(MatrixError, match="leaves out recipe.*cpu"):
        matrix.check_coverage([job for job in jobs if job.recipe != "cpu"], names)
    with pytest.raises(MatrixError, match="that recipes/ does not hold"):
        matrix.check_coverage([*jobs, replace(jobs[0], recipe="cu13-sm100")], names)
