"""Apply, export and check the patch stack.

apply:  pin -> work branch, one ``git am -3`` commit per patch.
export: work branch -> patches/, byte-stable, swapped in whole.
check:  apply + export into a temporary place; every byte must match.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import shutil
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from . import git
from .cache import UpstreamCache
from .curation import find_rewrites
from .errors import CheckFailed, ConfigError, HiraishinError, PatchError, WorkTreeError
from .fsutil import scratch_directory, staged_directory
from .log import get_logger
from .pin import PIN_FILE, UpstreamPin
from .project import Project
from .series import (SERIES_FILE, DiffSize, Patch, Series, parse_patch, patch_file_name, read_series, render_series,
                     restore_hint)
from .worktree import WorkState, WorkTree

# The rebase's state file in a work tree's git directory (rebase.py owns it; export only needs to
# know that a rebase stopped there).
REBASE_STATE_NAME = "hiraishin-rebase.json"


@dataclass(frozen=True)
class FailedHunk:
    file: str
    line: int | None
    header: str | None


def failed_hunks(output: str, patch_text: str) -> list[FailedHunk]:
    """Name the files and hunks ``git am`` could not apply, from its output."""
    hunks: list[FailedHunk] = []
    for match in re.finditer(r"^error: patch failed: (.+):(\d+)$", output, re.MULTILINE):
        file, line = match.group(1), int(match.group(2))
        header = re.search(rf"^@@ -{line}(?:,\d+)? \+\d+(?:,\d+)? @@.*$", patch_text, re.MULTILINE)
        hunks.append(FailedHunk(file, line, header.group(0) if header else None))
    for match in re.finditer(r"^CONFLICT \([^)]*\): Merge conflict in (.+)$", output, re.MULTILINE):
        if all(h.file != match.group(1) for h in hunks):
            hunks.append(FailedHunk(match.group(1), None, None))
    for match in re.finditer(r"^error: (.+?): (?:does not exist in index|No such file or directory)$", output, re.MULTILINE):
        hunks.append(FailedHunk(match.group(1), None, "the file does not exist in the base"))
    return hunks


# git am's advice for its own session (--continue, --skip, --abort, --show-current-patch): the
# tool aborts that session itself, so the advice would send a user to a session that is gone.
_AM_ADVICE = re.compile(r"^(?:hint: .*|Patch failed at .*|When you have resolved this problem.*|"
                        r"If you prefer to skip this patch.*|To restore the original branch.*)$")


def _absent_files(workdir: Path, patch_text: str) -> tuple[str, ...]:
    """Files the patch changes (not creates) that the work tree does not have: deleted or renamed upstream."""
    changed = re.findall(r"^--- a/(.+)$", patch_text, re.MULTILINE)
    return tuple(dict.fromkeys(path for path in changed if not (workdir / path).exists()))


def _describe_failure(patch: Path, output: str, conflicted: tuple[str, ...] = (),
                      absent: tuple[str, ...] = (), *, edited: bool = False) -> PatchError:
    text = patch.read_text(encoding="utf-8", errors="replace")
    corrupt = re.search(r"^(?:error|fatal): (corrupt patch at line \d+|.*patch fragment without header.*)$", output, re.MULTILINE)
    if corrupt:
        return PatchError(
            f"{patch.parent.name}/{patch.name}: the patch file is corrupt ({corrupt.group(1)})",
            hint=restore_hint(patch),
        )
    hunks = failed_hunks(output, text)
    # `git am --quiet` prints no CONFLICT lines: the files a three-way merge left unmerged say where.
    hunks += [FailedHunk(name, None, "merge conflict") for name in conflicted if all(h.file != name for h in hunks)]
    # A three-way fallback for a file the base lacks fails on fetching the patch's base blob instead of
    # saying so; name the file.
    hunks += [FailedHunk(name, None, "the file does not exist in the base") for name in absent
              if all(h.file != name for h in hunks)]
    where = "".join(
        f"\n    {h.file}" + (f" at line {h.line}" if h.line else "") + (f": {h.header}" if h.header else "")
        for h in hunks
    )
    lines = [line for line in output.strip().splitlines() if not _AM_ADVICE.match(line)]
    tail = "\n".join(f"    {line}" for line in "\n".join(lines).strip().splitlines()[-8:])
    if edited:
        # The pin is the one committed, on which the committed stack applies: the patch file changed.
        hint = (f"the pin is unchanged and patches/{patch.name} differs from its committed version: see "
                f"`git diff -- patches/{patch.name}`; to undo the edit, {restore_hint(patch)}")
    else:
        hint = ("the upstream changed under this patch: refresh it (`hiraishin rebase --onto <ref>`), or fix the "
                f"patch file (`git diff -- patches/{patch.name}` shows edits since the last commit)")
    return PatchError(
        f"{patch.name} does not apply" + (f"; failing files and hunks:{where}" if where else f":\n{tail}"),
        hint=hint,
    )


@dataclass
class ApplyResult:
    workdir: Path
    base: str
    head: str
    applied: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def load_stack(project: Project) -> tuple[Series, list[Patch], list[str]]:
    """Read and validate the series before anything is touched."""
    series = read_series(project.patches_dir)
    patches = series.patches()
    warnings = [
        f"{project.patches_dir / name} is not listed in {SERIES_FILE} and is ignored"
        for name in series.unlisted()
    ]
    for message in warnings:
        get_logger().warning(message)
    return series, patches, warnings


def apply_stack(
    project: Project,
    cache: UpstreamCache,
    workdir: Path,
    *,
    force: bool = False,
    strict: bool = False,
    pin: UpstreamPin | None = None,
    omit: frozenset[str] = frozenset(),
    scratch: bool = False,
) -> ApplyResult:
    """Check out the pin in ``workdir`` and commit every patch on it.

    ``strict`` refuses the three-way fallback: each patch must apply to the
    exact lines it was written against (what ``check`` requires). ``omit``
    names patches to leave out, for builds that show what each patch fixes;
    such a work tree must not be exported. ``scratch``: the caller deletes the
    work tree afterwards, so an error does not point the user at it.
    """
    pin = pin or project.pin()
    cache.verify(pin)
    series, patches, warnings = load_stack(project)
    unknown = sorted(omit - set(series.names))
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], series.names, n=1)
        raise ConfigError(
            f"cannot leave out {', '.join(unknown)}: not in {series.series_file}",
            hint=(f"did you mean '{close[0]}'? " if close else "") + "see `hiraishin patches list`",
        )
    patches = [patch for patch in patches if patch.name not in omit]
    cache.require_complete(pin.commit, pin.checkout)
    if (workdir / ".git" / REBASE_STATE_NAME).is_file():
        raise WorkTreeError(
            f"a rebase is stopped in {workdir}; `patches apply` there would throw away its progress",
            hint="finish it: resolve the conflict, `git add` the files, `hiraishin rebase --continue`; or undo it "
                 "with `hiraishin rebase --abort`; or apply elsewhere with --workdir DIR",
        )
    tree = WorkTree(workdir)
    written = written_hashes(project.patches_dir)
    # Until the last patch is in, the state says an apply is running and that the branch lacks every patch:
    # an export after a kill then refuses instead of deleting the patches not yet applied, and the next
    # apply resets the half-written tree instead of asking for the commits to be exported.
    journal = WorkState(base=pin.commit, head=pin.commit, missing=tuple(p.name for p in patches),
                        written=written, in_progress="apply")
    tree.prepare(cache, pin.commit, pin.checkout, force=force, journal=journal)
    result = ApplyResult(workdir, pin.commit, pin.commit, warnings=warnings)
    for number, patch in enumerate(patches):
        outcome = git.am(workdir, patch.path, three_way=not strict)
        if outcome.returncode != 0:
            conflicted = tuple(git.unmerged_paths(workdir))
            git.am_abort(workdir)
            # The branch keeps the patches that applied; record it so the next apply does not mistake
            # them for unexported work, and what it lacks, so that no export deletes those from patches/.
            missing = tuple(p.name for p in patches[number:])
            tree.write_state(WorkState(base=pin.commit, head=tree.head(), missing=missing, written=written))
            absent = _absent_files(workdir, patch.path.read_text(encoding="utf-8", errors="replace"))
            error = _describe_failure(patch.path, outcome.output, conflicted, absent,
                                      edited=_edited_on_committed_pin(project, pin, patch.path))
            if not scratch:
                error.message += (f"\n  the work tree {workdir} holds the {len(result.applied)} patch(es) before it; "
                                  f"`patches export` refuses it until the whole stack applies")
            raise error
        result.applied.append(patch.name)
        get_logger().info("applied %s", patch.name)
    result.head = tree.head()
    tree.write_state(WorkState(base=pin.commit, head=result.head, missing=tuple(sorted(omit)), written=written))
    return result


def written_hashes(patches_dir: Path) -> dict[str, str]:
    """sha256 of every file directly in patches/, as it is now."""
    if not patches_dir.is_dir():
        return {}
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(patches_dir.iterdir()) if path.is_file()}


def _edited_on_committed_pin(project: Project, pin: UpstreamPin, patch: Path) -> bool:
    """Whether the pin is the one last committed while the patch file is not: then a patch that stops
    applying was edited, not overtaken by the upstream. False where the project is no git checkout."""
    pin_file = PIN_FILE.as_posix()
    try:
        committed_pin = git.git(project.root, "show", f"HEAD:{pin_file}", check=False, what="reading the committed pin")
        patch_diff = git.git(project.root, "diff", "--quiet", "HEAD", "--", f"patches/{patch.name}", check=False,
                             what="comparing the patch with its committed version")
    except HiraishinError:
        return False
    return committed_pin.returncode == 0 and pin.commit in committed_pin.stdout and patch_diff.returncode == 1


class ExportChange(str, Enum):
    UNCHANGED = "unchanged"
    CHANGED = "changed"
    ADDED = "added"
    REMOVED = "removed"


@dataclass
class ExportResult:
    changes: dict[str, ExportChange]
    kept: list[str]
    series_changed: bool = False

    @property
    def changed(self) -> bool:
        return self.series_changed or any(change is not ExportChange.UNCHANGED for change in self.changes.values())


# The author date is not part of the change, and a stack re-exported on
# another day (or amended by another maintainer) must not differ. It is pinned
# rather than dropped: git am would stamp a patch without one with the current
# time, and the work branch's commits would then differ on every apply.
PINNED_DATE = b"Date: Thu, 1 Jan 1970 00:00:00 +0000"


def _pin_date(patch: Path) -> None:
    data = patch.read_bytes()
    header, sep, rest = data.partition(b"\n\n")
    lines = [PINNED_DATE if line.startswith(b"Date: ") else line for line in header.split(b"\n")]
    patch.write_bytes(b"\n".join(lines) + sep + rest)


def render_patches(workdir: Path, out_dir: Path) -> list[str]:
    """Write the work branch's commits as patch files; return them in order."""
    tree = WorkTree(workdir)
    state = tree.read_state()
    tree.refuse_if_dirty("export (uncommitted changes would be left out)")
    names: list[str] = []
    sizes: list[DiffSize | None] = []
    with scratch_directory("hiraishin-export-") as scratch:
        for line in git.rev_list(workdir, state.base, "HEAD"):
            commit, *parents = line.split()
            if len(parents) != 1:
                raise WorkTreeError(
                    f"{workdir}: commit {commit[:12]} is a merge; the stack must be a straight line of commits",
                    hint="rebase the work branch onto the pinned commit without merges",
                )
            written = git.format_patch(workdir, commit, Path(scratch))
            _pin_date(written)
            parsed = parse_patch(written)
            name = patch_file_name(parsed.subject, set(names))
            shutil.move(written, out_dir / name)
            names.append(name)
            sizes.append(parsed.size)
    (out_dir / SERIES_FILE).write_bytes(render_series(list(zip(names, sizes))).encode("utf-8"))
    return names


