import os
import shutil
import socket
import time
from pathlib import Path

import pytest

from hiraishin_build import cache as cache_module
from hiraishin_build import git, lock, proc
from hiraishin_build.cache import UPLOAD_PACK, UpstreamCache, normalize_source
from hiraishin_build.errors import (
    CacheLocked,
    CommandError,
    PinMismatchError,
    SourcesDisagree,
    SourceUnreachable,
    UpstreamError,
)
from hiraishin_build.git import ObjectStore
from hiraishin_build.pin import write_pin
from hiraishin_build.sources import RefKind, Source
from hiraishin_build.stack import apply_stack
from hiraishin_build.tags import all_tags

from ..conftest import FORK_ONLY_FILE, Upstream, drop_object, make_project, sh_git



def bare_mirror(tmp_path: Path, upstream: Upstream) -> Path:
    """A bare clone of the synthetic upstream at tmp_path/mirror.git: a second repository to fetch from."""
    mirror = tmp_path / "mirror.git"
    sh_git(tmp_path, "clone", "-q", "--bare", str(upstream.path), str(mirror))
    return mirror

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
    before = refs_and_config(cache)
    sh_git(upstream.path, "tag", "-f", "-a", "-m", "moved", upstream.tag, "HEAD")
    moved_to = sh_git(upstream.path, "rev-parse", "HEAD")
    # Refused before anything is written: the cache still vouches for the pin.
    with pytest.raises(PinMismatchError) as info:
        cache.fetch(str(upstream.path), pin)
    assert info.value.message == (f"the pinned ref '{upstream.tag}' names {moved_to} in {upstream.path}, but "
                                  f"{project.pin_file} records {pin.commit}: the ref moved; nothing in the cache changed")
    assert f"`hiraishin rebase --onto {moved_to}`" in (info.value.hint or "")
    assert refs_and_config(cache) == before
    assert cache.verify(pin).sources == ("upstream",)
    # Its objects came all the same, so the rebase the hint names finds the commit.
    assert ObjectStore(cache.git_dir).commit_exists(moved_to)
    # A pin whose ref names another commit of the cache is refused by every command that uses the pin.
    write_pin(project.pin_file, pin.moved_to(pin.ref, upstream.base))
    with pytest.raises(PinMismatchError, match=f"it now names {pin.commit} in upstream"):
        apply_stack(project, cache, tmp_path / "wd")
    assert not (tmp_path / "wd").exists()


def test_a_pin_on_the_commit_itself_lets_fetches_through_a_moved_tag(
    tmp_path: Path, upstream: Upstream, cache: UpstreamCache,
) -> None:
    """The other way out the refusal names: pin the commit itself, then re-pin when ready."""
    project = make_project(tmp_path / "project", upstream)
    pin = project.pin()
    cache.fetch(str(upstream.path), pin)
    sh_git(upstream.path, "tag", "-f", "-a", "-m", "moved", upstream.tag, "HEAD")
    on_commit = pin.moved_to(pin.commit, pin.commit)
    fetched = cache.fetch(str(upstream.path), on_commit)
    assert fetched.moved == ((upstream.tag, pin.commit, sh_git(upstream.path, "rev-parse", "HEAD")),)
    assert cache.verify(on_commit).sources == ("upstream",)
    # A commit no source has is still refused.
    with pytest.raises(UpstreamError, match="does not contain the pinned commit"):
        cache.fetch(str(upstream.path), pin.moved_to("0" * 40, "0" * 40))


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
    pin = project.pin()
    # An unrelated repository does not become a source by mistake: refused, and the failed first
    # fetch leaves no cache behind.
    with pytest.raises(UpstreamError) as refused:
        cache.fetch(str(other), pin)
    assert refused.value.message == (f"{other} does not contain the pinned commit {pin.commit} (b101): "
                                     "it is neither the pin's repository nor a fork of it")
    assert refused.value.hint == (f"to keep it as a source of its own all the same, name it: "
                                  f"`hiraishin upstream fetch --from {other} --name NAME`; nothing in the cache changed")
    assert not cache.exists()
    # Asked for by name, it is kept (its tags are what it was fetched for); the pin is not verified.
    kept = cache.fetch(str(other), pin, name="other")
    assert not kept.has_pin_commit and kept.source == Source("other", str(other), other.as_uri())
    with pytest.raises(UpstreamError, match="does not hold the pinned commit"):
        cache.verify(pin)
    # Fetched again, it is a source already: no name needed.
    assert cache.fetch(str(other), pin).source.name == "other"
    # The pin's own repository may not lack it: refused, and the cache keeps what it had.
    before = refs_and_config(cache)
    with pytest.raises(UpstreamError, match="does not contain the pinned commit") as info:
        cache.fetch(str(other), pin, name="pins-own", url=pin.url)
    assert "nothing in the cache changed" in (info.value.hint or "")
    assert refs_and_config(cache) == before


