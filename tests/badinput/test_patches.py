"""Bad input to `patches` and `rebase`: patches/, series, the pin and the cache stay as they were, and every
refusal says what to do instead. The first cases are the ways the stack used to be lost: an export of a
work branch that lacked part of it, and an export over hand edits."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ..conftest import StackProject, sh_git
from .harness import Guarded, assert_fails_cleanly, run, unchanged

MMVQ = "ggml/src/ggml-cuda/mmvq.cu"


def series_names(project_root: Path) -> list[str]:
    return [line.split("#")[0].strip() for line in (project_root / "patches" / "series").read_text().splitlines()
            if line.strip()]


def break_second_patch(root: Path) -> Path:
    """Change a context line of the second patch, so that it no longer applies (and the first one does)."""
    second = root / "patches" / series_names(root)[1]
    text = second.read_text()
    assert " int helper_29();\n" in text
    second.write_text(text.replace(" int helper_29();\n", " int helper_XX();\n"))
    return second


def tag_a_conflicting_upstream(stack_project: StackProject) -> str:
    """Tag b102 on the upstream with an edit where the first patch changes mmvq.cu, fetch it; its mmvq.cu."""
    upstream = stack_project.upstream
    text = (upstream.path / MMVQ).read_text().replace("    // block 20\n", "    // block 20 (upstream note)\n")
    (upstream.path / MMVQ).write_text(text)
    sh_git(upstream.path, "commit", "-q", "-am", "upstream edits block 20")
    sh_git(upstream.path, "tag", "-a", "-m", "b102", "b102")
    assert run("upstream", "fetch", "--from", str(upstream.path), cwd=stack_project.project.root).returncode == 0
    return text


def test_export_after_a_failed_apply_refuses_and_keeps_every_patch(stack_project: StackProject) -> None:
    root = stack_project.project.root
    broken = break_second_patch(root)
    applied = run("patches", "apply", cwd=root)
    assert_fails_cleanly(applied, exit_code=6, mentions=(broken.name, "holds the 1 patch(es) before it"))
    guarded = Guarded(root, stack_project.cache.root)
    with unchanged(guarded):
        exported = run("patches", "export", cwd=root)
    assert_fails_cleanly(exported, exit_code=5, mentions=(f"{broken.name} was not applied", "would delete"))
    assert "patches apply" in exported.stderr and "git checkout -- patches/" in exported.stderr
    assert len(series_names(root)) == 2


def test_a_later_commit_by_hand_does_not_make_a_partial_branch_exportable(stack_project: StackProject) -> None:
    root = stack_project.project.root
    break_second_patch(root)
    run("patches", "apply", cwd=root)
    (stack_project.workdir / "notes.txt").write_text("a fix\n")
    sh_git(stack_project.workdir, "add", "notes.txt")
    sh_git(stack_project.workdir, "commit", "-q", "-m", "a commit by hand")
    with unchanged(Guarded(root, stack_project.cache.root)):
        exported = run("patches", "export", cwd=root)
    assert_fails_cleanly(exported, exit_code=5, mentions=("does not hold the whole stack",))


def test_export_during_a_stopped_rebase_refuses_and_points_to_continue(stack_project: StackProject) -> None:
    root = stack_project.project.root
    text = tag_a_conflicting_upstream(stack_project)
    stopped = run("rebase", "--onto", "b102", cwd=root)
    assert stopped.returncode == 10 and "--continue" in stopped.stdout + stopped.stderr
    # The maintainer resolves by hand and commits, as git suggests, then reaches for export.
    (stack_project.workdir / MMVQ).write_text(text.replace("(upstream note)", "(both)"))
    sh_git(stack_project.workdir, "add", MMVQ)
    sh_git(stack_project.workdir, "am", "--continue")
    guarded = Guarded(root, stack_project.cache.root)
    with unchanged(guarded):
        exported = run("patches", "export", cwd=root)
        applied = run("patches", "apply", cwd=root)
    assert_fails_cleanly(exported, exit_code=5, mentions=("a rebase is stopped", "rebase --continue"))
    assert_fails_cleanly(applied, exit_code=5, mentions=("a rebase is stopped", "rebase --continue"))
    # The way it points to works and keeps both patches.
    finished = run("rebase", "--continue", cwd=root)
    assert finished.returncode == 0, finished
    assert len(series_names(root)) == 2


def test_export_refuses_to_overwrite_a_hand_edit_unless_asked(stack_project: StackProject) -> None:
    root = stack_project.project.root
    assert run("patches", "apply", cwd=root).returncode == 0
    first = root / "patches" / series_names(root)[0]
    first.write_text(first.read_text().replace("Why: a test needs a patch.", "Why: a test needs a patch, edited."))
    with unchanged(Guarded(root, stack_project.cache.root)):
        exported = run("patches", "export", cwd=root)
    assert_fails_cleanly(exported, exit_code=5, mentions=(f"patches/{first.name}", "--overwrite", "--force"))
    assert "edited." in first.read_text()
    overwritten = run("patches", "export", "--overwrite", cwd=root)
    assert overwritten.returncode == 0, overwritten
    assert "edited." not in first.read_text()


def test_a_hand_edit_carried_into_the_branch_exports(stack_project: StackProject) -> None:
    """The way the refusal points to: apply the edited patches/ with --force, then export keeps the edit."""
    root = stack_project.project.root
    assert run("patches", "apply", cwd=root).returncode == 0
    first = root / "patches" / series_names(root)[0]
    first.write_text(first.read_text().replace("Why: a test needs a patch.", "Why: a test needs a patch, edited."))
    assert run("patches", "apply", "--force", cwd=root).returncode == 0
    assert run("patches", "export", cwd=root).returncode == 0
    assert "edited." in first.read_text()


@pytest.mark.parametrize("cut", ["file boundary", "hunk boundary"])
def test_a_patch_cut_short_fails_check_and_apply(stack_project: StackProject, tmp_path: Path, cut: str) -> None:
    """A cut at a file or hunk boundary leaves a file that parses and applies; the series' size record
    tells it from the whole file."""
    root, workdir = stack_project.project.root, stack_project.workdir
    # One patch that changes two files with two hunks in the first.
    assert run("patches", "apply", cwd=root).returncode == 0
    mmvq = (workdir / MMVQ).read_text()
    (workdir / MMVQ).write_text(mmvq.replace("    // block 5\n", "    // block 5, too\n")
                                .replace("    // block 35\n", "    // block 35, too\n"))
    common = workdir / "ggml/src/ggml-cuda/common.cuh"
    common.write_text(common.read_text() + "bool more();\n")
    sh_git(workdir, "commit", "-q", "-am", "two files\n\nWhy: x.\n\nWhat: y.\n\nVerified: z.\n\nUpstream: no.\n")
    assert run("patches", "export", cwd=root).returncode == 0
    last = root / "patches" / series_names(root)[-1]
    lines = last.read_text().splitlines(keepends=True)
    files = [i for i, line in enumerate(lines) if line.startswith("diff --git")]
    assert len(files) == 2
    if cut == "file boundary":
        kept = lines[:files[1]]
    else:
        hunks = [i for i, line in enumerate(lines) if i > files[1] and line.startswith("@@")]
        assert len(hunks) == 2
        kept = lines[:hunks[1]]
    last.write_text("".join(kept))
    guarded = Guarded(root, stack_project.cache.root)
    with unchanged(guarded):
        checked = run("patches", "check", cwd=root)
        applied = run("patches", "apply", "--force", cwd=root)
    for ran in (checked, applied):
        assert_fails_cleanly(ran, exit_code=6, mentions=(last.name, "cut short or edited by hand"))


def test_a_crlf_patch_is_named_as_such(stack_project: StackProject) -> None:
    root = stack_project.project.root
    first = root / "patches" / series_names(root)[0]
    first.write_bytes(first.read_bytes().replace(b"\n", b"\r\n"))
    with unchanged(Guarded(root, stack_project.cache.root)):
        checked = run("patches", "check", cwd=root)
    assert_fails_cleanly(checked, exit_code=6, mentions=(first.name, "CRLF"))


def test_the_apply_hint_names_the_edit_when_the_pin_is_unchanged(stack_project: StackProject) -> None:
    root = stack_project.project.root
    (root / ".gitignore").write_text("/work/\n")
    sh_git(root, "init", "-q")
    sh_git(root, "add", "-A")
    sh_git(root, "commit", "-q", "-m", "project")
    broken = break_second_patch(root)
    applied = run("patches", "apply", "--force", cwd=root)
    assert_fails_cleanly(applied, exit_code=6, mentions=("the pin is unchanged", f"git diff -- patches/{broken.name}"))
    assert "the upstream changed" not in applied.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_apply_into_a_read_only_directory(stack_project: StackProject, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with unchanged(Guarded(stack_project.project.root, stack_project.cache.root)):
            ran = run("patches", "apply", "--workdir", str(locked / "wt"), cwd=stack_project.project.root)
    finally:
        locked.chmod(stat.S_IRWXU)
    assert_fails_cleanly(ran, exit_code=15, mentions=(str(locked), "--workdir"))


@pytest.mark.parametrize("args, mentions", [
    (("patches", "apply", "--workdir", "/proc/hiraishin-wt"), ("/proc", "--workdir")),
    (("rebase", "--onto", "b101", "--report", "/proc/hiraishin/report"), ("/proc/hiraishin", "--report")),
])
def test_an_unwritable_path_is_refused_before_any_work(stack_project: StackProject, args: tuple[str, ...],
                                                       mentions: tuple[str, ...]) -> None:
    root = stack_project.project.root
    with unchanged(Guarded(root, stack_project.cache.root, extra=(stack_project.workdir / ".git" / "HEAD",))):
        ran = run(*args, cwd=root)
    assert_fails_cleanly(ran, exit_code=15, mentions=mentions)
    assert not (stack_project.workdir / ".git" / "hiraishin-rebase.json").exists()


def test_a_rebase_that_stops_still_shows_its_conflict_when_the_report_cannot_be_written(
        stack_project: StackProject, tmp_path: Path) -> None:
    """The report path is checked first; so the stop itself is never hidden behind a write error."""
    root = stack_project.project.root
    tag_a_conflicting_upstream(stack_project)
    report = tmp_path / "reports" / "r"
    stopped = run("rebase", "--onto", "b102", "--report", str(report), cwd=root)
    assert stopped.returncode == 10 and MMVQ in stopped.stdout + stopped.stderr
    assert report.with_suffix(".txt").is_file() and report.with_suffix(".json").is_file()
    assert "Traceback" not in stopped.stderr


def test_dry_run_alone_says_what_it_goes_with(stack_project: StackProject) -> None:
    with unchanged(Guarded(stack_project.project.root, stack_project.cache.root)):
        ran = run("rebase", "--dry-run", cwd=stack_project.project.root)
    assert_fails_cleanly(ran, exit_code=2, mentions=("--dry-run goes with --onto",))