def _compare(old_dir: Path, new_dir: Path, old_names: list[str], new_names: list[str]) -> dict[str, ExportChange]:
    changes: dict[str, ExportChange] = {}
    for name in new_names:
        old = old_dir / name
        if name not in old_names or not old.is_file():
            changes[name] = ExportChange.ADDED
        elif old.read_bytes() == (new_dir / name).read_bytes():
            changes[name] = ExportChange.UNCHANGED
        else:
            changes[name] = ExportChange.CHANGED
    for name in old_names:
        if name not in new_names:
            changes[name] = ExportChange.REMOVED
    return changes


def _refuse_partial_branch(workdir: Path, state: WorkState) -> None:
    """An export writes patches/ as the branch holds it: a branch without the whole stack would delete
    the patches it lacks from patches/ and series."""
    rebase_state = workdir / ".git" / REBASE_STATE_NAME
    if rebase_state.is_file():
        raise WorkTreeError(
            f"a rebase is stopped in {workdir}; `patches export` now would write only the patches it has "
            "reached and delete the others from patches/",
            hint="resolve the conflict, `git add` the files, then `hiraishin rebase --continue` (it writes "
                 "patches/ when the whole stack is on the new base), or `hiraishin rebase --abort`; patches/ "
                 "was not changed",
        )
    if state.in_progress:
        raise WorkTreeError(
            f"an interrupted `hiraishin patches {state.in_progress}` left {workdir} without the whole stack; "
            "exporting it would delete the patches it lacks from patches/ and series",
            hint="run `hiraishin patches apply`: it resets that work tree and applies the whole stack again "
                 "(everything in it came from patches/, which was not changed)",
        )
    if state.missing:
        first, rest = state.missing[0], len(state.missing) - 1
        raise WorkTreeError(
            f"{workdir} does not hold the whole stack: {first} was not applied"
            + (f", nor the {rest} patch(es) after it" if rest else "")
            + "; exporting would delete them from patches/ and series",
            hint=f"make the stack apply, then export: fix patches/{first} (or restore it: "
                 f"git checkout -- patches/{first}) and run `hiraishin patches apply`; to drop a patch on "
                 "purpose, remove its line from patches/series first; patches/ was not changed",
        )


