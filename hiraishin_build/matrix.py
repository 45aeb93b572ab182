"""The CI wheel matrix: one job per recipe in ``recipes/``.

The recipes say what a wheel is (backend, CUDA major, architectures, extra);
``ci/matrix.toml`` says, per backend and CUDA major, where it is built (the
container image, pinned, and the runner labels) and where its smoke test runs.
This module joins the two, so the workflows never list the variants by hand:
the wheel workflow asks ``hiraishin matrix --format github`` for its matrix.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from . import tomlfile
from .errors import MatrixError
from .project import Project
from .recipe import Recipe, find_recipe, load_recipes, recipe_paths

CONFIG_FILE = Path("ci") / "matrix.toml"
_SETTING_KEYS = ("container", "cuda-version", "build-runs-on", "smoke-runs-on")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class CiSettings:
    """One table of ci/matrix.toml: ``[cpu]`` or ``[cuda.<major>]``."""

    table: str
    """Its name in the file, e.g. ``cuda.13``."""

    container: str
    """The build container image, pinned by exact tag or digest."""

    build_runs_on: tuple[str, ...]
    """Runner labels of the build job."""

    smoke_runs_on: tuple[str, ...]
    """Runner labels of the smoke job (CUDA recipes add their architecture label)."""

    cuda_version: str | None = None
    """The CUDA release in the container (cuda tables only), e.g. ``13.0.1``."""


@dataclass(frozen=True)
class CiConfig:
    path: Path
    cpu: CiSettings | None
    cuda: Mapping[int, CiSettings]


@dataclass(frozen=True)
class MatrixJob:
    """One wheel variant in CI: its build job and its smoke job."""

    recipe: str
    """The recipe name (recipes/<recipe>.toml), also the artifact and index name."""

    backend: str
    variant: str
    """The wheel's local version label, e.g. ``cu13.sm90``."""

    cuda_major: int | None
    cuda_version: str | None
    """The CUDA release the wheel is built with (that of the container)."""

    architectures: tuple[str, ...]
    """CMAKE_CUDA_ARCHITECTURES of the recipe."""

    extra: str | None
    """The extra that installs the CUDA runtime (``cu12``/``cu13``); None for cpu."""

    container: str
    build_runs_on: tuple[str, ...]
    smoke_runs_on: tuple[str, ...]
    smoke_label: str
    """The label that picks the smoke runner: the GPU architecture (``sm90``), or ``cpu``."""

    size_budget_mb: float

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, tuple):
                data[key] = list(value)
        return data


def pinned_image(image: str) -> bool:
    """Pinned by digest, or by an exact release tag: one with a version number in it
    (``22.04``, ``13.0.1-devel-ubuntu22.04``), not ``latest``, ``jammy`` or a bare major."""
    if _DIGEST.search(image):
        return True
    name, sep, tag = image.rpartition(":")
    if not sep or "/" in tag or not name:
        return False
    return re.search(r"\d+\.\d+", tag) is not None


def config_path(project: Project) -> Path:
    return project.root / CONFIG_FILE


