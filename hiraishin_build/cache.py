"""The local upstream cache: one bare, blobless repository per user.

``upstream fetch`` fills it with every commit and tree of a source but only
the blobs a work tree of the pinned commit needs (the sparse rules say which),
so it stays small (about 25 MB for llama.cpp) and everything after the fetch
works offline. A mirror that lacks some large blobs still works, as long as
those paths are excluded from checkouts.

The cache holds any number of sources (sources.py): the pin's repository,
forks, mirrors of either. A fetch is all or nothing for the refs and the
configuration: it lands in a scratch namespace first and is checked there
(the repository it claims to be must carry the pin as pinned; any other must
hold the pinned commit or have been asked for by name; the pin's file
contents must be there), and only then replaces that one source's refs in a
single ref transaction. A failed or refused fetch leaves every ref and
setting as it was, and a fetch of another repository never loses a ref the
pin needs.
"""

from __future__ import annotations

import difflib
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from . import git, lock, timeouts
from .mainthread import signals_left_to_main_thread as held_signals
from .errors import (CacheLocked, CommandError, CommandTimedOut, PathError, PinMismatchError, SourceUnreachable,
                     UpstreamError)
from .fsutil import NO_SPACE_TEXTS, no_space, no_space_hint, writable_directory
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
    names_hint,
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


# Free space below which a failed write into the cache is taken to be for want of space (the upstream's
# commits and trees alone take hundreds of megabytes).
_NEARLY_FULL_BYTES = 1 << 20


def _chosen_by(root: Path | None) -> str:
    """What set the cache directory, for a message about it: the variable, the option, or neither."""
    if root is None and os.environ.get(CACHE_ENV):
        return CACHE_ENV
    if root is None:
        return f"{CACHE_ENV} (or --cache-dir)"
    return f"--cache-dir (or {CACHE_ENV})"


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
    """The sources whose pinned ref names the pinned commit (for a pin on a commit: whose refs contain it)."""


@dataclass(frozen=True)
class Removal:
    source: Source
    tags: int
    branches: int
    warnings: tuple[str, ...] = ()
    """What the cache can no longer do for the pin without the source."""

    @property
    def fetch_again(self) -> str:
        """The command that brings the source back (its objects stayed, so it is cheap)."""
        where = display_location(self.source.location) if self.source.location else "PATH_OR_URL"
        url = f" --url {self.source.url}" if self.source.location and self.source.mirrored and self.source.url else ""
        return f"hiraishin upstream fetch --from {where}{url} --name {self.source.name}"


@dataclass(frozen=True)
class _Incoming:
    """What a fetch brought, in the scratch namespace, before any ref of a source is written."""

    refs: tuple[tuple[str, str, str | None], ...]
    """(ref, stored object, commit) under INCOMING_REFS."""
    pinned: str | None
    """The commit the pin's ref names there: its tag of that name, else its branch."""
    has_pin_commit: bool
    """The pinned commit is reachable from its refs."""
    carries_pin: bool
    """It has the pin's ref at the pinned commit (or, for a pin on a commit, the commit)."""


@dataclass(frozen=True)
class _LegacyMove:
    """How a cache made before sources moves to the per-source layout (see _migrate_legacy)."""

    target: Source
    updates: dict[str, str | None]
    tags: int


