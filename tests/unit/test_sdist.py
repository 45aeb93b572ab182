import hashlib
import json
import shutil
import tarfile
import tomllib
from pathlib import Path

import pytest

from hiraishin_build.errors import ConfigError
from hiraishin_build.sdist import build_sdist, stack_revision, upstream_build_number, wheel_version

from ..conftest import StackProject, sh_git

REPO = Path(__file__).resolve().parents[2]


def test_sdist_is_reproducible(wheel_project: StackProject, tmp_path: Path) -> None:
    project, cache = wheel_project.project, wheel_project.cache
    first = build_sdist(project, cache, tmp_path / "one")
    second = build_sdist(project, cache, tmp_path / "two")
    assert first.path.name == second.path.name == f"hiraishin_llama-{first.version}.tar.gz"
    assert first.sha256 == second.sha256 == hashlib.sha256(second.path.read_bytes()).hexdigest()
    # Same bytes on another day too: nothing in the tarball or its gzip header depends on the clock.
    raw = first.path.read_bytes()
    assert raw[:4] == b"\x1f\x8b\x08\x00"  # gzip, deflate, no flags (so no file name)
    assert raw[4:8] == b"\x00\x00\x00\x00"  # MTIME: none
    with tarfile.open(first.path) as tar:
        members = tar.getmembers()
    assert members and {m.mtime for m in members} == {315532800}  # 1980-01-01, the earliest a zip can hold
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "", "")}
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert {oct(m.mode) for m in members if m.isfile()} <= {"0o644", "0o755"}


def test_sdist_contents(wheel_project: StackProject, tmp_path: Path) -> None:
    result = build_sdist(wheel_project.project, wheel_project.cache, tmp_path)
    root = f"hiraishin_llama-{result.version}"
    with tarfile.open(result.path) as tar:
        names = set(tar.getnames())
        members = tar.getmembers()
        stack = json.loads(tar.extractfile(f"{root}/hiraishin_llama/stack.json").read())
        mmvq = tar.extractfile(f"{root}/llama.cpp/ggml/src/ggml-cuda/mmvq.cu").read().decode()
        version_py = tar.extractfile(f"{root}/hiraishin_llama/_version.py").read().decode()
    assert f"{root}/pyproject.toml" in names and f"{root}/CMakeLists.txt" in names and f"{root}/PKG-INFO" in names
    # The patched source, and nothing a build does not need.
    assert "batch-invariant" in mmvq
    assert f"{root}/llama.cpp/docs/build.md" not in names
    assert f"{root}/llama.cpp/models/ggml-vocab-big.gguf" not in names
    assert f"{root}/llama.cpp/models/templates/chat.jinja" in names
    assert all(m.mtime == members[0].mtime and m.uid == 0 and m.uname == "" for m in members)
    # The synthetic pin is tag b101, two commits deep: the version counts commits, not the name.
    assert result.version == f"2.{real_stack_revision()}"
    assert version_py == f'__version__ = "{result.version}"\n'
    assert result.files == len([m for m in members if not m.isdir()])
    generated = {m.name.removeprefix(f"{root}/"): m.mode for m in members
                 if m.name.endswith(("/PKG-INFO", "/_version.py", "/stack.json"))}
    assert generated == {"PKG-INFO": 0o644, "hiraishin_llama/_version.py": 0o644, "hiraishin_llama/stack.json": 0o644}
    assert stack["upstream"]["commit"] == wheel_project.upstream.commit
    assert stack["upstream"]["build_number"] == 2
    assert [p["subject"] for p in stack["patches"]] == ["mmvq: batch-invariant block 20", "common: declare the switch"]


def real_stack_revision() -> int:
    """The stack revision wheels/pyproject.toml states, read here without the tool."""
    return tomllib.loads((REPO / "wheels" / "pyproject.toml").read_text())["tool"]["hiraishin"]["stack-revision"]


