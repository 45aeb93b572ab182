"""An sdist's version must sort above every release its pin descends from,
so that `pip install -U` reaches it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.version import Version

from hiraishin_build.errors import ConfigError
from hiraishin_build.errors import VersionNotNewer
from hiraishin_build.releases import RELEASES_FILE, Release, load_releases, require_newer
from hiraishin_build.sdist import build_sdist

from ..conftest import StackProject, sh_git
from .test_sdist import real_stack_revision

REPO = Path(__file__).resolve().parents[2]


def write_releases(project_root: Path, *entries: tuple[str, str]) -> Path:
    path = project_root / RELEASES_FILE
    path.write_text("".join(f'[[release]]\nversion = "{version}"\nupstream-commit = "{commit}"\n\n'
                            for version, commit in entries))
    return path


def test_the_real_releases_file_names_the_released_10354_13_on_the_b10354_pin() -> None:
    releases = load_releases(REPO / RELEASES_FILE)
    assert Release(Version("10354.13"), "066cc29b42eed73b9e7b1a1e6ad45dc3dd2c9b07") in releases
    # Raw TOML, read without the tool, agrees.
    raw = tomllib.loads((REPO / RELEASES_FILE).read_text())["release"]
    assert [entry["version"] for entry in raw] == [str(release.version) for release in releases]


def test_no_releases_file_means_nothing_was_released(tmp_path: Path) -> None:
    assert load_releases(tmp_path / "releases.toml") == []


@pytest.mark.parametrize(("text", "message"), [
    ('release = "10354.13"\n', "'release' must be an array of tables ([[release]])"),
    ('[[release]]\nversion = "10354.13"\n', "missing required key 'release[1].upstream-commit'"),
    ('[[release]]\nversion = "not a version"\nupstream-commit = "' + "a" * 40 + '"\n',
     "'release[1].version' is not a version: 'not a version'"),
    ('[[release]]\nversion = "1.2"\nupstream-commit = "066cc29b"\n', "'release[1].upstream-commit' is too short: '066cc29b'"),
    ('[[release]]\nversion = "1.2"\nupstream-commit = "' + "a" * 40 + '"\ncommit = "x"\n',
     "unknown key 'release[1].commit'"),
    ('[[releases]]\nversion = "1.2"\n', "unknown key 'releases'"),
    ("[[release]\n", "not valid TOML"),
])
def test_a_malformed_releases_file_is_refused_naming_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "releases.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_releases(path)
    assert info.value.message.startswith(f"{path}: ")
    assert message in info.value.message


def test_a_version_not_above_a_release_on_an_ancestor_is_refused(wheel_project: StackProject) -> None:  # noqa: F811
    """The trap of a fork's release names: b10018-1.2.0 read as 10018 sorts below 10354.13."""
    project, upstream = wheel_project.project, wheel_project.upstream
    store, pin = wheel_project.cache.store(), project.pin()
    # The pin (b101) descends from upstream.base; a release made there as 9.3 outranks a 2.x built on the pin.
    releases = [Release(Version("9.3"), upstream.base)]
    with pytest.raises(VersionNotNewer) as info:
        require_newer("2.13", pin, releases, store)
    assert info.value.exit_code == 2
    assert info.value.message == (
        f"version 2.13 does not sort above 9.3, released on upstream {upstream.base[:12]}, an ancestor of the "
        f"pinned commit {pin.short} (b101): pip install -U would never move a user of 9.3 to it")
    assert "commit count" in info.value.hint
    # Equal is not enough on a descendant: both versions would name different sources.
    with pytest.raises(VersionNotNewer):
        require_newer("9.3", pin, releases, store)
    require_newer("9.4", pin, releases, store)
    require_newer("10.0", pin, releases, store)


def test_on_the_released_commit_a_rebuild_is_allowed_and_a_lower_revision_refused(
        wheel_project: StackProject) -> None:  # noqa: F811
    store, pin = wheel_project.cache.store(), wheel_project.project.pin()
    releases = [Release(Version("2.13"), pin.commit)]
    require_newer("2.13", pin, releases, store)
    require_newer("2.14", pin, releases, store)
    with pytest.raises(VersionNotNewer) as info:
        require_newer("2.12", pin, releases, store)
    assert "the pinned commit itself" in info.value.message
    assert info.value.hint == "raise [tool.hiraishin] stack-revision in wheels/pyproject.toml"


def test_releases_outside_the_pins_history_set_no_rule(wheel_project: StackProject) -> None:  # noqa: F811
    upstream = wheel_project.upstream
    store, pin = wheel_project.cache.store(), wheel_project.project.pin()
    later = sh_git(upstream.path, "rev-parse", "master")  # a descendant of the pin: a target older than a release
    assert later != pin.commit and store.commit_exists(later)
    require_newer("2.0", pin, [Release(Version("99.0"), later), Release(Version("99.0"), "b" * 40)], store)


def test_build_sdist_refuses_before_writing_anything(wheel_project: StackProject, tmp_path: Path) -> None:  # noqa: F811
    project, upstream = wheel_project.project, wheel_project.upstream
    revision = real_stack_revision()
    out = tmp_path / "out"
    out.mkdir()
    write_releases(project.root, (f"2.{revision + 1}", upstream.commit))
    with pytest.raises(VersionNotNewer):
        build_sdist(project, wheel_project.cache, out)
    assert list(out.iterdir()) == []
    # A release on the base: the pin's commit count (2) is above the base's (1), whatever the names say.
    write_releases(project.root, (f"1.{revision + 5}", upstream.base))
    assert build_sdist(project, wheel_project.cache, out).version == f"2.{revision}"