class UpstreamCache:
    def __init__(self, root: Path | None = None, *, given_as: str | None = None) -> None:
        self.root = root if root is not None else default_cache_root()
        self.given_as = given_as or _chosen_by(root)
        """The option or variable that chose the directory, named when it cannot be used."""
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

    def require_writable(self) -> None:
        """Refuse (PathError) a cache directory this process cannot write, before any work."""
        writable_directory(self.root, what="the upstream cache directory", given_as=self.given_as)

    def _no_space(self, error: BaseException) -> PathError | None:
        """The cache's file system filled while git (or this process) wrote into it: say so, naming the cache,
        instead of blaming the source."""
        full = no_space(error)
        if full is None and isinstance(error, CommandError):
            said = next((text for text in NO_SPACE_TEXTS if text in error.output_tail), None)
            full = f"the disk is full ({said})" if said else None
            if full is None:
                # Some of git's writes fail without the reason ("failed to write new configuration file"):
                # a file system with next to nothing left is it.
                try:
                    free = shutil.disk_usage(self.root).free
                except OSError:
                    free = None
                if free is not None and free < _NEARLY_FULL_BYTES:
                    full = f"the disk is full ({free // 1024} KiB free)"
        if full is None:
            return None
        return PathError(f"cannot write the upstream cache {self.git_dir}: {full}",
                         hint=no_space_hint(self.root, f"move the cache elsewhere ({self.given_as})")
                         + ", then fetch again")

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
        Nothing is written unless what came checks out (see the module's text).
        """
        fetch_url = normalize_source(location)
        if name is not None:
            validate_name(name)
        self.require_writable()
        with lock.exclusive(self.lock_file, _cache_locked(self.git_dir)):
            shown = display_location(fetch_url)
            # Asked first, so that a source that is not there does not even create the cache.
            self._probe(fetch_url, shown)
            created = not self.exists()
            try:
                if created:
                    self._init()
                result = self._fetch_locked(fetch_url, shown, pin, name=name, url=url)
            except BaseException as error:
                full = self._no_space(error)  # before a removal frees space
                if created:
                    # A failed first fetch leaves no cache behind: "before" had none.
                    shutil.rmtree(self.git_dir, ignore_errors=True)
                if full is not None:
                    raise full from None
                raise
            finally:
                self._containing.clear()
        for tag, old, new in result.moved:
            get_logger().warning("%s: the tag %s moved from %s to %s", result.source.name, tag, old[:12], new[:12])
        for tag, holders in result.disputed:
            get_logger().warning(
                "the sources disagree on the tag %s: %s", tag,
                "; ".join(f"{source} has {commit[:12]}" for source, commit in sorted(holders.items())),
            )
        return result

    def _fetch_locked(self, fetch_url: str, shown: str, pin: UpstreamPin, *, name: str | None,
                      url: str | None) -> FetchResult:
        held_before = git.ObjectStore(self.git_dir).commit_exists(pin.commit)
        move = self._legacy_plan(pin)
        existing = [source for source in self.sources() if not source.legacy] + ([move.target] if move else [])
        self._containing.clear()
        self._drop_incoming()
        try:
            get_logger().info("fetching commits and trees from %s", shown)
            git.fetch_as_promisor(
                self.git_dir, fetch_url, fetch_refspecs_into(INCOMING_REFS), remote=INCOMING_REMOTE,
                upload_pack=UPLOAD_PACK, what=f"fetching the upstream from {shown}",
                hint="check the URL or path; a local mirror must be a git repository. "
                "Nothing in the cache changed",
            )
            incoming = self._read_incoming(pin)
            source = identify(existing, fetch_url, pin, carries_pin=incoming.carries_pin, name=name, url=url)
            _refuse_unfit(source, incoming, pin, shown=shown, held_before=held_before,
                          known=any(known.name == source.name and same_repository(known.url, source.url)
                                    for known in existing), named=name is not None,
                          url_claimed=url is not None and not same_repository(fetch_url, pin.url))
            if git.ObjectStore(self.git_dir).commit_exists(pin.commit):
                # Checked before anything is written: a mirror that lacks a file the pin needs must
                # not replace the refs (and the location) of a source that has it.
                self.prefetch_blobs(pin.commit, pin.checkout, prefer=(source.name,),
                                    incoming=source if incoming.has_pin_commit else None)
            if move is not None:
                self._migrate_legacy(move)
            return self._record(source, incoming)
        finally:
            # Not cut short by Ctrl-C or SIGTERM: the refs end as they were or as the fetch wrote them, never
            # with its incoming refs beside them (after a kill -9 the next fetch drops those first).
            with held_signals():
                self._drop_incoming()

    def refetch(self, name: str, pin: UpstreamPin) -> FetchResult:
        """Fetch a source already in the cache again, from where it was fetched last."""
        if not self.exists():
            raise UpstreamError(
                f"no source named '{name}': the upstream cache {self.git_dir} has no sources yet",
                hint=f"add it: `hiraishin upstream fetch --from PATH_OR_URL --name {name}`; "
                "`hiraishin upstream fetch` alone fetches the pin's repository",
            )
        source = self.refs().source(name)
        if not source.location:
            raise UpstreamError(
                f"the source '{name}' has no location to fetch from (its remote was removed)",
                hint=f"give one: `hiraishin upstream fetch --from PATH_OR_URL --name {name}`",
            )
        # What it stands for is kept by :func:`identify` (the same location, the same name).
        return self.fetch(source.location, pin, name=name)

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

    def _read_incoming(self, pin: UpstreamPin) -> _Incoming:
        store = git.ObjectStore(self.git_dir)
        refs = tuple(store.references(INCOMING_REFS))
        by_name = {ref.removeprefix(INCOMING_REFS): commit for ref, _, commit in refs}
        pinned = by_name.get(f"tags/{pin.ref}") or by_name.get(f"heads/{pin.ref}")
        has_pin_commit = store.commit_exists(pin.commit) and bool(
            git.refs_containing(self.git_dir, pin.commit, [INCOMING_REFS]))
        carries_pin = has_pin_commit if _pinned_on_commit(pin) else pinned == pin.commit
        return _Incoming(refs, pinned, has_pin_commit, carries_pin)

    def _record(self, source: Source, incoming: _Incoming) -> FetchResult:
        """Make what a fetch brought the source's refs, in one transaction, then its settings."""
        store = git.ObjectStore(self.git_dir)
        before = {ref: (target, commit) for ref, target, commit in
                  store.references(source.tags_prefix) + store.references(source.heads_prefix)}
        wanted: dict[str, str] = {}
        for ref, target, _ in incoming.refs:
            kind, _, rest = ref.removeprefix(INCOMING_REFS).partition("/")
            wanted[(source.tags_prefix if kind == "tags" else source.heads_prefix) + rest] = target
        updates: dict[str, str | None] = {
            ref: target for ref, target in wanted.items() if before.get(ref, ("",))[0] != target
        }
        updates.update({ref: None for ref in before if ref not in wanted})
        # The refs first: when they cannot be written (a stale lock), the settings stay as they were too.
        git.update_refs(self.git_dir, updates, what=f"recording the refs of the source {source.name}")
        self._configure(source)
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
            has_pin_commit=incoming.has_pin_commit,
            disputed=tuple(disagreements(table, source.name)),
        )

    def _legacy_plan(self, pin: UpstreamPin) -> _LegacyMove | None:
        """How a cache made before sources (remote ``origin``, tags in refs/tags/) moves to the
        per-source layout; None for a cache already in it. Nothing is written here."""
        legacy = next((source for source in self.sources() if source.legacy), None)
        if legacy is None:
            return None
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
        return _LegacyMove(target, updates, len(tags))

    def _migrate_legacy(self, move: _LegacyMove) -> None:
        """Carry out a move planned by :meth:`_legacy_plan`; the refs in one transaction."""
        get_logger().info("moving the cache's %d tag(s) from the old single remote to the source %s",
                          move.tags, move.target.name)
        git.update_refs(self.git_dir, move.updates, what="moving the cache's refs to the per-source layout")
        git.config_remove_section(self.git_dir, f"remote.{LEGACY_REMOTE}")
        git.config_set(self.git_dir, "extensions.partialClone", move.target.name)
        self._configure(move.target)

    # -- removing a source ------------------------------------------------

    def remove(self, name: str, pin: UpstreamPin, *, force: bool = False) -> Removal:
        """Remove the source ``name``: its remote, its settings and its refs; its objects stay.

        The only source from whose refs the pinned commit is reachable is kept
        unless ``force``: without it the cache could neither check out the pin
        nor fetch the pin's file contents.
        """
        if not self.exists():
            raise UpstreamError(
                f"no source named '{name}': the upstream cache {self.git_dir} does not exist",
                hint="`hiraishin upstream show` says where the cache is; `hiraishin upstream fetch` makes it",
            )
        self.require_writable()
        with lock.exclusive(self.lock_file, _cache_locked(self.git_dir)):
            self._containing.clear()
            store = self.store()
            table = RefTable.read(store, self.sources())
            source = table.sources.get(name)
            if source is None:
                close = difflib.get_close_matches(name, list(table.sources), n=1, cutoff=0.5)
                raise UpstreamError(
                    f"no source named '{name}' in the upstream cache, nothing to remove "
                    f"(sources: {names_hint(table.sources.values())})",
                    hint=(f"did you mean '{close[0]}'? " if close else "") + "`hiraishin upstream show` lists them",
                )
            holding = self.sources_containing(pin.commit) if store.commit_exists(pin.commit) else ()
            warnings: list[str] = []
            if holding == (name,):
                if not force:
                    raise UpstreamError(
                        f"'{name}' is the only source of the upstream cache with the pinned commit {pin.short} "
                        f"({pin.ref}): without it the cache can neither check out the pin nor fetch its files",
                        hint="fetch another copy of the pin's repository first (`hiraishin upstream fetch`, or "
                        "with --from <mirror>), or give --force to remove it all the same; nothing was changed",
                    )
                warnings.append(f"no source has the pinned commit {pin.short} now: the cache cannot check out the "
                                "pin until one is fetched (`hiraishin upstream fetch`)")
            pinned = table.lookup(pin.ref)
            if pinned is not None and set(pinned[1]) == {name}:
                warnings.append(f"no source has the pinned ref '{pin.ref}' now: `hiraishin upstream verify` fails "
                                "until the pin's repository is fetched again")
            tags = len(store.references(source.tags_prefix))
            branches = len(store.references(source.heads_prefix))
            doomed = {ref: None for ref, _, _ in store.references(source.tags_prefix) + store.references(source.heads_prefix)}
            git.update_refs(self.git_dir, doomed, what=f"removing the refs of the source {name}")
            if git.config_get(self.git_dir, "extensions.partialClone") == name:
                # git asks this remote last for a missing object; another source takes its place. With
                # none left the setting stays: it is what keeps git treating the cache as a partial clone.
                remaining = [other for other in self.sources() if other.name != name and not other.legacy]
                if remaining:
                    git.config_set(self.git_dir, "extensions.partialClone", remaining[0].name)
            git.config_remove_section(self.git_dir, f"remote.{name}")
            git.config_remove_section(self.git_dir, f"{URL_SECTION}.{name}")
            self._containing.clear()
        return Removal(source, tags, branches, tuple(warnings))

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

    def _blob_sources(self, commit: str, prefer: Sequence[str], incoming: Source | None = None) -> list[_BlobServer]:
        """Where to fetch ``commit``'s blobs from: sources that have the commit,
        those in ``prefer`` first (the one its ref came from). ``incoming`` is
        a fetch not recorded yet that holds the commit: it stands in for the
        source of its name, reached through the scratch remote."""
        servers = [_BlobServer(source) for source in self.sources()
                   if source.location and (incoming is None or source.name != incoming.name)]
        holding = set(self.sources_containing(commit))
        if incoming is not None:
            servers.insert(0, _BlobServer(incoming, scratch=True))
            holding.add(incoming.name)
        rank = {name: number for number, name in enumerate(prefer)}
        # Sources without the commit are tried last: a mirror may hold its
        # objects without a ref to them.
        return sorted(servers, key=lambda s: (s.source.name not in holding, rank.get(s.source.name, len(rank))))

    def missing_blobs(self, commit: str, rules: SparseRules) -> list[MissingBlob]:
        store = self.store()
        return [
            MissingBlob(path, oid)
            for path, oid in store.blobs(commit)
            if not rules.excluded(path) and not store.has(oid)
        ]

    def _fetch_blobs(self, object_ids: Sequence[str], commit: str, prefer: Sequence[str], *, why: str,
                     incoming: Source | None = None) -> None:
        """Fetch the blobs from the first source that has them all; if none
        does, raise the first source's error (it names what it lacks)."""
        candidates = self._blob_sources(commit, prefer, incoming)
        if not candidates:
            raise UpstreamError(
                f"the upstream cache has no source to fetch file contents {why} from",
                hint="run `hiraishin upstream fetch` (or with --from <mirror>)",
            )
        failures: list[tuple[Source, CommandError]] = []
        for server in candidates:
            source = server.source
            what = (f"fetching {len(object_ids)} file content(s) {why} from {source.name} "
                    f"({display_location(source.location)})")
            try:
                if server.scratch:
                    self._fetch_objects_through_scratch(source.location, object_ids, what=what)
                else:
                    git.fetch_objects(self.git_dir, source.name, object_ids, what=what)
                return
            except CommandError as exc:
                full = self._no_space(exc)
                if full is not None:  # another source would fill the same disk
                    raise full from None
                get_logger().debug("%s could not serve them: %s", source.name, exc.message)
                failures.append((source, exc))
        raise _BlobsUnavailable(failures)

    def _fetch_objects_through_scratch(self, location: str, object_ids: Sequence[str], *, what: str) -> None:
        """:func:`git.fetch_objects` from a location that is no configured remote yet: the
        scratch remote of a fetch, which exists only on this command line (as in
        :func:`git.fetch_as_promisor`), so the configuration is not written."""
        settings = {"url": location, "promisor": "true", "partialclonefilter": "blob:none", "uploadpack": UPLOAD_PACK}
        config = [arg for key, value in settings.items() for arg in ("-c", f"remote.{INCOMING_REMOTE}.{key}={value}")]
        git.git(
            self.git_dir, *git.NETWORK_CONFIG, *config, "-c", "fetch.negotiationAlgorithm=noop",
            "fetch", "--quiet", INCOMING_REMOTE, "--no-tags", "--no-write-fetch-head",
            "--recurse-submodules=no", "--filter=blob:none", "--stdin",
            input="".join(f"{oid}\n" for oid in object_ids), env=git.NETWORK_ENV, what=what, limit=timeouts.NETWORK,
        )

    def prefetch_blobs(self, commit: str, rules: SparseRules, *, prefer: Sequence[str] = (),
                       incoming: Source | None = None) -> int:
        """Fetch the blobs a sparse checkout of ``commit`` needs; returns how many.

        They come from a source that has ``commit``, those in ``prefer``
        first: a fork's commit from the fork, not from the pin's repository.
        ``incoming``: a source being fetched, not yet recorded, asked first.
        """
        missing = self.missing_blobs(commit, rules)
        if not missing:
            return 0
        get_logger().info("fetching %d file contents for %s", len(missing), commit[:12])
        try:
            self._fetch_blobs(sorted({blob.object_id for blob in missing}), commit, prefer,
                              why=f"to check out {commit[:12]}", incoming=incoming)
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
        every source that has it must agree with the pin. A pin on a commit
        itself (a rebase onto a commit hash) has no ref that could move.
        """
        store = self.store()
        table = RefTable.read(store, self.sources())
        found = None if _pinned_on_commit(pin) else table.lookup(pin.ref)
        deciding = _deciding(table, found[1], pin) if found is not None else {}
        if not store.commit_exists(pin.commit):
            if deciding:
                # The ref is here and names something else: the recorded commit is wrong, or the ref moved
                # to a history without it. "Run fetch" would not help either way.
                where = "; ".join(f"{commit} in {name}" for name, commit in sorted(deciding.items()))
                named = sorted(set(deciding.values()))
                raise PinMismatchError(
                    f"the pinned ref '{pin.ref}' names {where}, while {_pin_file(pin)} records {pin.commit}, "
                    "which the upstream cache does not hold: a mistyped or moved commit",
                    hint=f"if `commit` is mistyped, correct it in {_pin_file(pin)}"
                    + (f" (the ref names {named[0]})" if len(named) == 1 else "")
                    + f"; if {pin.ref} was moved upstream, re-pin deliberately: fetch a copy that still has "
                    f"{pin.short}, then `hiraishin rebase --onto {pin.ref}`",
                )
            raise UpstreamError(
                f"the upstream cache {self.git_dir} does not hold the pinned commit {pin.commit}",
                hint="run `hiraishin upstream fetch` (or with --from <mirror>)",
            )
        if _pinned_on_commit(pin):
            return PinCheck(self.sources_containing(pin.commit))
        if found is None:
            sources = ", ".join(table.sources) or "none"
            raise UpstreamError(
                f"the pinned ref '{pin.ref}' is not in the upstream cache: no source has it (sources: {sources})",
                hint=f"fetch the pin's repository: `hiraishin upstream fetch` (from {pin.url}) or "
                "`hiraishin upstream fetch --from <a mirror of it>`; if the ref was deleted upstream, "
                "re-pin to a ref that exists",
            )
        holders = found[1]
        moved = {name: commit for name, commit in deciding.items() if commit != pin.commit}
        if moved:
            where = "; ".join(f"{commit} in {name}" for name, commit in sorted(moved.items()))
            raise PinMismatchError(
                f"the pinned ref '{pin.ref}' moved: it now names {where}, "
                f"but {_pin_file(pin)} records {pin.commit}",
                hint="a moved tag is never followed silently; review the new commit and re-pin deliberately "
                "(`hiraishin rebase --onto <ref>`)",
            )
        for name, commit in sorted(holders.items()):
            if name not in deciding and commit != pin.commit:
                get_logger().warning("the source %s has its own %s, at %s (the pin's repository has %s)",
                                     name, pin.ref, commit[:12], pin.commit[:12])
        return PinCheck(tuple(sorted(deciding)))


def _pinned_on_commit(pin: UpstreamPin) -> bool:
    """The pin's ref is its commit itself (what a rebase onto a commit hash records)."""
    return pin.ref == pin.commit


