"""What a rebase or a scan found, for a person (text) and for CI (JSON).

The same frozen dataclasses are the rebase's saved state (so a report after
``--continue`` covers the patches applied before the stop) and the report;
:func:`as_data` turns them into JSON-ready values and back.
"""

from __future__ import annotations

import dataclasses
import io
import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from .fsutil import atomic_write_text
from .stack import FailedHunk

REPORT_VERSION = 1


class PatchStatus(str, Enum):
    PENDING = "pending"
    CLEAN = "clean"
    OFFSET = "offset"
    THREE_WAY = "three-way"
    CONFLICT = "conflict"
    RESOLVED = "resolved"
    SKIPPED = "skipped"
    EMPTY = "empty"

    @property
    def label(self) -> str:
        return _STATUS_LABELS[self]

    @property
    def in_stack(self) -> bool:
        """The patch is a commit of the rebased branch."""
        return self in (PatchStatus.CLEAN, PatchStatus.OFFSET, PatchStatus.THREE_WAY, PatchStatus.RESOLVED)


_STATUS_LABELS = {
    PatchStatus.PENDING: "not tried",
    PatchStatus.CLEAN: "clean",
    PatchStatus.OFFSET: "applied with offset",
    PatchStatus.THREE_WAY: "merged three-way",
    PatchStatus.CONFLICT: "CONFLICT",
    PatchStatus.RESOLVED: "conflict resolved by hand",
    PatchStatus.SKIPPED: "skipped (dropped)",
    PatchStatus.EMPTY: "empty: already upstream (dropped)",
}

# One short word per status for the scan table, where columns must stay narrow.
_STATUS_CELLS = {
    PatchStatus.PENDING: "-",
    PatchStatus.CLEAN: "clean",
    PatchStatus.OFFSET: "offset",
    PatchStatus.THREE_WAY: "3-way",
    PatchStatus.CONFLICT: "CONFLICT",
    PatchStatus.RESOLVED: "resolved",
    PatchStatus.SKIPPED: "skipped",
    PatchStatus.EMPTY: "empty",
}


class ChangeKind(str, Enum):
    IDENTICAL = "identical"
    """The refreshed patch file is byte for byte the old one."""
    CONTEXT = "context"
    """Only context, line numbers or index lines moved; the change itself is the same."""
    CONTENT = "content"
    """Added or removed lines, touched files or the message differ: review it."""
    DROPPED = "dropped"
    """No longer in the stack (empty or skipped)."""
    ADDED = "added"
    """A new patch, made while resolving a conflict."""


@dataclass(frozen=True)
class PatchChange:
    kind: ChangeKind
    aspects: tuple[str, ...] = ()
    """What differs: for context, e.g. "line numbers"; for content, e.g. "changed lines"."""

    def describe(self) -> str:
        base = {
            ChangeKind.IDENTICAL: "unchanged",
            ChangeKind.CONTEXT: "refreshed, context only",
            ChangeKind.CONTENT: "CONTENT CHANGED",
            ChangeKind.DROPPED: "removed",
            ChangeKind.ADDED: "new",
        }[self.kind]
        return f"{base} ({', '.join(self.aspects)})" if self.aspects else base


@dataclass(frozen=True)
class ConflictRegion:
    file: str
    start: int
    end: int
    """1-based lines of the <<<<<<< and >>>>>>> markers in the work tree file."""


@dataclass(frozen=True)
class UpstreamCommit:
    commit: str
    subject: str


@dataclass(frozen=True)
class PatchOutcome:
    index: int
    """1-based position in the series."""
    name: str
    subject: str
    files: tuple[str, ...]
    status: PatchStatus = PatchStatus.PENDING
    hunks: tuple[FailedHunk, ...] = ()
    """Hunks that did not apply as written (found by the first, plain attempt)."""
    conflicts: tuple[ConflictRegion, ...] = ()
    upstreamed_in: UpstreamCommit | None = None
    """For an empty patch: the upstream commit from which it was already applied."""
    note: str = ""
    change: PatchChange | None = None
    """How the refreshed patch file differs from the old one."""
    new_name: str | None = None
    """The refreshed file's name when it differs (a subject edited while resolving)."""