def _edited_since_written(patches_dir: Path, state: WorkState, rendered: Path, names: list[str]) -> list[str]:
    """Files of patches/ changed by hand since the tool applied or wrote them, that an export would
    replace with other bytes. Work trees made before the tool recorded this have nothing to compare."""
    edited = []
    for name, digest in sorted(state.written.items()):
        current = patches_dir / name
        if not current.is_file():
            continue
        data = current.read_bytes()
        if hashlib.sha256(data).hexdigest() == digest:
            continue
        new = rendered / name
        if new.is_file() and new.read_bytes() == data:
            continue
        edited.append(name)
    return edited


def export_stack(project: Project, workdir: Path, *, overwrite_edits: bool = False,
                 rebasing: bool = False) -> ExportResult:
    """Write patches/ from the work branch, swapped in whole.

    Refuses a branch that lacks part of the stack (a failed apply, a stopped rebase) and, unless
    ``overwrite_edits``, files of patches/ edited by hand since they were applied. ``rebasing``: the
    rebase's own export, which keeps a backup of patches/ and reports every change."""
    patches_dir = project.patches_dir
    tree = WorkTree(workdir)
    state = tree.read_state()
    if not rebasing:
        _refuse_partial_branch(workdir, state)
    old_names = list(read_series(patches_dir, allow_empty=True).names) if (patches_dir / SERIES_FILE).is_file() else []
    with scratch_directory("hiraishin-render-") as rendered_dir:
        rendered = Path(rendered_dir)
        names = render_patches(workdir, rendered)
        if not rebasing and not overwrite_edits:
            edited = _edited_since_written(patches_dir, state, rendered, names)
            if edited:
                shown = ", ".join(f"patches/{name}" for name in edited)
                raise WorkTreeError(
                    f"{shown} changed since `patches apply` read {'it' if len(edited) == 1 else 'them'}, and the "
                    "work branch holds something else: exporting would overwrite the edit",
                    hint="to keep the edit, put it into the branch: `hiraishin patches apply --force` applies "
                         "patches/ as it is now (the branch is kept under refs/hiraishin/backup/); to replace "
                         "it with the branch's version, `hiraishin patches export --overwrite`; patches/ was "
                         "not changed",
                )
        changes = _compare(patches_dir, rendered, old_names, names)
        series_same = (patches_dir / SERIES_FILE).is_file() and (
            (patches_dir / SERIES_FILE).read_bytes() == (rendered / SERIES_FILE).read_bytes()
        )
        # Files in patches/ that the old series did not name (notes, a patch
        # being drafted) are not ours to delete: they are carried over.
        kept = sorted(
            p.name for p in patches_dir.iterdir()
            if p.name != SERIES_FILE and p.name not in old_names and p.name not in names
        ) if patches_dir.is_dir() else []
        result = ExportResult(changes, kept, series_changed=not series_same)
        if result.changed:
            with staged_directory(patches_dir) as staging:
                for name in [*names, SERIES_FILE]:
                    shutil.copy2(rendered / name, staging / name)
                for name in kept:
                    source = patches_dir / name
                    (shutil.copytree if source.is_dir() else shutil.copy2)(source, staging / name)
    tree.write_state(WorkState(base=state.base, head=tree.head(), written=written_hashes(patches_dir)))
    for name in kept:
        get_logger().warning("kept %s: it is not part of the stack", patches_dir / name)
    return result