def _pin_file(pin: UpstreamPin) -> str:
    return str(pin.source) if pin.source else "the pin"


def _deciding(table: RefTable, holders: dict[str, str], pin: UpstreamPin) -> dict[str, str]:
    """Of the sources that have the pinned ref (source -> commit), those that say what it names: the
    ones that stand for the pin's url, else (the pin's repository is not in the cache) all of them."""
    own = {name: commit for name, commit in holders.items()
           if name in table.sources and same_repository(table.sources[name].url, pin.url)}
    return own or holders


NOTHING_CHANGED = "nothing in the cache changed"


def _refuse_unfit(source: Source, incoming: _Incoming, pin: UpstreamPin, *, shown: str, held_before: bool,
                  known: bool, named: bool, url_claimed: bool) -> None:
    """Refuse, before anything is written, a fetch whose refs would make ``source`` what it is not.

    The pin's repository (and what is said, or taken, to be a mirror of it)
    must carry the pin as pinned: the pinned ref at the pinned commit, or for
    a pin on a commit, that commit. Any other repository must hold the pinned
    commit (a fork), be a source already (standing for the same repository),
    or be asked for by name; otherwise an unrelated repository would become a
    permanent source by mistake.
    ``url_claimed``: it was said (--url) to mirror the pin's repository.
    """
    anywhere = held_before or incoming.has_pin_commit
    differs = incoming.pinned is not None and incoming.pinned != pin.commit and not _pinned_on_commit(pin)
    if same_repository(source.url, pin.url):
        if incoming.carries_pin:
            return
        not_a_copy = (f"if {shown} is not a copy of {pin.url}, fetch it without --url (with --name NAME it is kept "
                      "as a source of its own); otherwise " if url_claimed else "")
        if differs:
            assert incoming.pinned is not None
            raise _pinned_ref_differs(pin, shown, incoming.pinned, anywhere=anywhere, url_claimed=url_claimed)
        if not incoming.has_pin_commit:
            raise UpstreamError(
                f"{shown} does not contain the pinned commit {pin.commit} ({pin.ref})"
                + ("" if held_before else ", and no other source in the cache does"),
                hint=f"{not_a_copy}fetch the repository the pin names ({pin.url}), or a mirror of it; "
                f"{NOTHING_CHANGED}",
            )
        raise UpstreamError(
            f"{shown} has no tag or branch '{pin.ref}' (the pinned ref), though it contains {pin.short}",
            hint=f"{not_a_copy}if {pin.ref} was deleted upstream, re-pin to a ref that exists (`hiraishin rebase "
            f"--onto REF`), or pin the commit itself (`ref = \"{pin.commit}\"` in {_pin_file(pin)}); "
            f"{NOTHING_CHANGED}",
        )
    if incoming.has_pin_commit or known or named:
        return
    if differs and not anywhere:
        assert incoming.pinned is not None
        raise _pinned_ref_differs(pin, shown, incoming.pinned, anywhere=False, url_claimed=False)
    raise UpstreamError(
        f"{shown} does not contain the pinned commit {pin.commit} ({pin.ref}): it is neither the pin's "
        "repository nor a fork of it" + (f" (its own '{pin.ref}' names {incoming.pinned})" if differs else ""),
        hint=f"to keep it as a source of its own all the same, name it: `hiraishin upstream fetch --from {shown} "
        f"--name NAME`; {NOTHING_CHANGED}",
    )


