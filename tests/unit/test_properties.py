"""Properties of the parsers and the version logic, over generated input: the series file and patch
files a maintainer may damage in any way, tag names, and versions."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import Version

from hiraishin_build import docgen, tags
from hiraishin_build.errors import ConfigError, PatchError, VersionNotNewer
from hiraishin_build.pin import UpstreamPin
from hiraishin_build.releases import Release, require_newer
from hiraishin_build.series import DiffSize, parse_patch, patch_file_name, read_series, render_series

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

patch_names = st.from_regex(r"[a-z0-9][a-z0-9-]{0,40}\.patch", fullmatch=True)
sizes = st.one_of(st.none(), st.builds(DiffSize, st.integers(1, 500), st.integers(0, 10**6), st.integers(0, 10**6)))


@SETTINGS
@given(st.lists(st.tuples(patch_names, sizes), unique_by=lambda entry: entry[0], min_size=1, max_size=12))
def test_a_rendered_series_reads_back_as_it_was_written(entries: list[tuple[str, DiffSize | None]]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        for name, _ in entries:
            (directory / name).write_text("")
        (directory / "series").write_text(render_series(entries))
        series = read_series(directory)
    assert list(series.names) == [name for name, _ in entries]
    assert series.recorded == {name: size for name, size in entries if size is not None}


@SETTINGS
@given(st.text(max_size=400))
def test_any_series_text_is_read_or_refused_with_a_config_or_patch_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        (directory / "a.patch").write_text("")
        (directory / "series").write_text(text, encoding="utf-8")
        try:
            series = read_series(directory, allow_empty=True)
        except (ConfigError, PatchError) as error:
            assert str(directory / "series") in error.message or "series" in error.message
        else:
            assert all(name.endswith(".patch") and "/" not in name for name in series.names)


@SETTINGS
@given(st.builds(DiffSize, st.integers(0, 10**6), st.integers(0, 10**9), st.integers(0, 10**9)))
def test_a_diff_size_record_round_trips(size: DiffSize) -> None:
    assert DiffSize.parse(str(size)) == size


WHOLE_PATCH = (b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
               b"From: A <a@example.invalid>\nDate: Thu, 1 Jan 1970 00:00:00 +0000\nSubject: a change\n\n"
               b"Why: x.\n---\n"
               b"diff --git a/f.c b/f.c\nindex 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222"
               b" 100644\n--- a/f.c\n+++ b/f.c\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n d\n")


@SETTINGS
@given(st.binary(max_size=600))
def test_any_bytes_as_a_patch_file_parse_or_are_refused_with_a_patch_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "x.patch"
        path.write_bytes(data)
        try:
            parse_patch(path)
        except PatchError as error:
            assert "x.patch" in error.message
    # and so does every prefix of a whole patch: cut anywhere, never another exception
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "x.patch"
        for end in range(0, len(WHOLE_PATCH) + 1, 7):
            path.write_bytes(WHOLE_PATCH[:end])
            try:
                parse_patch(path)
            except PatchError:
                pass


@SETTINGS
@given(st.integers(0, len(WHOLE_PATCH)))
def test_a_whole_patch_cut_short_never_keeps_its_size(end: int) -> None:
    """What the series' size record relies on: a cut changes the size or is refused."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "x.patch"
        path.write_bytes(WHOLE_PATCH)
        whole = parse_patch(path).size
        path.write_bytes(WHOLE_PATCH[:end])
        try:
            cut = parse_patch(path).size
        except PatchError:
            return
    # The last line may lose only its newline and still be the same hunk.
    assert cut != whole or end >= len(WHOLE_PATCH) - 1


@SETTINGS
@given(st.text(max_size=120), st.sets(patch_names, max_size=5))
def test_a_patch_file_name_is_always_a_fresh_bare_patch_name(subject: str, taken: set[str]) -> None:
    name = patch_file_name(subject, taken)
    assert name.endswith(".patch") and "/" not in name and name not in taken
    assert len(name) <= 60 + len("-99.patch")


@SETTINGS
@given(st.one_of(st.text(max_size=80), st.from_regex(r"([a-z-]{0,12}-)?b[0-9]{1,6}(-[a-z0-9.]{0,12})?", fullmatch=True)))
def test_a_tag_names_build_number_is_the_number_after_b_or_none(name: str) -> None:
    number = tags.build_number(name)
    assert number is None or re.search(rf"(?:^|-)b0*{number}(?:-|$)", name)


@SETTINGS
@given(st.integers(0, 10**6), st.integers(0, 999))
def test_versions_read_back_from_their_parts(build: int, revision: int) -> None:
    version = f"{build}.{revision}+cu13.sm90"
    assert docgen._build_of(version) == build
    assert docgen._revision_of(version) == revision


class _History:
    """A straight line of commits c0 <- c1 <- ... standing in for the cache's object store."""

    def __init__(self, length: int) -> None:
        self.commits = [f"{i:040x}" for i in range(length)]

    def commit_exists(self, commit: str) -> bool:
        return commit in self.commits

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return self.commits.index(ancestor) <= self.commits.index(descendant)


@SETTINGS
@given(st.integers(1, 30), st.data())
def test_a_version_is_accepted_exactly_when_it_sorts_above_every_release_in_its_history(length: int,
                                                                                       data: st.DataObject) -> None:
    history = _History(length)
    pinned = data.draw(st.integers(0, length - 1))
    releases = [Release(Version(f"{data.draw(st.integers(0, 40))}.{data.draw(st.integers(0, 20))}"),
                        history.commits[data.draw(st.integers(0, length - 1))])
                for _ in range(data.draw(st.integers(0, 4)))]
    candidate = Version(f"{data.draw(st.integers(0, 40))}.{data.draw(st.integers(0, 20))}")
    pin = UpstreamPin("u", "b1", history.commits[pinned])
    binding = [r for r in releases if history.commits.index(r.upstream_commit) <= pinned]
    allowed = all(candidate > r.version or (candidate == r.version and r.upstream_commit == pin.commit)
                  for r in binding)
    try:
        require_newer(str(candidate), pin, releases, history)  # type: ignore[arg-type]
    except VersionNotNewer:
        assert not allowed
    else:
        assert allowed