# patches/ differs from what the stack gives on the pin: either patches/ was changed (restore it) or the
# work branch holds what is wanted (write it back).
REFRESH_OR_RESTORE = (
    "if patches/ was edited or damaged, restore it: git checkout -- patches/; if the work branch holds what you "
    "want, write it back: `hiraishin patches apply` (three-way), fix any conflict, `hiraishin patches export`, "
    "and commit patches/"
)


FOLD_FIXUPS = (
    "in the work tree (`hiraishin patches apply`), squash each later change into the patch it names "
    "(`git rebase -i` with fixup), then `hiraishin patches export` and commit patches/"
)


@dataclass
class CheckResult:
    patches: list[str]
    seconds_apply: float = 0.0
    seconds_export: float = 0.0


def check_stack(project: Project, cache: UpstreamCache) -> CheckResult:
    """Apply into a temporary work tree, re-export, and require identical bytes,
    complete patch messages and no patch that rewrites lines an earlier one
    added (curation.py). Touches nothing in the project."""
    import time

    _, patches, _ = load_stack(project)
    problems: list[str] = []
    for patch in patches:
        missing = patch.missing_sections()
        if missing:
            problems.append(f"{patch.name}: the message lacks {', '.join(missing)}")
    with scratch_directory("hiraishin-check-") as scratch:
        workdir = Path(scratch) / "llama.cpp"
        started = time.monotonic()
        try:
            applied = apply_stack(project, cache, workdir, strict=True, scratch=True)
        except PatchError as exc:
            raise CheckFailed(
                f"patches check failed: {exc.message}\n  (check applies each patch as written, without the "
                "three-way fallback)",
                hint=REFRESH_OR_RESTORE,
            ) from None
        applied_at = time.monotonic()
        commits = [line.split()[0] for line in git.rev_list(workdir, applied.base, applied.head)]
        rewrites = find_rewrites(workdir, applied.base, commits, applied.applied)
        problems += [str(rewrite) for rewrite in rewrites]
        out_dir = Path(scratch) / "patches"
        out_dir.mkdir()
        names = render_patches(workdir, out_dir)
        exported_at = time.monotonic()
        expected = [*read_series(project.patches_dir).names]
        if names != expected:
            problems.append(f"the re-exported order {names} differs from {SERIES_FILE} {expected}")
        for name in names:
            committed = project.patches_dir / name
            if not committed.is_file():
                continue
            old, new = committed.read_bytes(), (out_dir / name).read_bytes()
            if old != new:
                diff = list(difflib.unified_diff(
                    old.decode("utf-8", "replace").splitlines(),
                    new.decode("utf-8", "replace").splitlines(),
                    f"patches/{name} (committed)", f"patches/{name} (re-exported)", lineterm="", n=1,
                ))
                problems.append(f"{name} re-exports differently:\n" + "\n".join(f"    {d}" for d in diff[:20]))
        if (project.patches_dir / SERIES_FILE).read_bytes() != (out_dir / SERIES_FILE).read_bytes():
            problems.append(f"{SERIES_FILE} re-exports differently (comments, blank lines, order, CRLF line endings or a byte "
                            "order mark)")
    if problems:
        hint = FOLD_FIXUPS if len(rewrites) == len(problems) else REFRESH_OR_RESTORE
        raise CheckFailed("patches check failed:\n  " + "\n  ".join(problems), hint=hint)
    return CheckResult(applied.applied, applied_at - started, exported_at - applied_at)