def test_version_is_the_pinned_commits_commit_count_and_the_stack_revision(wheel_project: StackProject) -> None:
    from hiraishin_build.pin import UpstreamPin

    project, upstream = wheel_project.project, wheel_project.upstream
    store = wheel_project.cache.store()
    revision = real_stack_revision()
    assert stack_revision(project) == revision
    # As llama.cpp counts its build number: `git rev-list --count`, whatever the tag is called.
    assert upstream_build_number(store, project.pin()) == 2 == int(sh_git(upstream.path, "rev-list", "--count", "b101"))
    assert wheel_version(project, project.pin(), store) == f"2.{revision}"
    named_otherwise = UpstreamPin("u", "b10018-1.2.0", upstream.base)
    assert upstream_build_number(store, named_otherwise) == 1
    assert upstream_build_number(store, UpstreamPin("u", "main", upstream.commit)) == 2


def test_a_pinned_commit_missing_from_the_cache_has_no_build_number(wheel_project: StackProject) -> None:
    from hiraishin_build.pin import UpstreamPin

    pin = UpstreamPin("u", "b9079", "a" * 40, source=Path("recipes/upstream.toml"))
    with pytest.raises(ConfigError) as info:
        upstream_build_number(wheel_project.cache.store(), pin)
    assert info.value.message == ("recipes/upstream.toml: the pinned commit aaaaaaaaaaaa (b9079) is not in the "
                                  "upstream cache")
    assert info.value.hint.startswith("hiraishin upstream fetch")


@pytest.mark.parametrize("value", [0, 6, 17])
def test_stack_revision_is_the_one_in_the_wheel_project(tmp_path: Path, value: int) -> None:
    from hiraishin_build.project import Project

    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "pyproject.toml").write_text(f"[tool.hiraishin]\nstack-revision = {value}\n")
    assert stack_revision(Project(tmp_path)) == value


@pytest.mark.parametrize("table", ["", "[tool.hiraishin]\n", "[tool.hiraishin]\nstack-revision = -1\n",
                                   '[tool.hiraishin]\nstack-revision = "6"\n', "[tool.hiraishin]\nstack-revision = 6.0\n"])
def test_a_missing_or_bad_stack_revision_is_refused(tmp_path: Path, table: str) -> None:
    from hiraishin_build.project import Project

    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "pyproject.toml").write_text(table)
    with pytest.raises(ConfigError) as info:
        stack_revision(Project(tmp_path))
    assert info.value.message == f"{tmp_path / 'wheels' / 'pyproject.toml'}: [tool.hiraishin] stack-revision must be a " \
                              "non-negative integer"
    assert info.value.hint.startswith("it is the second part of the wheel version")


def test_sdist_without_a_patch_for_fault_builds(wheel_project: StackProject, tmp_path: Path) -> None:
    from hiraishin_build.series import read_series

    names = read_series(wheel_project.project.patches_dir).names
    result = build_sdist(wheel_project.project, wheel_project.cache, tmp_path, omit=frozenset({names[0]}))
    root = f"hiraishin_llama-{result.version}"
    with tarfile.open(result.path) as tar:
        stack = json.loads(tar.extractfile(f"{root}/hiraishin_llama/stack.json").read())
        mmvq = tar.extractfile(f"{root}/llama.cpp/ggml/src/ggml-cuda/mmvq.cu").read().decode()
    assert stack["omitted_patches"] == [names[0]]
    assert [p["name"] for p in stack["patches"]] == list(names[1:])
    assert "batch-invariant" not in mmvq  # the omitted patch is the one that changed mmvq.cu
    with pytest.raises(ConfigError, match="cannot leave out nope.patch"):
        build_sdist(wheel_project.project, wheel_project.cache, tmp_path, omit=frozenset({"nope.patch"}))


def test_fault_sdist_directory_names_stay_usable() -> None:
    from hiraishin_build.cli import _without_dir_name

    series = tuple(f"patch-number-{i}-with-a-long-descriptive-subject-line.patch" for i in range(8))
    assert _without_dir_name(series[:1], series) == "without-patch-number-0-with-a-long-descriptive-subject-line"
    assert _without_dir_name(series, series) == "stock"
    many = _without_dir_name(series[:5], series)
    assert many.startswith("without-5-patches-") and len(many) < 40
    assert many != _without_dir_name(series[1:6], series)


# -- the parts of an sdist, without a stack to apply ------------------------------------


