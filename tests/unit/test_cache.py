import shutil
from pathlib import Path

import pytest

from hiraishin_build.cache import UpstreamCache, normalize_source
from hiraishin_build.errors import PinMismatchError, UpstreamError
from hiraishin_build.git import ObjectStore
from hiraishin_build.stack import apply_stack

from ..conftest import Upstream, make_project, sh_git


def test_fetch_makes_a_blobless_cache_with_just_the_needed_blobs(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    project = make_project(tmp_path / "project", upstream)
    pin = project.pin()
    cache.fetch(str(upstream.path), pin)
    store = ObjectStore(cache.git_dir)
    present = {path for path, oid in store.blobs(pin.commit) if store.has(oid)}
    assert "ggml/src/ggml-cuda/mmvq.cu" in present
    assert "models/templates/chat.jinja" in present
    # Excluded paths are never fetched: a mirror may lack them.
    assert not {"docs/build.md", "models/ggml-vocab-big.gguf", "tools/server/public/bundle.js"} & present
    assert cache.missing_blobs(pin.commit, pin.checkout) == []
    cache.verify(pin)


def test_everything_after_fetch_works_offline(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    project = make_project(tmp_path / "project", upstream)
    pin = project.pin()
    cache.fetch(str(upstream.path), pin)
    shutil.rmtree(upstream.path)  # the source is gone: no fetch can succeed now
    (project.patches_dir).mkdir()
    (project.patches_dir / "series").write_text("")
    cache.verify(pin)
    from hiraishin_build.worktree import WorkTree

    WorkTree(project.default_workdir).prepare(cache, pin.commit, pin.checkout, force=False)
    assert (project.default_workdir / "ggml/src/ggml-cuda/mmvq.cu").is_file()
    assert not (project.default_workdir / "docs").exists()


def test_moved_tag_is_refused_with_both_hashes(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    project = make_project(tmp_path / "project", upstream)
    pin = project.pin()
    cache.fetch(str(upstream.path), pin)
    sh_git(upstream.path, "tag", "-f", "-a", "-m", "moved", upstream.tag, "HEAD")
    moved_to = sh_git(upstream.path, "rev-parse", "HEAD")
    with pytest.raises(PinMismatchError) as info:
        cache.fetch(str(upstream.path), pin)
        cache.verify(pin)
    assert moved_to in str(info.value) and pin.commit in str(info.value)
    # A moved tag is refused by every command that uses the pin.
    with pytest.raises(PinMismatchError):
        apply_stack(project, cache, tmp_path / "wd")
    assert not (tmp_path / "wd").exists()


def test_verify_without_cache_says_how_to_fill_it(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    project = make_project(tmp_path / "project", upstream)
    with pytest.raises(UpstreamError, match="upstream fetch"):
        cache.verify(project.pin())


def test_source_without_the_pinned_commit(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    project = make_project(tmp_path / "project", upstream)
    other = tmp_path / "other"
    other.mkdir()
    sh_git(other, "init", "-q")
    sh_git(other, "commit", "-q", "--allow-empty", "-m", "unrelated")
    with pytest.raises(UpstreamError, match="does not contain the pinned commit"):
        cache.fetch(str(other), project.pin())


def test_source_lacking_a_needed_blob_names_the_file(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    """A mirror without some blob: fine when excluded, a clear error when not."""
    project = make_project(tmp_path / "project", upstream)
    pin = project.pin()
    mirror = tmp_path / "mirror.git"
    sh_git(tmp_path, "clone", "-q", "--bare", str(upstream.path), str(mirror))
    store = ObjectStore(mirror)
    blob = dict(store.blobs(pin.commit))["tools/server/server.cpp"]
    sh_git(mirror, "repack", "-a", "-d", "-q")
    # Rewrite the mirror's packs without that one blob.
    everything = sh_git(mirror, "rev-list", "--objects", "--all").splitlines()
    keep = "\n".join(line.split()[0] for line in everything if not line.startswith(blob)) + "\n"
    import subprocess

    staging = tmp_path / "newpack"
    staging.mkdir()
    subprocess.run(["git", "-C", str(mirror), "pack-objects", "-q", str(staging / "pack")], input=keep, text=True, check=True)
    for pack in (mirror / "objects" / "pack").glob("*"):
        pack.unlink()
    for pack in staging.iterdir():
        shutil.move(pack, mirror / "objects" / "pack" / pack.name)
    assert not ObjectStore(mirror).has(blob)
    with pytest.raises(UpstreamError, match="lacks the content of tools/server/server.cpp") as info:
        cache.fetch(str(mirror), pin)
    assert "exclude" in str(info.value)


def test_normalize_source(tmp_path: Path) -> None:
    assert normalize_source(str(tmp_path)).startswith("file://")
    assert normalize_source("https://github.com/x/y.git") == "https://github.com/x/y.git"
    with pytest.raises(UpstreamError, match="no such file"):
        normalize_source(str(tmp_path / "absent"))


# -- verify and require_complete, offline ---------------------------------------------

def test_verify_a_pin_whose_commit_the_cache_lacks(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    absent = pin.moved_to(pin.ref, "0123456789abcdef0123456789abcdef01234567")
    with pytest.raises(UpstreamError) as info:
        cache.verify(absent)
    assert info.value.message == (f"the upstream cache {cache.git_dir} does not hold the pinned commit "
                                  "0123456789abcdef0123456789abcdef01234567")
    assert info.value.hint == "run `hiraishin upstream fetch` (or with --from <mirror>)"


def test_verify_a_pin_whose_ref_the_cache_lacks(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    with pytest.raises(UpstreamError) as info:
        cache.verify(pin.moved_to("b999", pin.commit))
    assert info.value.message == "the pinned ref 'b999' is not in the upstream cache"
    assert not isinstance(info.value, PinMismatchError)
    assert "re-pin to a ref that exists" in info.value.hint
    cache.verify(pin.moved_to("b101", pin.commit))  # the tag names the commit: fine


def test_require_complete_works_offline_and_names_what_is_missing(tmp_path: Path, upstream: Upstream,
                                                                  cache: UpstreamCache) -> None:
    from hiraishin_build.sparse import SparseRules

    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    shutil.rmtree(upstream.path)  # no source: nothing can be fetched now, and nothing is tried
    cache.require_complete(pin.commit, pin.checkout)
    # Without the excludes a checkout needs the docs, vocab and web UI files the fetch left out.
    with pytest.raises(UpstreamError) as info:
        cache.require_complete(pin.commit, SparseRules(()))
    assert info.value.message.startswith(f"the upstream cache lacks 3 file(s) of {pin.commit[:12]} (first: ")
    assert info.value.message.removesuffix(")").rsplit(" ", 1)[1] in {
        "docs/build.md", "models/ggml-vocab-big.gguf", "tools/server/public/bundle.js"}
    assert info.value.hint == "run `hiraishin upstream fetch` again to fetch them"
    with pytest.raises(UpstreamError) as info:
        # The commit before the pin is in the cache, but its older fattn.cu was never fetched.
        cache.require_complete(upstream.base, pin.checkout)
    assert info.value.message == (f"the upstream cache lacks 1 file(s) of {upstream.base[:12]} "
                                  "(first: ggml/src/ggml-cuda/fattn.cu)")
    with pytest.raises(UpstreamError) as info:
        cache.require_complete("0123456789abcdef0123456789abcdef01234567", pin.checkout)
    assert info.value.message == (f"the upstream cache {cache.git_dir} does not hold commit "
                                  "0123456789abcdef0123456789abcdef01234567")