def _pinned_ref_differs(pin: UpstreamPin, shown: str, found: str, *, anywhere: bool,
                        url_claimed: bool) -> PinMismatchError:
    """A fetch whose pinned ref names another commit than the pin records, in words that say why
    that may be: a commit that exists nowhere (mistyped), a repository that is not the one claimed,
    or a ref that moved."""
    message = f"the pinned ref '{pin.ref}' names {found} in {shown}, but {_pin_file(pin)} records {pin.commit}"
    if not anywhere:
        message += f", which neither {shown} nor the upstream cache holds: a mistyped or moved commit"
        hint = (f"if `commit` is mistyped, correct it in {_pin_file(pin)} (to {found} if that is the one meant); "
                f"if {shown} is another repository, fetch it with --name NAME to keep it as a source of its own")
    elif url_claimed:
        message += f": {shown} is not a copy of {pin.url} as pinned, or the ref moved there"
        hint = (f"if {shown} is another repository, fetch it without --url (with --name NAME it is kept as a "
                "source of its own)")
    else:
        message += ": the ref moved"
        hint = (f"a moved ref is never followed silently: review {found[:12]}, then re-pin deliberately with "
                f"`hiraishin rebase --onto {found}` (in a cache that holds {pin.short}), or first pin the commit "
                f"itself (`ref = \"{pin.commit}\"` in {_pin_file(pin)}) so that fetches go through")
    return PinMismatchError(f"{message}; {NOTHING_CHANGED}", hint=hint)


@dataclass(frozen=True)
class _BlobServer:
    source: Source
    scratch: bool = False
    """Reached through the scratch remote: a fetch whose source is not recorded yet."""


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

    The repository it stands for: ``url`` when given; else what the source
    fetched from the same location as a mirror was recorded to stand for;
    the pin's url when it is that repository or a mirror of it (it carries
    the pinned tag at the pinned commit); else its own location. The source is then the one that
    already stands for that repository, or a new one named ``name`` or after
    the repository. Refused: a name taken by another repository (unless this
    is the same location, now said to mirror ``url``), or a repository that
    is already a source under another name.
    """
    shown = display_location(fetch_url)
    fetched_here = next((source for source in existing
                         if same_repository(source.location, fetch_url) and name in (None, source.name)), None)
    if url:
        stands_for = url
    elif fetched_here is not None and fetched_here.url and fetched_here.mirrored:
        # Fetched from here before as a mirror: it still stands for what it was recorded to stand for
        # (its --url, or the pin's url it carried then), not for the path it is fetched from.
        stands_for = fetched_here.url
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