def _labels(path: Path, table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = tomlfile.require(path, table, key, list, where)
    if not value or not all(isinstance(label, str) and _LABEL.match(label) for label in value):
        raise MatrixError(f"{path}: '{where}.{key}' must be a non-empty list of runner labels, not {value!r}",
                          hint='e.g. ["ubuntu-22.04"] or ["self-hosted", "linux", "x64", "gpu"]')
    return tuple(value)


def _settings(path: Path, table: Any, where: str, *, cuda_major: int | None) -> CiSettings:
    if not isinstance(table, dict):
        raise MatrixError(f"{path}: '{where}' must be a table ([{where}])")
    allowed = _SETTING_KEYS if cuda_major is not None else tuple(k for k in _SETTING_KEYS if k != "cuda-version")
    tomlfile.reject_unknown_keys(path, table, allowed, where)
    container = tomlfile.require(path, table, "container", str, where)
    if not pinned_image(container):
        raise MatrixError(
            f"{path}: '{where}.container' {container!r} is not pinned to an exact tag or digest",
            hint="name a full release tag (nvidia/cuda:13.0.1-devel-ubuntu22.04, ubuntu:22.04) or "
                 "append @sha256:<digest>; a moving tag such as 'latest' changes the build under you",
        )
    cuda_version = None
    if cuda_major is not None:
        cuda_version = tomlfile.require(path, table, "cuda-version", str, where)
        try:
            release = Version(cuda_version)
        except InvalidVersion:
            raise MatrixError(f"{path}: '{where}.cuda-version' {cuda_version!r} is not a version like 13.0.1") from None
        if release.major != cuda_major:
            raise MatrixError(f"{path}: '{where}.cuda-version' is {cuda_version}, not a CUDA {cuda_major} release",
                              hint=f"a [cuda.{cuda_major}] table names a CUDA {cuda_major}.x container")
        if cuda_version not in container:
            raise MatrixError(f"{path}: '{where}.container' {container!r} does not say CUDA {cuda_version} in its tag",
                              hint="keep 'cuda-version' and the image tag in step when either changes")
    return CiSettings(
        table=where,
        container=container,
        build_runs_on=_labels(path, table, "build-runs-on", where),
        smoke_runs_on=_labels(path, table, "smoke-runs-on", where),
        cuda_version=cuda_version,
    )


def load_config(path: Path) -> CiConfig:
    data = tomlfile.load(path)
    tomlfile.reject_unknown_keys(path, data, ["cpu", "cuda"])
    cpu = _settings(path, data["cpu"], "cpu", cuda_major=None) if "cpu" in data else None
    cuda_tables = data.get("cuda", {})
    if not isinstance(cuda_tables, dict):
        raise MatrixError(f"{path}: 'cuda' must hold one table per CUDA major ([cuda.13])")
    cuda: dict[int, CiSettings] = {}
    for key, table in cuda_tables.items():
        if not key.isdigit():
            raise MatrixError(f"{path}: [cuda.{key}] is not a CUDA major version", hint="name it [cuda.12], [cuda.13]")
        cuda[int(key)] = _settings(path, table, f"cuda.{key}", cuda_major=int(key))
    return CiConfig(path, cpu, cuda)


def _settings_for(recipe: Recipe, recipes_dir: Path, config: CiConfig) -> CiSettings:
    recipe_file = recipes_dir / f"{recipe.name}.toml"
    if recipe.backend == "cuda":
        settings = config.cuda.get(recipe.cuda_major or 0)
        table = f"cuda.{recipe.cuda_major}"
    else:
        settings, table = config.cpu, "cpu"
    if settings is None:
        raise MatrixError(
            f"{recipe_file}: no CI settings for this recipe: {config.path} has no [{table}] table",
            hint=f"add [{table}] to {config.path} with container, "
                 + ("cuda-version, " if recipe.backend == "cuda" else "")
                 + "build-runs-on and smoke-runs-on (see the tables already there)",
        )
    if recipe.backend == "cuda" and settings.cuda_version and recipe.min_cuda:
        have, need = Version(settings.cuda_version), recipe.min_cuda
        if (have.major, have.minor) < need:
            raise MatrixError(
                f"{recipe_file}: needs CUDA {need[0]}.{need[1]} or newer, but [{table}] in {config.path} "
                f"builds with CUDA {settings.cuda_version}",
                hint=f"move [{table}] to a container of CUDA {need[0]}.{need[1]} or newer",
            )
    return settings


def job_for(recipe: Recipe, settings: CiSettings) -> MatrixJob:
    if recipe.backend == "cuda":
        smoke_label = recipe.gpu_label
        smoke_runs_on = tuple(dict.fromkeys((*settings.smoke_runs_on, smoke_label)))
    else:
        smoke_label, smoke_runs_on = "cpu", settings.smoke_runs_on
    return MatrixJob(
        recipe=recipe.name,
        backend=recipe.backend,
        variant=recipe.variant,
        cuda_major=recipe.cuda_major,
        cuda_version=settings.cuda_version,
        architectures=recipe.architectures,
        extra=recipe.extra,
        container=settings.container,
        build_runs_on=settings.build_runs_on,
        smoke_runs_on=smoke_runs_on,
        smoke_label=smoke_label,
        size_budget_mb=recipe.size_budget_mb,
    )


def check_coverage(jobs: Sequence[MatrixJob], recipe_names: Iterable[str]) -> None:
    """Every recipe exactly once: a job for a recipe twice, or a recipe left out, is an error."""
    names = list(recipe_names)
    counts = Counter(job.recipe for job in jobs)
    twice = sorted(name for name, count in counts.items() if count > 1)
    if twice:
        raise MatrixError(f"the CI matrix has more than one job for recipe(s) {', '.join(twice)}",
                          hint="one job per recipes/*.toml file; derive the matrix with `hiraishin matrix`")
    missing = sorted(set(names) - set(counts))
    if missing:
        raise MatrixError(f"the CI matrix leaves out recipe(s) {', '.join(missing)}",
                          hint="every recipes/*.toml file gets a job; derive the matrix with `hiraishin matrix`")
    unknown = sorted(set(counts) - set(names))
    if unknown:
        raise MatrixError(f"the CI matrix has jobs for recipe(s) {', '.join(unknown)} that recipes/ does not hold")


def derive(recipes: Sequence[Recipe], recipes_dir: Path, config: CiConfig) -> tuple[MatrixJob, ...]:
    jobs = tuple(job_for(recipe, _settings_for(recipe, recipes_dir, config)) for recipe in recipes)
    check_coverage(jobs, [recipe.name for recipe in recipes])
    return jobs


def build_matrix(project: Project, only: Sequence[str] = ()) -> tuple[MatrixJob, ...]:
    """The matrix of every recipe in recipes/ (or of the recipes named in ``only``)."""
    config = load_config(config_path(project))
    recipes = load_recipes(project.recipes_dir)
    if not recipes:
        raise MatrixError(f"no recipes in {project.recipes_dir}", hint="the matrix has one job per recipes/*.toml")
    jobs = derive(recipes, project.recipes_dir, config)
    if not only:
        return jobs
    wanted = [find_recipe(project.recipes_dir, name).name for name in dict.fromkeys(only)]
    return tuple(job for job in jobs if job.recipe in wanted)


def github_json(jobs: Sequence[MatrixJob]) -> str:
    """The compact object ``fromJSON`` turns into ``strategy.matrix``: one ``include`` entry per job."""
    return json.dumps({"include": [job.as_dict() for job in jobs]}, separators=(",", ":"))


def readable_json(jobs: Sequence[MatrixJob], project: Project) -> str:
    data = {
        "kind": "hiraishin-ci-matrix",
        "config": str(CONFIG_FILE),
        "recipes": [p.name for p in recipe_paths(project.recipes_dir)],
        "jobs": [job.as_dict() for job in jobs],
    }
    return json.dumps(data, indent=2) + "\n"


def table_rows(jobs: Sequence[MatrixJob]) -> list[tuple[str, ...]]:
    return [
        (job.recipe, job.cuda_version or "-", " ".join(job.architectures) or "-", job.container,
         ",".join(job.build_runs_on), ",".join(job.smoke_runs_on))
        for job in jobs
    ]


TABLE_HEADER = ("recipe", "CUDA", "architectures", "build container", "build runner", "smoke runner")
