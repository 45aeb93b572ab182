"""The local upstream cache: one bare, blobless repository per user.

``upstream fetch`` fills it with every commit and tree of the upstream but only
the blobs a work tree of the pinned commit needs (the sparse rules say which),
so it stays small (about 25 MB for llama.cpp) and everything after the fetch
works offline. A mirror that lacks some large blobs still works, as long as
those paths are excluded from checkouts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from . import git
from .errors import CommandError, PinMismatchError, UpstreamError
from .log import get_logger
from .pin import UpstreamPin
from .sparse import SparseRules

CACHE_ENV = "HIRAISHIN_CACHE_DIR"
REMOTE = "origin"
FETCH_REFSPECS = ("+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*")
# A local mirror serves a partial clone only if its upload-pack allows filters
# and requests for single objects (what the blob prefetch sends). Servers such
# as GitHub allow both already; there this setting is not used.
UPLOAD_PACK = "git -c uploadpack.allowFilter=true -c uploadpack.allowAnySHA1InWant=true upload-pack"


def default_cache_root() -> Path:
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser().resolve()
    return platformdirs.user_cache_path("hiraishin")


def normalize_source(source: str) -> str:
    """A local path becomes a file:// URL: git ignores --filter for plain paths."""
    if "://" in source or (":" in source and not Path(source).exists()):
        return source
    path = Path(source).expanduser()
    if not path.exists():
        raise UpstreamError(
            f"--from {source}: no such file or directory",
            hint="give the path of a git repository (bare or not) or a URL",
        )
    return path.resolve().as_uri()


@dataclass(frozen=True)
class MissingBlob:
    path: str
    object_id: str


class UpstreamCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else default_cache_root()

    @property
    def git_dir(self) -> Path:
        return self.root / "upstream.git"

    @property
    def objects_dir(self) -> Path:
        return self.git_dir / "objects"

    def exists(self) -> bool:
        return (self.git_dir / "HEAD").is_file()

    def source(self) -> str | None:
        return git.config_get(self.git_dir, f"remote.{REMOTE}.url") if self.exists() else None

    def store(self) -> git.ObjectStore:
        if not self.exists():
            raise UpstreamError(
                f"the upstream cache {self.git_dir} does not exist",
                hint="run `hiraishin upstream fetch` (or `hiraishin upstream fetch --from <mirror>`) first",
            )
        return git.ObjectStore(self.git_dir)

    # -- filling ----------------------------------------------------------

    def _init(self) -> None:
        get_logger().info("creating the upstream cache in %s", self.git_dir)
        git.init(self.git_dir, bare=True)
        git.config_set(self.git_dir, "core.repositoryformatversion", "1")
        git.config_set(self.git_dir, "extensions.partialClone", REMOTE)
        git.config_set(self.git_dir, f"remote.{REMOTE}.promisor", "true")
        git.config_set(self.git_dir, f"remote.{REMOTE}.partialclonefilter", "blob:none")
        git.config_set(self.git_dir, f"remote.{REMOTE}.uploadpack", UPLOAD_PACK)
        git.config_replace_all(self.git_dir, f"remote.{REMOTE}.fetch", FETCH_REFSPECS)
        # The cache is shared by work trees through alternates; a gc there
        # must not drop blobs that a work tree reads.
        git.config_set(self.git_dir, "gc.auto", "0")

    def fetch(self, source: str, pin: UpstreamPin) -> None:
        url = normalize_source(source)
        if not self.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            self._init()
        git.config_set(self.git_dir, f"remote.{REMOTE}.url", url)
        get_logger().info("fetching commits and trees from %s", url)
        git.fetch(
            self.git_dir,
            REMOTE,
            filter_spec="blob:none",
            prune=True,
            what=f"fetching the upstream from {url}",
            hint="check the URL or path; a local mirror must be a git repository",
        )
        if not self.store().commit_exists(pin.commit):
            raise UpstreamError(
                f"{url} does not contain the pinned commit {pin.commit} ({pin.ref})",
                hint="fetch from the repository the pin names, or a mirror of it",
            )
        self.prefetch_blobs(pin.commit, pin.checkout)

    def missing_blobs(self, commit: str, rules: SparseRules) -> list[MissingBlob]:
        store = self.store()
        return [
            MissingBlob(path, oid)
            for path, oid in store.blobs(commit)
            if not rules.excluded(path) and not store.has(oid)
        ]

    def prefetch_blobs(self, commit: str, rules: SparseRules) -> int:
        """Fetch the blobs a sparse checkout of ``commit`` needs; returns how many."""
        missing = self.missing_blobs(commit, rules)
        if not missing:
            return 0
        get_logger().info("fetching %d file contents for %s", len(missing), commit[:12])
        try:
            git.fetch_objects(
                self.git_dir,
                REMOTE,
                sorted({blob.object_id for blob in missing}),
                what=f"fetching file contents for {commit[:12]} from {self.source()}",
            )
        except CommandError as exc:
            # The server names the first object it does not have; say which file that is.
            absent = [blob.path for blob in missing if blob.object_id in exc.output_tail]
            if not absent:
                raise
            raise UpstreamError(
                f"{self.source()} lacks the content of {', '.join(absent)} (needed to check out {commit[:12]})",
                hint="if no build needs it, add the path to [checkout] exclude in recipes/upstream.toml; "
                "otherwise fetch from a complete copy of the upstream",
            ) from None
        still = self.missing_blobs(commit, rules)
        if still:
            names = ", ".join(blob.path for blob in still[:5])
            raise UpstreamError(
                f"the upstream source lacks {len(still)} file(s) a checkout needs: {names}",
                hint="add them to [checkout] exclude in recipes/upstream.toml if no build needs them",
            )
        return len(missing)

    def ensure_blobs(self, object_ids: Iterable[str], *, why: str) -> None:
        """Fetch the given blobs unless the cache holds them already.

        For looking at a few files of commits that are never checked out
        (which upstream commit a patch landed in), without fetching whole trees.
        """
        store = self.store()
        missing = sorted({oid for oid in object_ids if not store.has(oid)})
        if missing:
            git.fetch_objects(self.git_dir, REMOTE, missing, what=f"fetching {len(missing)} file content(s) {why}")

    def require_complete(self, commit: str, rules: SparseRules) -> None:
        """Offline check that a checkout of ``commit`` will find every blob."""
        if not self.store().commit_exists(commit):
            raise UpstreamError(
                f"the upstream cache {self.git_dir} does not hold commit {commit}",
                hint="run `hiraishin upstream fetch` (or with --from <mirror>)",
            )
        missing = self.missing_blobs(commit, rules)
        if missing:
            raise UpstreamError(
                f"the upstream cache lacks {len(missing)} file(s) of {commit[:12]} (first: {missing[0].path})",
                hint="run `hiraishin upstream fetch` again to fetch them",
            )

    # -- checking the pin -------------------------------------------------

    def verify(self, pin: UpstreamPin) -> None:
        """Refuse a cache without the pinned commit, or whose ref moved."""
        store = self.store()
        if not store.commit_exists(pin.commit):
            raise UpstreamError(
                f"the upstream cache {self.git_dir} does not hold the pinned commit {pin.commit}",
                hint="run `hiraishin upstream fetch` (or with --from <mirror>)",
            )
        resolved = store.resolve(pin.ref)
        if resolved is None:
            raise UpstreamError(
                f"the pinned ref '{pin.ref}' is not in the upstream cache",
                hint="run `hiraishin upstream fetch`; if the ref was deleted upstream, re-pin to a ref that exists",
            )
        if resolved != pin.commit:
            raise PinMismatchError(
                f"the pinned ref '{pin.ref}' moved: it now names {resolved}, "
                f"but {pin.source or 'the pin'} records {pin.commit}",
                hint="a moved tag is never followed silently; review the new commit and re-pin deliberately "
                "(`hiraishin rebase --onto <ref>`)",
            )
