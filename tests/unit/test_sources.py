"""Sources: names, which repository a URL or path is, and which source a fetch fills."""

from __future__ import annotations

from pathlib import Path

import pytest

from hiraishin_build.cache import identify
from hiraishin_build.errors import UpstreamError
from hiraishin_build.pin import UpstreamPin
from hiraishin_build.sources import (
    Source,
    derive_name,
    display_location,
    name_is_valid,
    same_repository,
    url_problem,
    validate_name,
)

PIN_URL = "https://github.com/TheTom/llama-cpp-turboquant.git"
FORK_URL = "https://github.com/AtomicBot-ai/atomic-llama-cpp-turboquant"
PIN = UpstreamPin(
    url=PIN_URL, ref="feature-turboquant-kv-cache-b9079-69d8e4b", commit="69d8e4be47243e83b3d0d71e932bc7aa61c644dc",
)


@pytest.mark.parametrize(
    ("url", "name"),
    [
        (PIN_URL, "TheTom-llama-cpp-turboquant"),
        (FORK_URL, "AtomicBot-ai-atomic-llama-cpp-turboquant"),
        ("git@github.com:AtomicBot-ai/atomic-llama-cpp-turboquant.git", "AtomicBot-ai-atomic-llama-cpp-turboquant"),
        ("ssh://git@github.com/TheTom/llama-cpp-turboquant", "TheTom-llama-cpp-turboquant"),
        # Local mirrors: the last component that says which repository it is.
        ("/work/.mirror/TheTom+llama-cpp-turboquant/repo", "TheTom-llama-cpp-turboquant"),
        ("file:///work/.mirror/AtomicBot-ai%2Batomic-llama-cpp-turboquant/repo",
         "AtomicBot-ai-atomic-llama-cpp-turboquant"),
        ("/srv/git/llama.cpp.git", "llama.cpp"),
        ("/home/me/llama.cpp/.git", "llama.cpp"),
        ("https://example.org/x", "x"),
    ],
)
def test_derive_name(url: str, name: str) -> None:
    assert derive_name(url) == name
    validate_name(derive_name(url))


def test_derived_names_are_always_valid() -> None:
    for url in ("/", "file:///", "https://host/", "/a/..lock/b.lock", "/x/ .. /+++"):
        validate_name(derive_name(url))


@pytest.mark.parametrize("bad", ["", "-x", "a/b", "a b", "a..b", "x.lock", "x.", "ü"])
def test_bad_source_names_are_refused(bad: str) -> None:
    with pytest.raises(UpstreamError, match="cannot name a source") as info:
        validate_name(bad)
    assert info.value.hint
    assert not name_is_valid(bad)


def test_same_repository(tmp_path: Path) -> None:
    assert same_repository(PIN_URL, "https://github.com/TheTom/llama-cpp-turboquant")
    assert same_repository(PIN_URL, "git@github.com:thetom/llama-cpp-turboquant.git")
    assert same_repository(PIN_URL, "ssh://git@github.com/TheTom/llama-cpp-turboquant/")
    assert not same_repository(PIN_URL, FORK_URL)
    assert same_repository(str(tmp_path), tmp_path.as_uri())
    assert same_repository(str(tmp_path), f"{tmp_path}/")
    assert not same_repository(str(tmp_path / "a"), str(tmp_path / "b"))
    assert not same_repository("", "")
    assert display_location((tmp_path / "a+b").as_uri()) == str(tmp_path / "a+b")


MIRROR = "file:///work/.mirror/TheTom%2Bllama-cpp-turboquant/repo"
FORK_MIRROR = "file:///work/.mirror/AtomicBot-ai%2Batomic-llama-cpp-turboquant/repo"


def test_a_mirror_with_the_pinned_tag_stands_for_the_pins_url() -> None:
    source = identify([], MIRROR, PIN, carries_pin=True)
    assert (source.name, source.url, source.location) == ("TheTom-llama-cpp-turboquant", PIN_URL, MIRROR)