@dataclass(frozen=True)
class RebaseTarget:
    """Where a rebase moves the stack from (the pin) and to: shared by its saved state and its report."""

    onto_ref: str
    onto_commit: str
    onto_source: str
    """The upstream source the target was taken from ("" when none has it)."""
    onto_url: str
    """The url the pin records after the rebase ("" in states saved before sources: the pin's own)."""
    pin_ref: str
    pin_commit: str
    pin_url: str
    relation: str
    relation_note: str

    def target_fields(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(RebaseTarget)}


@dataclass(frozen=True)
class RebaseReport(RebaseTarget):
    dry_run: bool
    state: str
    """finished, stopped (at a conflict), or for a dry run: would finish, would stop."""
    outcomes: tuple[PatchOutcome, ...]
    seconds: float
    workdir: str | None = None
    added: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    commands: int = 1
    """Commands of this rebase so far: `--onto`, then each `--continue` or `--skip`."""

    tool_seconds: float = 0.0
    """The tool's own time over all of them (``seconds`` is this command's)."""

    elapsed_seconds: float | None = None
    """Wall-clock time since `rebase --onto`: the tool's time plus a maintainer's resolving."""

    kind: str = "rebase"
    version: int = REPORT_VERSION

    @property
    def stopped_at(self) -> PatchOutcome | None:
        return next((o for o in self.outcomes if o.status is PatchStatus.CONFLICT), None)

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for outcome in self.outcomes:
            found[outcome.status.value] = found.get(outcome.status.value, 0) + 1
        return found


@dataclass(frozen=True)
class ScanRow:
    ref: str
    commit: str
    relation: str
    later: bool
    """Newer than the pin by ancestry, or for a diverged ref by build number or date."""
    statuses: tuple[PatchStatus, ...]
    upstreamed_in: tuple[UpstreamCommit | None, ...]
    seconds: float

    @property
    def first_conflict(self) -> int | None:
        """0-based index of the first conflicting patch."""
        return next((i for i, s in enumerate(self.statuses) if s is PatchStatus.CONFLICT), None)


@dataclass(frozen=True)
class ScanReport:
    pin_ref: str
    pin_commit: str
    patches: tuple[str, ...]
    rows: tuple[ScanRow, ...]
    seconds: float
    kind: str = "scan"
    version: int = REPORT_VERSION


# -- JSON -------------------------------------------------------------------

