import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from hiraishin_build import git
from hiraishin_build.errors import CheckFailed, ConfigError, PatchError, WorkTreeError
from hiraishin_build.series import read_series
from hiraishin_build.stack import FailedHunk, apply_stack, check_stack, export_stack, failed_hunks, render_patches
from hiraishin_build.worktree import BACKUP_REF_PREFIX, WorkTree

from ..conftest import StackProject, commit_in_workdir, sh_git
from ..helpers import dir_snapshot as snapshot

MMVQ = "ggml/src/ggml-cuda/mmvq.cu"
COMMON = "ggml/src/ggml-cuda/common.cuh"


# -- apply ------------------------------------------------------------------

def test_apply_commits_each_patch_on_the_pin(stack_project: StackProject, tmp_path: Path) -> None:
    workdir = tmp_path / "fresh"
    result = apply_stack(stack_project.project, stack_project.cache, workdir)
    assert result.applied == list(read_series(stack_project.project.patches_dir).names)
    subjects = sh_git(workdir, "log", "--format=%s", f"{stack_project.upstream.commit}..HEAD").splitlines()
    assert subjects == ["common: declare the switch", "mmvq: batch-invariant block 20"]
    assert "batch-invariant" in (workdir / "ggml/src/ggml-cuda/mmvq.cu").read_text()
    # The sparse checkout leaves out what no build needs.
    assert not (workdir / "docs").exists()
    assert not (workdir / "models/ggml-vocab-big.gguf").exists()
    assert (workdir / "models/templates/chat.jinja").is_file()
    # CRLF files keep their line endings.
    assert (workdir / "scripts/win.bat").read_bytes() == b"echo one\r\necho two\r\n"


def test_apply_twice_gives_the_same_commits(stack_project: StackProject, tmp_path: Path) -> None:
    first = apply_stack(stack_project.project, stack_project.cache, tmp_path / "a").head
    second = apply_stack(stack_project.project, stack_project.cache, tmp_path / "b").head
    again = apply_stack(stack_project.project, stack_project.cache, tmp_path / "a").head
    assert first == second == again


def test_apply_refuses_a_dirty_work_tree_and_keeps_the_edit(stack_project: StackProject) -> None:
    workdir = stack_project.workdir
    edited = workdir / "ggml/src/ggml-cuda/fattn.cu"
    edited.write_text("my unsaved work\n")
    (workdir / "notes.txt").write_text("new file\n")
    with pytest.raises(WorkTreeError, match="uncommitted changes") as info:
        apply_stack(stack_project.project, stack_project.cache, workdir)
    assert "fattn.cu" in str(info.value) and "notes.txt" in str(info.value)
    assert edited.read_text() == "my unsaved work\n"
    assert (workdir / "notes.txt").read_text() == "new file\n"


def test_apply_refuses_unexported_commits_unless_forced(stack_project: StackProject) -> None:
    workdir = stack_project.workdir
    mine = commit_in_workdir(workdir, "ggml/src/ggml-cuda/fattn.cu", "int fattn() { return 3; }\n", "fattn: my fix")
    with pytest.raises(WorkTreeError, match="not in patches/"):
        apply_stack(stack_project.project, stack_project.cache, workdir)
    assert git.rev_parse(workdir, "HEAD") == mine
    apply_stack(stack_project.project, stack_project.cache, workdir, force=True)
    assert git.rev_parse(workdir, "HEAD") != mine
    # Nothing is lost: the old branch head is kept.
    assert git.rev_parse(workdir, f"{BACKUP_REF_PREFIX}{mine}") == mine


