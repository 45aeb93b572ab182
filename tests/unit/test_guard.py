"""The one rule, held in one place: a command that fails leaves patches/, recipes/ and the cache's refs
as they were. A command is made to break the rule on purpose here; the guard must undo it."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from hiraishin_build import cli, guard
from hiraishin_build.errors import PatchError, UpstreamError
from hiraishin_build.fsutil import staged_directory

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


def other_process(*script: str) -> subprocess.Popen[bytes]:
    """A process started before the command, as a maintainer's second shell is: it runs ``script`` (shell)
    once the file ``go`` beside it appears, then writes ``done``."""
    return subprocess.Popen(["sh", "-c", "while [ ! -f \"$0/go\" ]; do sleep 0.05; done; " + "; ".join(script)
                             + "; touch \"$0/done\"", str(Path(tempfile.mkdtemp(prefix="other-process-")))])


def let_run(process: subprocess.Popen[bytes]) -> None:
    signal_dir = Path(process.args[-1])  # type: ignore[index]
    (signal_dir / "go").touch()
    assert process.wait(timeout=30) == 0


def test_what_another_process_changed_while_the_command_ran_survives_its_failure(
        stack_project: StackProject, caplog: pytest.LogCaptureFixture) -> None:
    """A wheel build runs for an hour; meanwhile the maintainer exports two new patches and fetches upstream in
    another shell. The build then fails: the guard must put back only what the build changed (nothing), not the
    snapshot it took an hour ago, which would delete the new patches and move the cache's refs back."""
    root, cache = stack_project.project.root, stack_project.cache
    series = root / "patches" / "series"
    exported = series.read_text() + "new-one.patch\n"
    tag_ref = next(line.split()[0] for line in cache_refs(stack_project).splitlines() if "/tags/" in line)
    maintainer = other_process(
        f"printf 'From the maintainer\\n' > '{root}/patches/new-one.patch'",
        f"printf '%s' '{exported}' > '{series}'",
        f"git -C '{cache.git_dir}' update-ref refs/sources/other/tags/fetched {stack_project.upstream.commit}",
        f"git -C '{cache.git_dir}' update-ref -d {tag_ref}")
    with pytest.raises(PatchError):
        with guard.kept_on_failure(root, cache.git_dir):
            let_run(maintainer)
            raise PatchError("the build failed")
    assert (root / "patches" / "new-one.patch").read_text() == "From the maintainer\n"
    assert series.read_text() == exported
    refs = cache_refs(stack_project)
    assert "refs/sources/other/tags/fetched" in refs and tag_ref not in refs
    assert "by another process (not by this command), and left as it is" in caplog.text
    assert "patches/new-one.patch (new)" in caplog.text and "patches/series" in caplog.text


def test_a_failing_command_gets_back_what_it_changed_and_keeps_what_another_process_changed(
        stack_project: StackProject) -> None:
    root = stack_project.project.root
    first, second = [name for name in dir_snapshot(root / "patches") if name.endswith(".patch")][:2]
    mine_before = (root / "patches" / first).read_bytes()
    maintainer = other_process(f"printf 'edited by hand\\n' >> '{root}/patches/{second}'")
    theirs = (root / "patches" / second).read_bytes() + b"edited by hand\n"
    with pytest.raises(PatchError):
        with guard.kept_on_failure(root, None):
            (root / "patches" / first).write_text("half written by the command")
            (root / "recipes" / "stray.toml").write_text("made by the command")
            let_run(maintainer)
            raise PatchError("failed half way")
    assert (root / "patches" / first).read_bytes() == mine_before
    assert not (root / "recipes" / "stray.toml").exists()
    assert (root / "patches" / second).read_bytes() == theirs


def test_a_directory_the_command_replaced_is_restored_whole(stack_project: StackProject) -> None:
    """patches export replaces patches/ by renaming a staged directory over it: every file in it is the
    command's doing, though none was opened under patches/."""
    root = stack_project.project.root
    before = dir_snapshot(root / "patches")
    with pytest.raises(PatchError):
        with guard.kept_on_failure(root, None):
            with staged_directory(root / "patches") as staging:
                (staging / "series").write_text("")
            raise PatchError("failed after the swap")
    assert dir_snapshot(root / "patches") == before
