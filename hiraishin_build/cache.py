"""The local upstream cache: one bare, blobless repository per user.

``upstream fetch`` fills it with every commit and tree of a source but only
the blobs a work tree of the pinned commit needs (the sparse rules say which),
so it stays small (about 25 MB for llama.cpp) and everything after the fetch
works offline. A mirror that lacks some large blobs still works, as long as
those paths are excluded from checkouts.

The cache holds any number of sources (sources.py): the pin's repository,
forks, mirrors of either. A fetch is all or nothing for the refs: it lands in
a scratch namespace first, is checked, and only then replaces that one
source's refs in a single ref transaction, so a failed or refused fetch, or
a fetch of another repository, never loses a ref the pin needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from . import git, lock, timeouts
from .errors import CacheLocked, CommandError, CommandTimedOut, PinMismatchError, SourceUnreachable, UpstreamError
from .log import get_logger
from .pin import UpstreamPin
from .sources import (
    LEGACY_HEADS,
    LEGACY_REMOTE,
    LEGACY_TAGS,
    SOURCES_REFS,
    URL_SECTION,
    RefTable,
    Source,
    derive_name,
    disagreements,
    display_location,
    fetch_refspecs,
    read_sources,
    same_repository,
    validate_name,
)
from .sparse import SparseRules

CACHE_ENV = "HIRAISHIN_CACHE_DIR"
# A source that does not answer a ref listing within this many seconds is
# reported unreachable (a host that drops packets would otherwise hang a
# fetch for minutes). The fetch itself has no overall limit, only git's
# low-speed limit: a first fetch over a slow link may take long.
# A local mirror serves a partial clone only if its upload-pack allows filters
# and requests for single objects (what the blob prefetch sends). Servers such
# as GitHub allow both already; there this setting is not used.
UPLOAD_PACK = "git -c uploadpack.allowFilter=true -c uploadpack.allowAnySHA1InWant=true upload-pack"
# Where a fetch lands before it is checked; the remote of that fetch exists
# only on its command line.
INCOMING_REFS = "refs/hiraishin/incoming/"
INCOMING_REMOTE = "hiraishin-incoming"


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


@dataclass(frozen=True)
class FetchResult:
    source: Source
    tags: int
    branches: int
    added: tuple[str, ...] = ()
    """Tags the source did not have in the cache before."""
    removed: tuple[str, ...] = ()
    """Tags the source no longer has (pruned from its namespace only)."""
    moved: tuple[tuple[str, str, str], ...] = ()
    """(tag, old commit, new commit) for tags of this source that now name another commit."""
    has_pin_commit: bool = False
    """The source itself carries the pinned commit."""
    disputed: tuple[tuple[str, dict[str, str]], ...] = ()
    """Its tags that another source gives another commit: (tag, source -> commit)."""


@dataclass(frozen=True)
class PinCheck:
    sources: tuple[str, ...]
    """The sources whose pinned ref names the pinned commit."""


class UpstreamCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else default_cache_root()
        self._containing: dict[str, tuple[str, ...]] = {}

    @property
    def git_dir(self) -> Path:
        return self.root / "upstream.git"

    @property
    def objects_dir(self) -> Path:
        return self.git_dir / "objects"

    @property
    def lock_file(self) -> Path:
        return self.root / "upstream.lock"

    def exists(self) -> bool:
        return (self.git_dir / "HEAD").is_file()

    def store(self) -> git.ObjectStore:
        if not self.exists():
            raise UpstreamError(
                f"the upstream cache {self.git_dir} does not exist",
                hint="run `hiraishin upstream fetch` (or `hiraishin upstream fetch --from <mirror>`) first",
            )
        return git.ObjectStore(self.git_dir)

    def sources(self) -> list[Source]:
        return read_sources(self.git_dir) if self.exists() else []

    def refs(self) -> RefTable:
        return RefTable.read(self.store(), self.sources())

    # -- filling ----------------------------------------------------------

    def _init(self) -> None:
        get_logger().info("creating the upstream cache in %s", self.git_dir)
        git.init(self.git_dir, bare=True)
        git.config_set(self.git_dir, "core.repositoryformatversion", "1")
        # The cache is shared by work trees through alternates; a gc there
        # must not drop blobs that a work tree reads.
        git.config_set(self.git_dir, "gc.auto", "0")

    def _configure(self, source: Source) -> None:
        name = source.name
        git.config_set(self.git_dir, f"remote.{name}.url", source.location)
        git.config_set(self.git_dir, f"remote.{name}.promisor", "true")
        git.config_set(self.git_dir, f"remote.{name}.partialclonefilter", "blob:none")
        git.config_set(self.git_dir, f"remote.{name}.uploadpack", UPLOAD_PACK)
        # Tags only ever go to the source's own namespace, never refs/tags/.
        git.config_set(self.git_dir, f"remote.{name}.tagopt", "--no-tags")
        git.config_replace_all(self.git_dir, f"remote.{name}.fetch", fetch_refspecs(name))
        git.config_set(self.git_dir, f"{URL_SECTION}.{name}.url", source.url)
        # git wants one promisor remote named here (it is asked last when a
        # blob is fetched on demand); every source is a promisor remote.
        if git.config_get(self.git_dir, "extensions.partialClone") is None:
            git.config_set(self.git_dir, "extensions.partialClone", name)

    def fetch(self, location: str, pin: UpstreamPin, *, name: str | None = None, url: str | None = None) -> FetchResult:
        """Fetch the source at ``location`` (a path or URL) into its own namespace.

        ``name`` and ``url`` say which source it is (see :func:`identify`);
        without them the source is found by its repository, or named after it.
        """
        fetch_url = normalize_source(location)
        if name is not None:
            validate_name(name)
        self.root.mkdir(parents=True, exist_ok=True)
        with lock.exclusive(self.lock_file, _cache_locked(self.git_dir)):
            if not self.exists():
                self._init()
            self._migrate_legacy(pin)
            self._containing.clear()
            shown = display_location(fetch_url)
            self._probe(fetch_url, shown)
            self._drop_incoming()
            try:
                get_logger().info("fetching commits and trees from %s", shown)
                git.fetch_as_promisor(
                    self.git_dir, fetch_url, fetch_refspecs_into(INCOMING_REFS), remote=INCOMING_REMOTE,
                    upload_pack=UPLOAD_PACK, what=f"fetching the upstream from {shown}",
                    hint="check the URL or path; a local mirror must be a git repository. "
                    "Nothing in the cache changed",
                )
                result = self._adopt(fetch_url, pin, name=name, url=url)
            finally:
                self._drop_incoming()
                self._containing.clear()
        for tag, old, new in result.moved:
            get_logger().warning("%s: the tag %s moved from %s to %s", result.source.name, tag, old[:12], new[:12])
        for tag, holders in result.disputed:
            get_logger().warning(
                "the sources disagree on the tag %s: %s", tag,
                "; ".join(f"{source} has {commit[:12]}" for source, commit in sorted(holders.items())),
            )
        if self.store().commit_exists(pin.commit):
            self.prefetch_blobs(pin.commit, pin.checkout, prefer=(result.source.name,))
        return result

    def refetch(self, name: str, pin: UpstreamPin) -> FetchResult:
        """Fetch a source already in the cache again, from where it was fetched last."""
        source = self.refs().source(name)
        if not source.location:
            raise UpstreamError(
                f"the source '{name}' has no location to fetch from (its remote was removed)",
                hint=f"give one: `hiraishin upstream fetch --from PATH_OR_URL --name {name}`",
            )
        return self.fetch(source.location, pin, name=name, url=source.url or None)

    def _probe(self, fetch_url: str, shown: str) -> None:
        try:
            git.ls_remote(fetch_url, upload_pack=UPLOAD_PACK, what=f"reaching {shown}")
        except CommandTimedOut:
            raise SourceUnreachable(
                f"cannot read the upstream source {shown}: no answer within "
                f"{timeouts.describe(timeouts.CONNECT.seconds() or 0)}",
                hint="check the URL or path and the network; a slow server may need a longer "
                f"{timeouts.CONNECT.variable}. Nothing in the cache changed",
            ) from None
        except CommandError as exc:
            raise SourceUnreachable(
                f"cannot read the upstream source {shown}: {_first_fatal(exc.output_tail) or exc.message}",
                hint="check the URL or path (a local mirror must be a git repository) and the network. "
                "Nothing in the cache changed",
            ) from None

    def _drop_incoming(self) -> None:
        leftovers = {ref: None for ref, _, _ in git.ObjectStore(self.git_dir).references(INCOMING_REFS)}
        git.update_refs(self.git_dir, leftovers, what="removing the refs of an unfinished fetch")

    def _adopt(self, fetch_url: str, pin: UpstreamPin, *, name: str | None, url: str | None) -> FetchResult:
        """Check what a fetch brought, then make it the source's refs in one transaction."""
        store = git.ObjectStore(self.git_dir)
        incoming = store.references(INCOMING_REFS)
        incoming_tags = {ref.removeprefix(INCOMING_REFS + "tags/"): commit
                         for ref, _, commit in incoming if ref.startswith(INCOMING_REFS + "tags/")}
        carries_pin = incoming_tags.get(pin.ref) == pin.commit
        source = identify(self.sources(), fetch_url, pin, carries_pin=carries_pin, name=name, url=url)
        if not store.commit_exists(pin.commit) and same_repository(source.url, pin.url):
            # Another repository may lack the pinned commit (its tags are what it is fetched for);
            # the pin's own repository may not.
            raise UpstreamError(
                f"{display_location(fetch_url)} does not contain the pinned commit {pin.commit} ({pin.ref}), "
                "and no other source in the cache does",
                hint=f"fetch the repository the pin names ({pin.url}), or a mirror of it; nothing in the cache changed",
            )
        has_pin_commit = store.commit_exists(pin.commit) and bool(git.refs_containing(self.git_dir, pin.commit, [INCOMING_REFS]))
        before = {ref: (target, commit) for ref, target, commit in
                  store.references(source.tags_prefix) + store.references(source.heads_prefix)}
        wanted: dict[str, str] = {}
        for ref, target, _ in incoming:
            kind, _, rest = ref.removeprefix(INCOMING_REFS).partition("/")
            wanted[(source.tags_prefix if kind == "tags" else source.heads_prefix) + rest] = target
        updates: dict[str, str | None] = {
            ref: target for ref, target in wanted.items() if before.get(ref, ("",))[0] != target
        }
        updates.update({ref: None for ref in before if ref not in wanted})
        self._configure(source)
        git.update_refs(self.git_dir, updates, what=f"recording the refs of the source {source.name}")
        after = git.ObjectStore(self.git_dir)
        new_tags = {ref.removeprefix(source.tags_prefix): commit
                    for ref, _, commit in after.references(source.tags_prefix)}
        old_tags = {ref.removeprefix(source.tags_prefix): commit for ref, (_, commit) in before.items()
                    if ref.startswith(source.tags_prefix)}
        table = RefTable.read(after, self.sources())
        return FetchResult(
            source=source,
            tags=len(new_tags),
            branches=len(after.references(source.heads_prefix)),
            added=tuple(sorted(set(new_tags) - set(old_tags))),
            removed=tuple(sorted(set(old_tags) - set(new_tags))),
            moved=tuple((tag, old_tags[tag] or "", commit or "") for tag, commit in sorted(new_tags.items())
                        if tag in old_tags and old_tags[tag] != commit),
            has_pin_commit=has_pin_commit,
            disputed=tuple(disagreements(table, source.name)),
        )

    def _migrate_legacy(self, pin: UpstreamPin) -> None:
        """Move a cache made before sources (remote ``origin``, tags in
        refs/tags/) to the per-source layout; one ref transaction."""
        legacy = next((source for source in self.sources() if source.legacy), None)
        if legacy is None:
            return
        store = self.store()
        tags = store.references(LEGACY_TAGS)
        heads = store.references(LEGACY_HEADS)
        carries_pin = any(ref == LEGACY_TAGS + pin.ref and commit == pin.commit for ref, _, commit in tags)
        url = pin.url if carries_pin or same_repository(legacy.location, pin.url) else display_location(legacy.location)
        taken = {source.name for source in self.sources() if not source.legacy}
        name = derive_name(url)
        while name in taken:
            name += "-1"
        target = Source(name, url, legacy.location)
        updates: dict[str, str | None] = {}
        moves = ((LEGACY_TAGS, target.tags_prefix, tags), (LEGACY_HEADS, target.heads_prefix, heads))
        for prefix, new_prefix, refs in moves:
            for ref, object_id, _ in refs:
                updates[new_prefix + ref.removeprefix(prefix)] = object_id
                updates[ref] = None
        get_logger().info("moving the cache's %d tag(s) from the old single remote to the source %s", len(tags), name)
        git.update_refs(self.git_dir, updates, what="moving the cache's refs to the per-source layout")
        git.config_remove_section(self.git_dir, f"remote.{LEGACY_REMOTE}")
        git.config_set(self.git_dir, "extensions.partialClone", name)
        self._configure(target)

    # -- file contents ----------------------------------------------------

    def sources_containing(self, commit: str) -> tuple[str, ...]:
        """The sources with a tag or branch from which ``commit`` is reachable."""
        if commit not in self._containing:
            refs = git.refs_containing(self.git_dir, commit, [SOURCES_REFS, LEGACY_TAGS, LEGACY_HEADS])
            names: dict[str, None] = {}
            for ref in refs:
                if ref.startswith(SOURCES_REFS):
                    names[ref.removeprefix(SOURCES_REFS).split("/", 1)[0]] = None
                else:
                    names[LEGACY_REMOTE] = None
            self._containing[commit] = tuple(names)
        return self._containing[commit]

    def _blob_sources(self, commit: str, prefer: Sequence[str]) -> list[Source]:
        """Where to fetch ``commit``'s blobs from: sources that have the commit,
        those in ``prefer`` first (the one its ref came from)."""
        configured = [source for source in self.sources() if source.location]
        holding = set(self.sources_containing(commit))
        rank = {name: number for number, name in enumerate(prefer)}
        # Sources without the commit are tried last: a mirror may hold its
        # objects without a ref to them.
        return sorted(configured, key=lambda s: (s.name not in holding, rank.get(s.name, len(rank))))

    def missing_blobs(self, commit: str, rules: SparseRules) -> list[MissingBlob]:
        store = self.store()
        return [
            MissingBlob(path, oid)
            for path, oid in store.blobs(commit)
            if not rules.excluded(path) and not store.has(oid)
        ]

    def _fetch_blobs(self, object_ids: Sequence[str], commit: str, prefer: Sequence[str], *, why: str) -> None:
        """Fetch the blobs from the first source that has them all; if none
        does, raise the first source's error (it names what it lacks)."""
        candidates = self._blob_sources(commit, prefer)
        if not candidates:
            raise UpstreamError(
                f"the upstream cache has no source to fetch file contents {why} from",
                hint="run `hiraishin upstream fetch` (or with --from <mirror>)",
            )
        failures: list[tuple[Source, CommandError]] = []
        for source in candidates:
            try:
                git.fetch_objects(
                    self.git_dir, source.name, object_ids,
                    what=f"fetching {len(object_ids)} file content(s) {why} from {source.name} "
                    f"({display_location(source.location)})",
                )
                return
            except CommandError as exc:
                get_logger().debug("%s could not serve them: %s", source.name, exc.message)
                failures.append((source, exc))
        raise _BlobsUnavailable(failures)

    def prefetch_blobs(self, commit: str, rules: SparseRules, *, prefer: Sequence[str] = ()) -> int:
        """Fetch the blobs a sparse checkout of ``commit`` needs; returns how many.

        They come from a source that has ``commit``, those in ``prefer``
        first: a fork's commit from the fork, not from the pin's repository.
        """
        missing = self.missing_blobs(commit, rules)
        if not missing:
            return 0
        get_logger().info("fetching %d file contents for %s", len(missing), commit[:12])
        try:
            self._fetch_blobs(sorted({blob.object_id for blob in missing}), commit, prefer,
                              why=f"to check out {commit[:12]}")
        except _BlobsUnavailable as unavailable:
            source, exc = unavailable.failures[0]
            # The server names the first object it does not have; say which file that is.
            absent = [blob.path for blob in missing if blob.object_id in exc.output_tail]
            if not absent:
                raise exc from None
            tried = ", ".join(s.name for s, _ in unavailable.failures)
            raise UpstreamError(
                f"{display_location(source.location)} lacks the content of {', '.join(absent)} "
                f"(needed to check out {commit[:12]}; sources tried: {tried})",
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

    def ensure_blobs(self, object_ids: Iterable[str], *, why: str, commit: str, prefer: Sequence[str] = ()) -> None:
        """Fetch the given blobs of ``commit`` unless the cache holds them already.

        For looking at a few files of commits that are never checked out
        (which upstream commit a patch landed in), without fetching whole trees.
        """
        store = self.store()
        missing = sorted({oid for oid in object_ids if not store.has(oid)})
        if missing:
            try:
                self._fetch_blobs(missing, commit, prefer, why=why)
            except _BlobsUnavailable as unavailable:
                raise unavailable.failures[0][1] from None

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

    def verify(self, pin: UpstreamPin) -> PinCheck:
        """Refuse a cache without the pinned commit, or whose pinned ref moved.

        The sources that stand for the pin's url decide; when none of them
        has the ref (the pin's repository was never fetched, only a fork),
        every source that has it must agree with the pin.
        """
        store = self.store()
        if not store.commit_exists(pin.commit):
            raise UpstreamError(
                f"the upstream cache {self.git_dir} does not hold the pinned commit {pin.commit}",
                hint="run `hiraishin upstream fetch` (or with --from <mirror>)",
            )
        table = RefTable.read(store, self.sources())
        found = table.lookup(pin.ref)
        if found is None:
            sources = ", ".join(table.sources) or "none"
            raise UpstreamError(
                f"the pinned ref '{pin.ref}' is not in the upstream cache: no source has it (sources: {sources})",
                hint=f"fetch the pin's repository: `hiraishin upstream fetch` (from {pin.url}) or "
                "`hiraishin upstream fetch --from <a mirror of it>`; if the ref was deleted upstream, "
                "re-pin to a ref that exists",
            )
        _, holders = found
        own = {name: commit for name, commit in holders.items() if same_repository(table.sources[name].url, pin.url)}
        deciding = own or holders
        moved = {name: commit for name, commit in deciding.items() if commit != pin.commit}
        if moved:
            where = "; ".join(f"{commit} in {name}" for name, commit in sorted(moved.items()))
            raise PinMismatchError(
                f"the pinned ref '{pin.ref}' moved: it now names {where}, "
                f"but {pin.source or 'the pin'} records {pin.commit}",
                hint="a moved tag is never followed silently; review the new commit and re-pin deliberately "
                "(`hiraishin rebase --onto <ref>`)",
            )
        for name, commit in sorted(holders.items()):
            if name not in deciding and commit != pin.commit:
                get_logger().warning("the source %s has its own %s, at %s (the pin's repository has %s)",
                                     name, pin.ref, commit[:12], pin.commit[:12])
        return PinCheck(tuple(sorted(deciding)))


class _BlobsUnavailable(Exception):
    def __init__(self, failures: list[tuple[Source, CommandError]]) -> None:
        super().__init__(failures[0][1].message)
        self.failures = failures


def _first_fatal(output: str) -> str:
    """git's reason for failing: its first ``fatal:`` line with the lines that
    continue it (a warning may come before; advice comes after)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if line.startswith("fatal: ")), None)
    if start is None:
        return lines[-1] if lines else ""
    reason = [lines[start].removeprefix("fatal: ")]
    for line in lines[start + 1:]:
        if line.startswith(("fatal: ", "Please make sure")):
            break
        reason.append(line)
    return " ".join(reason)


def fetch_refspecs_into(prefix: str) -> tuple[str, str]:
    return (f"+refs/tags/*:{prefix}tags/*", f"+refs/heads/*:{prefix}heads/*")


def _cache_locked(git_dir: Path) -> Callable[[lock.Holder | None], CacheLocked]:
    def refuse(holder: lock.Holder | None) -> CacheLocked:
        who = holder.describe() if holder else "a process that has not said who it is yet"
        return CacheLocked(
            f"another fetch into the upstream cache {git_dir} is running ({who})",
            hint="wait for it to finish and run this again; the lock ends with its process",
        )
    return refuse


def identify(
    existing: Sequence[Source], fetch_url: str, pin: UpstreamPin, *, carries_pin: bool,
    name: str | None = None, url: str | None = None,
) -> Source:
    """Which source a fetch from ``fetch_url`` fills.

    The repository it stands for: ``url`` when given; the pin's url when it
    is that repository or a mirror of it (it carries the pinned tag at the
    pinned commit); else its own location. The source is then the one that
    already stands for that repository, or a new one named ``name`` or after
    the repository. Refused: a name taken by another repository (unless this
    is the same location, now said to mirror ``url``), or a repository that
    is already a source under another name.
    """
    shown = display_location(fetch_url)
    if url:
        stands_for = url
    elif same_repository(fetch_url, pin.url) or carries_pin:
        stands_for = pin.url
    else:
        stands_for = shown
    by_url = next((source for source in existing if same_repository(source.url, stands_for)), None)
    if name is None and by_url is not None:
        return Source(by_url.name, url or by_url.url, fetch_url)
    if name is not None and by_url is not None and by_url.name != name:
        raise UpstreamError(
            f"{stands_for} is already the source '{by_url.name}' in the upstream cache",
            hint=f"fetch it as `--name {by_url.name}` (or without --name); one repository is one source",
        )
    chosen = validate_name(name if name is not None else derive_name(stands_for))
    taken = next((source for source in existing if source.name == chosen), None)
    if taken is not None and not same_repository(taken.url, stands_for) and taken.url:
        if not same_repository(taken.location, fetch_url):
            raise UpstreamError(
                f"the source name '{chosen}' already stands for {taken.url}, not {stands_for}",
                hint="choose another name with --name NAME"
                + (f", or give --url {taken.url} if {shown} is a mirror of it" if not url else ""),
            )
        get_logger().info("the source %s (fetched from %s) now stands for %s", chosen, shown, stands_for)
    return Source(chosen, stands_for, fetch_url)
