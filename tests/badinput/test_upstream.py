"""Bad input to the `upstream` commands (fetch, show, verify, tags, remove).

Every case exits with its documented code, prints one message that names what is wrong and how to
fix it, no traceback, and leaves patches/, recipes/ and the cache's refs and settings byte for byte
as they were (see harness.py). Arguments and expected mentions may name the places of a scene:
{fork}, {unrelated}, {mirror}, {not_git}, {a_file}, {absent}, {pin_url} (a path here, as a URL:
{pin_uri}), {pin_commit}, {pin_short}, {typo}, {fork_commit}.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from hiraishin_build.cache import UpstreamCache
from hiraishin_build.pin import load_pin, write_pin

from ..conftest import Upstream, make_project, sh_git
from .harness import BadInput, Guarded, assert_fails_cleanly, run, unchanged


@dataclass(frozen=True)
class Scene:
    project: Path
    cache: Path
    places: dict[str, str]

    def fill(self, text: str) -> str:
        return text.format(**self.places)

    def fails_cleanly(self, case: BadInput, *, env: dict[str, str] | None = None,
                      cache_root: Path | None = None) -> None:
        with unchanged(Guarded(self.project, cache_root or self.cache)):
            ran = run(*(self.fill(arg) for arg in case.args), cwd=self.project, env=env)
        assert_fails_cleanly(ran, exit_code=case.exit_code, mentions=[self.fill(m) for m in case.mentions],
                             hint=case.hint)


def make_scene(tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache, *, filled: bool) -> Scene:
    """A project pinned on the synthetic upstream; with ``filled``, a cache holding the pin's repository.

    Beside it: a fork that has a b101 of its own (another commit than the pin's), an unrelated
    repository, a mirror of the pin's repository, a directory that is no repository, a plain file.
    """
    project = make_project(tmp_path / "project", upstream)
    pin = project.pin()
    if filled:
        cache.fetch(str(upstream.path), pin)
    sh_git(fork.path, "tag", "-a", "-m", "the fork's own b101", upstream.tag, fork.commit)
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    sh_git(unrelated, "init", "-q")
    sh_git(unrelated, "commit", "-q", "--allow-empty", "-m", "unrelated")
    mirror = tmp_path / "mirror.git"
    sh_git(tmp_path, "clone", "-q", "--bare", str(upstream.path), str(mirror))
    not_git = tmp_path / "not-a-repository"
    not_git.mkdir()
    a_file = tmp_path / "a-file"
    a_file.write_text("not a repository\n")
    places = {
        "fork": str(fork.path), "unrelated": str(unrelated), "mirror": str(mirror), "not_git": str(not_git),
        "a_file": str(a_file), "absent": str(tmp_path / "absent"), "pin_url": pin.url, "pin_uri": Path(pin.url).as_uri(), "pin_commit": pin.commit,
        "pin_short": pin.short, "typo": pin.commit[:-4] + "0000", "fork_commit": fork.commit,
    }
    return Scene(project.root, cache.root, places)


@pytest.fixture
def filled(tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache) -> Scene:
    return make_scene(tmp_path, upstream, fork, cache, filled=True)


@pytest.fixture
def empty(tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache) -> Scene:
    return make_scene(tmp_path, upstream, fork, cache, filled=False)


# -- a cache that holds the pin's repository -----------------------------------------------------------

FILLED = [
    # A repository with the pinned tag at another commit, said to be the pin's: it used to replace the
    # pin source's tags before the pin check failed.
    BadInput("claimed-mirror-with-another-pinned-tag", ("upstream", "fetch", "--from", "{fork}", "--url", "{pin_uri}"),
             4, ("{fork_commit}", "{pin_commit}", "is not a copy of", "nothing in the cache changed", "without --url")),
    BadInput("claimed-mirror-without-the-pinned-commit",
             ("upstream", "fetch", "--from", "{unrelated}", "--url", "{pin_uri}"),
             4, ("{unrelated} does not contain the pinned commit {pin_commit}", "nothing in the cache changed")),
    BadInput("unrelated-repository", ("upstream", "fetch", "--from", "{unrelated}"),
             4, ("{unrelated} does not contain the pinned commit", "neither the pin's repository nor a fork",
                 "--name NAME")),
    BadInput("url-not-a-url", ("upstream", "fetch", "--from", "{mirror}", "--url", "not-a-url"),
             2, ("'not-a-url' is not a repository URL git understands", "scheme://host/path")),
    BadInput("url-without-a-repository", ("upstream", "fetch", "--from", "{mirror}", "--url", "https://github.com"),
             2, ("nothing follows the host",)),
    BadInput("url-a-local-path", ("upstream", "fetch", "--from", "{mirror}", "--url", "{mirror}"),
             2, ("it is a path, not a URL", "file:///path")),
    BadInput("url-without-from", ("upstream", "fetch", "--url", "https://example.org/x/y"),
             2, ("--url goes with --from",)),
    BadInput("malformed-name", ("upstream", "fetch", "--from", "{fork}", "--name", "bad/name"),
             2, ("'bad/name' cannot name a source", "letters, digits")),
    BadInput("malformed-name-alone", ("upstream", "fetch", "--name", "bad/name"), 2, ("cannot name a source",)),
    BadInput("name-of-another-repository", ("upstream", "fetch", "--from", "{fork}", "--name", "upstream"),
             4, ("the source name 'upstream' already stands for {pin_url}", "--name NAME")),
    BadInput("unknown-name-without-from", ("upstream", "fetch", "--name", "nosuch"),
             4, ("no source named 'nosuch'", "sources: upstream")),
    BadInput("from-a-path-that-does-not-exist", ("upstream", "fetch", "--from", "{absent}"),
             4, ("--from {absent}: no such file or directory",)),
    BadInput("from-a-directory-that-is-no-repository", ("upstream", "fetch", "--from", "{not_git}"),
             4, ("cannot read the upstream source {not_git}", "does not appear to be a git repository")),
    BadInput("from-a-file", ("upstream", "fetch", "--from", "{a_file}"),
             4, ("cannot read the upstream source {a_file}",)),
    BadInput("remove-unknown-source", ("upstream", "remove", "nosuch"),
             4, ("no source named 'nosuch'", "nothing to remove", "sources: upstream")),
    BadInput("remove-the-only-source-with-the-pin", ("upstream", "remove", "upstream"),
             4, ("'upstream' is the only source", "{pin_short}", "--force")),
    BadInput("remove-malformed-name", ("upstream", "remove", "bad/name"), 2, ("cannot name a source",)),
    BadInput("remove-without-a-source", ("upstream", "remove"), 2, ("Missing argument 'SOURCE'",)),
    BadInput("tags-of-an-unknown-source", ("upstream", "tags", "--source", "nosuch"),
             4, ("no source named 'nosuch'",)),
    BadInput("tags-of-a-malformed-source", ("upstream", "tags", "--source", "a/b"), 2, ("cannot name a source",)),
    BadInput("tags-since-an-unknown-ref", ("upstream", "tags", "--since", "nosuch"), 4, ("unknown ref 'nosuch'",)),
]


@pytest.mark.parametrize("case", FILLED, ids=lambda case: case.id)
def test_bad_input_to_a_filled_cache(filled: Scene, case: BadInput) -> None:
    filled.fails_cleanly(case)


# -- no cache yet: a failed fetch must not leave one behind ----------------------------------------------

EMPTY = [
    BadInput("verify", ("upstream", "verify"), 4, ("does not exist", "upstream fetch")),
    BadInput("tags", ("upstream", "tags"), 4, ("does not exist",)),
    BadInput("tags-of-a-source", ("upstream", "tags", "--source", "fork"), 4, ("does not exist",)),
    BadInput("remove", ("upstream", "remove", "fork"), 4, ("no source named 'fork'", "does not exist")),
    BadInput("fetch-a-name-never-fetched", ("upstream", "fetch", "--name", "fork"),
             4, ("no source named 'fork'", "has no sources yet", "--from PATH_OR_URL --name fork")),
    BadInput("fetch-an-unrelated-repository", ("upstream", "fetch", "--from", "{unrelated}"),
             4, ("neither the pin's repository nor a fork",)),
    BadInput("fetch-a-directory-that-is-no-repository", ("upstream", "fetch", "--from", "{not_git}"),
             4, ("does not appear to be a git repository",)),
]


@pytest.mark.parametrize("case", EMPTY, ids=lambda case: case.id)
def test_bad_input_to_an_empty_cache(empty: Scene, case: BadInput) -> None:
    empty.fails_cleanly(case)
    assert not (empty.cache / "upstream.git").exists()


# -- a mistyped commit in recipes/upstream.toml ------------------------------------------------------------

MISTYPED = [
    # It used to relabel the pin's source as standing for the mirror's path, and say nothing.
    BadInput("fetch-from-a-mirror", ("upstream", "fetch", "--from", "{mirror}"),
             4, ("names {pin_commit} in {mirror}", "records {typo}", "a mistyped or moved commit",
                 "nothing in the cache changed", "correct it in")),
    BadInput("fetch-from-the-pins-url", ("upstream", "fetch"), 4, ("records {typo}", "a mistyped or moved commit")),
    # It used to say "run fetch", which cannot help.
    BadInput("verify", ("upstream", "verify"),
             4, ("the pinned ref 'b101' names {pin_commit} in upstream", "records {typo}",
                 "a mistyped or moved commit", "hiraishin rebase --onto b101")),
]


@pytest.mark.parametrize("case", MISTYPED, ids=lambda case: case.id)
def test_a_mistyped_pin_commit(filled: Scene, case: BadInput) -> None:
    pin_file = filled.project / "recipes" / "upstream.toml"
    pin = load_pin(pin_file)
    write_pin(pin_file, pin.moved_to(pin.ref, filled.places["typo"]))
    filled.fails_cleanly(case)


# -- where the cache is ----------------------------------------------------------------------------------

UNUSABLE = [
    BadInput("fetch-variable", ("upstream", "fetch"), 15,
             ("the upstream cache directory /proc/x cannot be written", "give HIRAISHIN_CACHE_DIR a directory")),
    BadInput("fetch-option", ("--cache-dir", "/proc/x", "upstream", "fetch", "--from", "{mirror}"), 15,
             ("the upstream cache directory /proc/x cannot be written", "give --cache-dir a directory")),
    # Nothing there to remove: said as such, before the directory matters.
    BadInput("remove", ("upstream", "remove", "upstream"), 4, ("/proc/x/upstream.git does not exist",)),
]


@pytest.mark.parametrize("case", UNUSABLE, ids=lambda case: case.id)
def test_an_unusable_cache_directory(empty: Scene, case: BadInput) -> None:
    # Refused before any work: the command stops before the "fetching into" step.
    empty.fails_cleanly(case, env={"HIRAISHIN_CACHE_DIR": "/proc/x"}, cache_root=Path("/proc/x"))
