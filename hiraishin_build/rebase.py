"""Rebase the patch stack onto another upstream ref, patch by patch.

Each patch is applied first as written (``git am --no-3way``): clean when its
hunks land at their old line numbers, "applied with offset" otherwise. If that
fails, with git's three-way merge: "merged three-way", "empty" when the merge
leaves nothing to commit (upstream already has the change; the patch is
dropped and the upstream commit that made it empty is looked up), or
"conflict": the ``git am`` session is left in the work tree for the
maintainer, who resolves, ``git add``s and runs ``hiraishin rebase --continue``.

The state lives in a JSON file in the work tree's git directory and is
rewritten (atomically) after every step, so a killed process or a closed
terminal loses nothing: ``--continue`` redoes the interrupted step,
``--abort`` restores patches/, the pin and the work tree exactly. The input
patches and the pin are copied next to the state file first; the rebase reads
only those copies.

Phases: applying -> [conflict -> applying]... -> finishing -> done (the state
file is removed). Finishing writes patches/ and then the pin; an interruption
between the two is finished by ``--continue`` or undone by ``--abort``.

The target may be a tag of any source in the cache; the pin then records that
source's url with the ref and commit (the pin always names where its ref
lives).

One rebase process per project at a time: a rebase writes the project's
patches/ and pin, whatever its work tree, so ``start``, ``continue_``,
``skip`` and ``abort`` hold an exclusive lock (lock.py) on
``work/hiraishin-rebase.lock`` in the project; a second one is refused at
once, naming the first. The lock is not in the work tree because a rebase may
create the work tree and ``--abort`` may remove it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from . import git, lock, tags
from .cache import UpstreamCache
from .errors import HiraishinError, RebaseError, RebaseLocked, RebaseStopped, UpstreamError, WorkTreeError
from .fsutil import atomic_write_bytes, atomic_write_text, scratch_directory, staged_directory
from .git import ObjectStore
from .log import get_logger
from .pin import PIN_FILE, UpstreamPin, load_pin, write_pin
from .project import Project
from .report import (
    ChangeKind,
    ConflictRegion,
    PatchChange,
    PatchOutcome,
    PatchStatus,
    RebaseReport,
    RebaseTarget,
    ScanReport,
    ScanRow,
    UpstreamCommit,
    as_data,
    outcome_from_data,
)
from .series import Patch, read_series
from .sources import RefKind, RefTable, is_local, same_repository
from .stack import REBASE_STATE_NAME, FailedHunk, export_stack, failed_hunks, load_stack, render_patches
from .worktree import WORK_BRANCH, WorkState, WorkTree

STATE_NAME = REBASE_STATE_NAME
BACKUP_NAME = "hiraishin-rebase"
ORIG_HEAD_REF = "refs/hiraishin/rebase-orig-head"
STATE_VERSION = 1
LOCK_NAME = "hiraishin-rebase.lock"
KILL_ENV = "HIRAISHIN_TEST_KILL"
PAUSE_ENV = "HIRAISHIN_TEST_PAUSE"

# The search for the upstream commit that made a patch empty walks parents
# one at a time below the bisection; a bound keeps a pathological history
# from turning a report detail into a long wait.
_MAX_WALK = 20000


class Phase(str, Enum):
    APPLYING = "applying"
    CONFLICT = "conflict"
    FINISHING = "finishing"


@dataclass(frozen=True)
class Origin:
    """The work tree as it was before the rebase; what ``--abort`` restores."""

    created: bool
    """The rebase created the work tree (abort removes it)."""
    head_ref: str | None
    """The branch HEAD was on (refs/heads/...), None when detached."""
    head: str | None
    work_branch: str | None
    """Where refs/heads/hiraishin/work pointed, None if it did not exist."""
    work_state: str | None
    """The text of the work tree's own state file."""


@dataclass(frozen=True)
class Target:
    ref: str
    """What the pin will record: the tag or branch name (without a SOURCE/ prefix), or the full commit for a hash."""
    commit: str
    relation: tags.Relation
    note: str
    later: bool
    """Newer than the pin: by ancestry, or for a diverged ref by build number or date."""
    kind: RefKind = RefKind.TAG
    source: str = ""
    """The source the ref was taken from; empty when no source has it (a hash reachable from no ref)."""
    url: str = ""
    """What the pin's url becomes: that source's url (the pin's own url when no source has the ref)."""
    sources: tuple[str, ...] = ()
    """Every source that has the ref at this commit (or, for a hash, a ref containing it)."""


@dataclass(frozen=True)
class RebaseState(RebaseTarget):
    project: str
    workdir: str
    phase: Phase
    next: int
    """0-based index of the patch to apply next (or the one stopped at)."""
    head: str
    """The work branch after the last completed step."""
    outcomes: tuple[PatchOutcome, ...]
    origin: Origin | None
    notes: tuple[str, ...] = ()
    began: float = 0.0
    """When `rebase --onto` ran (seconds since the epoch): the report says how long the whole rebase took."""

    command_seconds: tuple[float, ...] = ()
    """The tool's own time in each command of this rebase so far (--onto, then each --continue/--skip)."""

    version: int = STATE_VERSION


@dataclass(frozen=True)
class AbortResult:
    onto_ref: str
    workdir: Path
    restored: tuple[str, ...]
    """What had changed and was put back."""


@dataclass(frozen=True)
class _Run:
    workdir: Path
    cache: UpstreamCache
    store: ObjectStore
    pin: UpstreamPin
    onto: str
    patch_dir: Path
    """Where the patch files are read from: the backup copy during a real rebase."""
    prefer: tuple[str, ...] = ()
    """The target's source first: where the blobs of commits up to the target are fetched from."""


