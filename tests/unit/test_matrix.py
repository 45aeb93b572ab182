"""The CI matrix: one job per recipe, derived from recipes/ and ci/matrix.toml."""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from hiraishin_build import matrix
from hiraishin_build.errors import ConfigError, MatrixError
from hiraishin_build.project import Project
from hiraishin_build.recipe import Recipe, load_recipes, recipe_paths

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
        assert job.smoke_label == recipe.gpu_label == job.smoke_runs_on[-1]
    assert jobs["cu12-sm120"].smoke_label == "sm120" and jobs["cu13-sm86"].smoke_label == "sm86"


def test_every_wheel_is_built_on_the_glibc_its_recipe_promises() -> None:
    """The recipes promise manylinux_2_28; each build image is RHEL 8-based, whose glibc is 2.28."""
    recipes = {recipe.name: recipe for recipe in load_recipes(REPO / "recipes")}
    for job in matrix.build_matrix(Project(REPO)):
        assert recipes[job.recipe].manylinux == "manylinux_2_28", job.recipe
        if job.backend == "cuda":
            assert job.container.endswith("-devel-rockylinux8"), job.container
        else:
            assert job.container.startswith("quay.io/pypa/manylinux_2_28_x86_64:"), job.container


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
        'description = "CUDA 14"\nbackend = "cuda"\ncuda = 14\narchitectures = ["120a-real"]\n'
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
        ('container = "nvidia/cuda:13.0.1-devel-rockylinux8"\n', "", "missing required key 'cuda.13.container'"),
        ('"nvidia/cuda:13.0.1-devel-rockylinux8"', '"nvidia/cuda:latest"', "not pinned to an exact tag"),
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
    assert "cu12-sm120.toml: needs CUDA 12.9 or newer" in str(raised.value) and "12.4.1" in str(raised.value)


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


MATRIX = '''[cpu]
container = "ubuntu:22.04"
build-runs-on = ["ubuntu-22.04"]
smoke-runs-on = ["ubuntu-22.04"]

[cuda.13]
container = "nvidia/cuda:13.0.1-devel-ubuntu22.04"
cuda-version = "13.0.1"
build-runs-on = ["ubuntu-22.04"]
smoke-runs-on = ["self-hosted", "gpu"]
'''
GPU = matrix.CiSettings("cuda.13", "nvidia/cuda:13.0.1-devel-ubuntu22.04", ("ubuntu-22.04",), ("self-hosted", "gpu"),
                        "13.0.1")
CPU = matrix.CiSettings("cpu", "ubuntu:22.04", ("ubuntu-22.04",), ("ubuntu-22.04",))


def _recipe(name: str) -> Recipe:
    if name.startswith("cpu"):
        return Recipe(name, "d", "cpu", size_budget_mb=15.0)
    major, sm = name[2:].split("-sm")
    if sm.startswith("12"):  # Blackwell as ggml builds it (recipe.py: _check_not_rewritten)
        return Recipe(name, "d", "cuda", int(major), (f"{sm}a-real", "121a-real"), f"cu{major}", size_budget_mb=120.0)
    return Recipe(name, "d", "cuda", int(major), (f"{sm}-real", f"{sm}-virtual"), f"cu{major}", size_budget_mb=120.0)


