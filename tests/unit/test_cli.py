"""The command line: exit codes, messages, and the commands end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import StackProject, Upstream, make_project, sh_git
from ..helpers import hiraishin


def test_fetch_show_verify(tmp_path: Path, upstream: Upstream, cache) -> None:  # type: ignore[no-untyped-def]
    project = make_project(tmp_path / "project", upstream)
    shown = hiraishin("upstream", "show", cwd=project.root)
    assert shown.returncode == 0 and "cached:    no" in shown.stdout
    fetched = hiraishin("upstream", "fetch", "--from", str(upstream.path), cwd=project.root)
    assert fetched.returncode == 0, fetched.stderr
    shown = hiraishin("upstream", "show", cwd=project.root)
    assert "cached:    yes, complete" in shown.stdout and "matches the pin" in shown.stdout
    assert hiraishin("upstream", "verify", cwd=project.root).returncode == 0


def test_moved_tag_exit_code_and_message(tmp_path: Path, upstream: Upstream, cache) -> None:  # type: ignore[no-untyped-def]
    project = make_project(tmp_path / "project", upstream)
    assert hiraishin("upstream", "fetch", "--from", str(upstream.path), cwd=project.root).returncode == 0
    sh_git(upstream.path, "tag", "-f", "-a", "-m", "moved", upstream.tag, "HEAD")
    moved = hiraishin("upstream", "fetch", "--from", str(upstream.path), cwd=project.root)
    assert moved.returncode == 4
    assert "moved" in moved.stderr and upstream.commit in moved.stderr
    assert "Traceback" not in moved.stderr
    assert "MOVED" in hiraishin("upstream", "show", cwd=project.root).stdout


def test_patches_commands(stack_project: StackProject) -> None:
    root = stack_project.project.root
    listed = hiraishin("patches", "list", cwd=root)
    assert listed.returncode == 0
    assert "mmvq: batch-invariant block 20" in listed.stdout and "ggml/src/ggml-cuda/common.cuh" in listed.stdout
    assert hiraishin("patches", "apply", cwd=root).returncode == 0
    exported = hiraishin("patches", "export", cwd=root)
    assert exported.returncode == 0 and "patches/ unchanged" in exported.stdout
    checked = hiraishin("patches", "check", cwd=root)
    assert checked.returncode == 0 and "re-export byte-identical" in checked.stdout


def test_build_fetches_the_upstream_then_names_what_is_missing(tmp_path: Path, stack_project: StackProject) -> None:
    import shutil

    shutil.rmtree(stack_project.cache.root)
    built = hiraishin("build", "--recipe", "cpu", cwd=stack_project.project.root)  # the pin's url is the synthetic upstream
    # The cache was filled from the pin's url before anything else ...
    assert stack_project.cache.store().commit_exists(stack_project.upstream.commit)
    # ... and a project without a wheel project stops with a clear error, not a traceback.
    assert built.returncode == 2, built.stderr
    assert "no recipe 'cpu'" in built.stderr or "pyproject.toml" in built.stderr
    assert "Traceback" not in built.stderr


@pytest.mark.parametrize(
    ("breakage", "code", "message"),
    [
        ("missing", 6, "is missing"),
        ("empty", 2, "series is empty"),
        ("dirty", 5, "uncommitted changes"),
    ],
)
def test_bad_input_exit_codes(stack_project: StackProject, breakage: str, code: int, message: str) -> None:
    root = stack_project.project.root
    patches = stack_project.project.patches_dir
    if breakage == "missing":
        next(patches.glob("*.patch")).unlink()
    elif breakage == "empty":
        (patches / "series").write_text("")
    elif breakage == "dirty":
        (stack_project.workdir / "CMakeLists.txt").write_text("edited\n")
    result = hiraishin("patches", "apply", cwd=root)
    assert result.returncode == code
    assert message in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.stderr


def test_outside_a_project(tmp_path: Path) -> None:
    result = hiraishin("patches", "list", cwd=tmp_path)
    assert result.returncode == 2 and "recipes/upstream.toml" in result.stderr


def test_old_git_is_refused_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    from hiraishin_build import git, proc

    git.require_git.cache_clear()
    monkeypatch.setattr(proc, "run", lambda *a, **k: proc.Completed(["git"], 0, "git version 2.30.1\n", ""))
    with pytest.raises(git.GitTooOld, match="git 2.30.1 is too old"):
        git.require_git()
    git.require_git.cache_clear()
