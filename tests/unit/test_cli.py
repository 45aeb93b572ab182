"""The command line: exit codes, messages, and the commands end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import StackProject, Upstream, drop_object, make_project, sh_git
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
    assert "matches the pin" in hiraishin("upstream", "show", cwd=project.root).stdout  # a refused fetch changes nothing


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
    # a recipe that exists, so the build gets as far as the fetch
    shutil.copy(Path(__file__).resolve().parents[2] / "recipes" / "cpu.toml", stack_project.project.recipes_dir / "cpu.toml")
    built = hiraishin("build", "--recipe", "cpu", cwd=stack_project.project.root)  # the pin's url is the synthetic upstream
    # The cache was filled from the pin's url before anything else ...
    assert stack_project.cache.store().commit_exists(stack_project.upstream.commit)
    # ... and a project without a wheel project stops with a clear error, not a traceback.
    assert built.returncode == 2, built.stderr
    assert "pyproject.toml" in built.stderr
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


# -- sources ---------------------------------------------------------------------

def test_fetch_two_sources_then_tags_name_their_source(tmp_path: Path, upstream: Upstream, fork: Upstream, cache) -> None:  # type: ignore[no-untyped-def]
    project = make_project(tmp_path / "project", upstream)
    upstream.commit_change("CMakeLists.txt", "project(llama) # b102\n", "b102", tag="b102")
    first = hiraishin("upstream", "fetch", "--from", str(fork.path), "--url", "https://example.org/forks/fork",
                      "--name", "fork", cwd=project.root)
    # Only the fork so far: fetched fine, but the pin's tag is nowhere yet.
    assert first.returncode == 0, first.stderr
    assert "source fork: https://example.org/forks/fork (fetched from" in first.stdout
    assert "note: the pinned ref 'b101' is not in the upstream cache" in first.stderr
    assert hiraishin("upstream", "verify", cwd=project.root).returncode == 4
    second = hiraishin("upstream", "fetch", cwd=project.root)  # the pin's url
    assert second.returncode == 0, second.stderr
    assert "pin: b101 = " in second.stdout and "(in upstream)" in second.stdout
    verified = hiraishin("upstream", "verify", cwd=project.root)
    assert verified.returncode == 0 and "(in upstream)" in verified.stdout
    listed = hiraishin("upstream", "tags", cwd=project.root)
    rows = {line.split()[0]: line for line in listed.stdout.splitlines() if line.startswith("  ")}
    assert rows["b102"].endswith("upstream") and rows["fork-b200"].endswith("fork")
    only_fork = hiraishin("upstream", "tags", "--source", "fork", cwd=project.root)
    assert "fork-b200" in only_fork.stdout and "b102" not in only_fork.stdout
    shown = hiraishin("upstream", "show", cwd=project.root)
    assert "fork: 1 tag(s)" in shown.stdout and "upstream: 3 tag(s) (the pin's repository)" in shown.stdout
    # --name without --from fetches that source again, from where it was fetched.
    again = hiraishin("upstream", "fetch", "--name", "fork", cwd=project.root)
    assert again.returncode == 0 and "source fork:" in again.stdout


def test_source_usage_errors(tmp_path: Path, upstream: Upstream, cache) -> None:  # type: ignore[no-untyped-def]
    project = make_project(tmp_path / "project", upstream)
    assert hiraishin("upstream", "fetch", "--url", "https://x/y", cwd=project.root).returncode == 2
    assert hiraishin("upstream", "fetch", cwd=project.root).returncode == 0
    unknown = hiraishin("upstream", "fetch", "--name", "nosuch", cwd=project.root)
    assert unknown.returncode == 4 and "no source named 'nosuch'" in unknown.stderr and "hint:" in unknown.stderr
    tags = hiraishin("upstream", "tags", "--source", "nosuch", cwd=project.root)
    assert tags.returncode == 4 and "no source named 'nosuch'" in tags.stderr
    bad = hiraishin("upstream", "fetch", "--from", str(upstream.path), "--name", "a/b", cwd=project.root)
    assert bad.returncode == 2 and "cannot name a source" in bad.stderr
    assert "Traceback" not in unknown.stderr + tags.stderr + bad.stderr


def test_brackets_in_errors_survive_the_console(tmp_path: Path, upstream: Upstream, cache) -> None:  # type: ignore[no-untyped-def]
    """Observed: "add the path to [checkout] exclude" printed as "add the path to  exclude"."""
    project = make_project(tmp_path / "project", upstream)
    mirror = tmp_path / "mirror.git"
    sh_git(tmp_path, "clone", "-q", "--bare", str(upstream.path), str(mirror))
    drop_object(mirror, sh_git(mirror, "rev-parse", f"{upstream.commit}:tools/server/server.cpp"))
    failed = hiraishin("upstream", "fetch", "--from", str(mirror), cwd=project.root)
    assert failed.returncode == 4
    assert "lacks the content of tools/server/server.cpp" in failed.stderr
    assert "add the path to [checkout] exclude in recipes/upstream.toml" in failed.stderr


def test_step_titles_keep_their_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    from hiraishin_build import log

    with log.step("fetching [checkout] paths"):
        pass
    assert "fetching [checkout] paths" in capsys.readouterr().err


def test_piped_log_lines_are_never_wrapped(tmp_path: Path, upstream: Upstream, cache) -> None:  # type: ignore[no-untyped-def]
    # A CI log is not a terminal: a line wrapped at 80 columns splits the paths in it.
    import os
    import shutil

    mirror = tmp_path / ("a-mirror-directory-with-a-rather-long-name-" * 3) / "upstream"
    shutil.copytree(upstream.path, mirror)
    project = make_project(tmp_path / "project", upstream)
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    fetched = subprocess.run([sys.executable, "-m", "hiraishin_build.cli", "upstream", "fetch", "--from", str(mirror)],
                             cwd=project.root, capture_output=True, text=True, env=env)
    assert fetched.returncode == 0, fetched.stderr
    lines = fetched.stderr.splitlines()
    assert any(line.endswith(f"fetching commits and trees from {mirror}") for line in lines), fetched.stderr
    assert any(line.endswith(f"into {cache.git_dir}") for line in lines), fetched.stderr


@pytest.mark.parametrize("kept", [0.3, 0.5, 0.8, 0.95])
def test_check_of_a_truncated_patch_says_to_restore_it(stack_project: StackProject, kept: float) -> None:
    root = stack_project.project.root
    path = next(stack_project.project.patches_dir.glob("mmvq*.patch"))
    path.write_bytes(path.read_bytes()[: int(path.stat().st_size * kept)])
    checked = hiraishin("patches", "check", cwd=root)
    assert checked.returncode == 6, checked.stderr
    error = checked.stderr
    assert f"patches/{path.name}" in error and "hint:" in error
    assert f"git checkout -- patches/{path.name}" in error  # what a user can act on
    assert "git am" not in error  # git's advice is for a session the user does not have
    assert "work tree" not in error and "hiraishin-check-" not in error  # nothing was made, nothing is left
    assert "patches export" not in error  # re-exporting would not bring the lost lines back
    assert "Traceback" not in error


def test_check_of_a_patch_that_no_longer_applies_names_no_deleted_work_tree(stack_project: StackProject) -> None:
    root = stack_project.project.root
    path = next(stack_project.project.patches_dir.glob("common*.patch"))
    path.write_text(path.read_text().replace(" int helper_29();", " int helper_twenty_nine();"))
    checked = hiraishin("patches", "check", cwd=root)
    assert checked.returncode == 7, checked.stderr
    error = checked.stderr[checked.stderr.index("error:"):]
    assert f"{path.name} does not apply" in error and "common.cuh at line 28" in error
    assert "hiraishin-check-" not in error and "holds the" not in error
    assert "git am --continue" not in error and "git am --skip" not in error
    assert "git checkout -- patches/" in error and "hiraishin patches export" in error  # either way out