def test_an_sdist_result_cannot_change() -> None:
    import dataclasses

    from hiraishin_build.sdist import SdistResult

    result = SdistResult(Path("x.tar.gz"), "1.2", "0" * 64, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.files = 4  # type: ignore[misc]


def test_package_metadata() -> None:
    from hiraishin_build.sdist import _pkg_info

    assert _pkg_info("9079.6") == b"Metadata-Version: 2.1\nName: hiraishin-llama\nVersion: 9079.6\n"


def test_tar_entries_have_fixed_owners_times_and_modes() -> None:
    from hiraishin_build.sdist import FIXED_MTIME, _tar_entry

    assert FIXED_MTIME == 315532800  # 1980-01-01 00:00:00 UTC
    # Any execute bit makes a file executable (0o755); nothing else does (a write bit for others included).
    for mode, expected in ((0o100644, 0o644), (0o100755, 0o755), (0o100744, 0o755), (0o100640, 0o644),
                           (0o100646, 0o644), (0o100601, 0o755), (0o100610, 0o755)):
        info, payload = _tar_entry("root/a.c", mode, b"int a;\n")
        assert (info.name, info.type, info.mode, info.size, payload) == ("root/a.c", tarfile.REGTYPE, expected, 7,
                                                                         b"int a;\n")
        assert (info.mtime, info.uid, info.gid, info.uname, info.gname) == (315532800, 0, 0, "", "")
    link, payload = _tar_entry("root/link.h", 0o120000, b"../include/real.h")
    assert (link.type, link.linkname, payload) == (tarfile.SYMTYPE, "../include/real.h", None)
    assert (link.mtime, link.uid, link.gid, link.uname, link.gname) == (315532800, 0, 0, "", "")


def test_a_tarball_is_sorted_and_the_same_bytes_each_time(tmp_path: Path) -> None:
    from hiraishin_build.sdist import write_tarball

    files = [("src/b.c", 0o100644, b"b\n"), ("run.sh", 0o100755, b"#!/bin/sh\n"), ("a.h", 0o120000, b"src/b.c")]
    assert write_tarball(tmp_path / "one.tar.gz", "pkg-1.0", files) == 3
    assert write_tarball(tmp_path / "two.tar.gz", "pkg-1.0", list(reversed(files))) == 3
    raw = (tmp_path / "one.tar.gz").read_bytes()
    assert raw == (tmp_path / "two.tar.gz").read_bytes()
    assert raw[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # no name, no time; XFL 2: best compression
    with tarfile.open(tmp_path / "one.tar.gz") as tar:
        members = tar.getmembers()
        assert [(m.name, m.type, m.mode) for m in members] == [
            ("pkg-1.0/a.h", tarfile.SYMTYPE, 0o644), ("pkg-1.0/run.sh", tarfile.REGTYPE, 0o755),
            ("pkg-1.0/src/b.c", tarfile.REGTYPE, 0o644)]
        assert members[0].linkname == "src/b.c"
        assert tar.extractfile("pkg-1.0/src/b.c").read() == b"b\n"
        assert tar.pax_headers == {} and members[1].pax_headers == {}


def test_the_stack_info_in_full(tmp_path: Path) -> None:
    from hiraishin_build.pin import UpstreamPin
    from hiraishin_build.project import Project
    from hiraishin_build.sdist import _stack_info

    shutil.copytree(REPO / "patches", tmp_path / "patches")
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "pyproject.toml").write_text(
        '[tool.hiraishin]\nexact-backends = ["cuda", "cpu"]\nexact-moe-backends = ["cuda"]\n')
    project = Project(tmp_path)
    pin = UpstreamPin("https://example.invalid/llama.git", "b101", "a" * 40)
    names = [line.split("#")[0].strip() for line in (tmp_path / "patches" / "series").read_text().splitlines() if line.strip()]
    text = _stack_info(project, pin, "c" * 40, "101.7", 101).decode()
    info = json.loads(text)
    assert list(info) == ["exact_backends", "exact_hybrid_backends", "exact_moe_backends",
                          "exact_moe_experts_on_cpu_backends", "exact_slots_backends",
                          "patched_commit", "patches", "upstream", "version"]  # sorted keys
    assert text.endswith("}\n") and text.splitlines()[1] == '  "exact_backends": ['
    assert info["exact_backends"] == ["cpu", "cuda"]
    assert info["exact_moe_backends"] == ["cuda"]
    assert info["upstream"] == {"url": "https://example.invalid/llama.git", "ref": "b101", "commit": "a" * 40,
                               "build_number": 101}
    assert (info["patched_commit"], info["version"]) == ("c" * 40, "101.7")
    assert [p["name"] for p in info["patches"]] == names
    first = tmp_path / "patches" / names[0]
    subject = next(line for line in first.read_text().splitlines() if line.startswith("Subject: "))
    assert info["patches"][0] == {"name": names[0], "subject": subject.removeprefix("Subject: "),
                                  "sha256": hashlib.sha256(first.read_bytes()).hexdigest()}
    omitted = json.loads(_stack_info(project, pin, "c" * 40, "101.7", 101, frozenset(names[:2][::-1])))
    assert omitted["omitted_patches"] == sorted(names[:2])
    assert [p["name"] for p in omitted["patches"]] == names[2:]
    # Without exact backends in the wheel project, none are claimed.
    (tmp_path / "wheels" / "pyproject.toml").write_text("[tool.hiraishin]\nstack-revision = 1\n")
    assert json.loads(_stack_info(project, pin, "c" * 40, "101.7", 101))["exact_backends"] == []


def test_the_wheel_project_is_what_git_tracks_as_it_is_on_disk(tmp_path: Path) -> None:
    import os

    from hiraishin_build.project import Project
    from hiraishin_build.sdist import _wheel_project_files

    wheels = tmp_path / "wheels"
    (wheels / "src").mkdir(parents=True)
    (wheels / "pyproject.toml").write_text("[project]\n")
    (wheels / "src" / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(wheels / "src" / "run.sh", 0o755)
    (wheels / "gone.txt").write_text("x\n")
    # Executable is any execute bit, for owner, group or others; a write bit for others is not one.
    for name, mode in (("others-x.sh", 0o601), ("others-w.txt", 0o646), ("group-x.sh", 0o610)):
        (wheels / name).write_text(name)
        os.chmod(wheels / name, mode)
    (tmp_path / "README").write_text("not the wheel project\n")
    sh_git(tmp_path, "init", "-q")
    sh_git(tmp_path, "add", "-A")
    sh_git(tmp_path, "commit", "-q", "-m", "wheels")
    (wheels / "gone.txt").unlink()  # deleted, not yet committed
    (wheels / "pyproject.toml").write_text("[project]\nname = 'edited'\n")  # a work in progress builds
    (wheels / "untracked.txt").write_text("x\n")
    assert sorted(_wheel_project_files(Project(tmp_path))) == [
        ("group-x.sh", 0o100755, b"group-x.sh"), ("others-w.txt", 0o100644, b"others-w.txt"),
        ("others-x.sh", 0o100755, b"others-x.sh"),
        ("pyproject.toml", 0o100644, b"[project]\nname = 'edited'\n"), ("src/run.sh", 0o100755, b"#!/bin/sh\n")]
    sh_git(tmp_path, "rm", "-q", "--cached", "wheels/pyproject.toml")
    with pytest.raises(ConfigError) as info:
        _wheel_project_files(Project(tmp_path))
    assert info.value.message == f"{wheels}: no tracked pyproject.toml"
    assert info.value.hint == "the wheel project must be committed"


def test_stack_revision_hint_in_full(tmp_path: Path) -> None:
    from hiraishin_build.project import Project

    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "pyproject.toml").write_text("[tool.hiraishin]\nstack-revision = true\n")
    with pytest.raises(ConfigError) as info:
        stack_revision(Project(tmp_path))
    assert info.value.hint == ("it is the second part of the wheel version; raise it when the stack changes on the "
                               "same upstream build")


def test_build_sdist_says_what_it_wrote(wheel_project: StackProject, tmp_path: Path,
                                        caplog: pytest.LogCaptureFixture) -> None:
    import os

    root = wheel_project.project.root
    (root / "wheels" / "blob.bin").write_bytes(os.urandom(250_000))  # incompressible: some 0.25 MB of sdist
    sh_git(root, "add", "wheels/blob.bin")
    with caplog.at_level("INFO", logger="hiraishin"):
        result = build_sdist(wheel_project.project, wheel_project.cache, tmp_path)
    size = result.path.stat().st_size
    assert 250_000 < size < 450_000  # the blob and the wheel project's own files, compressed
    assert f"wrote {result.path} ({result.files} files, {size / 1e6:.1f} MB)" in [
        r.getMessage() for r in caplog.records if r.name == "hiraishin"]