def test_source_lacking_a_needed_blob_names_the_file(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    """A mirror without some blob: fine when excluded, a clear error when not."""
    project = make_project(tmp_path / "project", upstream)
    pin = project.pin()
    mirror = bare_mirror(tmp_path, upstream)
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


# -- several sources -------------------------------------------------------------

def refs_and_config(cache: UpstreamCache) -> tuple[str, str]:
    """Everything a failed fetch must leave as it was."""
    refs = sh_git(cache.git_dir, "for-each-ref", "--format=%(refname) %(objectname)")
    config = (cache.git_dir / "config").read_text()
    return refs, config


def test_fetching_a_fork_keeps_the_pins_tag(tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache) -> None:
    """The reported bug: a fork without the pinned tag pruned it from the cache."""
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    result = cache.fetch(str(fork.path), pin)
    assert result.source.name == "fork" and result.has_pin_commit
    assert result.added == ("fork-b200",) and not result.removed
    assert cache.verify(pin).sources == ("upstream",)
    table = cache.refs()
    assert table.holders("b101", RefKind.TAG) == {"upstream": upstream.commit}
    assert table.holders("fork-b200", RefKind.TAG) == {"fork": fork.commit}
    # Fetching the fork again prunes only the fork's own namespace.
    sh_git(fork.path, "tag", "-d", "fork-b200")
    again = cache.fetch(str(fork.path), pin)
    assert again.removed == ("fork-b200",)
    assert cache.refs().holders("b101", RefKind.TAG) == {"upstream": upstream.commit}
    cache.verify(pin)


def test_fork_first_then_the_pins_repository(tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(fork.path), pin)  # the fork has the pinned commit, not the tag
    with pytest.raises(UpstreamError, match="no source has it") as info:
        cache.verify(pin)
    assert "upstream fetch" in (info.value.hint or "")
    cache.fetch(str(upstream.path), pin)
    assert cache.verify(pin).sources == ("upstream",)
    assert [s.name for s in cache.sources()] == ["fork", "upstream"]


def test_a_mirror_of_the_pins_repository_is_the_same_source(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    project = make_project(tmp_path / "project", upstream)
    pin = project.pin()
    mirror = tmp_path / "mirrors" / "repo"
    mirror.parent.mkdir()
    sh_git(tmp_path, "clone", "-q", "--bare", str(upstream.path), str(mirror))
    first = cache.fetch(str(mirror), pin)
    # It has the pinned tag at the pinned commit: it stands for the pin's url.
    assert first.source.url == pin.url and first.source.name == "upstream"
    second = cache.fetch(str(upstream.path), pin)
    assert second.source.name == "upstream" and len(cache.sources()) == 1


def test_sources_that_disagree_on_a_tag(tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    sh_git(fork.path, "tag", "-a", "-m", "b102 of the fork", "b102", fork.commit)
    theirs = upstream.commit_change("CMakeLists.txt", "project(llama) # b102\n", "b102", tag="b102")
    cache.fetch(str(upstream.path), pin)
    fetched = cache.fetch(str(fork.path), pin)
    assert [name for name, _ in fetched.disputed] == ["b102"]
    table = cache.refs()
    with pytest.raises(SourcesDisagree) as info:
        table.resolve("b102")
    text = str(info.value)
    assert theirs in text and fork.commit in text and "upstream" in text and "fork" in text
    assert "`fork/b102`" in (info.value.hint or "")
    assert table.resolve("fork/b102").commit == fork.commit
    assert table.resolve("upstream/b102").commit == theirs
    # Both are listed, each under the name that picks it.
    labels = {tag.label for tag in all_tags(table)}
    assert {"fork/b102", "upstream/b102"} <= labels and "b101" in labels


def test_the_pins_repository_decides_what_the_pinned_tag_names(
    tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    sh_git(fork.path, "tag", "-a", "-m", "the fork's own b101", upstream.tag, fork.commit)
    cache.fetch(str(fork.path), pin)
    # Only the fork has a b101, and it is another commit: refused, both named.
    with pytest.raises(PinMismatchError, match=f"{fork.commit} in fork"):
        cache.verify(pin)
    cache.fetch(str(upstream.path), pin)
    assert cache.verify(pin).sources == ("upstream",)


def test_unknown_source_and_unknown_ref(tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    cache.fetch(str(fork.path), pin)
    table = cache.refs()
    with pytest.raises(UpstreamError, match="no source named 'frok'") as info:
        table.source("frok")
    assert "did you mean 'fork'" in (info.value.hint or "")
    with pytest.raises(UpstreamError, match="nor is 'frok' a source: the sources are upstream, fork"):
        table.resolve("frok/fork-b200")
    with pytest.raises(UpstreamError, match="the source 'fork' has no tag or branch 'b101'"):
        table.resolve("fork/b101")
    with pytest.raises(UpstreamError, match="no source named 'frok'"):
        cache.refetch("frok", pin)


def test_an_unreachable_source_changes_nothing(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    before = refs_and_config(cache)
    not_a_repository = tmp_path / "empty-dir"
    not_a_repository.mkdir()
    with pytest.raises(SourceUnreachable, match="does not appear to be a git repository") as info:
        cache.fetch(str(not_a_repository), pin)
    assert "Nothing in the cache changed" in (info.value.hint or "")
    with pytest.raises(SourceUnreachable):
        cache.fetch("git://127.0.0.1:9/nothing-listens-here", pin)
    assert refs_and_config(cache) == before
    cache.verify(pin)


def test_a_source_that_does_not_answer_times_out(
    tmp_path: Path, upstream: Upstream, cache: UpstreamCache, monkeypatch: pytest.MonkeyPatch,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    before = refs_and_config(cache)
    # A server that accepts the connection and never says a word.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    monkeypatch.setenv("HIRAISHIN_CONNECT_TIMEOUT", "1")
    started = time.monotonic()
    try:
        with pytest.raises(SourceUnreachable, match="no answer within 1 s") as info:
            cache.fetch(f"git://127.0.0.1:{server.getsockname()[1]}/silent", pin)
    finally:
        server.close()
    assert time.monotonic() - started < 20
    assert "HIRAISHIN_CONNECT_TIMEOUT" in (info.value.hint or "")
    assert refs_and_config(cache) == before


def test_a_fetch_that_fails_midway_leaves_the_refs_as_they_were(
    tmp_path: Path, upstream: Upstream, cache: UpstreamCache,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    mirror = bare_mirror(tmp_path, upstream)
    cache.fetch(str(mirror), pin)
    before = refs_and_config(cache)
    # The mirror gains a tag whose tree it has lost: the fetch dies in the transfer.
    sh_git(upstream.path, "commit", "-q", "--allow-empty", "-m", "b102")
    (upstream.path / "new.txt").write_text("new\n")
    sh_git(upstream.path, "add", "new.txt")
    sh_git(upstream.path, "commit", "-q", "-m", "b102 with a file")
    sh_git(upstream.path, "tag", "-a", "-m", "b102", "b102")
    sh_git(mirror, "fetch", "-q", str(upstream.path), "+refs/tags/*:refs/tags/*", "+refs/heads/*:refs/heads/*")
    tree = sh_git(mirror, "rev-parse", "b102^{tree}")
    drop_object(mirror, tree)
    with pytest.raises(CommandError):
        cache.fetch(str(mirror), pin)
    assert refs_and_config(cache) == before
    assert "refs/hiraishin/incoming" not in sh_git(cache.git_dir, "for-each-ref")


def test_file_contents_come_from_the_source_that_has_the_commit(
    tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache,
) -> None:
    """Observed: the blobs of a fork's commit were asked from the pin's repository, which lacks them."""
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    cache.fetch(str(fork.path), pin)
    store = ObjectStore(cache.git_dir)
    blob = dict(store.blobs(fork.commit))[FORK_ONLY_FILE]
    assert not store.has(blob)
    # The pin's repository is asked first (it is preferred), cannot serve the
    # file, and the fork, which has the commit, is asked next.
    assert cache.prefetch_blobs(fork.commit, pin.checkout, prefer=("upstream",)) == 1
    assert ObjectStore(cache.git_dir).has(blob)


def test_legacy_cache_is_read_then_migrated(tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache) -> None:
    """A cache made before sources: remote origin, its tags in refs/tags/."""
    pin = make_project(tmp_path / "project", upstream).pin()
    make_legacy_cache(cache, upstream.path)
    assert cache.verify(pin).sources == ("origin",)
    assert cache.refs().resolve("b100").commit == upstream.base
    cache.fetch(str(fork.path), pin)
    refs = sh_git(cache.git_dir, "for-each-ref", "--format=%(refname)").splitlines()
    assert not [ref for ref in refs if ref.startswith(("refs/tags/", "refs/remotes/"))]
    assert "refs/sources/upstream/tags/b101" in refs and "refs/sources/fork/tags/fork-b200" in refs
    assert [s.name for s in cache.sources()] == ["upstream", "fork"]
    assert git.config_get(cache.git_dir, "extensions.partialClone") == "upstream"
    assert cache.verify(pin).sources == ("upstream",)


def test_concurrent_fetches_are_refused(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    before = refs_and_config(cache)
    with lock.exclusive(cache.lock_file, lambda holder: CacheLocked("held")):
        with pytest.raises(CacheLocked, match="another fetch into the upstream cache") as info:
            cache.fetch(str(upstream.path), pin)
    assert f"pid {os.getpid()}" in str(info.value)
    assert refs_and_config(cache) == before


def make_legacy_cache(cache: UpstreamCache, source: Path) -> None:
    """The cache as the code before sources made it (one remote, shared refs/tags/, --prune)."""
    repo = cache.git_dir
    cache.root.mkdir(parents=True, exist_ok=True)
    sh_git(cache.root, "init", "-q", "--bare", str(repo))
    for key, value in [
        ("core.repositoryformatversion", "1"), ("extensions.partialClone", "origin"), ("remote.origin.promisor", "true"),
        ("remote.origin.partialclonefilter", "blob:none"), ("remote.origin.uploadpack", UPLOAD_PACK),
        ("gc.auto", "0"), ("remote.origin.url", source.as_uri()),
    ]:
        sh_git(repo, "config", key, value)
    sh_git(repo, "config", "--add", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*")
    sh_git(repo, "config", "--add", "remote.origin.fetch", "+refs/tags/*:refs/tags/*")
    sh_git(repo, "fetch", "-q", "--filter=blob:none", "--prune", "origin")


def test_only_a_local_repository_is_told_its_upload_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    # Told one, an https remote answers with a warning before its real error.
    seen: list[tuple[str, ...]] = []
    monkeypatch.setattr(git, "git", lambda repo, *args, **kwargs: seen.append(args) or proc.Completed([], 0, "", ""))
    git.ls_remote("https://github.com/o/r.git", upload_pack=UPLOAD_PACK, what="x")
    git.ls_remote("file:///srv/r.git", upload_pack=UPLOAD_PACK, what="x")
    assert [arg for arg in seen[0] if arg.startswith("--upload-pack")] == []
    assert f"--upload-pack={UPLOAD_PACK}" in seen[1]
    assert seen[1][-2:] == ("file:///srv/r.git", "HEAD")


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("warning: setting remote service path not supported by protocol\n"
         "fatal: unable to access 'https://h/r.git/': Could not resolve host: h",
         "unable to access 'https://h/r.git/': Could not resolve host: h"),
        ("fatal: unable to connect to 127.0.0.1:\n127.0.0.1[0: 127.0.0.1]: errno=Connection refused",
         "unable to connect to 127.0.0.1: 127.0.0.1[0: 127.0.0.1]: errno=Connection refused"),
        ("fatal: '/tmp' does not appear to be a git repository\nfatal: Could not read from remote repository.\n\n"
         "Please make sure you have the correct access rights\nand the repository exists.",
         "'/tmp' does not appear to be a git repository"),
        ("something else went wrong", "something else went wrong"),
    ],
)
def test_the_reason_a_source_is_unreachable(output: str, reason: str) -> None:
    assert cache_module._first_fatal(output) == reason


# -- verify and require_complete, offline ---------------------------------------------

def test_verify_a_pin_whose_commit_the_cache_lacks(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    project = make_project(tmp_path / "project", upstream)
    pin = project.pin()
    cache.fetch(str(upstream.path), pin)
    # The ref is there and names another commit: a mistyped (or moved) commit, not a cache to fill.
    absent = pin.moved_to(pin.ref, "0123456789abcdef0123456789abcdef01234567")
    with pytest.raises(PinMismatchError) as info:
        cache.verify(absent)
    assert info.value.message == (f"the pinned ref 'b101' names {pin.commit} in upstream, while {project.pin_file} "
                                  "records 0123456789abcdef0123456789abcdef01234567, which the upstream cache "
                                  "does not hold: a mistyped or moved commit")
    assert info.value.hint == (f"if `commit` is mistyped, correct it in {project.pin_file} (the ref names "
                               f"{pin.commit}); if b101 was moved upstream, re-pin deliberately: fetch a copy that "
                               "still has 0123456789ab, then `hiraishin rebase --onto b101`")
    # Neither the ref nor the commit: the cache lacks the pin.
    with pytest.raises(UpstreamError) as info:
        cache.verify(absent.moved_to("b999", absent.commit))
    assert info.value.message == (f"the upstream cache {cache.git_dir} does not hold the pinned commit "
                                  "0123456789abcdef0123456789abcdef01234567")
    assert info.value.hint == "run `hiraishin upstream fetch` (or with --from <mirror>)"


def test_verify_a_pin_whose_ref_the_cache_lacks(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    with pytest.raises(UpstreamError) as info:
        cache.verify(pin.moved_to("b999", pin.commit))
    assert info.value.message.startswith("the pinned ref 'b999' is not in the upstream cache")
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


# -- where the cache lives, fetching a source again, single blobs ----------------------------------

def test_the_cache_root_is_the_environments_or_the_users_cache_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import platformdirs

    assert cache_module.CACHE_ENV == "HIRAISHIN_CACHE_DIR"  # the name users set
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HIRAISHIN_CACHE_DIR", "~/caches/../hiraishin-cache")
    assert cache_module.default_cache_root() == (tmp_path / "hiraishin-cache").resolve()
    assert UpstreamCache().root == (tmp_path / "hiraishin-cache").resolve()
    for unset in ("", None):
        if unset is None:
            monkeypatch.delenv(cache_module.CACHE_ENV)
        else:
            monkeypatch.setenv(cache_module.CACHE_ENV, unset)
        assert cache_module.default_cache_root() == platformdirs.user_cache_path("hiraishin")


def test_refetch_fetches_a_source_again_from_where_it_was_fetched(
    tmp_path: Path, upstream: Upstream, cache: UpstreamCache,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    mirror = bare_mirror(tmp_path, upstream)
    public = "https://example.invalid/org/upstream.git"
    first = cache.fetch(str(mirror), pin, url=public)
    assert (first.source.name, first.source.url) == ("org-upstream", public)
    sh_git(mirror, "tag", "b102", pin.commit)
    again = cache.refetch("org-upstream", pin)
    assert again.source == first.source
    assert again.source.location == mirror.resolve().as_uri()
    assert again.added == ("b102",)
    assert [(s.name, s.url) for s in cache.sources()] == [("org-upstream", public)]
    # A source whose remote was removed by hand keeps its refs, but has nowhere to be fetched from.
    sh_git(cache.git_dir, "config", "--remove-section", "remote.org-upstream")
    with pytest.raises(UpstreamError) as info:
        cache.refetch("org-upstream", pin)
    assert info.value.message == "the source 'org-upstream' has no location to fetch from (its remote was removed)"
    assert info.value.hint == "give one: `hiraishin upstream fetch --from PATH_OR_URL --name org-upstream`"
    vocab = dict(ObjectStore(cache.git_dir).blobs(pin.commit))["models/ggml-vocab-big.gguf"]
    with pytest.raises(UpstreamError) as info:
        cache.ensure_blobs([vocab], why="for a test", commit=pin.commit)
    assert info.value.message == "the upstream cache has no source to fetch file contents for a test from"
    assert info.value.hint == "run `hiraishin upstream fetch` (or with --from <mirror>)"


def test_ensure_blobs_fetches_only_what_the_cache_lacks(
    tmp_path: Path, upstream: Upstream, cache: UpstreamCache, monkeypatch: pytest.MonkeyPatch,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    blobs = dict(ObjectStore(cache.git_dir).blobs(pin.commit))
    docs, vocab, mmvq = blobs["docs/build.md"], blobs["models/ggml-vocab-big.gguf"], blobs["ggml/src/ggml-cuda/mmvq.cu"]
    assert not ObjectStore(cache.git_dir).has(docs)
    asked: list[list[str]] = []
    real = git.fetch_objects
    monkeypatch.setattr(git, "fetch_objects", lambda repo, remote, ids, **kw: asked.append(list(ids)) or real(repo, remote, ids, **kw))
    cache.ensure_blobs([docs, mmvq, docs], why="for a test", commit=pin.commit)
    assert asked == [[docs]]
    assert ObjectStore(cache.git_dir).has(docs)
    cache.ensure_blobs([docs, mmvq], why="for a test", commit=pin.commit)
    assert asked == [[docs]]  # nothing left to fetch: no fetch
    shutil.rmtree(upstream.path)
    # The only source is gone: its own error, as git gave it.
    with pytest.raises(CommandError) as info:
        cache.ensure_blobs([vocab], why="for a test", commit=pin.commit)
    assert type(info.value) is CommandError
    assert info.value.message.startswith("fetching 1 file content(s) for a test from upstream (")


def test_a_checkout_whose_blobs_no_source_can_serve(
    tmp_path: Path, upstream: Upstream, cache: UpstreamCache, monkeypatch: pytest.MonkeyPatch,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    # The commit before the pin needs its own fattn.cu, which the fetch of the pin left out.
    assert [b.path for b in cache.missing_blobs(upstream.base, pin.checkout)] == ["ggml/src/ggml-cuda/fattn.cu"]
    # A source that answers without sending them.
    monkeypatch.setattr(git, "fetch_objects", lambda *args, **kwargs: None)
    with pytest.raises(UpstreamError) as info:
        cache.prefetch_blobs(upstream.base, pin.checkout)
    assert info.value.message == "the upstream source lacks 1 file(s) a checkout needs: ggml/src/ggml-cuda/fattn.cu"
    assert info.value.hint == "add them to [checkout] exclude in recipes/upstream.toml if no build needs them"
    monkeypatch.undo()
    monkeypatch.setenv(cache_module.CACHE_ENV, str(cache.root))
    # A source that is gone: git's error, which names no object, is raised as it is.
    shutil.rmtree(upstream.path)
    with pytest.raises(CommandError) as info:
        cache.prefetch_blobs(upstream.base, pin.checkout)
    assert type(info.value) is CommandError
    assert info.value.message.startswith(f"fetching 1 file content(s) to check out {upstream.base[:12]} from upstream (")


def test_a_legacy_cache_moves_aside_from_a_source_that_took_its_name(
    tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    make_legacy_cache(cache, upstream.path)
    assert cache.sources_containing(pin.commit) == ("origin",)
    # A source named as the pin's repository would be, but fetched from the fork.
    sh_git(cache.git_dir, "config", "remote.upstream.url", fork.path.as_uri())
    cache.fetch(str(fork.path), pin)
    refs = sh_git(cache.git_dir, "for-each-ref", "--format=%(refname)").splitlines()
    assert "refs/sources/upstream-1/tags/b101" in refs
    assert "refs/sources/upstream/tags/fork-b200" in refs
    assert "refs/sources/upstream/tags/b101" not in refs
    assert {s.name: s.url for s in cache.sources()} == {"upstream": str(fork.path), "upstream-1": str(upstream.path)}
    assert git.config_get(cache.git_dir, "extensions.partialClone") == "upstream-1"


def test_which_source_a_fetch_fills_in_full() -> None:
    from hiraishin_build.cache import identify
    from hiraishin_build.pin import UpstreamPin
    from hiraishin_build.sources import Source

    pin_url = "https://github.com/TheTom/llama-cpp-turboquant.git"
    fork_url = "https://github.com/AtomicBot-ai/atomic-llama-cpp-turboquant"
    other = "https://gitlab.com/AtomicBot-ai/atomic-llama-cpp-turboquant"
    mirror = "file:///srv/mirror/TheTom%2Bllama-cpp-turboquant/repo"
    pin = UpstreamPin(url=pin_url, ref="b1", commit="69d8e4be47243e83b3d0d71e932bc7aa61c644dc")
    thetom = Source("thetom", pin_url, mirror)
    # Found by its repository: the url given replaces the one recorded.
    assert identify([thetom], "https://github.com/thetom/llama-cpp-turboquant", pin, carries_pin=False,
                    url="https://github.com/thetom/llama-cpp-turboquant") == Source(
        "thetom", "https://github.com/thetom/llama-cpp-turboquant", "https://github.com/thetom/llama-cpp-turboquant")
    assert identify([thetom], mirror, pin, carries_pin=True) == Source("thetom", pin_url, mirror)
    with pytest.raises(UpstreamError) as info:
        identify([thetom], pin_url, pin, carries_pin=True, name="other")
    assert info.value.message == f"{pin_url} is already the source 'thetom' in the upstream cache"
    assert info.value.hint == "fetch it as `--name thetom` (or without --name); one repository is one source"
    atomic = Source("AtomicBot-ai-atomic-llama-cpp-turboquant", fork_url, fork_url)
    with pytest.raises(UpstreamError) as info:
        identify([atomic], other, pin, carries_pin=False)
    assert info.value.message == ("the source name 'AtomicBot-ai-atomic-llama-cpp-turboquant' already stands for "
                                  f"{fork_url}, not {other}")
    assert info.value.hint == f"choose another name with --name NAME, or give --url {fork_url} if {other} is a mirror of it"
    with pytest.raises(UpstreamError) as info:
        identify([atomic], other, pin, carries_pin=False, url=other)
    assert info.value.hint == "choose another name with --name NAME"
    # A name whose remote is gone (no url) may be taken by any repository.
    assert identify([Source("x", "", "")], fork_url, pin, carries_pin=False, name="x") == Source("x", fork_url, fork_url)
    # The same location, now said to mirror another repository, keeps its name.
    local = Source("local", "/srv/a", "file:///srv/a")
    assert identify([local], "file:///srv/a", pin, carries_pin=False, name="local", url=fork_url) == Source(
        "local", fork_url, "file:///srv/a")


# -- messages and hints in full; what git itself does with the cache's remotes -------------------

def test_the_refusals_of_a_fetch_in_full(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    not_a_repository = tmp_path / "empty-dir"
    not_a_repository.mkdir()
    with pytest.raises(SourceUnreachable) as info:
        cache.fetch(str(not_a_repository), pin)
    assert info.value.message.startswith(f"cannot read the upstream source {not_a_repository}: '")
    assert info.value.hint == ("check the URL or path (a local mirror must be a git repository) and the network. "
                               "Nothing in the cache changed")
    cache.fetch(str(upstream.path), pin)
    with lock.exclusive(cache.lock_file, lambda holder: CacheLocked("held")):
        with pytest.raises(CacheLocked) as locked:
            cache.fetch(str(upstream.path), pin)
    assert locked.value.message.startswith(f"another fetch into the upstream cache {cache.git_dir} is running (pid ")
    assert locked.value.hint == "wait for it to finish and run this again; the lock ends with its process"
    with pytest.raises(UpstreamError) as info:
        cache.verify(pin.moved_to("b999", pin.commit))
    assert info.value.message == "the pinned ref 'b999' is not in the upstream cache: no source has it (sources: upstream)"
    assert info.value.hint == (f"fetch the pin's repository: `hiraishin upstream fetch` (from {pin.url}) or "
                               "`hiraishin upstream fetch --from <a mirror of it>`; if the ref was deleted upstream, "
                               "re-pin to a ref that exists")
    # The refs cannot be written (a stale lock of git's own): the fetch says what it was doing.
    sh_git(upstream.path, "tag", "-a", "-m", "b102", "b102")
    lock_of_ref = cache.git_dir / "refs" / "sources" / "upstream" / "tags" / "b102.lock"
    lock_of_ref.write_text("")
    with pytest.raises(CommandError) as failed:
        cache.fetch(str(upstream.path), pin)
    assert failed.value.message.startswith("recording the refs of the source upstream")
    lock_of_ref.unlink()


def test_a_fetch_that_fails_in_the_transfer_says_so(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    mirror = bare_mirror(tmp_path, upstream)
    cache.fetch(str(mirror), pin)
    (upstream.path / "new.txt").write_text("new\n")
    sh_git(upstream.path, "add", "new.txt")
    sh_git(upstream.path, "commit", "-q", "-m", "b102 with a file")
    sh_git(upstream.path, "tag", "-a", "-m", "b102", "b102")
    sh_git(mirror, "fetch", "-q", str(upstream.path), "+refs/tags/*:refs/tags/*", "+refs/heads/*:refs/heads/*")
    drop_object(mirror, sh_git(mirror, "rev-parse", "b102^{tree}"))
    with pytest.raises(CommandError) as info:
        cache.fetch(str(mirror), pin)
    assert info.value.message.startswith(f"fetching the upstream from {mirror}")
    assert info.value.hint == "check the URL or path; a local mirror must be a git repository. Nothing in the cache changed"


def test_a_blob_a_mirror_lacks_is_named_in_full(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    mirror = bare_mirror(tmp_path, upstream)
    drop_object(mirror, dict(ObjectStore(mirror).blobs(pin.commit))["tools/server/server.cpp"])
    with pytest.raises(UpstreamError) as info:
        cache.fetch(str(mirror), pin)
    assert info.value.message == (f"{mirror} lacks the content of tools/server/server.cpp (needed to check out "
                                  f"{pin.commit[:12]}; sources tried: upstream)")
    assert info.value.hint == ("if no build needs it, add the path to [checkout] exclude in recipes/upstream.toml; "
                               "otherwise fetch from a complete copy of the upstream")
    # The contents are checked before anything is written: the failed first fetch left no cache.
    assert not cache.exists()


def test_a_moved_tag_is_said_when_fetched(
    tmp_path: Path, upstream: Upstream, cache: UpstreamCache, caplog: pytest.LogCaptureFixture,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    sh_git(upstream.path, "tag", "-f", "-a", "-m", "moved", "b100", "HEAD")
    moved_to = sh_git(upstream.path, "rev-parse", "HEAD")
    caplog.set_level("WARNING", logger="hiraishin")
    result = cache.fetch(str(upstream.path), pin)
    assert result.moved == (("b100", upstream.base, moved_to),)
    assert [r.getMessage() for r in caplog.records] == [
        f"upstream: the tag b100 moved from {upstream.base[:12]} to {moved_to[:12]}"]


def test_git_itself_fetching_a_source_keeps_to_its_namespace(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    sh_git(upstream.path, "tag", "-a", "-m", "b102", "b102", "HEAD")
    # As git's own maintenance or a maintainer would: the remote by its name.
    sh_git(cache.git_dir, "fetch", "-q", "upstream")
    refs = sh_git(cache.git_dir, "for-each-ref", "--format=%(refname)").splitlines()
    assert "refs/sources/upstream/tags/b102" in refs
    assert not [ref for ref in refs if ref.startswith("refs/tags/")]
    assert git.config_get(cache.git_dir, "remote.upstream.promisor") == "true"
    assert not ObjectStore(cache.git_dir).has(dict(ObjectStore(cache.git_dir).blobs(pin.commit))["docs/build.md"])


def test_file_contents_are_asked_first_of_the_sources_that_have_the_commit(
    tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    cache.fetch(str(fork.path), pin)
    assert cache.sources_containing(pin.commit) == ("fork", "upstream")
    assert cache.sources_containing(fork.commit) == ("fork",)
    assert cache.prefetch_blobs(pin.commit, pin.checkout) == 0
    asked: list[str] = []
    real = git.fetch_objects
    monkeypatch.setattr(git, "fetch_objects", lambda repo, remote, ids, **kw: asked.append(remote) or real(repo, remote, ids, **kw))
    caplog.set_level("INFO", logger="hiraishin")
    assert cache.prefetch_blobs(fork.commit, pin.checkout) == 1
    assert asked == ["fork"]
    assert f"fetching 1 file contents for {fork.commit[:12]}" in [r.getMessage() for r in caplog.records]


def test_a_legacy_cache_of_a_mirror_that_carries_the_pin_stands_for_the_pins_repository(
    tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    mirror = bare_mirror(tmp_path, upstream)
    make_legacy_cache(cache, mirror)
    cache.fetch(str(fork.path), pin)
    assert {s.name: s.url for s in cache.sources()} == {"upstream": pin.url, "fork": str(fork.path)}
    assert cache.sources()[0].location == mirror.as_uri()


def test_a_tag_that_named_no_commit_and_now_names_one_is_said_to_move(
    tmp_path: Path, upstream: Upstream, cache: UpstreamCache,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    sh_git(upstream.path, "tag", "odd", "HEAD:CMakeLists.txt")  # a tag of a file's content, not of a commit
    cache.fetch(str(upstream.path), pin)
    sh_git(upstream.path, "tag", "-f", "odd", "HEAD")
    result = cache.fetch(str(upstream.path), pin)
    assert result.moved == (("odd", "", sh_git(upstream.path, "rev-parse", "HEAD")),)


# -- what a fetch checks before it writes anything -------------------------------------------------

def test_a_repository_said_to_be_the_pins_that_is_not_changes_nothing(
    tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache,
) -> None:
    """Observed: --url <the pin's url> on a repository with its own pinned tag rewrote the pin source's
    tags ("2 gone, 1 moved") before the pin check failed, and the cache failed every command after."""
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    before = refs_and_config(cache)
    sh_git(fork.path, "tag", "-a", "-m", "the fork's own b101", upstream.tag, fork.commit)
    with pytest.raises(PinMismatchError) as info:
        cache.fetch(str(fork.path), pin, url=pin.url)
    assert info.value.message == (
        f"the pinned ref 'b101' names {fork.commit} in {fork.path}, but {pin.source} records {pin.commit}: "
        f"{fork.path} is not a copy of {pin.url} as pinned, or the ref moved there; nothing in the cache changed")
    assert info.value.hint == (f"if {fork.path} is another repository, fetch it without --url (with --name NAME "
                               "it is kept as a source of its own)")
    assert refs_and_config(cache) == before
    assert cache.verify(pin).sources == ("upstream",)
    # One that lacks the pinned tag altogether, said to be the pin's: refused as well.
    sh_git(fork.path, "tag", "-d", upstream.tag)
    with pytest.raises(UpstreamError) as info:
        cache.fetch(str(fork.path), pin, url=pin.url)
    assert info.value.message == (f"{fork.path} has no tag or branch 'b101' (the pinned ref), though it contains "
                                  f"{pin.short}")
    assert (info.value.hint or "").startswith(f"if {fork.path} is not a copy of {pin.url}, fetch it without --url")
    assert refs_and_config(cache) == before
    # As what it is, a fork, it is welcome.
    assert cache.fetch(str(fork.path), pin).source.name == "fork"


def test_a_mistyped_pin_commit_is_said_and_the_mirror_keeps_its_url(
    tmp_path: Path, upstream: Upstream, cache: UpstreamCache,
) -> None:
    """Observed: with a mistyped commit, a fetch from the mirror the pin's source is fetched from
    relabelled that source as standing for the mirror's path."""
    project = make_project(tmp_path / "project", upstream)
    pin = project.pin()
    # A mirror whose path gives the name the pin's url gives: .../upstream/repo -> upstream.
    mirror = tmp_path / "mirrors" / "upstream" / "repo"
    sh_git(tmp_path, "clone", "-q", "--bare", str(upstream.path), str(mirror))
    assert cache.fetch(str(mirror), pin).source == Source("upstream", pin.url, mirror.as_uri())
    before = refs_and_config(cache)
    typo = pin.moved_to(pin.ref, pin.commit[:-4] + "0000")
    with pytest.raises(PinMismatchError) as info:
        cache.fetch(str(mirror), typo)
    assert info.value.message == (
        f"the pinned ref 'b101' names {pin.commit} in {mirror}, but {project.pin_file} records {typo.commit}, "
        f"which neither {mirror} nor the upstream cache holds: a mistyped or moved commit; nothing in the cache changed")
    assert (info.value.hint or "").startswith(
        f"if `commit` is mistyped, correct it in {project.pin_file} (to {pin.commit} if that is the one meant)")
    assert refs_and_config(cache) == before
    assert [(s.name, s.url) for s in cache.sources()] == [("upstream", pin.url)]
    # Fetched again by name, the mirror is still taken for the pin's repository (no --url was given):
    # a tag moved there is said to have moved.
    sh_git(mirror, "tag", "-f", "-a", "-m", "moved", "b101", upstream.base)
    with pytest.raises(PinMismatchError) as moved:
        cache.refetch("upstream", pin)
    assert moved.value.message.endswith(": the ref moved; nothing in the cache changed")
    assert refs_and_config(cache) == before
    # Into an empty cache: the same words, and no cache is left behind.
    fresh = UpstreamCache(tmp_path / "fresh")
    with pytest.raises(PinMismatchError, match="a mistyped or moved commit"):
        fresh.fetch(str(mirror), typo)
    assert not fresh.exists()


def test_a_refused_fetch_leaves_a_legacy_cache_unmoved(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    make_legacy_cache(cache, upstream.path)
    before = refs_and_config(cache)
    other = tmp_path / "other"
    other.mkdir()
    sh_git(other, "init", "-q")
    sh_git(other, "commit", "-q", "--allow-empty", "-m", "unrelated")
    with pytest.raises(UpstreamError, match="neither the pin's repository nor a fork of it"):
        cache.fetch(str(other), pin)
    assert refs_and_config(cache) == before
    assert cache.verify(pin).sources == ("origin",)


def test_contents_no_source_can_serve_are_refused_before_the_refs_change(
    tmp_path: Path, upstream: Upstream, cache: UpstreamCache,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    other = tmp_path / "other"
    other.mkdir()
    sh_git(other, "init", "-q")
    sh_git(other, "commit", "-q", "--allow-empty", "-m", "unrelated")
    cache.fetch(str(other), pin, name="other")
    before = refs_and_config(cache)
    mirror = bare_mirror(tmp_path, upstream)
    drop_object(mirror, dict(ObjectStore(mirror).blobs(pin.commit))["tools/server/server.cpp"])
    with pytest.raises(UpstreamError, match="lacks the content of tools/server/server.cpp"):
        cache.fetch(str(mirror), pin)
    assert refs_and_config(cache) == before


def test_an_unusable_cache_directory_is_named_before_any_work(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hiraishin_build.errors import PathError

    pin = make_project(tmp_path / "project", upstream).pin()
    probed: list[str] = []
    monkeypatch.setattr(git, "ls_remote", lambda url, **kwargs: probed.append(url) or [])
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(cache_module.CACHE_ENV, str(blocker / "cache"))
    with pytest.raises(PathError) as info:
        UpstreamCache().fetch(str(upstream.path), pin)
    assert info.value.message.startswith(f"the upstream cache directory {blocker / 'cache'} cannot be written: ")
    assert info.value.hint == "give HIRAISHIN_CACHE_DIR a directory you can write to"
    with pytest.raises(PathError) as info:
        UpstreamCache(blocker / "cache").fetch(str(upstream.path), pin)
    assert info.value.hint == "give --cache-dir (or HIRAISHIN_CACHE_DIR) a directory you can write to"
    assert probed == []


# -- removing a source ------------------------------------------------------------------------------

def test_remove_a_source_keeps_its_objects_and_says_how_to_get_it_back(
    tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    cache.fetch(str(upstream.path), pin)
    cache.fetch(str(fork.path), pin, url="https://example.org/someone/fork", name="fork")
    removed = cache.remove("fork", pin)
    assert (removed.source.name, removed.tags, removed.branches, removed.warnings) == ("fork", 1, 1, ())
    assert removed.fetch_again == (f"hiraishin upstream fetch --from {fork.path} --url https://example.org/someone/fork "
                                   "--name fork")
    assert [s.name for s in cache.sources()] == ["upstream"]
    refs = sh_git(cache.git_dir, "for-each-ref", "--format=%(refname)").splitlines()
    assert not [ref for ref in refs if ref.startswith("refs/sources/fork/")]
    assert git.config_get_regexp(cache.git_dir, r"\.fork\.") == []
    assert ObjectStore(cache.git_dir).commit_exists(fork.commit)  # a later fetch is cheap
    cache.verify(pin)
    back = cache.fetch(str(fork.path), pin, url="https://example.org/someone/fork", name="fork")
    assert back.added == ("fork-b200",) and back.source.url == "https://example.org/someone/fork"


def test_remove_refuses_what_is_not_there_and_the_last_copy_of_the_pin(
    tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache,
) -> None:
    pin = make_project(tmp_path / "project", upstream).pin()
    with pytest.raises(UpstreamError) as info:
        cache.remove("upstream", pin)
    assert info.value.message == f"no source named 'upstream': the upstream cache {cache.git_dir} does not exist"
    cache.fetch(str(upstream.path), pin)
    before = refs_and_config(cache)
    with pytest.raises(UpstreamError) as info:
        cache.remove("upstrem", pin)
    assert info.value.message == "no source named 'upstrem' in the upstream cache, nothing to remove (sources: upstream)"
    assert info.value.hint == "did you mean 'upstream'? `hiraishin upstream show` lists them"
    with pytest.raises(UpstreamError) as info:
        cache.remove("upstream", pin)
    assert info.value.message == (f"'upstream' is the only source of the upstream cache with the pinned commit "
                                  f"{pin.short} (b101): without it the cache can neither check out the pin nor fetch "
                                  "its files")
    assert "--force" in (info.value.hint or "")
    assert refs_and_config(cache) == before
    # With a fork that has the commit, the pin's repository may go, with a word on what that costs.
    cache.fetch(str(fork.path), pin)
    removed = cache.remove("upstream", pin)
    assert removed.warnings == ("no source has the pinned ref 'b101' now: `hiraishin upstream verify` fails until "
                                "the pin's repository is fetched again",)
    assert git.config_get(cache.git_dir, "extensions.partialClone") == "fork"
    # The last one, with --force: the cache stays a partial clone for git.
    forced = cache.remove("fork", pin, force=True)
    assert forced.warnings[0].startswith(f"no source has the pinned commit {pin.short} now")
    assert cache.sources() == [] and git.config_get(cache.git_dir, "extensions.partialClone") == "fork"
    again = cache.fetch(str(upstream.path), pin)
    assert again.source.name == "upstream" and cache.verify(pin).sources == ("upstream",)


def test_remove_on_the_command_line_prints_what_went_and_the_way_back(
    tmp_path: Path, upstream: Upstream, fork: Upstream, cache: UpstreamCache,
) -> None:
    import shlex

    from ..helpers import hiraishin

    project = make_project(tmp_path / "project", upstream)
    cache.fetch(str(upstream.path), project.pin())
    cache.fetch(str(fork.path), project.pin())
    removed = hiraishin("upstream", "remove", "fork", cwd=project.root)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.splitlines() == [
        f"removed the source fork: {fork.path}",
        "  1 tag(s) and 1 branch(es) gone; its objects stay in the cache",
        f"to get it back: hiraishin upstream fetch --from {fork.path} --name fork",
    ]
    way_back = shlex.split(removed.stdout.splitlines()[-1].removeprefix("to get it back: hiraishin "))
    back = hiraishin(*way_back, cwd=project.root)
    assert back.returncode == 0, back.stderr
    assert "source fork:" in back.stdout and "(1 new)" in back.stdout
    # The pin's repository may go while the fork still has the pinned commit; the command says what that costs.
    forced = hiraishin("upstream", "remove", "upstream", cwd=project.root)
    assert forced.returncode == 0, forced.stderr  # the fork has the pinned commit too
    assert "warning: no source has the pinned ref 'b101' now" in forced.stderr
