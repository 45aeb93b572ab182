"""patches/series and the format-patch files it names, read without git: files written here by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hiraishin_build.errors import ConfigError, PatchError
from hiraishin_build.series import (
    PATCH_SUFFIX,
    REQUIRED_SECTIONS,
    SERIES_FILE,
    DiffSize,
    Patch,
    Series,
    parse_patch,
    patch_file_name,
    read_series,
    render_series,
    restore_hint,
)

HEADER = (
    "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
    "From: hiraishin-llama <maintainers@hiraishin-llama.invalid>\n"
    "Date: Thu, 1 Jan 1970 00:00:00 +0000\n"
)
MESSAGE = "Why: a reason.\n\nWhat: the change.\nVerified: a test.\nUpstream: not applicable.\n"
DIFF = (
    "diff --git a/src/a.c b/src/a.c\n"
    "index 1111111..2222222 100644\n"
    "--- a/src/a.c\n"
    "+++ b/src/a.c\n"
    "@@ -1,3 +1,3 @@\n"
    " int a;\n"
    "-int b;\n"
    "+int c;\n"
    " int d;\n"
)
SECOND_FILE = (
    "diff --git a/include/b.h b/include/b.h\n"
    "new file mode 100644\n"
    "index 0000000..3333333\n"
    "--- /dev/null\n"
    "+++ b/include/b.h\n"
    "@@ -0,0 +1 @@\n"
    "+int b;\n"
)
STAT = "---\n src/a.c | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n\n"


def patch_text(subject: str = "ggml: a change", message: str = MESSAGE, stat: str = STAT,
               diff: str = DIFF + SECOND_FILE) -> str:
    return f"{HEADER}Subject: {subject}\n\n{message}{stat}{diff}--\n2.43.0\n"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def test_constants() -> None:
    assert (SERIES_FILE, PATCH_SUFFIX) == ("series", ".patch")
    assert REQUIRED_SECTIONS == ("Why:", "What:", "Verified:", "Upstream:")


def test_a_patch_read_in_full(tmp_path: Path) -> None:
    path = write(tmp_path, "a.patch", patch_text())
    patch = parse_patch(path)
    assert patch == Patch("a.patch", path, "ggml: a change", MESSAGE.strip(), ("src/a.c", "include/b.h"),
                          DiffSize(2, 2, 1))
    assert patch.missing_sections() == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        patch.name = "b.patch"  # type: ignore[misc]


def test_the_message_ends_at_the_first_diff_when_there_is_no_stat(tmp_path: Path) -> None:
    patch = parse_patch(write(tmp_path, "a.patch", patch_text(stat="")))
    assert patch.body == MESSAGE.strip() and patch.files == ("src/a.c", "include/b.h")


def test_folded_and_encoded_subjects(tmp_path: Path) -> None:
    folded = patch_text(subject="speculative: keep verify batches inside one\n 256-cell KV window")
    assert parse_patch(write(tmp_path, "f.patch", folded)).subject == \
        "speculative: keep verify batches inside one 256-cell KV window"
    encoded = patch_text(subject="=?UTF-8?q?cuda:=20caf=C3=A9?=")
    assert parse_patch(write(tmp_path, "e.patch", encoded)).subject == "cuda: café"


def test_missing_sections_must_start_a_line(tmp_path: Path) -> None:
    message = "Why: a reason. What: inline, not a section.\nVerified: a test.\n"
    patch = parse_patch(write(tmp_path, "a.patch", patch_text(message=message)))
    assert patch.missing_sections() == ["What:", "Upstream:"]
    assert Patch("x.patch", tmp_path / "x.patch", "s", "", ("f",)).missing_sections() == list(REQUIRED_SECTIONS)


def test_restore_hint_names_the_file_under_its_directory(tmp_path: Path) -> None:
    assert restore_hint(tmp_path / "patches" / "a.patch") == (
        "restore it from git: git checkout -- patches/a.patch (patch files are written by the tool from the work "
        "branch; a damaged one cannot be re-exported back)")


def _refused(path: Path) -> PatchError:
    with pytest.raises(PatchError) as raised:
        parse_patch(path)
    return raised.value


def test_damaged_patch_files_in_full(tmp_path: Path) -> None:
    directory = tmp_path / "patches"
    directory.mkdir()
    hint = restore_hint(directory / "a.patch")
    cases = [
        ("just some text\n", "not a git format-patch file (no mail header)"),
        ("just some text\n\nand more\n", "not a git format-patch file (no mail header)"),
        (HEADER + "Subject: x", "not a git format-patch file (no mail header)"),
        (HEADER + "\n" + MESSAGE + STAT + DIFF, "the patch has no Subject"),
        (HEADER + "Subject:   \n\n" + MESSAGE + STAT + DIFF, "the patch has no Subject"),
        (patch_text(stat="", diff=""), "the patch contains no diff (cut short?)"),
        (patch_text(diff=""), "the patch contains no diff (cut short?)"),
        (patch_text(stat="", diff="--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"), "the patch contains no diff (cut short?)"),
    ]
    for text, message in cases:
        error = _refused(write(directory, "a.patch", text))
        assert (error.message, error.hint) == (f"patches/a.patch: {message}", hint), text
        assert error.exit_code == 6


def test_a_diff_cut_short_says_where_it_starts(tmp_path: Path) -> None:
    directory = tmp_path / "patches"
    directory.mkdir()
    text = patch_text(diff=DIFF.rsplit(" int d;\n", 1)[0] + "-int e;\n")  # the hunk promises more than follows
    error = _refused(write(directory, "a.patch", text))
    first = text[: text.index("diff --git")].count("\n") + 1
    assert first == 15  # 4 header lines, a blank one, 5 of message, 4 of stat
    assert error.message.startswith("patches/a.patch: the patch file is corrupt or cut short (")
    assert error.message.endswith(f"; its diff starts at line {first})")
    assert error.hint == restore_hint(directory / "a.patch")


def test_a_diff_git_cannot_read_is_corrupt(tmp_path: Path) -> None:
    directory = tmp_path / "patches"
    directory.mkdir()
    text = patch_text(stat="", diff="diff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\n")
    error = _refused(write(directory, "a.patch", text))
    assert error.message == ("patches/a.patch: the patch file is corrupt or cut short (invalid patch header at line 2; "
                             "its diff starts at line 11)")
    # libgit2 finding no patch at all is a KeyError (pygit2's NotFoundError).
    error = _refused(write(directory, "a.patch", f"{HEADER}Subject: s\n\n{MESSAGE}diff --git "))
    assert error.message == ("patches/a.patch: the patch file is corrupt or cut short ('no patch found'; "
                             "its diff starts at line 11)")


def test_a_diff_that_touches_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    import pygit2

    from hiraishin_build import series

    # What libgit2 parses always names a file; should a diff ever come back empty, it is refused all the same.
    monkeypatch.setattr(series, "pygit2", SimpleNamespace(Diff=SimpleNamespace(parse_diff=lambda data: []),
                                                          GitError=pygit2.GitError))
    directory = tmp_path / "patches"
    directory.mkdir()
    error = _refused(write(directory, "a.patch", patch_text()))
    assert error.message == "patches/a.patch: the patch contains no diff"
    assert error.hint == restore_hint(directory / "a.patch")


def test_an_unreadable_patch_file(tmp_path: Path) -> None:
    (tmp_path / "a.patch").mkdir()
    error = _refused(tmp_path / "a.patch")
    assert error.message == f"{tmp_path / 'a.patch'}: cannot be read: Is a directory" and error.hint is None


# -- series --------------------------------------------------------------------------


def make_stack(directory: Path, *names: str, series: str | None = None) -> None:
    directory.mkdir(exist_ok=True)
    for name in names:
        write(directory, name, patch_text(subject=name[: -len(".patch")]))
    write(directory, "series", render_series([(name, None) for name in names]) if series is None else series)


def test_a_series_read_in_full(tmp_path: Path) -> None:
    make_stack(tmp_path, "b.patch", "a.patch", series="# the order\n\nb.patch\n  a.patch  \n")
    write(tmp_path, "draft.patch", patch_text())
    write(tmp_path, "notes.txt", "")
    series = read_series(tmp_path)
    assert series == Series(tmp_path, ("b.patch", "a.patch"))
    assert series.series_file == tmp_path / "series"
    assert series.patch_paths() == [tmp_path / "b.patch", tmp_path / "a.patch"]
    assert series.unlisted() == ["draft.patch"]
    assert [(p.name, p.subject) for p in series.patches()] == [("b.patch", "b"), ("a.patch", "a")]
    with pytest.raises(dataclasses.FrozenInstanceError):
        series.names = ()  # type: ignore[misc]


def test_several_unlisted_files_are_sorted(tmp_path: Path) -> None:
    make_stack(tmp_path, "a.patch")
    for name in ("z.patch", "m.patch"):
        write(tmp_path, name, "")
    assert read_series(tmp_path).unlisted() == ["m.patch", "z.patch"]


def test_render_series() -> None:
    assert render_series([("a.patch", None), ("b.patch", None)]) == "a.patch\nb.patch\n"
    assert render_series([("a.patch", DiffSize(2, 126, 67)), ("b.patch", DiffSize(1, 4, 1))]) == (
        "a.patch  # 2 files, +126 -67\nb.patch  # 1 file, +4 -1\n")
    assert render_series([]) == ""


def test_a_size_record_is_read_and_checked_against_the_file(tmp_path: Path) -> None:
    make_stack(tmp_path, "a.patch", series="a.patch  # 2 files, +2 -1\n")
    series = read_series(tmp_path)
    assert series.recorded == {"a.patch": DiffSize(2, 2, 1)} and series.patches()[0].size == DiffSize(2, 2, 1)
    write(tmp_path, "series", "a.patch  # 2 files, +3 -1\n")
    with pytest.raises(PatchError, match="records 2 files, \\+3 -1, but the file holds 2 files, \\+2 -1"):
        read_series(tmp_path).patches()
    write(tmp_path, "series", "a.patch  # two files\n")
    with pytest.raises(ConfigError, match="is not a diff size record"):
        read_series(tmp_path)


def _config_error(directory: Path) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        read_series(directory)
    return raised.value


@pytest.mark.parametrize(("series", "message", "hint"), [
    ("a.patch\nsub/b.patch\n", "{series}:2: 'sub/b.patch' is not a patch file name", "list bare names ending in .patch"),
    ("# x\na.diff\n", "{series}:2: 'a.diff' is not a patch file name", "list bare names ending in .patch"),
    ("a.patch\n\na.patch\n", "{series}:3: 'a.patch' is listed twice", None),
    ("# only a comment\n\n", "{series}: the series is empty",
     "list the patch files in order, one per line, or regenerate with `hiraishin patches export`"),
])
def test_bad_series_in_full(tmp_path: Path, series: str, message: str, hint: str | None) -> None:
    make_stack(tmp_path, "a.patch", series=series)
    error = _config_error(tmp_path)
    assert (error.message, error.hint) == (message.format(series=tmp_path / "series"), hint)
    assert type(error) is ConfigError


def test_a_series_file_that_is_missing(tmp_path: Path) -> None:
    error = _config_error(tmp_path)
    assert error.message == f"{tmp_path / 'series'}: file not found"
    assert error.hint == "the stack needs an order file listing one patch file name per line"


def test_a_patch_file_that_is_missing(tmp_path: Path) -> None:
    make_stack(tmp_path, "a.patch", series="a.patch\n# next\nb.patch\n")
    with pytest.raises(PatchError) as raised:
        read_series(tmp_path)
    assert raised.value.message == f"{tmp_path / 'series'}:3: patch file 'b.patch' is missing from {tmp_path}"
    assert raised.value.hint == "restore the file (git checkout -- patches/) or remove its line from series"
    (tmp_path / "b.patch").mkdir()  # a directory is no patch file either
    with pytest.raises(PatchError, match="patch file 'b.patch' is missing"):
        read_series(tmp_path)


def test_an_empty_series_when_allowed(tmp_path: Path) -> None:
    make_stack(tmp_path, series="")
    assert read_series(tmp_path, allow_empty=True) == Series(tmp_path, ())


@pytest.mark.parametrize(("subject", "name"), [
    ("ggml-cuda: batch-invariant mmvq up to 16 columns", "ggml-cuda-batch-invariant-mmvq-up-to-16-columns.patch"),
    ("  --Hello,  World!--  ", "hello-world.patch"),
    ("!!!", "patch.patch"),
    ("", "patch.patch"),
    # Cut at 60 characters, then any dash the cut leaves at the end is dropped.
    ("a" * 59 + " b" + "c" * 10, "a" * 59 + ".patch"),
    ("x" * 70, "x" * 60 + ".patch"),
])
def test_patch_file_names(subject: str, name: str) -> None:
    assert patch_file_name(subject, set()) == name


def test_patch_file_names_never_collide() -> None:
    assert patch_file_name("A change", {"a-change.patch"}) == "a-change-2.patch"
    assert patch_file_name("A change", {"a-change.patch", "a-change-2.patch"}) == "a-change-3.patch"
    assert patch_file_name("A change", {"a-change-2.patch"}) == "a-change.patch"


def test_a_patch_with_no_message_body_and_no_stat(tmp_path: Path) -> None:
    # git format-patch --no-stat of a commit with a subject only: the diff follows the header's blank line.
    patch = parse_patch(write(tmp_path, "a.patch", patch_text(message="", stat="")))
    assert (patch.subject, patch.body, patch.files) == ("ggml: a change", "", ("src/a.c", "include/b.h"))
    assert patch.missing_sections() == list(REQUIRED_SECTIONS)


def test_a_message_that_is_not_utf8_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "a.patch"
    path.write_bytes(patch_text(message="Why: caf\udce9.\n").encode("utf-8", errors="surrogateescape"))
    assert path.read_bytes().count(b"caf\xe9.") == 1  # a Latin-1 byte, not UTF-8
    patch = parse_patch(path)
    assert patch.body == "Why: caf\udce9." and patch.files == ("src/a.c", "include/b.h")