def test_a_mirror_without_the_pinned_tag_stands_for_itself_unless_told() -> None:
    source = identify([], FORK_MIRROR, PIN, carries_pin=False)
    assert source.url == "/work/.mirror/AtomicBot-ai+atomic-llama-cpp-turboquant/repo"
    told = identify([], FORK_MIRROR, PIN, carries_pin=False, url=FORK_URL)
    assert (told.name, told.url) == ("AtomicBot-ai-atomic-llama-cpp-turboquant", FORK_URL)


def test_the_pins_url_itself_is_the_pins_source() -> None:
    assert identify([], PIN_URL, PIN, carries_pin=False).url == PIN_URL


def test_a_repository_is_found_again_by_its_url() -> None:
    existing = [Source("thetom", PIN_URL, MIRROR)]
    # Fetched from GitHub this time: the same source, its location updated.
    again = identify(existing, PIN_URL, PIN, carries_pin=True)
    assert (again.name, again.url, again.location) == ("thetom", PIN_URL, PIN_URL)
    with pytest.raises(UpstreamError, match="already the source 'thetom'"):
        identify(existing, PIN_URL, PIN, carries_pin=True, name="other")


def test_a_taken_name_is_refused_for_another_repository() -> None:
    existing = [Source("AtomicBot-ai-atomic-llama-cpp-turboquant", FORK_URL, FORK_MIRROR)]
    with pytest.raises(UpstreamError, match="already stands for") as info:
        identify(existing, "https://gitlab.com/AtomicBot-ai/atomic-llama-cpp-turboquant", PIN, carries_pin=False)
    assert "--name" in (info.value.hint or "")


def test_the_same_mirror_may_say_later_what_it_mirrors() -> None:
    existing = [Source("AtomicBot-ai-atomic-llama-cpp-turboquant", display_location(FORK_MIRROR), FORK_MIRROR)]
    source = identify(existing, FORK_MIRROR, PIN, carries_pin=False, url=FORK_URL)
    assert (source.name, source.url) == ("AtomicBot-ai-atomic-llama-cpp-turboquant", FORK_URL)


def test_a_mirror_fetched_again_keeps_what_it_was_recorded_to_stand_for() -> None:
    """Observed: fetched again without --url (the pin's commit mistyped, so it no longer carried the pin),
    a mirror of the pin's repository was relabelled as standing for its own path."""
    existing = [Source("TheTom-llama-cpp-turboquant", PIN_URL, MIRROR)]
    again = identify(existing, MIRROR, PIN, carries_pin=False)
    assert (again.name, again.url, again.location) == ("TheTom-llama-cpp-turboquant", PIN_URL, MIRROR)
    told = [Source("fork", FORK_URL, FORK_MIRROR)]
    assert identify(told, FORK_MIRROR, PIN, carries_pin=False).url == FORK_URL
    # --url still says otherwise.
    assert identify(told, FORK_MIRROR, PIN, carries_pin=False, url=PIN_URL).url == PIN_URL
    # Recorded as standing for its own path (the default), it may later be found to carry the pin.
    itself = [Source("mirror", display_location(MIRROR), MIRROR)]
    assert identify(itself, MIRROR, PIN, carries_pin=True).url == PIN_URL


@pytest.mark.parametrize(
    "url",
    [PIN_URL, FORK_URL, "git@github.com:owner/name.git", "github.com:owner/name", "ssh://git@host:2222/srv/r.git",
     "git://127.0.0.1:9418/r", "file:///srv/mirror/r.git", "http://[::1]/r", "hg::https://example.org/r"],
)
def test_urls_git_understands(url: str) -> None:
    assert url_problem(url) is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("not-a-url", "it is neither scheme://host/path nor scp-like [user@]host:path"),
        ("", "it is empty"),
        ("/srv/mirror/r.git", "it is a path, not a URL (a repository on this machine is file:///path)"),
        ("https://", "it names no host (scheme://host/path)"),
        ("https://github.com/", "it names no repository: nothing follows the host (scheme://host/path)"),
        ("github.com:", "it names no repository: nothing follows the ':' ([user@]host:path)"),
        ("https://github.com/a b", "it contains white space (a URL spells a space %20)"),
        ("1x://host/r", "'1x' is not a URL scheme"),
        ("::r", "it names no remote helper and address (transport::address)"),
    ],
)
def test_what_is_wrong_with_a_url(url: str, problem: str) -> None:
    assert url_problem(url) == problem