def test_a_config_is_read_in_full(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(MATRIX)
    config = matrix.load_config(path)
    assert config == matrix.CiConfig(path, CPU, {13: GPU})
    assert config.cpu is not None and config.cpu.cuda_version is None  # the dataclass default too
    assert matrix.CiSettings("cpu", "ubuntu:22.04", ("a",), ("b",)).cuda_version is None


def test_settings_config_and_jobs_cannot_change() -> None:
    job = matrix.job_for(_recipe("cpu"), CPU)
    for value, field in ((CPU, "container"), (matrix.CiConfig(Path("m.toml"), CPU, {}), "cpu"), (job, "recipe")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, None)


def test_jobs_in_full() -> None:
    assert matrix.job_for(_recipe("cpu"), CPU) == matrix.MatrixJob(
        recipe="cpu", backend="cpu", variant="cpu", cuda_major=None, cuda_version=None, architectures=(), extra=None,
        container="ubuntu:22.04", build_runs_on=("ubuntu-22.04",), smoke_runs_on=("ubuntu-22.04",),
        smoke_label="cpu", size_budget_mb=15.0)
    assert matrix.job_for(_recipe("cu13-sm90"), GPU) == matrix.MatrixJob(
        recipe="cu13-sm90", backend="cuda", variant="cu13.sm90", cuda_major=13, cuda_version="13.0.1",
        architectures=("90-real", "90-virtual"), extra="cu13", container="nvidia/cuda:13.0.1-devel-ubuntu22.04",
        build_runs_on=("ubuntu-22.04",), smoke_runs_on=("self-hosted", "gpu", "sm90"), smoke_label="sm90",
        size_budget_mb=120.0)


def test_table_rows_and_header_in_full() -> None:
    from hiraishin_build import log

    jobs = [matrix.job_for(_recipe("cpu"), CPU), matrix.job_for(_recipe("cu13-sm90"), GPU)]
    assert matrix.table_rows(jobs) == [
        ("cpu", "-", "-", "ubuntu:22.04", "ubuntu-22.04", "ubuntu-22.04"),
        ("cu13-sm90", "13.0.1", "90-real 90-virtual", "nvidia/cuda:13.0.1-devel-ubuntu22.04", "ubuntu-22.04",
         "self-hosted,gpu,sm90"),
    ]
    header = log.table_lines(matrix.table_rows(jobs), header=matrix.TABLE_HEADER)[0]
    several = dataclasses.replace(CPU, build_runs_on=("self-hosted", "x64"), smoke_runs_on=("self-hosted", "cpu"))
    assert matrix.table_rows([matrix.job_for(_recipe("cpu"), several)])[0][4:] == ("self-hosted,x64", "self-hosted,cpu")
    assert [cell.strip() for cell in header.split("  ") if cell.strip()] == [
        "recipe", "CUDA", "architectures", "build container", "build runner", "smoke runner"]


def test_readable_json_in_full(project_copy: Project) -> None:
    jobs = matrix.build_matrix(project_copy)
    text = matrix.readable_json(jobs, project_copy)
    assert json.loads(text) == {
        "kind": "hiraishin-ci-matrix", "config": "ci/matrix.toml",
        "recipes": [path.name for path in recipe_paths(project_copy.recipes_dir)],
        "jobs": [job.as_dict() for job in jobs],
    }
    assert "upstream.toml" not in json.loads(text)["recipes"]
    assert text.splitlines()[1] == '  "kind": "hiraishin-ci-matrix",' and text.endswith("}\n")


def test_only_exact_release_tags_and_digests_count_as_pinned() -> None:
    # A registry with a port: what follows the last colon is a path, not a tag, even with a version in it.
    assert not matrix.pinned_image("registry.local:5000/nvidia/cuda-13.0")
    assert matrix.pinned_image("registry.local:5000/nvidia/cuda:13.0.1-devel-ubuntu22.04")
    assert not matrix.pinned_image(":13.0.1")


def _config_error(tmp_path: Path, text: str) -> MatrixError:
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    with pytest.raises(MatrixError) as raised:
        matrix.load_config(path)
    return raised.value


@pytest.mark.parametrize(("old", "new", "message", "hint"), [
    ('build-runs-on = ["ubuntu-22.04"]', 'build-runs-on = ["ubuntu 22.04"]',
     "'cpu.build-runs-on' must be a non-empty list of runner labels, not ['ubuntu 22.04']",
     'e.g. ["ubuntu-22.04"] or ["self-hosted", "linux", "x64", "gpu"]'),
    ('build-runs-on = ["ubuntu-22.04"]', "build-runs-on = [22]",
     "'cpu.build-runs-on' must be a non-empty list of runner labels, not [22]",
     'e.g. ["ubuntu-22.04"] or ["self-hosted", "linux", "x64", "gpu"]'),
    ('smoke-runs-on = ["self-hosted", "gpu"]', "smoke-runs-on = []",
     "'cuda.13.smoke-runs-on' must be a non-empty list of runner labels, not []",
     'e.g. ["ubuntu-22.04"] or ["self-hosted", "linux", "x64", "gpu"]'),
    ('[cpu]\ncontainer = "ubuntu:22.04"\nbuild-runs-on = ["ubuntu-22.04"]\nsmoke-runs-on = ["ubuntu-22.04"]\n',
     'cpu = "ubuntu:22.04"\n', "'cpu' must be a table ([cpu])", None),
    ('"ubuntu:22.04"', '"ubuntu:jammy"', "'cpu.container' 'ubuntu:jammy' is not pinned to an exact tag or digest",
     "name a full release tag (nvidia/cuda:13.0.1-devel-ubuntu22.04, ubuntu:22.04) or append @sha256:<digest>; "
     "a moving tag such as 'latest' changes the build under you"),
    ('cuda-version = "13.0.1"', 'cuda-version = "13.x"', "'cuda.13.cuda-version' '13.x' is not a version like 13.0.1",
     None),
    ('cuda-version = "13.0.1"', 'cuda-version = "12.9.1"', "'cuda.13.cuda-version' is 12.9.1, not a CUDA 13 release",
     "a [cuda.13] table names a CUDA 13.x container"),
    ('cuda-version = "13.0.1"', 'cuda-version = "13.0.2"',
     "'cuda.13.container' 'nvidia/cuda:13.0.1-devel-ubuntu22.04' does not say CUDA 13.0.2 in its tag",
     "keep 'cuda-version' and the image tag in step when either changes"),
    (MATRIX, "cuda = 13\n" + MATRIX[:MATRIX.index("[cuda.13]")], "'cuda' must hold one table per CUDA major ([cuda.13])",
     None),
    ("[cuda.13]", "[cuda.thirteen]", "[cuda.thirteen] is not a CUDA major version", "name it [cuda.12], [cuda.13]"),
])
def test_malformed_ci_settings_in_full(tmp_path: Path, old: str, new: str, message: str, hint: str | None) -> None:
    assert old in MATRIX
    error = _config_error(tmp_path, MATRIX.replace(old, new, 1))
    assert error.message == f"{tmp_path / 'matrix.toml'}: {message}"
    assert error.hint == hint


@pytest.mark.parametrize(("recipe", "config", "table", "settings"), [
    ("cu12-sm90", matrix.CiConfig(Path("ci/matrix.toml"), CPU, {13: GPU}), "cuda.12",
     "container, cuda-version, build-runs-on and smoke-runs-on"),
    ("cpu", matrix.CiConfig(Path("ci/matrix.toml"), None, {13: GPU}), "cpu",
     "container, build-runs-on and smoke-runs-on"),
])
def test_a_recipe_without_ci_settings_in_full(tmp_path: Path, recipe: str, config: matrix.CiConfig, table: str,
                                              settings: str) -> None:
    with pytest.raises(MatrixError) as raised:
        matrix.derive([_recipe(recipe)], tmp_path, config)
    assert raised.value.message == (f"{tmp_path / recipe}.toml: no CI settings for this recipe: ci/matrix.toml has no "
                                    f"[{table}] table")
    assert raised.value.hint == f"add [{table}] to ci/matrix.toml with {settings} (see the tables already there)"


def test_a_container_too_old_for_an_architecture_in_full(tmp_path: Path) -> None:
    old = dataclasses.replace(GPU, table="cuda.12", container="nvidia/cuda:12.4.1-devel-ubuntu22.04",
                              cuda_version="12.4.1")
    config = matrix.CiConfig(Path("ci/matrix.toml"), CPU, {12: old})
    with pytest.raises(MatrixError) as raised:
        matrix.derive([_recipe("cu12-sm120")], tmp_path, config)
    # sm_121a (GB10) needs 12.9; sm_120a alone would build with 12.8.
    assert raised.value.message == (f"{tmp_path}/cu12-sm120.toml: needs CUDA 12.9 or newer, but [cuda.12] in "
                                    "ci/matrix.toml builds with CUDA 12.4.1")
    assert raised.value.hint == "move [cuda.12] to a container of CUDA 12.9 or newer"
    with pytest.raises(MatrixError, match="needs CUDA 12.9 or newer"):
        matrix.derive([_recipe("cu12-sm120")], tmp_path, matrix.CiConfig(
            Path("ci/matrix.toml"), CPU, {12: dataclasses.replace(old, cuda_version="12.8.1")}))
    # 12.9 itself is new enough; a cuda table made in code without a CUDA version is not checked.
    assert matrix.derive([_recipe("cu12-sm120")], tmp_path, matrix.CiConfig(
        Path("ci/matrix.toml"), CPU, {12: dataclasses.replace(old, cuda_version="12.9.0")}))[0].cuda_version == "12.9.0"
    unversioned = matrix.CiConfig(Path("ci/matrix.toml"), CPU, {12: dataclasses.replace(old, cuda_version=None)})
    assert matrix.derive([_recipe("cu12-sm120")], tmp_path, unversioned)[0].cuda_version is None


def test_coverage_messages_in_full() -> None:
    jobs = [matrix.job_for(_recipe(name), GPU if name.startswith("cu") else CPU)
            for name in ("cpu", "cu13-sm86", "cu13-sm90")]
    names = ["cpu", "cu13-sm86", "cu13-sm90"]
    with pytest.raises(MatrixError) as twice:
        matrix.check_coverage([*jobs, *jobs[1:]], names)
    assert twice.value.message == "the CI matrix has more than one job for recipe(s) cu13-sm86, cu13-sm90"
    assert twice.value.hint == "one job per recipes/*.toml file; derive the matrix with `hiraishin matrix`"
    with pytest.raises(MatrixError) as missing:
        matrix.check_coverage(jobs[:1], names)
    assert missing.value.message == "the CI matrix leaves out recipe(s) cu13-sm86, cu13-sm90"
    assert missing.value.hint == "every recipes/*.toml file gets a job; derive the matrix with `hiraishin matrix`"
    with pytest.raises(MatrixError) as unknown:
        matrix.check_coverage(jobs, names[:1])
    assert unknown.value.message == ("the CI matrix has jobs for recipe(s) cu13-sm86, cu13-sm90 that recipes/ does "
                                     "not hold")
    assert unknown.value.hint is None


def test_no_recipes_in_full(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "upstream.toml").write_text("")  # the pin alone: no recipe
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "matrix.toml").write_text(MATRIX)
    with pytest.raises(MatrixError) as raised:
        matrix.build_matrix(Project(tmp_path))
    assert raised.value.message == f"no recipes in {tmp_path / 'recipes'}"
    assert raised.value.hint == "the matrix has one job per recipes/*.toml"