# -- targets ----------------------------------------------------------------

def resolve_target(cache: UpstreamCache, table: RefTable, pin: UpstreamPin, ref: str) -> Target:
    store = table.store
    found = tags.resolve(table, ref)
    relation, note = tags.describe(store, found.name, found.commit, pin.ref, pin.commit)
    later = relation is tags.Relation.NEWER or (
        relation is tags.Relation.DIVERGED and tags.later(store, found.name, found.commit, pin.ref, pin.commit)
    )
    holders = found.sources or cache.sources_containing(found.commit)
    known = [table.sources[name] for name in holders if name in table.sources and table.sources[name].url]
    # The pin stays where it is when its own repository has the ref too.
    chosen = next((s for s in known if same_repository(s.url, pin.url)), known[0] if known else None)
    return Target(
        found.name, found.commit, relation, note, later, kind=found.kind,
        source=chosen.name if chosen else "", url=chosen.url if chosen else pin.url, sources=tuple(holders),
    )


def _target_notes(pin: UpstreamPin, target: Target) -> tuple[str, ...]:
    notes: list[str] = []
    if target.kind is RefKind.BRANCH:
        notes.append(f"{target.ref} is a branch: the pin records it, but a branch moves; prefer a tag")
    if not target.source:
        notes.append(f"no source has a ref containing {target.commit[:12]}: the pin keeps its url {pin.url}")
    others = [name for name in target.sources if name != target.source]
    if target.source and others:
        notes.append(f"{target.ref} is also in {', '.join(others)}; the pin takes the url of {target.source}")
    if not same_repository(target.url, pin.url):
        notes.append(f"{target.ref} is from the source {target.source}: the pin's url moves from {pin.url} to {target.url}")
        if is_local(target.url):
            notes.append(
                f"{target.url} is a path on this machine; to record the public repository instead, fetch the mirror "
                f"again with `hiraishin upstream fetch --from {target.url} --url URL` before the rebase"
            )
    return tuple(notes)


def _target_order(store: ObjectStore, target: Target) -> tuple[int, int, str]:
    return tags.order_key(tags.UpstreamTag(
        target.ref, target.commit, tags.build_number(target.ref), store.commit_time(target.commit),
    ))


def _require_pin_commit(store: ObjectStore, cache: UpstreamCache, pin: UpstreamPin) -> None:
    # The pinned ref itself may have moved: a rebase is how that is fixed, so
    # only the recorded commit has to be present.
    if not store.commit_exists(pin.commit):
        raise UpstreamError(
            f"the upstream cache {cache.git_dir} does not hold the pinned commit {pin.commit}",
            hint="run `hiraishin upstream fetch` (or with --from <mirror>)",
        )


# -- state file -------------------------------------------------------------

def _state_file(tree: WorkTree) -> Path:
    return tree.git_dir / STATE_NAME


def _backup_dir(tree: WorkTree) -> Path:
    return tree.git_dir / BACKUP_NAME


def in_progress(workdir: Path) -> bool:
    return _state_file(WorkTree(workdir)).is_file()


def _save(tree: WorkTree, state: RebaseState) -> None:
    atomic_write_text(_state_file(tree), json.dumps(as_data(state), indent=2) + "\n")


