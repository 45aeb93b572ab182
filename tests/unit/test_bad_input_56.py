"""Bad input a user met (report 56): a series with a BOM or CRLF line endings, text after a patch's last hunk,
usage errors that exit 2, empty paths, a --without that names no patch, a full disk, and the slots the CPU
wheel's coverage line names."""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import pytest

from hiraishin_build import fsutil, git
from hiraishin_build.errors import CommandError, PatchError, PathError
from hiraishin_build.series import parse_patch, read_series

from ..conftest import StackProject, Upstream, make_project
from ..helpers import hiraishin, make_wheel

BOM = "\ufeff".encode()
CRLF_FIX = "sed -i 's/\\r$//' patches/series"


def first_patch(stack: StackProject) -> Path:
    return stack.project.patches_dir / read_series(stack.project.patches_dir).names[0]


# -- 1. a UTF-8 byte order mark at the start of patches/series ------------------------------------------------


def test_a_bom_at_the_start_of_series_is_not_part_of_the_first_name(tmp_path: Path) -> None:
    for name in ("one.patch", "two.patch"):
        (tmp_path / name).write_text("x\n")
    (tmp_path / "series").write_bytes(BOM + b"one.patch  # 1 file, +1 -1\ntwo.patch\n")
    series = read_series(tmp_path)
    assert series.names == ("one.patch", "two.patch")
    assert set(series.recorded) == {"one.patch"}


def test_a_bom_in_series_is_read_named_by_check_and_never_written(stack_project: StackProject) -> None:
    root, series = stack_project.project.root, stack_project.project.patches_dir / "series"
    series.write_bytes(BOM + series.read_bytes())
    listed = hiraishin("patches", "list", cwd=root)
    assert listed.returncode == 0, listed.stderr
    checked = hiraishin("patches", "check", cwd=root)
    # check compares bytes with what export writes (no BOM): it fails, and says why and how to fix it, once.
    assert checked.returncode == 7, checked.stderr
    assert checked.stderr.count("patches/series starts with a UTF-8 byte order mark (BOM)") == 1
    assert "sed -i '1s/^\\xEF\\xBB\\xBF//' patches/series" in checked.stderr
    assert "is missing" not in checked.stderr
    assert hiraishin("patches", "apply", cwd=root).returncode == 0
    exported = hiraishin("patches", "export", cwd=root)
    assert exported.returncode == 0, exported.stderr
    assert not series.read_bytes().startswith(BOM)
    assert hiraishin("patches", "check", cwd=root).returncode == 0


# -- 2. CRLF line endings in patches/series ---------------------------------------------------------------------


def test_crlf_line_endings_in_series_are_named_by_check_with_the_fix(stack_project: StackProject) -> None:
    root, series = stack_project.project.root, stack_project.project.patches_dir / "series"
    series.write_bytes(series.read_bytes().replace(b"\n", b"\r\n"))
    checked = hiraishin("patches", "check", cwd=root)
    assert checked.returncode == 7, checked.stderr
    assert checked.stderr.count("patches/series has CRLF line endings") == 1
    assert CRLF_FIX in checked.stderr
    # Read as the same series; the tool writes it back with LF.
    assert hiraishin("patches", "apply", cwd=root).returncode == 0
    exported = hiraishin("patches", "export", cwd=root)
    assert exported.returncode == 0, exported.stderr
    assert b"\r" not in series.read_bytes()


# -- 3. text after a patch's last hunk --------------------------------------------------------------------------


def test_a_note_after_the_last_hunk_is_refused_naming_its_line(stack_project: StackProject) -> None:
    patch = first_patch(stack_project)
    lines = patch.read_bytes().count(b"\n")
    patch.write_bytes(patch.read_bytes() + b"\nNote: send this upstream once b7000 is out.\n")
    with pytest.raises(PatchError) as info:
        parse_patch(patch)
    assert info.value.message.startswith(f"patches/{patch.name}: text after the diff at line {lines + 2} ")
    assert "'Note: send this upstream once b7000 is out.'" in info.value.message
    assert "message above the diff" in (info.value.hint or "")