def test_apply_refuses_a_foreign_directory(stack_project: StackProject, tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me\n")
    with pytest.raises(WorkTreeError, match="not a hiraishin work tree"):
        apply_stack(stack_project.project, stack_project.cache, foreign)
    assert sorted(p.name for p in foreign.iterdir()) == ["precious.txt"]


def test_missing_patch_file(stack_project: StackProject, tmp_path: Path) -> None:
    name = read_series(stack_project.project.patches_dir).names[0]
    (stack_project.project.patches_dir / name).unlink()
    with pytest.raises(PatchError, match=f"patch file '{name}' is missing") as info:
        apply_stack(stack_project.project, stack_project.cache, tmp_path / "wd")
    assert "series:1" in str(info.value)
    assert not (tmp_path / "wd").exists()


def test_unlisted_patch_file_is_a_warning(stack_project: StackProject, tmp_path: Path) -> None:
    stray = stack_project.project.patches_dir / "draft.patch"
    shutil.copy(next(stack_project.project.patches_dir.glob("*.patch")), stray)
    result = apply_stack(stack_project.project, stack_project.cache, tmp_path / "wd")
    assert any("draft.patch" in w and "not listed" in w for w in result.warnings)
    assert len(result.applied) == 2


def test_empty_series(stack_project: StackProject, tmp_path: Path) -> None:
    (stack_project.project.patches_dir / "series").write_text("# nothing yet\n\n")
    with pytest.raises(ConfigError, match="the series is empty"):
        apply_stack(stack_project.project, stack_project.cache, tmp_path / "wd")


def test_corrupt_patch_is_named(stack_project: StackProject, tmp_path: Path) -> None:
    name = read_series(stack_project.project.patches_dir).names[0]
    path = stack_project.project.patches_dir / name
    text = path.read_text()
    # Truncate inside a hunk: the hunk header promises more lines than follow.
    cut = text.index("@@") + text[text.index("@@"):].index("\n") + 1
    path.write_text(text[: cut] + " one context line only\n")
    with pytest.raises(PatchError, match=f"{name}: the patch file is corrupt"):
        apply_stack(stack_project.project, stack_project.cache, tmp_path / "wd")


def test_not_a_patch_file(stack_project: StackProject, tmp_path: Path) -> None:
    name = read_series(stack_project.project.patches_dir).names[0]
    (stack_project.project.patches_dir / name).write_text("just some text\n")
    with pytest.raises(PatchError, match="not a git format-patch file"):
        apply_stack(stack_project.project, stack_project.cache, tmp_path / "wd")


def test_non_applying_patch_names_patch_file_and_hunk(stack_project: StackProject, tmp_path: Path) -> None:
    series = read_series(stack_project.project.patches_dir)
    common_patch = next(p for p in series.patches() if "common" in p.subject)
    assert series.names[-1] == common_patch.name
    text = common_patch.path.read_text()
    # The context the hunk expects is no longer there.
    common_patch.path.write_text(text.replace(" int helper_29();", " int helper_twenty_nine();"))
    with pytest.raises(PatchError) as info:
        apply_stack(stack_project.project, stack_project.cache, tmp_path / "wd")
    message = str(info.value)
    assert f"{common_patch.name} does not apply" in message
    assert "ggml/src/ggml-cuda/common.cuh at line 28: @@ -28," in message
    # The work tree holds the patches before the failing one, and is clean.
    assert WorkTree(tmp_path / "wd").uncommitted_changes() == []
    assert sh_git(tmp_path / "wd", "log", "--format=%s", "-1") == "mmvq: batch-invariant block 20"
    assert "holds the 1 patch(es) before it" in message


def move_pin_to_new_upstream(sp: StackProject, change: Callable[[Path], None], tag: str) -> None:
    """Commit ``change`` on the upstream, tag it, fetch it, and move the pin there."""
    from hiraishin_build.pin import write_pin

    repo = sp.upstream.path
    change(repo)
    sh_git(repo, "add", "-A")
    sh_git(repo, "commit", "-q", "-m", f"upstream {tag}")
    sh_git(repo, "tag", "-a", "-m", tag, tag)
    pin = sp.project.pin().moved_to(tag, sh_git(repo, "rev-parse", f"{tag}^{{commit}}"))
    write_pin(sp.project.pin_file, pin)
    sp.cache.fetch(str(repo), pin)


def test_a_conflicting_patch_names_the_file_the_merge_left_unmerged(stack_project: StackProject,
                                                                     tmp_path: Path) -> None:
    # Upstream rewrote the lines the second patch's hunk touches: the three-way merge conflicts.
    move_pin_to_new_upstream(stack_project, lambda repo: (repo / COMMON).write_text("int helper_29(int);\n"), "b102")
    with pytest.raises(PatchError) as info:
        apply_stack(stack_project.project, stack_project.cache, tmp_path / "wd")
    message = info.value.message
    name = read_series(stack_project.project.patches_dir).names[1]
    assert message.startswith(f"{name} does not apply; failing files and hunks:\n    {COMMON}")
    assert f"\n    {COMMON}: merge conflict\n" in message
    assert "holds the 1 patch(es) before it" in message


def test_a_patch_to_a_file_upstream_deleted(stack_project: StackProject, tmp_path: Path) -> None:
    move_pin_to_new_upstream(stack_project, lambda repo: (repo / MMVQ).unlink(), "b102")
    with pytest.raises(PatchError) as info:
        apply_stack(stack_project.project, stack_project.cache, tmp_path / "wd")
    first = read_series(stack_project.project.patches_dir).names[0]
    assert info.value.message.startswith(f"{first} does not apply; failing files and hunks:\n"
                                         f"    {MMVQ}: the file does not exist in the base\n")
    assert "holds the 0 patch(es) before it" in info.value.message


def test_a_patch_follows_a_file_upstream_renamed(stack_project: StackProject, tmp_path: Path) -> None:
    renamed = MMVQ.replace("mmvq.cu", "mmvq-renamed.cu")
    move_pin_to_new_upstream(stack_project, lambda repo: (repo / MMVQ).rename(repo / renamed), "b102")
    result = apply_stack(stack_project.project, stack_project.cache, tmp_path / "wd")  # the three-way merge
    assert len(result.applied) == 2
    assert "block 20, batch-invariant" in (tmp_path / "wd" / renamed).read_text()
    assert not (tmp_path / "wd" / MMVQ).exists()


def git_am_output(tmp_path: Path, base: dict[str, str], patched: dict[str, str], upstream: dict[str, str | None],
                  *, three_way: bool) -> tuple[str, str]:
    """The real output of `git am` (not --quiet) applying a patch made from ``base`` -> ``patched`` onto
    ``base`` changed by ``upstream`` (None deletes a file); and the patch's text."""
    repo = tmp_path / f"am-{'3way' if three_way else 'plain'}"
    repo.mkdir()
    sh_git(repo, "init", "-q", "--initial-branch=main")
    for name, text in base.items():
        (repo / name).write_text(text)
    sh_git(repo, "add", "-A")
    sh_git(repo, "commit", "-q", "-m", "base")
    sh_git(repo, "checkout", "-q", "-b", "patched")
    for name, text in patched.items():
        (repo / name).write_text(text)
    sh_git(repo, "commit", "-q", "-am", "the patch")
    patch = repo / "the.patch"
    patch.write_text(sh_git(repo, "format-patch", "--stdout", "--full-index", "main") + "\n")
    sh_git(repo, "checkout", "-q", "main")
    for name, text in upstream.items():
        if text is None:
            (repo / name).unlink()
        else:
            (repo / name).write_text(text)
    sh_git(repo, "add", "-A")
    sh_git(repo, "commit", "-q", "-m", "upstream")
    completed = subprocess.run(["git", "-C", str(repo), "am", "--3way" if three_way else "--no-3way", str(patch)],
                               capture_output=True, text=True)
    assert completed.returncode != 0
    return completed.stdout + completed.stderr, patch.read_text()


LINES = "".join(f"line {i}\n" for i in range(1, 21))


def test_failed_hunks_names_the_line_and_hunk_from_git_output(tmp_path: Path) -> None:
    output, patch = git_am_output(tmp_path, {"a.c": LINES}, {"a.c": LINES.replace("line 10\n", "line ten\n")},
                                  {"a.c": LINES.replace("line 9\n", "line nine\n")}, three_way=False)
    assert "error: patch failed: a.c:7" in output
    assert failed_hunks(output, patch) == [FailedHunk("a.c", 7, "@@ -7,7 +7,7 @@ line 6")]


def test_failed_hunks_reads_conflict_lines(tmp_path: Path) -> None:
    files = ({"a.c": LINES, "b.c": LINES},
             {"a.c": LINES.replace("line 10\n", "line ten\n"), "b.c": LINES.replace("line 3\n", "line three\n")},
             {"a.c": LINES.replace("line 10\n", "line TEN\n"), "b.c": LINES.replace("line 3\n", "line THREE\n")})
    merged, patch = git_am_output(tmp_path, *files, three_way=True)
    assert "CONFLICT (content): Merge conflict in a.c" in merged
    assert failed_hunks(merged, patch) == [FailedHunk("b.c", None, None), FailedHunk("a.c", None, None)]
    # After a failed plain apply (line and hunk named), a conflict in the same file adds nothing.
    plain, _ = git_am_output(tmp_path, *files, three_way=False)
    assert failed_hunks(plain + merged, patch) == [FailedHunk("a.c", 7, "@@ -7,7 +7,7 @@ line 6"),
                                                   FailedHunk("b.c", 1, "@@ -1,6 +1,6 @@")]


def test_failed_hunks_names_a_file_the_base_lacks(tmp_path: Path) -> None:
    output, patch = git_am_output(tmp_path, {"a.c": LINES, "keep.c": "x\n"},
                                  {"a.c": LINES.replace("line 10\n", "line ten\n")},
                                  {"a.c": None}, three_way=False)
    assert "a.c: does not exist in index" in output or "a.c: No such file or directory" in output
    assert failed_hunks(output, patch) == [FailedHunk("a.c", None, "the file does not exist in the base")]
    assert failed_hunks("", patch) == []


# -- export -----------------------------------------------------------------

def test_export_of_unchanged_work_is_byte_identical(stack_project: StackProject) -> None:
    before = snapshot(stack_project.project.patches_dir)
    result = export_stack(stack_project.project, stack_project.workdir)
    assert not result.changed
    assert snapshot(stack_project.project.patches_dir) == before
    # Also from a fresh apply, on another day, by another committer.
    apply_stack(stack_project.project, stack_project.cache, stack_project.workdir)
    export_stack(stack_project.project, stack_project.workdir)
    assert snapshot(stack_project.project.patches_dir) == before


def test_export_has_no_drifting_fields(stack_project: StackProject) -> None:
    for patch in stack_project.project.patches_dir.glob("*.patch"):
        text = patch.read_text()
        assert text.startswith("From 0000000000000000000000000000000000000000 ")
        assert "\nDate: Thu, 1 Jan 1970 00:00:00 +0000\n" in text
        assert "[PATCH" not in text
        assert not text.rstrip().endswith(tuple("0123456789"))  # no git version signature
        for line in text.splitlines():
            if line.startswith("index "):
                old, new = line.split()[1].split("..")
                assert len(old) == len(new) == 40


def test_export_ignores_the_users_git_configuration(stack_project: StackProject, isolated_git_config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(stack_project.project.patches_dir)
    with isolated_git_config.open("a") as config:
        config.write("[diff]\n\tnoprefix = true\n\tcontext = 7\n[format]\n\tsignOff = true\n[core]\n\tabbrev = 8\n")
    export_stack(stack_project.project, stack_project.workdir)
    assert snapshot(stack_project.project.patches_dir) == before
    # The isolation is what makes this hold: without it the export changes.
    monkeypatch.setattr(git, "ISOLATED_CONFIG", {})
    result = export_stack(stack_project.project, stack_project.workdir)
    assert result.changed


def test_export_writes_new_work_and_keeps_foreign_files(stack_project: StackProject) -> None:
    notes = stack_project.project.patches_dir / "README.md"
    notes.write_text("notes about the stack\n")
    commit_in_workdir(stack_project.workdir, "ggml/src/ggml-cuda/fattn.cu", "int fattn() { return 3; }\n", "fattn: vec up to 16")
    result = export_stack(stack_project.project, stack_project.workdir)
    assert result.changes["fattn-vec-up-to-16.patch"].value == "added"
    assert read_series(stack_project.project.patches_dir).names[-1] == "fattn-vec-up-to-16.patch"
    assert notes.read_text() == "notes about the stack\n"
    assert "README.md" in result.kept


def test_export_refuses_uncommitted_changes(stack_project: StackProject) -> None:
    (stack_project.workdir / "ggml/src/ggml-cuda/fattn.cu").write_text("half done\n")
    before = snapshot(stack_project.project.patches_dir)
    with pytest.raises(WorkTreeError, match="uncommitted changes"):
        export_stack(stack_project.project, stack_project.workdir)
    assert snapshot(stack_project.project.patches_dir) == before


def test_interrupted_export_leaves_patches_whole(stack_project: StackProject, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(stack_project.project.patches_dir)
    commit_in_workdir(stack_project.workdir, "ggml/src/ggml-cuda/fattn.cu", "int fattn() { return 3; }\n", "fattn: more")
    calls = {"n": 0}
    real_copy = shutil.copy2

    def failing_copy(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return real_copy(src, dst, *args, **kwargs)

    monkeypatch.setattr(shutil, "copy2", failing_copy)
    with pytest.raises(OSError, match="disk full"):
        export_stack(stack_project.project, stack_project.workdir)
    assert snapshot(stack_project.project.patches_dir) == before
    leftovers = [p.name for p in stack_project.project.root.iterdir() if "hiraishin-" in p.name]
    assert leftovers == []


def test_export_rejects_merge_commits(stack_project: StackProject) -> None:
    workdir = stack_project.workdir
    sh_git(workdir, "checkout", "-q", "-b", "side", "HEAD~1")
    commit_in_workdir(workdir, "ggml/src/ggml-cuda/fattn.cu", "int fattn() { return 4; }\n", "side")
    sh_git(workdir, "checkout", "-q", "hiraishin/work")
    sh_git(workdir, "merge", "-q", "--no-edit", "side")
    with pytest.raises(WorkTreeError, match="is a merge"):
        export_stack(stack_project.project, workdir)


# -- check ------------------------------------------------------------------

def test_check_passes_on_an_exported_stack(stack_project: StackProject) -> None:
    before = snapshot(stack_project.project.patches_dir)
    result = check_stack(stack_project.project, stack_project.cache)
    assert len(result.patches) == 2
    assert snapshot(stack_project.project.patches_dir) == before


def test_check_fails_on_a_patch_that_applies_only_with_an_offset(stack_project: StackProject) -> None:
    name = next(p for p in read_series(stack_project.project.patches_dir).patches() if "mmvq" in p.subject).name
    path = stack_project.project.patches_dir / name
    text = path.read_text()
    header = next(line for line in text.splitlines() if line.startswith("@@ "))
    old_start = int(header.split()[1].split(",")[0][1:])
    shifted = header.replace(f"-{old_start},", f"-{old_start + 3},", 1)
    path.write_text(text.replace(header, shifted))
    # It still applies (git finds the context 3 lines away) ...
    apply_stack(stack_project.project, stack_project.cache, stack_project.workdir, force=True)
    # ... but the committed file is not what the tool would write.
    with pytest.raises(CheckFailed, match=f"{name} re-exports differently"):
        check_stack(stack_project.project, stack_project.cache)


def test_check_fails_on_a_patch_needing_a_three_way_merge(stack_project: StackProject, tmp_path: Path) -> None:
    """A patch written against the previous upstream commit: its context moved,
    so only git's three-way fallback applies it. apply accepts that; check must not."""
    project, cache, upstream = stack_project.project, stack_project.cache, stack_project.upstream
    pin = project.pin()
    cache.prefetch_blobs(upstream.base, pin.checkout)
    old_base = tmp_path / "old-base"
    WorkTree(old_base).prepare(cache, upstream.base, pin.checkout, force=False)
    fattn = (old_base / "ggml/src/ggml-cuda/fattn.cu").read_text()
    commit_in_workdir(old_base, "ggml/src/ggml-cuda/fattn.cu", fattn.replace("return 8;", "return 80;"), "fattn: eighty")
    shutil.rmtree(project.patches_dir)
    project.patches_dir.mkdir()
    render_patches(old_base, project.patches_dir)
    apply_stack(project, cache, stack_project.workdir, force=True)
    assert "return 50;" in (stack_project.workdir / "ggml/src/ggml-cuda/fattn.cu").read_text()
    assert "return 80;" in (stack_project.workdir / "ggml/src/ggml-cuda/fattn.cu").read_text()
    with pytest.raises(CheckFailed, match="fattn-eighty.patch does not apply"):
        check_stack(project, cache)


def test_check_requires_complete_patch_messages(stack_project: StackProject) -> None:
    name = read_series(stack_project.project.patches_dir).names[0]
    path = stack_project.project.patches_dir / name
    path.write_text(path.read_text().replace("Upstream: not applicable.\n", ""))
    with pytest.raises(CheckFailed, match=f"{name}: the message lacks Upstream:"):
        check_stack(stack_project.project, stack_project.cache)


def test_check_fails_on_a_hand_edited_series(stack_project: StackProject) -> None:
    series = stack_project.project.patches_dir / "series"
    series.write_text("# order matters\n" + series.read_text())
    with pytest.raises(CheckFailed, match="series re-exports differently"):
        check_stack(stack_project.project, stack_project.cache)


def test_long_subjects_fold_and_round_trip(stack_project: StackProject) -> None:
    subject = ("speculative: keep verify batches inside one 256-cell KV window in batch-invariant mode, "
               "a subject long enough to be folded")
    commit_in_workdir(stack_project.workdir, "ggml/src/ggml-cuda/fattn.cu", "int fattn() { return 9; }\n", subject)
    result = export_stack(stack_project.project, stack_project.workdir)
    added = [name for name, change in result.changes.items() if change.value == "added"]
    assert len(added) == 1
    text = (stack_project.project.patches_dir / added[0]).read_text()
    assert "\n " in text.split("\n\n", 1)[0]  # git folded the Subject header
    patch = read_series(stack_project.project.patches_dir).patches()[-1]
    assert patch.subject == subject
    check_stack(stack_project.project, stack_project.cache)


def test_files_with_names_git_quotes_are_listed_as_they_are(stack_project: StackProject) -> None:
    # git format-patch writes "a/caf\303\251.cu" for a non-ASCII name; the file is café.cu.
    commit_in_workdir(stack_project.workdir, "ggml/src/ggml-cuda/café.cu", "int x;\n", "cuda: a file with an accent")
    export_stack(stack_project.project, stack_project.workdir)
    patch = next(p for p in read_series(stack_project.project.patches_dir).patches() if "accent" in p.subject)
    assert patch.files == ("ggml/src/ggml-cuda/café.cu",)
    assert b'"b/ggml/src/ggml-cuda/caf\\303\\251.cu"' in patch.path.read_bytes()


# -- the error a failed apply raises, from git's output ------------------------------------

AM_ADVICE = (
    "hint: Use 'git am --show-current-patch=diff' to see the failed patch\n"
    "Patch failed at 0001 mmvq: a change\n"
    "When you have resolved this problem, run \"git am --continue\".\n"
    "If you prefer to skip this patch, run \"git am --skip\" instead.\n"
    "To restore the original branch and stop patching, run \"git am --abort\".\n"
)


def test_a_failure_naming_no_hunk_quotes_gits_output_without_its_advice(tmp_path: Path) -> None:
    from hiraishin_build.stack import _describe_failure

    patch = tmp_path / "patches" / "0001-a.patch"
    patch.parent.mkdir()
    patch.write_text("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n")
    output = "Applying: mmvq: a change\nerror: sha1 information is lacking or useless (a.c).\n" + AM_ADVICE
    error = _describe_failure(patch, output)
    assert error.message == ("0001-a.patch does not apply:\n    Applying: mmvq: a change\n"
                             "    error: sha1 information is lacking or useless (a.c).")
    assert error.hint == ("the upstream changed under this patch: refresh it (`hiraishin rebase --onto <ref>`), or fix "
                          "the patch file (`git diff -- patches/0001-a.patch` shows edits since the last commit)")


def test_a_patch_git_calls_corrupt_is_named_with_gits_reason(tmp_path: Path) -> None:
    from hiraishin_build.series import restore_hint
    from hiraishin_build.stack import _describe_failure

    patch = tmp_path / "patches" / "0002-b.patch"
    patch.parent.mkdir()
    # Bytes that are not UTF-8 are read, not refused.
    patch.write_bytes(b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nSubject: caf\xe9\n")
    for output, reason in (("Applying: b\nerror: corrupt patch at line 12\n" + AM_ADVICE, "corrupt patch at line 12"),
                           ("fatal: git diff header lacks filename information when removing 1 leading pathname "
                            "component (line 9)\nerror: patch fragment without header at line 14: @@ -1 +1 @@\n",
                            "patch fragment without header at line 14: @@ -1 +1 @@")):
        error = _describe_failure(patch, output)
        assert error.message == f"patches/0002-b.patch: the patch file is corrupt ({reason})"
        assert error.hint == restore_hint(patch)
    unreadable = _describe_failure(patch, "error: patch failed: a.c:3\n" + AM_ADVICE)
    assert unreadable.message == "0002-b.patch does not apply; failing files and hunks:\n    a.c at line 3"


def test_a_failed_hunk_is_a_value() -> None:
    import dataclasses

    hunk = FailedHunk("a.c", 7, "@@ -7,7 +7,7 @@")
    assert {hunk, FailedHunk("a.c", 7, "@@ -7,7 +7,7 @@")} == {hunk}
    with pytest.raises(dataclasses.FrozenInstanceError):
        hunk.line = 8  # type: ignore[misc]


def test_conflicted_and_absent_files_are_named_once_after_the_failed_hunks(tmp_path: Path) -> None:
    from hiraishin_build.stack import _describe_failure

    patch = tmp_path / "patches" / "0003-c.patch"
    patch.parent.mkdir()
    patch.write_text("diff --git a/a.c b/a.c\n")
    error = _describe_failure(patch, "error: patch failed: a.c:3\n" + AM_ADVICE,
                              conflicted=("a.c", "b.c"), absent=("a.c", "b.c", "c.c"))
    assert error.message == ("0003-c.patch does not apply; failing files and hunks:\n    a.c at line 3\n"
                             "    b.c: merge conflict\n    c.c: the file does not exist in the base")


def test_a_failure_naming_no_hunk_quotes_the_last_eight_lines_of_gits_output(tmp_path: Path) -> None:
    from hiraishin_build.stack import _describe_failure

    patch = tmp_path / "patches" / "0004-d.patch"
    patch.parent.mkdir()
    patch.write_text("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n")
    output = "".join(f"error: reason {i}\n" for i in range(1, 11)) + AM_ADVICE
    assert _describe_failure(patch, output).message == "0004-d.patch does not apply:\n" + "\n".join(
        f"    error: reason {i}" for i in range(3, 11))


def test_leaving_out_patches(stack_project: StackProject, tmp_path: Path) -> None:
    project = stack_project.project
    names = read_series(project.patches_dir).names
    assert names == ("mmvq-batch-invariant-block-20.patch", "common-declare-the-switch.patch")
    with pytest.raises(ConfigError) as info:
        apply_stack(project, stack_project.cache, tmp_path / "wd", omit=frozenset({"zz.patch", "mmvq-batch-invariant-block-2.patch"}))
    assert info.value.message == (f"cannot leave out mmvq-batch-invariant-block-2.patch, zz.patch: not in "
                                  f"{project.patches_dir / 'series'}")
    assert info.value.hint == "did you mean 'mmvq-batch-invariant-block-20.patch'? see `hiraishin patches list`"
    with pytest.raises(ConfigError) as info:
        apply_stack(project, stack_project.cache, tmp_path / "wd", omit=frozenset({"zz.patch"}))
    assert info.value.hint == "see `hiraishin patches list`"
    result = apply_stack(project, stack_project.cache, tmp_path / "wd", omit=frozenset({names[0]}))
    assert result.applied == [names[1]]
    assert sh_git(tmp_path / "wd", "log", "--format=%s", f"{stack_project.upstream.commit}..HEAD") == "common: declare the switch"


def test_a_non_applying_patch_with_bytes_that_are_not_utf8(stack_project: StackProject, tmp_path: Path) -> None:
    series = read_series(stack_project.project.patches_dir)
    common_patch = next(p for p in series.patches() if "common" in p.subject)
    data = common_patch.path.read_bytes()
    common_patch.path.write_bytes(data.replace(b" int helper_29();", b" int helper_\xff\xfe();"))
    with pytest.raises(PatchError) as info:
        apply_stack(stack_project.project, stack_project.cache, tmp_path / "wd", strict=True)
    assert info.value.message.startswith(f"{common_patch.name} does not apply; failing files and hunks:\n"
                                         f"    {COMMON} at line 28: @@ -28,")


def test_export_says_what_changed_for_each_patch(stack_project: StackProject) -> None:
    first, second = read_series(stack_project.project.patches_dir).names
    sh_git(stack_project.workdir, "reset", "-q", "--hard", "HEAD~1")
    result = export_stack(stack_project.project, stack_project.workdir)
    assert {name: change.value for name, change in result.changes.items()} == {first: "unchanged", second: "removed"}
    assert result.changed and result.kept == []
    assert read_series(stack_project.project.patches_dir).names == (first,)
    sh_git(stack_project.workdir, "commit", "-q", "--amend", "-m", "mmvq: batch-invariant block 20\n\nWhy: changed.\n")
    result = export_stack(stack_project.project, stack_project.workdir)
    assert {name: change.value for name, change in result.changes.items()} == {first: "changed"}


def test_export_refuses_a_merge_and_names_kept_files_in_full(stack_project: StackProject,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    workdir = stack_project.workdir
    notes = stack_project.project.patches_dir / "notes.txt"
    notes.write_text("mine\n")
    caplog.set_level("WARNING", logger="hiraishin")
    export_stack(stack_project.project, workdir)
    assert [r.getMessage() for r in caplog.records] == [f"kept {notes}: it is not part of the stack"]
    sh_git(workdir, "checkout", "-q", "-b", "side", "HEAD~1")
    commit_in_workdir(workdir, "ggml/src/ggml-cuda/fattn.cu", "int fattn() { return 4; }\n", "side")
    sh_git(workdir, "checkout", "-q", "hiraishin/work")
    sh_git(workdir, "merge", "-q", "--no-edit", "side")
    merge = sh_git(workdir, "rev-parse", "HEAD")
    with pytest.raises(WorkTreeError) as info:
        export_stack(stack_project.project, workdir)
    assert info.value.message == f"{workdir}: commit {merge[:12]} is a merge; the stack must be a straight line of commits"
    assert info.value.hint == "rebase the work branch onto the pinned commit without merges"


def test_check_reports_every_problem_in_full(stack_project: StackProject) -> None:
    project = stack_project.project
    result = check_stack(project, stack_project.cache)
    assert 0 < result.seconds_apply < 600 and 0 < result.seconds_export < 600
    workdir = stack_project.workdir
    # A line that is not UTF-8 in the file the first patch changes.
    mmvq = (workdir / "ggml/src/ggml-cuda/mmvq.cu").read_bytes()
    (workdir / "ggml/src/ggml-cuda/mmvq.cu").write_bytes(mmvq.replace(b"    // block 25\n", b"    // block 25, caf\xe9\n"))
    sh_git(workdir, "commit", "-q", "-am", "mmvq: a comment in Latin-1\n\nWhy: a test.\n")
    export_stack(project, workdir)
    name = read_series(project.patches_dir).names[-1]
    path = project.patches_dir / name
    data = path.read_bytes()
    header = next(line for line in data.split(b"\n") if line.startswith(b"@@ "))
    path.write_bytes(data.replace(header, header.replace(b"-124,7 +124,7", b"-127,7 +127,7")))
    with pytest.raises(CheckFailed) as info:
        check_stack(project, stack_project.cache)
    assert header.startswith(b"@@ -124,7 +124,7 @@")
    lacking = "What:, Verified:, Upstream:"
    assert info.value.message == (
        f"patches check failed:\n  {name}: the message lacks {lacking}\n  {name} re-exports differently:\n"
        f"    --- patches/{name} (committed)\n    +++ patches/{name} (re-exported)\n"
        "    @@ -11,3 +11,3 @@\n     +++ b/ggml/src/ggml-cuda/mmvq.cu\n"
        "    -@@ -127,7 +127,7 @@ static int kernel_24(int ncols_dst) {\n"
        "    +@@ -124,7 +124,7 @@ static int kernel_24(int ncols_dst) {\n      }")
    # A patch that no longer applies as written.
    path.write_bytes(data.replace(b" static int kernel_25(int ncols_dst) {", b" static int kernel_xx(int ncols_dst) {"))
    with pytest.raises(CheckFailed) as info:
        check_stack(project, stack_project.cache)
    assert info.value.message == (
        f"patches check failed: {name} does not apply; failing files and hunks:\n"
        "    ggml/src/ggml-cuda/mmvq.cu at line 124: @@ -124,7 +124,7 @@ static int kernel_24(int ncols_dst) {\n"
        "  (check applies each patch as written, without the three-way fallback)")
