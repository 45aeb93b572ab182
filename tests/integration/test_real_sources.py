"""Two real sources: the pin's repository and a fork that lacks the pinned tag.

Uses local mirrors of TheTom/llama-cpp-turboquant (the pin's repository) and
AtomicBot-ai/atomic-llama-cpp-turboquant (a fork carrying descendants of the
pin, but not its tag), named by HIRAISHIN_TEST_PIN_MIRROR and
HIRAISHIN_TEST_FORK_MIRROR (default: the mirrors under /work/.mirror/), and
skips, saying why, where they are absent. Each test fills caches of its own
in a temporary directory; the user's cache is not touched.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hiraishin_build import rebase
from hiraishin_build.cache import UpstreamCache
from hiraishin_build.project import Project
from hiraishin_build.report import PatchStatus
from hiraishin_build.sources import RefKind
from hiraishin_build.stack import apply_stack

REPO_ROOT = Path(__file__).resolve().parents[2]
PIN_MIRROR = Path(os.environ.get("HIRAISHIN_TEST_PIN_MIRROR", "/work/.mirror/TheTom+llama-cpp-turboquant/repo"))
FORK_MIRROR = Path(os.environ.get(
    "HIRAISHIN_TEST_FORK_MIRROR", "/work/.mirror/AtomicBot-ai+atomic-llama-cpp-turboquant/repo"))
FORK_URL = "https://github.com/AtomicBot-ai/atomic-llama-cpp-turboquant"
FORK = "AtomicBot-ai-atomic-llama-cpp-turboquant"
PIN_SOURCE = "TheTom-llama-cpp-turboquant"
B9964 = ("feature-turboquant-kv-cache-b9964-519f0c5", "519f0c594a8e31467d2e2f2cf17054c9e7e11536")
B10354 = ("feature-turboquant-kv-cache-b10354-066cc29", "066cc29b42eed73b9e7b1a1e6ad45dc3dd2c9b07")
# In the fork's history only: the pin's repository cannot serve its content.
FORK_ONLY_FILE = "ggml/src/ggml-cuda/sumrows.cu"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mirrors() -> tuple[Path, Path]:
    for path, variable in ((PIN_MIRROR, "HIRAISHIN_TEST_PIN_MIRROR"), (FORK_MIRROR, "HIRAISHIN_TEST_FORK_MIRROR")):
        if not (path / "HEAD").is_file() and not (path / ".git").exists():
            pytest.skip(f"no mirror at {path}: set {variable} to a local mirror to run these tests")
    return PIN_MIRROR, FORK_MIRROR


@pytest.fixture(scope="module")
def both(mirrors: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> UpstreamCache:
    """The pin's repository, then the fork (said to mirror its GitHub url)."""
    pin = Project(REPO_ROOT).pin()
    cache = UpstreamCache(tmp_path_factory.mktemp("cache-pin-then-fork"))
    cache.fetch(str(mirrors[0]), pin)
    cache.fetch(str(mirrors[1]), pin, url=FORK_URL)
    return cache


def test_the_fork_keeps_the_pinned_tag_and_tags_name_their_source(both: UpstreamCache) -> None:
    pin = Project(REPO_ROOT).pin()
    assert both.verify(pin).sources == (PIN_SOURCE,)
    table = both.refs()
    assert table.holders(pin.ref, RefKind.TAG) == {PIN_SOURCE: pin.commit}
    assert table.holders(B9964[0], RefKind.TAG) == {FORK: B9964[1]}
    assert table.sources[FORK].url == FORK_URL and table.sources[PIN_SOURCE].url == pin.url


def test_fork_first_then_the_pins_repository(mirrors: tuple[Path, Path], tmp_path: Path) -> None:
    pin = Project(REPO_ROOT).pin()
    cache = UpstreamCache(tmp_path / "cache")
    fork = cache.fetch(str(mirrors[1]), pin)
    assert fork.has_pin_commit and fork.source.name == FORK
    cache.fetch(str(mirrors[0]), pin)
    cache.fetch(str(mirrors[1]), pin)  # and the fork again: nothing of the pin's goes
    assert cache.verify(pin).sources == (PIN_SOURCE,)


def test_dry_run_onto_the_forks_tag(both: UpstreamCache) -> None:
    report = rebase.dry_run(Project(REPO_ROOT), both, B9964[0])
    assert (report.onto_commit, report.onto_source, report.onto_url) == (B9964[1], FORK, FORK_URL)
    assert report.relation == "newer"
    assert all(o.status is not PatchStatus.PENDING for o in report.outcomes)


def test_file_contents_of_a_fork_commit_come_from_the_fork(both: UpstreamCache) -> None:
    pin = Project(REPO_ROOT).pin()
    both.prefetch_blobs(B10354[1], pin.checkout, prefer=(PIN_SOURCE,))
    store = both.store()
    assert store.has(dict(store.blobs(B10354[1]))[FORK_ONLY_FILE])


def test_a_rebase_onto_the_forks_tag_moves_the_pins_url(both: UpstreamCache, tmp_path: Path) -> None:
    project = Project(tmp_path / "project")
    shutil.copytree(REPO_ROOT / "recipes", project.root / "recipes")
    shutil.copytree(REPO_ROOT / "patches", project.patches_dir)
    apply_stack(project, both, project.default_workdir)
    report = rebase.start(project, both, B9964[0], project.default_workdir)
    # The stack may not apply there yet: patches that conflict are dropped
    # here, since what is tested is where the pin ends up.
    while report.state == "stopped":
        report = rebase.skip(project, both, project.default_workdir)
    pin = project.pin()
    assert (pin.url, pin.ref, pin.commit) == (FORK_URL, B9964[0], B9964[1])
    assert both.verify(pin).sources == (FORK,)