@pytest.mark.parametrize("command", ["check", "apply"])
def test_check_and_apply_refuse_a_note_after_the_last_hunk(stack_project: StackProject, command: str) -> None:
    patch = first_patch(stack_project)
    lines = patch.read_bytes().count(b"\n")
    patch.write_bytes(patch.read_bytes() + b"Note: keep until upstream fixes it\n")
    before = patch.read_bytes()
    result = hiraishin("patches", command, cwd=stack_project.project.root)
    assert result.returncode == 6, result.stderr
    assert f"patches/{patch.name}: text after the diff at line {lines + 1}" in result.stderr
    assert "hint:" in result.stderr and "Traceback" not in result.stderr
    assert patch.read_bytes() == before


HAND_PATCH = (
    "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
    "From: A <a@example.invalid>\nDate: Thu, 1 Jan 1970 00:00:00 +0000\nSubject: a\n\nWhy: x\n---\n"
    "diff --git a/x.c b/x.c\nindex 1111111..2222222 100644\n--- a/x.c\n+++ b/x.c\n"
    "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
    "diff --git a/y.c b/y.c\nold mode 100644\nnew mode 100755\n"
    "diff --git a/z.c b/z.c\nindex 1111111..2222222 100644\n--- a/z.c\n+++ b/z.c\n"
    "@@ -1 +1 @@\n-a\n+b\n"
    "@@ -10,2 +10,2 @@\n \n-c\n+d\n"
)


def write_hand_patch(tmp_path: Path, text: str) -> Path:
    (tmp_path / "patches").mkdir(exist_ok=True)
    path = tmp_path / "patches" / "a.patch"
    path.write_text(text)
    return path


def test_what_git_writes_in_and_after_a_diff_still_parses(tmp_path: Path) -> None:
    # "\\ No newline", a mode change without hunks, an empty context line, a signature, blank lines at the end.
    for tail in ("", "-- \n2.43.0\n\n", "--\n2.39.3 (Apple Git-146)\n", "\n\n"):
        assert parse_patch(write_hand_patch(tmp_path, HAND_PATCH.replace("\n \n-c", "\n\n-c") + tail)).files == (
            "x.c", "y.c", "z.c")


@pytest.mark.parametrize(("where", "text"), [
    ("between hunks", HAND_PATCH.replace("\n@@ -10,2", "\nsee the issue\n@@ -10,2")),
    ("between files", HAND_PATCH.replace("\ndiff --git a/z.c", "\n\nsee the issue\ndiff --git a/z.c")),
    ("after a mode change", HAND_PATCH.replace("new mode 100755\n", "new mode 100755\nsee the issue\n")),
    ("after a signature", HAND_PATCH + "-- \n2.43.0\n\nsee the issue\n"),
    ("instead of a signature", HAND_PATCH + "-- \nsee the issue\n"),
], ids=lambda value: value if len(value) < 40 else "")
def test_text_anywhere_after_the_diff_starts_is_refused(tmp_path: Path, where: str, text: str) -> None:
    line = text[:text.index("see the issue")].count("\n") + 1
    with pytest.raises(PatchError, match=f"^patches/a.patch: text after the diff at line {line} "):
        parse_patch(write_hand_patch(tmp_path, text))


# -- 4. usage errors exit 2; empty paths; --without a patch the series lacks -----------------------------------


