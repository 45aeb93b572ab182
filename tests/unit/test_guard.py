"""The one rule, held in one place: a command that fails leaves patches/, recipes/ and the cache's refs
as they were. A command is made to break the rule on purpose here; the guard must undo it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hiraishin_build import cli, guard
from hiraishin_build.errors import PatchError, UpstreamError

from ..conftest import StackProject, sh_git
from ..helpers import dir_snapshot


def cache_refs(stack_project: StackProject) -> str:
    return sh_git(stack_project.cache.git_dir, "for-each-ref", "--format=%(refname) %(objectname)")


def test_a_failing_command_that_damaged_the_stack_gets_it_back(stack_project: StackProject,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    root = stack_project.project.root
    patches_before = dir_snapshot(root / "patches")
    pin_before = (root / "recipes" / "upstream.toml").read_bytes()
    first = next(name for name in patches_before if name.endswith(".patch"))

    def export_that_breaks_the_rule(project, workdir, **_):  # type: ignore[no-untyped-def]
        (project.patches_dir / "series").write_text("")
        (project.patches_dir / first).unlink()
        (project.patches_dir / "stray.patch").write_text("half written")
        project.pin_file.write_text("garbage")
        raise PatchError("export failed half way")

    monkeypatch.setattr(cli, "export_stack", export_that_breaks_the_rule)
    result = CliRunner().invoke(cli.cli, ["--project", str(root), "patches", "export"])
    assert isinstance(result.exception, PatchError)
    assert dir_snapshot(root / "patches") == patches_before
    assert (root / "recipes" / "upstream.toml").read_bytes() == pin_before


def test_a_failing_command_that_moved_the_caches_refs_gets_them_back(stack_project: StackProject,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root, cache = stack_project.project.root, stack_project.cache
    before = cache_refs(stack_project)
    tag_ref = next(line.split()[0] for line in before.splitlines() if "/tags/" in line)

    def fetch_that_breaks_the_rule(self, location, pin, **_):  # type: ignore[no-untyped-def]
        sh_git(cache.git_dir, "update-ref", "-d", tag_ref)
        sh_git(cache.git_dir, "update-ref", "refs/sources/stray/tags/x", stack_project.upstream.commit)
        raise UpstreamError("fetch failed half way")

    monkeypatch.setattr(cli.UpstreamCache, "fetch", fetch_that_breaks_the_rule)
    result = CliRunner().invoke(cli.cli, ["--project", str(root), "--cache-dir", str(cache.root),
                                          "upstream", "fetch", "--from", str(stack_project.upstream.path)])
    assert isinstance(result.exception, UpstreamError)
    assert cache_refs(stack_project) == before


def test_an_interrupt_is_left_to_the_command(stack_project: StackProject, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebase killed mid-step resumes from its own state: the guard must not undo its steps."""
    root = stack_project.project.root
    series = root / "patches" / "series"

    def interrupted(project, workdir, **_):  # type: ignore[no-untyped-def]
        series.write_text(series.read_text() + "# a step of a longer operation\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "export_stack", interrupted)
    with pytest.raises(KeyboardInterrupt):
        with guard.kept_on_failure(root, None):
            cli.export_stack(None, None)
    assert series.read_text().endswith("# a step of a longer operation\n")


def test_success_keeps_what_the_command_wrote(stack_project: StackProject) -> None:
    root = stack_project.project.root
    with guard.kept_on_failure(root, stack_project.cache.git_dir):
        (root / "patches" / "notes.txt").write_text("kept\n")
    assert (root / "patches" / "notes.txt").read_text() == "kept\n"


def test_outside_a_project_the_guard_keeps_nothing_and_gets_in_no_way(tmp_path: Path) -> None:
    assert guard.locate(tmp_path / "nowhere", tmp_path / "no-cache") == (None, tmp_path / "no-cache" / "upstream.git")
    with pytest.raises(ValueError):
        with guard.kept_on_failure(None, None):
            raise ValueError("the command's own error")