def _load(tree: WorkTree) -> RebaseState:
    path = _state_file(tree)
    if not path.is_file():
        raise RebaseError(
            f"no rebase is in progress in {tree.path}",
            hint="start one with `hiraishin rebase --onto REF`",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"state version {data.get('version')}, expected {STATE_VERSION}")
        origin = data["origin"]
        # States saved before sources existed lack the urls: the pin's url stays.
        defaults = {"onto_source": "", "onto_url": "", "pin_url": ""}
        return RebaseState(
            **{f.name: data[f.name] if f.name not in defaults else data.get(f.name, defaults[f.name])
               for f in dataclasses.fields(RebaseTarget)},
            project=data["project"], workdir=data["workdir"],
            phase=Phase(data["phase"]), next=int(data["next"]), head=data["head"],
            outcomes=tuple(outcome_from_data(item) for item in data["outcomes"]),
            origin=Origin(**origin) if origin is not None else None,
            notes=tuple(data.get("notes", ())),
            # states saved before these were recorded lack them: the totals then start here
            began=float(data.get("began", 0.0)),
            command_seconds=tuple(float(x) for x in data.get("command_seconds", ())),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise RebaseError(
            f"{path}: unreadable rebase state ({exc})",
            hint=f"the original patches/ and pin are in {_backup_dir(tree)}; restore them by hand, "
            f"then remove {path}",
        ) from None


def _load_for(project: Project, workdir: Path) -> tuple[WorkTree, RebaseState]:
    tree = WorkTree(workdir)
    state = _load(tree)
    if Path(state.project) != project.root.resolve():
        raise RebaseError(
            f"the rebase in progress in {workdir} belongs to the project {state.project}",
            hint=f"run the command there (or with --project {state.project})",
        )
    return tree, state


def _refuse_in_progress(tree: WorkTree) -> None:
    if _state_file(tree).is_file():
        state = _load(tree)
        raise RebaseError(
            f"a rebase onto {state.onto_ref} is already in progress in {tree.path} ({state.phase.value})",
            hint="finish it with `hiraishin rebase --continue` (or `--skip`), or undo it with `hiraishin rebase --abort`",
        )


def _crash_point(stage: str, number: int) -> None:
    # Tests prove that a rebase killed at any step loses nothing: with
    # HIRAISHIN_TEST_KILL=<stage>:<patch number> the process dies right there,
    # as from `kill -9`, with no chance to clean up. With
    # HIRAISHIN_TEST_PAUSE=<stage>:<patch number>=<file> it writes <file> and
    # waits there until the file is removed, so a test can run a second
    # rebase while this one holds the lock.
    point = f"{stage}:{number}"
    if os.environ.get(KILL_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
    where, _, marker = os.environ.get(PAUSE_ENV, "").partition("=")
    if where == point and marker:
        Path(marker).write_text(f"{os.getpid()}\n", encoding="utf-8")
        deadline = time.monotonic() + 300
        while Path(marker).exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def _rebase_lock_file(project: Project) -> Path:
    return project.root / "work" / LOCK_NAME


@contextlib.contextmanager
def _exclusive(project: Project) -> Iterator[None]:
    """Hold the project's rebase lock, or refuse at once, naming its holder."""
    path = _rebase_lock_file(project)

    def refuse(holder: lock.Holder | None) -> RebaseLocked:
        who = holder.describe() if holder else "a process that has not written its name yet"
        return RebaseLocked(
            f"another hiraishin rebase is running in the project {project.root} ({who}); "
            "nothing was changed",
            hint="wait for it to finish (or stop it), then run this again; "
            "the lock ends with its process, so a crashed rebase never holds it",
        )

    with lock.exclusive(path, refuse):
        yield


# -- applying one patch ------------------------------------------------------

_RANGE = re.compile(r"^@@ (-\d+(?:,\d+)? \+\d+(?:,\d+)?) @@")


def _hunk_ranges(text: str) -> list[tuple[str, str]]:
    ranges: list[tuple[str, str]] = []
    current = ""
    for line in text.splitlines():
        if line.startswith("diff --git "):
            current = line
        else:
            match = _RANGE.match(line)
            if match:
                ranges.append((current, match.group(1)))
    return ranges


def _export_commit(workdir: Path, commit: str) -> str:
    with scratch_directory("hiraishin-step-") as scratch:
        return git.format_patch(workdir, commit, Path(scratch)).read_text(encoding="utf-8", errors="replace")


def _conflict_regions(workdir: Path, files: Sequence[str]) -> tuple[ConflictRegion, ...]:
    regions: list[ConflictRegion] = []
    for name in files:
        path = workdir / name
        if not path.is_file():
            continue
        start = None
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            if line.startswith("<<<<<<< "):
                start = number
            elif line.startswith(">>>>>>> ") and start is not None:
                regions.append(ConflictRegion(name, start, number))
                start = None
    return tuple(regions)


def _apply_one(run: _Run, outcome: PatchOutcome, head: str) -> PatchOutcome:
    patch = run.patch_dir / outcome.name
    text = patch.read_text(encoding="utf-8", errors="replace")
    plain = git.am(run.workdir, patch, three_way=False)
    if plain.returncode == 0:
        new_head = git.rev_parse(run.workdir, "HEAD")
        if new_head == head:
            return replace(outcome, status=PatchStatus.EMPTY, note="git am applied nothing")
        same = _hunk_ranges(text) == _hunk_ranges(_export_commit(run.workdir, new_head or "HEAD"))
        return replace(outcome, status=PatchStatus.CLEAN if same else PatchStatus.OFFSET)
    git.am_abort(run.workdir)
    hunks = tuple(failed_hunks(plain.output, text))
    merged = git.am(run.workdir, patch, three_way=True)
    if merged.returncode == 0:
        if git.rev_parse(run.workdir, "HEAD") == head:
            found, note = _upstreamed_in(run, patch, outcome.files)
            return replace(outcome, status=PatchStatus.EMPTY, hunks=hunks, upstreamed_in=found, note=note)
        return replace(outcome, status=PatchStatus.THREE_WAY, hunks=hunks)
    conflicted = git.unmerged_paths(run.workdir)
    named = {hunk.file for hunk in hunks}
    hunks += tuple(FailedHunk(name, None, None) for name in conflicted if name not in named)
    note = "" if conflicted else "git am could not merge it:\n" + "\n".join(
        line for line in merged.output.splitlines()[-6:] if not line.startswith(("hint:", "When you", "If you", "To restore"))
    )
    return replace(
        outcome, status=PatchStatus.CONFLICT, hunks=hunks,
        conflicts=_conflict_regions(run.workdir, conflicted), note=note,
    )


@contextlib.contextmanager
def _scratch_index(workdir: Path) -> Iterator[Path]:
    """An index file of our own, so the work tree's index is never touched."""
    directory = Path(tempfile.mkdtemp(prefix="hiraishin-index-", dir=workdir / ".git"))
    try:
        yield directory / "index"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _prime(run: _Run, patches: Sequence[PatchOutcome]) -> None:
    """Put every patch's pre-image blobs into the object store.

    ``git am --3way`` rebuilds a patch's base from the blob ids on its
    ``index`` lines. For a file that an earlier patch of the stack changed,
    that blob exists only where the stack was applied to the old pin, which
    is not here: apply the stack to the old pin in a separate index first.
    """
    paths = sorted({path for patch in patches for path in patch.files})
    entries = [(*found, path) for path in paths if (found := run.store.entry(run.pin.commit, path))]
    try:
        run.cache.ensure_blobs((blob for _, blob, _ in entries), why=f"of {run.pin.short} for the three-way fallback",
                               commit=run.pin.commit)
        with _scratch_index(run.workdir) as index:
            git.index_add_entries(run.workdir, index, entries)
            for patch in patches:
                if not git.apply_to_index(run.workdir, run.patch_dir / patch.name, index):
                    get_logger().warning(
                        "%s does not apply to the old pin; three-way merges of it and later patches may lack a base",
                        patch.name,
                    )
                    return
    except HiraishinError as exc:
        # Only the three-way fallback needs these blobs; a plain apply does not.
        get_logger().warning("could not prepare the three-way fallback: %s", exc.message)


def _upstreamed_in(run: _Run, patch: Path, files: Sequence[str]) -> tuple[UpstreamCommit | None, str]:
    """Find the upstream commit from which ``patch`` is already applied.

    Bisects the commits between the pin and the target that touch the
    patch's files, testing whether the patch applies in reverse (only the
    touched files are fetched), then walks parents down to the commit that
    brought it, so a change that arrived through a merge is named by its own
    commit.
    """
    try:
        return _search_upstream(run, patch, files)
    except HiraishinError as exc:
        # A report detail; the rebase goes on without it.
        return None, f"the commit that made it empty was not found: {exc.message}"


def _search_upstream(run: _Run, patch: Path, files: Sequence[str]) -> tuple[UpstreamCommit | None, str]:
    store = run.store
    base = store.merge_base(run.pin.commit, run.onto)
    if base == run.onto:
        return None, "not searched: the target is older than the pin, so no upstream commit after the pin brought it"
    candidates = git.rev_list_touching(run.workdir, base, run.onto, files)
    if not candidates:
        return None, "the commit that made it empty was not found: no upstream commit since the pin touches its files"
    known: dict[tuple[Any, ...], bool] = {}

    def present(commit: str) -> bool:
        entries = [(*found, path) for path in files if (found := store.entry(commit, path))]
        key = tuple(entries)
        if key not in known:
            run.cache.ensure_blobs((blob for _, blob, _ in entries), why="to find where a patch went upstream",
                                   commit=commit, prefer=run.prefer)
            with _scratch_index(run.workdir) as index:
                git.index_add_entries(run.workdir, index, entries)
                known[key] = git.apply_to_index(run.workdir, patch, index, reverse=True, check_only=True)
        return known[key]

    if not present(run.onto):
        return None, (
            "the commit that made it empty was not found: the patch does not apply in reverse on the target "
            "(upstream changed the code again after taking it)"
        )
    low, high = 0, len(candidates) - 1
    while low < high:
        middle = (low + high) // 2
        if present(candidates[middle]):
            high = middle
        else:
            low = middle + 1
    commit = candidates[low]
    for _ in range(_MAX_WALK):
        earlier = next((parent for parent in store.parents(commit) if present(parent)), None)
        if earlier is None:
            return UpstreamCommit(commit, store.subject(commit)), ""
        commit = earlier
    return None, "the commit that made it empty was not found within the search bound"


# -- the loop ----------------------------------------------------------------

def _initial_outcomes(patches: Sequence[Patch]) -> tuple[PatchOutcome, ...]:
    return tuple(
        PatchOutcome(index=number, name=patch.name, subject=patch.subject, files=patch.files)
        for number, patch in enumerate(patches, start=1)
    )


def _with(outcomes: tuple[PatchOutcome, ...], index: int, outcome: PatchOutcome) -> tuple[PatchOutcome, ...]:
    return (*outcomes[:index], outcome, *outcomes[index + 1:])


def _advance(
    run: _Run, state: RebaseState, *, stop_at_conflict: bool, persist: Callable[[RebaseState], None],
) -> RebaseState:
    """Apply the patches from ``state.next`` on; stop at a conflict if asked,
    else leave the conflicting patch out and go on."""
    for index in range(state.next, len(state.outcomes)):
        outcome = _apply_one(run, state.outcomes[index], state.head)
        outcomes = _with(state.outcomes, index, outcome)
        get_logger().info("%s: %s", outcome.name, outcome.status.label)
        if outcome.status is PatchStatus.CONFLICT:
            if stop_at_conflict:
                state = replace(state, phase=Phase.CONFLICT, next=index, outcomes=outcomes)
                persist(state)
                return state
            git.am_abort(run.workdir)
            git.reset_branch(run.workdir, WORK_BRANCH, state.head)
        _crash_point("applied", index + 1)
        state = replace(
            state, phase=Phase.APPLYING, next=index + 1, head=git.rev_parse(run.workdir, "HEAD") or state.head,
            outcomes=outcomes,
        )
        persist(state)
        _crash_point("recorded", index + 1)
    return state


# -- comparing old and new patch files ---------------------------------------

@dataclass(frozen=True)
class _PatchText:
    message: str
    headers: tuple[tuple[str, ...], ...]
    """Per file: the diff --git line and mode lines (index lines left out)."""
    index_lines: tuple[str, ...]
    ranges: tuple[str, ...]
    functions: tuple[str, ...]
    context: tuple[tuple[str, ...], ...]
    changes: tuple[tuple[str, ...], ...]
    """Per file: the added and removed lines, in order."""


def _parse_patch_text(text: str) -> _PatchText:
    head, sep, diff = text.partition("\ndiff --git ")
    headers: list[list[str]] = []
    context: list[list[str]] = []
    changes: list[list[str]] = []
    index_lines: list[str] = []
    ranges: list[str] = []
    functions: list[str] = []
    in_hunk = False
    for line in (("diff --git " + diff) if sep else "").splitlines():
        if line.startswith("diff --git "):
            headers.append([line])
            context.append([])
            changes.append([])
            in_hunk = False
        elif line.startswith("@@ "):
            in_hunk = True
            match = re.match(r"^@@ (\S+ \S+) @@ ?(.*)$", line)
            ranges.append(match.group(1) if match else line)
            functions.append(match.group(2) if match else "")
        elif not headers:
            continue
        elif not in_hunk:
            (index_lines if line.startswith("index ") else headers[-1]).append(line)
        elif line.startswith(" ") or line == "":
            context[-1].append(line)
        else:
            changes[-1].append(line)
    return _PatchText(
        head, tuple(map(tuple, headers)), tuple(index_lines), tuple(ranges), tuple(functions),
        tuple(map(tuple, context)), tuple(map(tuple, changes)),
    )


def classify_refresh(old: str, new: str) -> PatchChange:
    """Is the refreshed patch the same change with moved context, or a different change?"""
    if old == new:
        return PatchChange(ChangeKind.IDENTICAL)
    before, after = _parse_patch_text(old), _parse_patch_text(new)
    content = [
        aspect for aspect, differs in (
            ("message", before.message != after.message),
            ("files or modes", before.headers != after.headers),
            ("changed lines", before.changes != after.changes),
        ) if differs
    ]
    if content:
        return PatchChange(ChangeKind.CONTENT, tuple(content))
    context = [
        aspect for aspect, differs in (
            ("line numbers", before.ranges != after.ranges),
            ("context lines", before.context != after.context),
            ("hunk function names", before.functions != after.functions),
            ("index lines", before.index_lines != after.index_lines),
        ) if differs
    ]
    return PatchChange(ChangeKind.CONTEXT, tuple(context) or ("whitespace",))


def _classify(
    old_dir: Path, new_dir: Path, outcomes: tuple[PatchOutcome, ...], new_names: Sequence[str],
) -> tuple[tuple[PatchOutcome, ...], tuple[str, ...]]:
    kept = [o for o in outcomes if o.status.in_stack]
    # A subject edited while resolving renames the file; the order still says
    # which new file is which old patch when nothing was added or dropped.
    by_position = len(kept) == len(new_names)
    matched: set[str] = set()
    result: list[PatchOutcome] = []
    position = 0
    for outcome in outcomes:
        if outcome.status in (PatchStatus.EMPTY, PatchStatus.SKIPPED):
            result.append(replace(outcome, change=PatchChange(ChangeKind.DROPPED)))
            continue
        if not outcome.status.in_stack:
            # A conflict left out of a dry run: its refreshed form is not known yet.
            result.append(outcome)
            continue
        name = outcome.name if outcome.name in new_names else (new_names[position] if by_position else None)
        position += 1
        if name is None:
            result.append(replace(outcome, change=PatchChange(ChangeKind.CONTENT, ("no longer in the series",))))
            continue
        matched.add(name)
        change = classify_refresh(
            (old_dir / outcome.name).read_text(encoding="utf-8", errors="surrogateescape"),
            (new_dir / name).read_text(encoding="utf-8", errors="surrogateescape"),
        )
        result.append(replace(outcome, change=change, new_name=name if name != outcome.name else None))
    return tuple(result), tuple(name for name in new_names if name not in matched)


# -- reports -----------------------------------------------------------------

def _report(
    state: RebaseState, *, dry_run: bool, started: float, added: Sequence[str] = (), notes: Sequence[str] = (),
) -> RebaseReport:
    stopped = any(o.status is PatchStatus.CONFLICT for o in state.outcomes)
    if dry_run:
        outcome = "would stop" if stopped else "would finish"
    else:
        outcome = "stopped" if state.phase is Phase.CONFLICT else "finished"
    seconds = round(time.monotonic() - started, 3)
    return RebaseReport(
        **state.target_fields(), dry_run=dry_run, state=outcome,
        outcomes=state.outcomes, seconds=seconds,
        workdir=None if dry_run else state.workdir, added=tuple(added), notes=(*state.notes, *notes),
        commands=len(state.command_seconds) + 1, tool_seconds=round(sum(state.command_seconds) + seconds, 3),
        elapsed_seconds=round(time.time() - state.began, 1) if state.began and not dry_run else None,
    )


def stopped_error(report: RebaseReport) -> RebaseStopped | None:
    """The error the command line exits with when a rebase stopped (or would)."""
    stopped = report.stopped_at
    if stopped is None:
        return None
    files = ", ".join(dict.fromkeys(h.file for h in stopped.hunks)) or "see the report"
    if report.dry_run:
        return RebaseStopped(
            f"a rebase onto {report.onto_ref} would stop at patch {stopped.index} ({stopped.name}): "
            f"conflicts in {files}",
            hint="nothing was changed; run `hiraishin rebase --onto` without --dry-run to resolve it",
        )
    return RebaseStopped(
        f"the rebase onto {report.onto_ref} stopped at patch {stopped.index} ({stopped.name}): conflicts in {files}\n"
        f"  the work tree {report.workdir} holds the patches before it and the conflicted files",
        hint="resolve the conflicts there, `git add` the files, then `hiraishin rebase --continue`; "
        "or `hiraishin rebase --skip` to drop this patch, `hiraishin rebase --abort` to restore everything",
    )


# -- starting, going on, finishing -------------------------------------------

def _origin(tree: WorkTree, created: bool) -> Origin:
    state_text = tree.state_file.read_text(encoding="utf-8") if tree.state_file.is_file() else None
    return Origin(
        created=created,
        head_ref=git.head_ref(tree.path),
        head=git.rev_parse(tree.path, "HEAD"),
        work_branch=git.rev_parse(tree.path, f"refs/heads/{WORK_BRANCH}"),
        work_state=state_text,
    )


def _backup(project: Project, tree: WorkTree) -> Path:
    backup = _backup_dir(tree)
    # A leftover from a start that died before its state file was written.
    shutil.rmtree(backup, ignore_errors=True)
    backup.mkdir(parents=True)
    shutil.copytree(project.patches_dir, backup / "patches", symlinks=True)
    shutil.copy2(project.pin_file, backup / PIN_FILE.name)
    return backup


def _run_for(tree: WorkTree, cache: UpstreamCache, state: RebaseState) -> _Run:
    pin = load_pin(_backup_dir(tree) / PIN_FILE.name)
    prefer = (state.onto_source,) if state.onto_source else ()
    return _Run(tree.path, cache, cache.store(), pin, state.onto_commit, _backup_dir(tree) / "patches", prefer)


def start(project: Project, cache: UpstreamCache, onto: str, workdir: Path) -> RebaseReport:
    """Begin a rebase in ``workdir``; returns when it finished or stopped at a conflict."""
    with _exclusive(project):
        return _start(project, cache, onto, workdir)


def _start(project: Project, cache: UpstreamCache, onto: str, workdir: Path) -> RebaseReport:
    started = time.monotonic()
    tree = WorkTree(workdir)
    _refuse_in_progress(tree)
    _crash_point("started", 0)
    pin = project.pin()
    store = cache.store()
    _require_pin_commit(store, cache, pin)
    target = resolve_target(cache, cache.refs(), pin, onto)
    _, patches, warnings = load_stack(project)
    if tree.interrupted():
        raise WorkTreeError(
            f"an interrupted `hiraishin patches {tree.interrupted()}` left {workdir} without the whole stack; "
            "a rebase from it would leave the missing patches out",
            hint="run `hiraishin patches apply` first (it resets that work tree and applies the whole stack "
                 "again; nothing of yours is in it), then the rebase",
        )
    if tree.is_initialized():
        tree.refuse_if_dirty("start a rebase")
        if tree.unexported_commits():
            raise WorkTreeError(
                f"{workdir}: the work branch has commits that are not in patches/; a rebase of patches/ would leave them out",
                hint="run `hiraishin patches export` first (or `hiraishin patches apply --force` to set them aside)",
            )
    prefer = (target.source,) if target.source else ()
    cache.prefetch_blobs(target.commit, pin.checkout, prefer=prefer)
    created = not tree.is_initialized()
    if created:
        # The state file and the backup live in the work tree's git directory,
        # so it must exist first; a checkout of the pin is what apply makes.
        cache.prefetch_blobs(pin.commit, pin.checkout)
        tree.prepare(cache, pin.commit, pin.checkout, force=False)
    origin = _origin(tree, created)
    _backup(project, tree)
    if origin.head:
        git.update_ref(workdir, ORIG_HEAD_REF, origin.head)
    notes = (*warnings, *_target_notes(pin, target))
    state = replace(_initial_state(project, workdir, pin, target, patches), origin=origin, notes=notes)
    _save(tree, state)
    if target.relation is tags.Relation.OLDER:
        get_logger().warning(target.note)
    try:
        tree.prepare(cache, target.commit, pin.checkout, force=False)
    except BaseException:
        _abort(project, workdir)
        raise
    run = _run_for(tree, cache, state)
    _prime(run, state.outcomes)
    return _settle(project, tree, run, _advance(run, state, stop_at_conflict=True, persist=lambda s: _save(tree, s)), started)


def _settle(project: Project, tree: WorkTree, run: _Run, state: RebaseState, started: float) -> RebaseReport:
    if state.phase is Phase.CONFLICT:
        report = _report(state, dry_run=False, started=started)
        # the command ends here: its time counts towards the totals the finishing command reports
        _save(tree, replace(state, command_seconds=(*state.command_seconds, report.seconds)))
        return report
    return _finish(project, tree, run, state, started)


def _finish(project: Project, tree: WorkTree, run: _Run, state: RebaseState, started: float) -> RebaseReport:
    state = replace(state, phase=Phase.FINISHING)
    _save(tree, state)
    tree.write_state(WorkState(base=state.onto_commit, head=tree.head()))
    export_stack(project, tree.path, rebasing=True)
    names = list(read_series(project.patches_dir, allow_empty=True).names)
    outcomes, added = _classify(run.patch_dir, project.patches_dir, state.outcomes, names)
    write_pin(project.pin_file, run.pin.moved_to(state.onto_ref, state.onto_commit, url=state.onto_url or None))
    report = _report(replace(state, outcomes=outcomes), dry_run=False, started=started, added=added)
    _clean_up(tree)
    return report


def _clean_up(tree: WorkTree) -> None:
    git.delete_ref(tree.path, ORIG_HEAD_REF)
    shutil.rmtree(_backup_dir(tree), ignore_errors=True)
    # Last: until it is gone, --continue and --abort still work.
    _state_file(tree).unlink(missing_ok=True)


def _recover(tree: WorkTree, state: RebaseState) -> None:
    """Undo a step that a killed process left half done, so it can be redone."""
    if git.am_in_progress(tree.path):
        git.am_abort(tree.path)
    git.reset_branch(tree.path, WORK_BRANCH, state.head)


def continue_(project: Project, cache: UpstreamCache, workdir: Path) -> RebaseReport:
    """Go on after a resolved conflict, or after an interruption."""
    with _exclusive(project):
        return _continue(project, cache, workdir)


def _continue(project: Project, cache: UpstreamCache, workdir: Path) -> RebaseReport:
    started = time.monotonic()
    tree, state = _load_for(project, workdir)
    run = _run_for(tree, cache, state)
    if state.phase is Phase.FINISHING:
        return _finish(project, tree, run, state, started)
    if state.phase is Phase.CONFLICT:
        state = _take_resolution(tree, state)
        _save(tree, state)
    else:
        get_logger().info("resuming the interrupted rebase onto %s at patch %d", state.onto_ref, state.next + 1)
        _recover(tree, state)
    _prime(run, state.outcomes)
    return _settle(project, tree, run, _advance(run, state, stop_at_conflict=True, persist=lambda s: _save(tree, s)), started)


def _take_resolution(tree: WorkTree, state: RebaseState) -> RebaseState:
    outcome = state.outcomes[state.next]
    workdir = tree.path
    if git.am_in_progress(workdir):
        unresolved = git.unmerged_paths(workdir)
        if unresolved:
            raise RebaseStopped(
                f"{outcome.name} still has unresolved conflicts in: {', '.join(unresolved)}",
                hint=f"edit them in {workdir}, `git add` them, then `hiraishin rebase --continue` (or --skip, --abort)",
            )
        result = git.am_continue(workdir)
        if result.returncode != 0:
            tail = "\n".join(f"    {line}" for line in result.output.splitlines()[-4:])
            raise RebaseStopped(
                f"{outcome.name}: git am --continue did not commit the resolution:\n{tail}",
                hint="`git add` the resolved files (or `hiraishin rebase --skip` if nothing of the patch is left)",
            )
    head = tree.head()
    if head == state.head:
        raise RebaseStopped(
            f"{outcome.name}: there is no resolution to continue with (no git am session, no new commit)",
            hint="apply the patch by hand and commit it, or `hiraishin rebase --skip` to drop it, or --abort",
        )
    # Leftovers would stop the next patch's git am, be lost by a later
    # --skip, or (untracked files) make the final export refuse to run.
    leftovers = tree.uncommitted_changes()
    if leftovers:
        raise WorkTreeError(
            f"{workdir} has uncommitted changes besides the resolution of {outcome.name}: "
            + ", ".join(line[3:] for line in leftovers[:10]),
            hint="commit them (`git commit --amend` folds them into the resolution), or remove them, "
            "then `hiraishin rebase --continue` again",
        )
    resolved = replace(outcome, status=PatchStatus.RESOLVED)
    return replace(state, phase=Phase.APPLYING, next=state.next + 1, head=head, outcomes=_with(state.outcomes, state.next, resolved))


def skip(project: Project, cache: UpstreamCache, workdir: Path) -> RebaseReport:
    """Drop the patch the rebase stopped at (the report records it) and go on."""
    with _exclusive(project):
        return _skip(project, cache, workdir)


def _skip(project: Project, cache: UpstreamCache, workdir: Path) -> RebaseReport:
    started = time.monotonic()
    tree, state = _load_for(project, workdir)
    if state.phase is not Phase.CONFLICT:
        raise RebaseError(
            f"the rebase onto {state.onto_ref} is not stopped at a conflict, so there is no patch to skip",
            hint="`hiraishin rebase --continue` resumes it",
        )
    outcome = state.outcomes[state.next]
    if not git.am_in_progress(workdir) and tree.head() != state.head:
        raise RebaseError(
            f"the work branch has new commits since the rebase stopped at {outcome.name} (a resolution?)",
            hint="`hiraishin rebase --continue` keeps them; to drop the patch anyway, "
            f"`git reset --hard {state.head[:12]}` in {workdir}, then --skip",
        )
    git.am_abort(workdir)
    git.reset_branch(workdir, WORK_BRANCH, state.head)
    skipped = replace(outcome, status=PatchStatus.SKIPPED, note=(outcome.note + "\n" if outcome.note else "") + "dropped with --skip")
    state = replace(state, phase=Phase.APPLYING, next=state.next + 1, outcomes=_with(state.outcomes, state.next, skipped))
    _save(tree, state)
    run = _run_for(tree, cache, state)
    _prime(run, state.outcomes)
    return _settle(project, tree, run, _advance(run, state, stop_at_conflict=True, persist=lambda s: _save(tree, s)), started)


def _snapshot(directory: Path) -> dict[str, bytes]:
    if not directory.is_dir():
        return {}
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*")) if path.is_file()
    }


def abort(project: Project, workdir: Path) -> AbortResult:
    """Put patches/, the pin and the work tree back exactly as before the rebase."""
    with _exclusive(project):
        return _abort(project, workdir)


def _abort(project: Project, workdir: Path) -> AbortResult:
    tree, state = _load_for(project, workdir)
    backup = _backup_dir(tree)
    restored: list[str] = []
    # patches/ and the pin first: their only copy is in the work tree.
    if _snapshot(project.patches_dir) != _snapshot(backup / "patches"):
        with staged_directory(project.patches_dir) as staging:
            shutil.rmtree(staging)
            shutil.copytree(backup / "patches", staging, symlinks=True)
        restored.append("patches/")
    saved_pin = (backup / PIN_FILE.name).read_bytes()
    if not project.pin_file.is_file() or project.pin_file.read_bytes() != saved_pin:
        atomic_write_bytes(project.pin_file, saved_pin)
        restored.append(str(PIN_FILE))
    origin = state.origin
    if git.am_in_progress(workdir):
        git.am_abort(workdir)
    if origin is None or origin.created:
        _state_file(tree).unlink(missing_ok=True)
        shutil.rmtree(workdir, ignore_errors=True)
        restored.append(f"{workdir} (removed: the rebase created it)")
        return AbortResult(state.onto_ref, workdir, tuple(restored))
    work_ref = f"refs/heads/{WORK_BRANCH}"
    if origin.work_branch and origin.head_ref != work_ref:
        git.update_ref(workdir, work_ref, origin.work_branch)
    if origin.head_ref and origin.head:
        git.reset_branch(workdir, origin.head_ref.removeprefix("refs/heads/"), origin.head)
    elif origin.head:
        git.checkout_force(workdir, origin.head, detach=True)
    if origin.work_branch is None:
        git.delete_ref(workdir, work_ref)
    if origin.work_state is not None:
        atomic_write_text(tree.state_file, origin.work_state)
    restored.append(f"{workdir} ({'branch ' + origin.head_ref.removeprefix('refs/heads/') if origin.head_ref else 'HEAD'}"
                    f" at {(origin.head or '')[:12]})")
    _clean_up(tree)
    return AbortResult(state.onto_ref, workdir, tuple(restored))


# -- dry run and scan ---------------------------------------------------------

def _initial_state(project: Project, workdir: Path, pin: UpstreamPin, target: Target, patches: Sequence[Patch]) -> RebaseState:
    """Nothing applied yet; `start` adds what it saved to restore (origin) and its notes."""
    return RebaseState(
        project=str(project.root.resolve()), workdir=str(workdir), onto_ref=target.ref, onto_commit=target.commit,
        onto_source=target.source, onto_url=target.url, pin_ref=pin.ref, pin_commit=pin.commit, pin_url=pin.url,
        relation=target.relation.value, relation_note=target.note,
        phase=Phase.APPLYING, next=0, head=target.commit, outcomes=_initial_outcomes(patches), origin=None,
        began=time.time(),
    )


def _no_persist(state: RebaseState) -> None:
    del state


def dry_run(project: Project, cache: UpstreamCache, onto: str) -> RebaseReport:
    """The whole report of a rebase onto ``onto``, made in a throwaway work
    tree: patches/, the pin and the work tree are not touched. After a
    conflict the later patches are tried with the conflicting one left out."""
    started = time.monotonic()
    pin = project.pin()
    store = cache.store()
    _require_pin_commit(store, cache, pin)
    target = resolve_target(cache, cache.refs(), pin, onto)
    _, patches, warnings = load_stack(project)
    prefer = (target.source,) if target.source else ()
    cache.prefetch_blobs(target.commit, pin.checkout, prefer=prefer)
    with scratch_directory("hiraishin-dry-run-") as scratch:
        tree = WorkTree(Path(scratch) / "llama.cpp")
        tree.prepare(cache, target.commit, pin.checkout, force=False)
        run = _Run(tree.path, cache, store, pin, target.commit, project.patches_dir, prefer)
        state = _initial_state(project, tree.path, pin, target, patches)
        _prime(run, state.outcomes)
        state = _advance(run, state, stop_at_conflict=False, persist=_no_persist)
        out = Path(scratch) / "patches"
        out.mkdir()
        names = render_patches(tree.path, out)
        outcomes, added = _classify(project.patches_dir, out, state.outcomes, names)
    return _report(replace(state, outcomes=outcomes), dry_run=True, started=started, added=added,
                   notes=(*warnings, *_target_notes(pin, target)))


def scan(project: Project, cache: UpstreamCache, refs: Sequence[str]) -> ScanReport:
    """Try the stack on each ref in one throwaway work tree; one row per ref,
    oldest first. After a conflict the later patches are tried with the
    conflicting one left out, so each column shows that patch's own fate."""
    started = time.monotonic()
    pin = project.pin()
    store = cache.store()
    _require_pin_commit(store, cache, pin)
    table = cache.refs()
    targets = sorted({t.commit: t for t in (resolve_target(cache, table, pin, ref) for ref in refs)}.values(),
                     key=lambda t: _target_order(store, t))
    _, patches, _ = load_stack(project)
    rows: list[ScanRow] = []
    with scratch_directory("hiraishin-scan-") as scratch:
        tree = WorkTree(Path(scratch) / "llama.cpp")
        for number, target in enumerate(targets):
            row_started = time.monotonic()
            get_logger().info("scanning %s (%d/%d)", target.ref, number + 1, len(targets))
            prefer = (target.source,) if target.source else ()
            cache.prefetch_blobs(target.commit, pin.checkout, prefer=prefer)
            tree.prepare(cache, target.commit, pin.checkout, force=True)
            run = _Run(tree.path, cache, store, pin, target.commit, project.patches_dir, prefer)
            state = _initial_state(project, tree.path, pin, target, patches)
            if number == 0:
                _prime(run, state.outcomes)
            state = _advance(run, state, stop_at_conflict=False, persist=_no_persist)
            # Marks the branch as written by the tool, so the next prepare
            # does not keep it as unexported work.
            tree.write_state(WorkState(base=target.commit, head=tree.head()))
            rows.append(ScanRow(
                ref=target.ref, commit=target.commit, relation=target.relation.value, later=target.later,
                statuses=tuple(o.status for o in state.outcomes),
                upstreamed_in=tuple(o.upstreamed_in for o in state.outcomes),
                seconds=round(time.monotonic() - row_started, 3),
            ))
    return ScanReport(pin.ref, pin.commit, tuple(p.name for p in patches), tuple(rows),
                      round(time.monotonic() - started, 3))