def test_index_usage_errors_exit_2(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    make_wheel(wheels / "cpu", {})
    cases = [
        (["--assets-url", "https://example.invalid/releases/download/v1"], "--assets-out"),
        (["--assets-out", str(tmp_path / "assets")], "--assets-url"),
        (["--assets-url", "ftp://example.invalid/x", "--assets-out", str(tmp_path / "assets")], "--assets-url"),
        (["--site-url", "example.invalid/site"], "--site-url"),
    ]
    for extra, named in cases:
        result = hiraishin("index", str(wheels), "--out", str(tmp_path / "site"), *extra, cwd=tmp_path)
        assert result.returncode == 2, (extra, result.stderr)
        assert named in result.stderr and "Traceback" not in result.stderr
        assert not (tmp_path / "site").exists() and not (tmp_path / "assets").exists()


def test_yank_usage_errors_exit_2(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    for args, named in [(["10400.20", "--reason", " "], "--reason"), (["ten", "--reason", "broken"], "VERSION")]:
        result = hiraishin("yank", *args, "--site", str(site), cwd=tmp_path)
        assert result.returncode == 2, (args, result.stderr)
        assert named in result.stderr and "Traceback" not in result.stderr


def test_an_empty_sdist_out_is_a_usage_error(stack_project: StackProject) -> None:
    root = stack_project.project.root
    before = sorted(path.name for path in root.iterdir())
    result = hiraishin("sdist", "--out", "", cwd=root)
    assert result.returncode == 2, result.stderr
    assert "--out" in result.stderr and "empty" in result.stderr
    assert sorted(path.name for path in root.iterdir()) == before


def test_an_empty_fetch_from_is_a_usage_error(tmp_path: Path, upstream: Upstream, cache) -> None:  # type: ignore[no-untyped-def]
    project = make_project(tmp_path / "project", upstream)
    result = hiraishin("upstream", "fetch", "--from", "", cwd=project.root)
    assert result.returncode == 2, result.stderr
    assert "--from" in result.stderr and "empty" in result.stderr
    assert not cache.exists()  # nothing was fetched from the pin's url instead


@pytest.mark.parametrize(("given", "suggested"), [
    ("nosuch.patch", None),
    ("mmvq-batch-invariant-block-2.patch", "mmvq-batch-invariant-block-20.patch"),
])
def test_sdist_without_a_patch_not_in_series_makes_nothing(stack_project: StackProject, given: str,
                                                           suggested: str | None) -> None:
    root = stack_project.project.root
    result = hiraishin("sdist", "--without", given, cwd=root)
    assert result.returncode == 2, result.stderr
    assert f"'{given}' is not in patches/series" in result.stderr
    assert (f"did you mean '{suggested}'?" in result.stderr) == (suggested is not None)
    assert not (root / "dist").exists()


# -- 5. a full disk names the path being written ----------------------------------------------------------------


def _full_disk(*args: object, **kwargs: object) -> object:
    raise OSError(errno.ENOSPC, "No space left on device")


class _FullFile:
    """What os.fdopen gives on a full disk: a file whose writes fail."""

    def __init__(self, fd: int, *args: object, **kwargs: object) -> None:
        import os

        self._fd = fd
        self._os = os

    def __enter__(self) -> _FullFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._os.close(self._fd)

    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_names_the_sdist_being_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hiraishin_build.sdist import write_tarball

    monkeypatch.setattr(fsutil.os, "fdopen", _FullFile)
    target = tmp_path / "dist" / "hiraishin_llama-1.0.tar.gz"
    with pytest.raises(PathError) as info:
        write_tarball(target, "hiraishin_llama-1.0", [("PKG-INFO", 0o100644, b"Name: x\n")])
    assert info.value.message == f"cannot write {target}: the disk is full (No space left on device)"
    assert info.value.hint is not None and "free space" in info.value.hint and "another directory" in info.value.hint
    assert list(target.parent.iterdir()) == []  # no temporary file left behind


def test_a_full_disk_names_the_output_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsutil.tempfile, "NamedTemporaryFile", _full_disk)
    with pytest.raises(PathError) as info:
        fsutil.writable_directory(tmp_path / "out", what="the sdist's output directory", given_as="--out")
    assert info.value.message == (f"the sdist's output directory {tmp_path / 'out'} cannot be written: the disk is "
                                  "full (No space left on device)")
    assert info.value.hint is not None and "free space" in info.value.hint and "--out" in info.value.hint


def test_a_full_disk_while_staging_names_the_directory(tmp_path: Path) -> None:
    target = tmp_path / "site"
    target.mkdir()
    (target / "index.html").write_text("old\n")
    with pytest.raises(PathError) as info, fsutil.staged_directory(target):
        raise OSError(errno.ENOSPC, "No space left on device", "/somewhere/else/wheel.whl")
    assert info.value.message.startswith(f"cannot write the new {target}: the disk is full")
    assert (target / "index.html").read_text() == "old\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["site"]


def test_a_full_cache_is_named_not_blamed_on_the_url(tmp_path: Path, upstream: Upstream, cache,  # type: ignore[no-untyped-def]
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_project(tmp_path / "project", upstream)

    def fetch_into_a_full_disk(repo: Path, url: str, *args: object, what: str, hint: str | None = None,
                               **kwargs: object) -> None:
        # What git says when the cache's file system fills during a fetch (git 2.39, a 256 KiB tmpfs).
        raise CommandError(f"{what} failed", command=["git", "fetch"], returncode=128, hint=hint,
                           output_tail="fatal: unable to write loose object file: No space left on device\n"
                                       "fatal: unpack-objects failed")

    monkeypatch.setattr(git, "fetch_as_promisor", fetch_into_a_full_disk)
    with pytest.raises(PathError) as info:
        cache.fetch(str(upstream.path), project.pin())
    assert info.value.message.startswith(f"cannot write the upstream cache {cache.git_dir}: the disk is full")
    assert "check the URL" not in str(info.value)
    assert info.value.hint is not None and "free space" in info.value.hint and "HIRAISHIN_CACHE_DIR" in info.value.hint
    assert not cache.exists()  # a failed first fetch leaves no cache


@pytest.mark.parametrize("free", [4096, 10 << 30])
def test_a_git_write_that_fails_without_a_reason_on_a_full_cache(tmp_path: Path, upstream: Upstream, cache,  # type: ignore[no-untyped-def]
                                                                  monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    """git's config writes fail without saying why (seen on a full tmpfs): next to no space left says it."""
    import collections
    import shutil

    project = make_project(tmp_path / "project", upstream)
    real_init = cache._init

    def init_then_fail() -> None:
        real_init()
        raise CommandError("git failed", command=["git", "config"], returncode=4,
                           output_tail=f"error: failed to write new configuration file {cache.git_dir}/config.lock")

    monkeypatch.setattr(cache, "_init", init_then_fail)
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(free * 2, free, free))
    with pytest.raises((PathError, CommandError)) as info:
        cache.fetch(str(upstream.path), project.pin())
    if free < 1 << 20:
        assert isinstance(info.value, PathError)
        assert info.value.message == f"cannot write the upstream cache {cache.git_dir}: the disk is full (4 KiB free)"
    else:
        assert not isinstance(info.value, PathError)  # a disk with room: git's own error stands
    assert not cache.exists()


# -- 6. the CPU wheel's coverage line does not say one server slot -----------------------------------------------


@pytest.fixture
def coverage_module():  # type: ignore[no-untyped-def]
    pytest.importorskip("gguf")
    wheels = str(Path(__file__).resolve().parents[2] / "wheels")
    if wheels not in sys.path:
        sys.path.insert(0, wheels)
    from hiraishin_llama import coverage

    return coverage


def _render(coverage, backends: list[str]) -> str:  # type: ignore[no-untyped-def]
    data = coverage.load_coverage()
    model = coverage.Model(Path("m.gguf"), "qwen3", {}, (), (Path("m.gguf"),))
    verdicts = [coverage.Verdict(backend, True, ()) for backend in backends]
    lines = [line for line in coverage.render(model, verdicts, data).splitlines() if line.startswith("at run time:")]
    assert len(lines) == 1
    return lines[0]


def test_the_cpu_wheels_run_time_line_does_not_say_one_slot(coverage_module) -> None:  # type: ignore[no-untyped-def]
    line = _render(coverage_module, ["cpu"])
    assert "one server slot" not in line
    assert "one or several server slots" in line
    assert _render(coverage_module, ["cuda"]).count("one server slot;") == 1
    both = _render(coverage_module, ["cuda", "cpu"])
    assert "one server slot on cuda (several on cpu)" in both


@pytest.mark.parametrize("args", [
    ("build", "--from", ""),
    ("index", "dist", "--out", ""),
    ("index", "dist", "--out", "site", "--assets-out", "", "--assets-url", "https://example.invalid/a/"),
])
def test_an_empty_path_or_source_is_a_usage_error_not_the_current_directory(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "dist").mkdir()
    done = hiraishin(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "empty: give a value" in done.stderr
    assert not (tmp_path / "site").exists()


def test_an_sdist_whose_patch_fails_names_no_work_tree_it_deleted(wheel_project: StackProject, tmp_path: Path) -> None:
    patches = wheel_project.project.patches_dir
    name = next(p for p in read_series(patches).patches() if "mmvq" in p.subject).name
    text = (patches / name).read_text()
    (patches / name).write_text(text.replace("-    // block 20\n", "-    // block twenty\n"))
    done = hiraishin("sdist", "--out", str(tmp_path / "out"), cwd=wheel_project.project.root)
    assert done.returncode != 0
    assert name in done.stderr
    # the scratch work tree is gone when the message is read: pointing at it would send the user nowhere
    error = done.stderr[done.stderr.index("error:"):]
    assert "hiraishin-sdist-" not in error, error