def as_data(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [as_data(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value


def outcome_from_data(data: dict[str, Any]) -> PatchOutcome:
    change = data.get("change")
    upstreamed = data.get("upstreamed_in")
    return PatchOutcome(
        index=int(data["index"]),
        name=data["name"],
        subject=data["subject"],
        files=tuple(data["files"]),
        status=PatchStatus(data["status"]),
        hunks=tuple(FailedHunk(h["file"], h["line"], h["header"]) for h in data.get("hunks", ())),
        conflicts=tuple(ConflictRegion(c["file"], c["start"], c["end"]) for c in data.get("conflicts", ())),
        upstreamed_in=UpstreamCommit(upstreamed["commit"], upstreamed["subject"]) if upstreamed else None,
        note=data.get("note", ""),
        change=PatchChange(ChangeKind(change["kind"]), tuple(change["aspects"])) if change else None,
        new_name=data.get("new_name"),
    )


def rebase_json(report: RebaseReport) -> str:
    data = as_data(report)
    data["patches"] = data.pop("outcomes")
    data["stopped_at"] = report.stopped_at.name if report.stopped_at else None
    data["counts"] = report.counts()
    return json.dumps(_kind_first(data), indent=2) + "\n"


def scan_json(report: ScanReport) -> str:
    data = as_data(report)
    for row, row_data in zip(report.rows, data["rows"]):
        first = row.first_conflict
        row_data["first_conflict"] = report.patches[first] if first is not None else None
    data["summary"] = scan_summary(report)
    return json.dumps(_kind_first(data), indent=2) + "\n"


def _kind_first(data: dict[str, Any]) -> dict[str, Any]:
    # A reader (or jq) sees what the file is before the details.
    return {"kind": data.pop("kind"), "version": data.pop("version"), **data}


# -- text -------------------------------------------------------------------

def _short(commit: str) -> str:
    return commit[:12]


def rebase_text(report: RebaseReport) -> str:
    mode = " (dry run: nothing was changed)" if report.dry_run else ""
    source = f" from the source {report.onto_source}" if report.onto_source else ""
    lines = [
        f"rebase of the patch stack onto {report.onto_ref} ({_short(report.onto_commit)}){source}{mode}",
        f"  from the pin {report.pin_ref} ({_short(report.pin_commit)})",
        f"  {report.relation_note}",
    ]
    lines += [f"  note: {note}" for note in report.notes]
    lines.append("")
    width = max((len(o.status.label) for o in report.outcomes), default=10)
    for outcome in report.outcomes:
        change = outcome.change.describe() if outcome.change else ""
        lines.append(f"{outcome.index:>3}. {outcome.status.label:<{width}}  {outcome.name}")
        if change:
            renamed = f" -> {outcome.new_name}" if outcome.new_name else ""
            lines.append(f"       patches/: {change}{renamed}")
        if outcome.upstreamed_in:
            lines.append(
                f"       upstream since {_short(outcome.upstreamed_in.commit)} \"{outcome.upstreamed_in.subject}\""
            )
        if outcome.status in (PatchStatus.CONFLICT, PatchStatus.THREE_WAY, PatchStatus.RESOLVED, PatchStatus.SKIPPED):
            for hunk in outcome.hunks:
                where = f" at line {hunk.line}" if hunk.line else ""
                lines.append(f"       hunk: {hunk.file}{where}" + (f": {hunk.header}" if hunk.header else ""))
        for region in outcome.conflicts:
            lines.append(f"       conflict: {region.file} lines {region.start}-{region.end}")
        if outcome.note:
            lines += [f"       {line}" for line in outcome.note.splitlines()]
    for name in report.added:
        lines.append(f"  +. added while resolving: {name}")
    counts = report.counts()
    summary = ", ".join(f"{count} {PatchStatus(status).label}" for status, count in counts.items())
    lines += ["", f"{report.state}: {summary} ({report.seconds:.1f} s)"]
    if report.commands > 1:
        lines.append(f"in all: {report.commands} commands, {report.tool_seconds:.1f} s in the tool"
                     + (f", {_duration(report.elapsed_seconds)} since `rebase --onto`"
                        if report.elapsed_seconds is not None else ""))
    changed = [o for o in report.outcomes if o.change and o.change.kind is ChangeKind.CONTENT]
    refreshed = [o for o in report.outcomes if o.change and o.change.kind is ChangeKind.CONTEXT]
    if report.state in ("finished", "would finish"):
        lines.append(
            f"patches/: {len(changed)} with changed content (review these), "
            f"{len(refreshed)} refreshed context only, "
            f"{sum(1 for o in report.outcomes if o.status in (PatchStatus.EMPTY, PatchStatus.SKIPPED))} dropped"
        )
    if report.state == "finished":
        lines.append(f"pin: {report.onto_ref} = {report.onto_commit}" + (f" in {report.onto_url}" if report.onto_url else ""))
    stopped = report.stopped_at
    if stopped and not report.dry_run:
        lines.append(
            f"next: resolve the conflicts in {report.workdir}, `git add` the files, then "
            "`hiraishin rebase --continue` (or `--skip` to drop this patch, `--abort` to restore everything)"
        )
    elif stopped:
        conflicts = [o.name for o in report.outcomes if o.status is PatchStatus.CONFLICT]
        lines.append(
            f"a rebase would stop at {stopped.name}; patches after a conflict were tried with it left out "
            f"({len(conflicts)} conflict(s) in all)"
        )
    return "\n".join(lines) + "\n"


def scan_summary(report: ScanReport) -> list[str]:
    """The answer to "from which tag does the stack stop applying, and which patch breaks first"."""
    lines: list[str] = []
    pin_rows = [row for row in report.rows if row.relation == "same"]
    newer = [row for row in report.rows if row.later]
    older = [row for row in report.rows if not row.later and row.relation != "same"][::-1]
    for side, rows in (("newer", newer), ("older", older)):
        if not rows:
            continue
        # Walking away from the pin; the pin's own row, if scanned, is where both walks start.
        good = pin_rows[0] if pin_rows and pin_rows[0].first_conflict is None else None
        for row in rows:
            first = row.first_conflict
            if first is None:
                good = row
                continue
            reached = f"applies up to {good.ref}; " if good else ""
            lines.append(
                f"{side} than the pin: {reached}stops applying at {row.ref}, "
                f"first at patch {first + 1} ({report.patches[first]})"
            )
            break
        else:
            lines.append(f"{side} than the pin: the stack applies on all {len(rows)} ref(s) scanned")
    return lines


def scan_text(report: ScanReport) -> str:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("upstream ref")
    table.add_column("commit")
    table.add_column("vs pin")
    for number in range(1, len(report.patches) + 1):
        table.add_column(f"#{number}", justify="center")
    table.add_column("first conflict")
    for row in report.rows:
        first = row.first_conflict
        table.add_row(
            row.ref, _short(row.commit), row.relation + ("" if row.relation != "diverged" else (", later" if row.later else ", earlier")),
            *(_STATUS_CELLS[status] for status in row.statuses),
            f"#{first + 1}" if first is not None else "-",
        )
    buffer = io.StringIO()
    # As wide as the table is: a stack of many patches gets a wide table, never one with its cells cut short.
    Console(file=buffer, width=1 << 20, color_system=None, force_terminal=False, highlight=False).print(table)
    count = f"{len(report.patches)} patch{'' if len(report.patches) == 1 else 'es'}"
    lines = [f"compatibility of the stack ({count}) with {len(report.rows)} upstream ref(s); "
             f"pin {report.pin_ref} ({_short(report.pin_commit)})", ""]
    lines += [line.rstrip() for line in buffer.getvalue().splitlines()]
    lines += ["", "patches:"]
    lines += [f"  #{number}  {name}" for number, name in enumerate(report.patches, start=1)]
    empties = [
        (row.ref, report.patches[i], commit)
        for row in report.rows for i, commit in enumerate(row.upstreamed_in) if commit is not None
    ]
    for ref, name, commit in empties:
        lines.append(f"  on {ref}, {name} is already upstream since {_short(commit.commit)} \"{commit.subject}\"")
    lines += [
        "",
        "statuses: clean, offset (applies as written at other line numbers), 3-way (needs git's three-way merge), "
        "CONFLICT, empty (already upstream). After a conflict the later patches are tried with the conflicting one "
        "left out, so a column shows each patch's own fate.",
        "",
        *scan_summary(report),
        f"({report.seconds:.1f} s)",
    ]
    return "\n".join(lines) + "\n"


def _duration(seconds: float) -> str:
    """4.2 -> '4 s', 2280 -> '38 min', 5400 -> '1.5 h'."""
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def write(base: Path, text: str, data: str) -> tuple[Path, Path]:
    """Write ``base``.txt and ``base``.json; return both paths."""
    text_path, json_path = base.with_suffix(".txt"), base.with_suffix(".json")
    atomic_write_text(text_path, text)
    atomic_write_text(json_path, data)
    return text_path, json_path
