"""Two real sources: the pin's repository and another that lacks the pinned commit.

The pin names AtomicBot-ai/atomic-llama-cpp-turboquant (tag ...-b10354-066cc29);
TheTom/llama-cpp-turboquant, where the stack's earlier bases live, has older
tags (...-b9079-69d8e4b) that the pin's repository does not carry, and not
the pinned commit. Local mirrors of both are named by HIRAISHIN_TEST_PIN_MIRROR
and HIRAISHIN_TEST_OTHER_MIRROR (default: the mirrors under /work/.mirror/);
the tests skip, saying why, where they are absent. Each test fills caches of
its own in a temporary directory; the user's cache is not touched.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hiraishin_build import rebase
from hiraishin_build.cache import UpstreamCache
from hiraishin_build.errors import UpstreamError
from hiraishin_build.project import Project
from hiraishin_build.report import PatchStatus
from hiraishin_build.sources import RefKind
from hiraishin_build.stack import apply_stack

REPO_ROOT = Path(__file__).resolve().parents[2]
PIN_MIRROR = Path(os.environ.get(
    "HIRAISHIN_TEST_PIN_MIRROR", "/work/.mirror/AtomicBot-ai+atomic-llama-cpp-turboquant/repo"))
OTHER_MIRROR = Path(os.environ.get("HIRAISHIN_TEST_OTHER_MIRROR", "/work/.mirror/TheTom+llama-cpp-turboquant/repo"))
PIN_URL = "https://github.com/AtomicBot-ai/atomic-llama-cpp-turboquant.git"
OTHER_URL = "https://github.com/TheTom/llama-cpp-turboquant.git"
PIN_SOURCE = "AtomicBot-ai-atomic-llama-cpp-turboquant"
OTHER = "TheTom-llama-cpp-turboquant"
B9079 = ("feature-turboquant-kv-cache-b9079-69d8e4b", "69d8e4be47243e83b3d0d71e932bc7aa61c644dc")
B9964 = ("feature-turboquant-kv-cache-b9964-519f0c5", "519f0c594a8e31467d2e2f2cf17054c9e7e11536")
# Only in the pin's repository's history: the other repository cannot serve its content.
PIN_ONLY_FILE = "ggml/src/ggml-cuda/sumrows.cu"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mirrors() -> tuple[Path, Path]:
    for path, variable in ((PIN_MIRROR, "HIRAISHIN_TEST_PIN_MIRROR"), (OTHER_MIRROR, "HIRAISHIN_TEST_OTHER_MIRROR")):
        if not (path / "HEAD").is_file() and not (path / ".git").exists():
            pytest.skip(f"no mirror at {path}: set {variable} to a local mirror to run these tests")
    return PIN_MIRROR, OTHER_MIRROR


@pytest.fixture(scope="module")
def both(mirrors: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> UpstreamCache:
    """The pin's repository, then the other one (each said to mirror its GitHub url)."""
    pin = Project(REPO_ROOT).pin()
    assert pin.url == PIN_URL, "these tests describe the pin in the pin's repository"
    cache = UpstreamCache(tmp_path_factory.mktemp("cache-pin-then-other"))
    cache.fetch(str(mirrors[0]), pin, url=PIN_URL)
    cache.fetch(str(mirrors[1]), pin, url=OTHER_URL, name=OTHER)
    return cache


def test_the_other_source_keeps_the_pinned_tag_and_tags_name_their_source(both: UpstreamCache) -> None:
    pin = Project(REPO_ROOT).pin()
    assert both.verify(pin).sources == (PIN_SOURCE,)
    table = both.refs()
    assert table.holders(pin.ref, RefKind.TAG) == {PIN_SOURCE: pin.commit}
    assert table.holders(B9079[0], RefKind.TAG) == {OTHER: B9079[1]}
    assert table.holders(B9964[0], RefKind.TAG) == {PIN_SOURCE: B9964[1]}
    assert table.sources[OTHER].url == OTHER_URL and table.sources[PIN_SOURCE].url == pin.url


@pytest.mark.parametrize("order", ["pin-first", "other-first"])
def test_verify_passes_after_both_sources_in_either_order(mirrors: tuple[Path, Path], tmp_path: Path,
                                                         order: str) -> None:
    pin = Project(REPO_ROOT).pin()
    cache = UpstreamCache(tmp_path / "cache")
    fetches = [(mirrors[0], PIN_URL), (mirrors[1], OTHER_URL)]
    if order == "other-first":
        fetches.reverse()
        other = cache.fetch(str(mirrors[1]), pin, url=OTHER_URL, name=OTHER)
        # kept, named, though it lacks the pinned commit: its tags are what it is fetched for
        assert not other.has_pin_commit and other.tags >= 1
        with pytest.raises(UpstreamError, match="does not hold the pinned commit"):
            cache.verify(pin)
    for mirror, url in fetches + fetches:  # and each again: nothing of the pin's goes
        cache.fetch(str(mirror), pin, url=url, name=OTHER if url == OTHER_URL else None)
        if (mirror, url) == fetches[0] and order == "pin-first":
            assert cache.verify(pin).sources == (PIN_SOURCE,)
    assert cache.verify(pin).sources == (PIN_SOURCE,)
    assert cache.refs().holders(B9079[0], RefKind.TAG) == {OTHER: B9079[1]}


def test_dry_run_onto_the_pins_repository_tag(both: UpstreamCache) -> None:
    # b9964 is in the pin's repository, older than the pin
    report = rebase.dry_run(Project(REPO_ROOT), both, B9964[0])
    assert (report.onto_commit, report.onto_source) == (B9964[1], PIN_SOURCE)
    assert report.relation == "older"
    assert all(o.status is not PatchStatus.PENDING for o in report.outcomes)


def test_file_contents_of_a_pin_repository_commit_come_from_it(both: UpstreamCache) -> None:
    pin = Project(REPO_ROOT).pin()
    both.prefetch_blobs(pin.commit, pin.checkout, prefer=(OTHER,))
    store = both.store()
    assert store.has(dict(store.blobs(pin.commit))[PIN_ONLY_FILE])


def test_a_rebase_onto_the_other_repositorys_tag_moves_the_pins_url(both: UpstreamCache, tmp_path: Path) -> None:
    project = Project(tmp_path / "project")
    shutil.copytree(REPO_ROOT / "recipes", project.root / "recipes")
    shutil.copytree(REPO_ROOT / "patches", project.patches_dir)
    apply_stack(project, both, project.default_workdir)
    report = rebase.start(project, both, B9079[0], project.default_workdir)
    # The stack does not apply there: patches that conflict are dropped here,
    # since what is tested is where the pin ends up.
    while report.state == "stopped":
        report = rebase.skip(project, both, project.default_workdir)
    pin = project.pin()
    assert (pin.url, pin.ref, pin.commit) == (OTHER_URL, B9079[0], B9079[1])
    assert both.verify(pin).sources == (OTHER,)
