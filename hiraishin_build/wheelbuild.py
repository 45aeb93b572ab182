"""Build a wheel from the sdist with a recipe, through scikit-build-core, then repair and label it."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from . import doctor, glibcfloor, proc, repair, timeouts
from .errors import PathError, WheelBuildError
from .fsutil import writable_directory
from .log import get_logger
from .recipe import Recipe


@dataclass(frozen=True)
class WheelResult:
    path: Path
    log: Path
    size: int
    version: str = ""
    """With the recipe's local label, e.g. 9079.2+cu13.sm90."""

    tags: tuple[str, ...] = ()
    unrepaired: Path | None = None
    """What pip wheel wrote, before auditwheel and the label."""


def config_settings(recipe: Recipe, build_dir: Path, extra_defines: Mapping[str, str] | None = None) -> list[str]:
    """The -C options that hand the recipe (and any extra CMake defines) to scikit-build-core."""
    clashing = sorted(set(extra_defines or {}) & set(recipe.cmake_defines()))
    if clashing:
        raise WheelBuildError(
            f"--cmake-define {', '.join(clashing)} would override what recipe {recipe.name} sets",
            hint=f"change recipes/{recipe.name}.toml, or copy it to a new recipe",
        )
    settings = [f"build-dir={build_dir}"]
    defines = {**recipe.cmake_defines(), **(extra_defines or {})}
    settings += [f"cmake.define.{key}={value}" for key, value in sorted(defines.items())]
    return settings


def pip_wheel_command(sdist: Path, recipe: Recipe, out_dir: Path, build_dir: Path, *, isolated: bool,
                      extra_defines: Mapping[str, str] | None = None) -> list[str]:
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out_dir), "-v"]
    if not isolated:
        command.append("--no-build-isolation")
    for setting in config_settings(recipe, build_dir, extra_defines):
        command += ["-C", setting]
    return [*command, str(sdist)]


def check_output_paths(out_dir: Path, build_dir: Path) -> None:
    """Refuse, before anything is built, a wheel directory or build directory this process cannot write:
    the build takes many minutes, and would otherwise fail only at its end."""
    try:
        writable_directory(out_dir, what="the wheel's output directory", given_as="--sdist")
    except PathError as error:
        raise PathError(error.message, hint="the wheels go beside the sdist, in wheels/<recipe>/: copy the sdist "
                                            "to a directory you can write to and pass that to --sdist") from None
    try:
        writable_directory(build_dir, what="the build directory", given_as="--project")
    except PathError as error:
        raise PathError(error.message, hint="it is build/<recipe> in the project: build in a checkout you can "
                                            "write to (--project DIR)") from None


def rerun_note(sdist: Path, build_dir: Path) -> str:
    """What a re-run does after the build was stopped on the way, for the line that says it stopped.

    Found by stopping builds, not assumed: scikit-build-core keeps ``build_dir``
    but configures CMake afresh when the source directory (or the isolated
    build environment) differs from the last run's, and ninja compiles again
    every step whose command changed. pip unpacks an sdist tarball into a new
    temporary directory each time, so every command names other paths and
    nothing is reused (not by ccache either: its hashes hold the paths). An
    unpacked sdist stays where it is, so the commands stay the same and ninja
    compiles only the steps it had not finished.
    """
    if sdist.is_dir():
        return (f"a re-run with --sdist {sdist} resumes: CMake configures again, then ninja compiles only the steps "
                f"it had not finished in {build_dir}")
    return (f"a re-run starts over: pip unpacks {sdist.name} into a new temporary directory each time, so every step "
            f"is compiled again; to make a build that a re-run resumes, unpack the sdist once and pass that "
            f"directory (--sdist DIR)")


SOURCE_STAMP = ".hiraishin-source"
"""In a build directory: the fingerprint of the unpacked sdist it was last built from."""


def source_fingerprint(source_dir: Path) -> str:
    """sha256 over every file of an unpacked sdist, by relative path and content."""
    digest = hashlib.sha256()
    for path in sorted(p for p in source_dir.rglob("*") if p.is_file()):
        digest.update(path.relative_to(source_dir).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def prepare_build_dir(source_dir: Path, build_dir: Path) -> None:
    """Keep BUILD_DIR for an incremental build only if it was built from these very sources.

    An sdist is reproducible: every file carries the same fixed mtime (1980), so when another sdist of the
    same version is unpacked to the same directory (a wheel with a planted fault, a stack edited without a
    new revision), ninja sees no source newer than its objects and links the old ones into the new wheel.
    A build directory whose stamp names other sources is removed first (ccache keeps the rebuild short); one
    with the same sources, or without a stamp but with nothing in it, is kept, so an interrupted build resumes.
    """
    fingerprint = source_fingerprint(source_dir)
    stamp = build_dir / SOURCE_STAMP
    if build_dir.is_dir() and any(build_dir.iterdir()):
        previous = stamp.read_text(encoding="utf-8").strip() if stamp.is_file() else None
        if previous != fingerprint:
            get_logger().info("removing %s: it was built from %s, not from %s (fingerprint %s), and ninja "
                              "would keep its objects (sdist files all date from 1980)", build_dir,
                              "other sources" if previous else "sources it did not record",
                              source_dir, fingerprint[:12])
            shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fingerprint + "\n", encoding="utf-8")


def build_wheel(
    sdist: Path,
    recipe: Recipe,
    out_dir: Path,
    *,
    build_dir: Path,
    isolated: bool = True,
    jobs: int | None = None,
    extra_defines: Mapping[str, str] | None = None,
    toolchain: doctor.Environment | None = None,
    manylinux: str = "auto",
) -> WheelResult:
    """``toolchain``: what was detected on this machine, if the caller did already (it is checked either way)."""
    if sdist.is_dir():
        # An unpacked sdist builds in place, so its build directory can be rebuilt incrementally later.
        if not (sdist / "pyproject.toml").is_file():
            raise WheelBuildError(f"{sdist} is a directory without pyproject.toml, not an unpacked sdist",
                                  hint="pass the .tar.gz from `hiraishin sdist`, or the directory it unpacks to")
    elif not sdist.is_file():
        raise WheelBuildError(f"sdist {sdist} does not exist", hint="make one with `hiraishin sdist`")
    # Refused before a long build: no compiler, the wrong nvcc, a toolkit without cuBLAS (exit 11), a place it
    # cannot write to, a time limit set to something that is not a number of seconds.
    doctor.require_buildable(recipe, toolchain or doctor.detect())
    # The floor repair holds the wheel to (``manylinux``: glibcfloor.FLOOR_MODES), said before the long build.
    floor = glibcfloor.resolve_floor(recipe.manylinux, recipe.name, manylinux)
    if floor.note:
        get_logger().warning("%s", floor.note)
    check_output_paths(out_dir, build_dir)
    timeouts.check_settings(timeouts.BUILD, timeouts.COMMAND)
    if sdist.is_dir():
        prepare_build_dir(sdist, build_dir)
    else:
        # pip unpacks a tarball into a new directory each time: CMake configures afresh and compiles all of it,
        # so the build directory no longer holds the objects of the sources its stamp names
        (build_dir / SOURCE_STAMP).unlink(missing_ok=True)
    final_dir, out_dir = out_dir, out_dir / "unrepaired"
    out_dir.mkdir(parents=True, exist_ok=True)
    before = set(out_dir.glob("*.whl"))
    env = {"CMAKE_BUILD_PARALLEL_LEVEL": str(jobs or os.cpu_count() or 2)}
    log = final_dir / f"build-{recipe.name}.log"
    get_logger().info("building the %s wheel from %s (log: %s)", recipe.name, sdist.name, log)
    proc.run_logged(
        pip_wheel_command(sdist, recipe, out_dir, build_dir, isolated=isolated, extra_defines=extra_defines),
        log_path=log,
        env=env,
        what=f"building the {recipe.name} wheel",
        hint="read the full log; `hiraishin doctor` checks the toolchain" if recipe.backend == "cuda" else None,
        limit=timeouts.BUILD,
        if_stopped=rerun_note(sdist, build_dir),
    )
    built = sorted(set(out_dir.glob("hiraishin_llama-*.whl")) - before) or sorted(out_dir.glob("hiraishin_llama-*.whl"))
    if not built:
        raise WheelBuildError(f"pip reported success but wrote no wheel to {out_dir}", hint=f"see {log}")
    wheel = max(built, key=lambda p: p.stat().st_mtime)
    # A linux_x86_64 wheel with the public version is not publishable: repair
    # gives it the manylinux tag, the variant label and the linking checks.
    repaired = repair.repair_wheel(wheel, dataclasses.replace(recipe, manylinux=floor.manylinux), final_dir)
    return WheelResult(repaired.path, log, repaired.size, repaired.version, repaired.tags, wheel)
