"""The rebase and scan reports, text and JSON, from values made here (no git, no rebase)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from hiraishin_build.report import (
    REPORT_VERSION,
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
    rebase_json,
    rebase_text,
    scan_json,
    scan_summary,
    scan_text,
    write,
)
from hiraishin_build.stack import FailedHunk

S = PatchStatus
A, B, C = "a" * 40, "b" * 40, "c" * 40
TARGET = dict(onto_ref="b102", onto_commit=A, onto_source="", onto_url="", pin_ref="b100", pin_commit=B,
              pin_url="https://example.invalid/llama.git", relation="newer",
              relation_note="b102 is newer than the pin (2 commits on)")
FORK = {**TARGET, "onto_source": "someone-fork", "onto_url": "https://example.invalid/fork.git"}


def test_statuses_their_labels_and_which_are_in_the_stack() -> None:
    assert {s.value: s.label for s in PatchStatus} == {
        "pending": "not tried", "clean": "clean", "offset": "applied with offset", "three-way": "merged three-way",
        "conflict": "CONFLICT", "resolved": "conflict resolved by hand", "skipped": "skipped (dropped)",
        "empty": "empty: already upstream (dropped)",
    }
    assert [s for s in PatchStatus if s.in_stack] == [S.CLEAN, S.OFFSET, S.THREE_WAY, S.RESOLVED]
    assert [k.value for k in ChangeKind] == ["identical", "context", "content", "dropped", "added"]
    assert REPORT_VERSION == 1


@pytest.mark.parametrize(("change", "text"), [
    (PatchChange(ChangeKind.IDENTICAL), "unchanged"),
    (PatchChange(ChangeKind.CONTEXT, ("line numbers", "index lines")), "refreshed, context only (line numbers, index lines)"),
    (PatchChange(ChangeKind.CONTENT, ("changed lines",)), "CONTENT CHANGED (changed lines)"),
    (PatchChange(ChangeKind.DROPPED), "removed"),
    (PatchChange(ChangeKind.ADDED), "new"),
])
def test_a_change_described(change: PatchChange, text: str) -> None:
    assert change.describe() == text


def test_defaults_and_immutability() -> None:
    outcome = PatchOutcome(1, "one.patch", "s", ("a.c",))
    assert (outcome.status, outcome.hunks, outcome.conflicts, outcome.upstreamed_in, outcome.note, outcome.change,
            outcome.new_name) == (S.PENDING, (), (), None, "", None, None)
    assert PatchChange(ChangeKind.ADDED).aspects == ()
    report = RebaseReport(**TARGET, dry_run=False, state="finished", outcomes=(outcome,), seconds=1.0)
    assert (report.workdir, report.added, report.notes, report.commands, report.tool_seconds, report.elapsed_seconds,
            report.kind, report.version) == (None, (), (), 1, 0.0, None, "rebase", 1)
    scan = ScanReport("b100", B, (), (), 0.0)
    assert (scan.kind, scan.version) == ("scan", 1)
    for value in (outcome, report, scan, PatchChange(ChangeKind.ADDED), ConflictRegion("f", 1, 2),
                  UpstreamCommit(A, "s"), ScanRow("r", A, "newer", True, (), (), 0.0)):
        field = dataclasses.fields(value)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, None)


def test_target_fields_are_the_targets_own() -> None:
    report = RebaseReport(**TARGET, dry_run=True, state="would finish", outcomes=(), seconds=0.0)
    assert report.target_fields() == TARGET
    assert RebaseTarget(**TARGET).target_fields() == TARGET


def test_stopped_at_and_counts() -> None:
    outcomes = (PatchOutcome(1, "one.patch", "s", (), S.CLEAN), PatchOutcome(2, "two.patch", "s", (), S.CONFLICT),
                PatchOutcome(3, "three.patch", "s", (), S.CONFLICT), PatchOutcome(4, "four.patch", "s", (), S.CLEAN))
    report = RebaseReport(**TARGET, dry_run=True, state="would stop", outcomes=outcomes, seconds=0.0)
    assert report.stopped_at is outcomes[1]
    assert report.counts() == {"clean": 2, "conflict": 2}
    assert list(report.counts()) == ["clean", "conflict"]  # in the order first met
    assert RebaseReport(**TARGET, dry_run=True, state="would finish", outcomes=outcomes[:1], seconds=0).stopped_at is None


FULL = PatchOutcome(
    3, "three.patch", "ggml: three", ("d.c", "e.h"), S.THREE_WAY,
    hunks=(FailedHunk("d.c", 12, "int f()"), FailedHunk("d.c", None, None)),
    conflicts=(ConflictRegion("d.c", 10, 16),), upstreamed_in=UpstreamCommit(C, "up: three"), note="a note",
    change=PatchChange(ChangeKind.CONTENT, ("changed lines", "message")), new_name="three-b.patch")


def test_an_outcome_as_data_and_back() -> None:
    data = as_data(FULL)
    assert data == {
        "index": 3, "name": "three.patch", "subject": "ggml: three", "files": ["d.c", "e.h"], "status": "three-way",
        "hunks": [{"file": "d.c", "line": 12, "header": "int f()"}, {"file": "d.c", "line": None, "header": None}],
        "conflicts": [{"file": "d.c", "start": 10, "end": 16}],
        "upstreamed_in": {"commit": C, "subject": "up: three"}, "note": "a note",
        "change": {"kind": "content", "aspects": ["changed lines", "message"]}, "new_name": "three-b.patch",
    }
    assert outcome_from_data(json.loads(json.dumps(data))) == FULL
    # What a state saved by an older version may leave out takes the defaults.
    assert outcome_from_data({"index": "2", "name": "two.patch", "subject": "s", "files": ["a.c"],
                              "status": "clean"}) == PatchOutcome(2, "two.patch", "s", ("a.c",), S.CLEAN)
    assert as_data(Path("/x/y")) == "/x/y" and as_data(PatchOutcome) is PatchOutcome and as_data((1, [2])) == [1, [2]]


FINISHED_OUTCOMES = (
    PatchOutcome(1, "one.patch", "ggml: one", ("a.c",), S.CLEAN, change=PatchChange(ChangeKind.IDENTICAL)),
    # An offset patch's hunks (found by the plain attempt) are not listed: it applied as written.
    PatchOutcome(2, "two.patch", "ggml: two", ("b.c", "c.c"), S.OFFSET, hunks=(FailedHunk("b.c", 4, None),),
                 change=PatchChange(ChangeKind.CONTEXT, ("line numbers", "index lines"))),
    PatchOutcome(3, "three.patch", "ggml: three", ("d.c",), S.THREE_WAY,
                 hunks=(FailedHunk("d.c", 12, "int f()"), FailedHunk("d.c", None, None)),
                 change=PatchChange(ChangeKind.CONTENT, ("changed lines",)), new_name="three-b.patch"),
    PatchOutcome(4, "four.patch", "ggml: four", ("e.c",), S.EMPTY,
                 upstreamed_in=UpstreamCommit(C, "ggml: four, upstream"), change=PatchChange(ChangeKind.DROPPED)),
    PatchOutcome(5, "five.patch", "ggml: five", ("f.c",), S.SKIPPED, hunks=(FailedHunk("f.c", 9, None),),
                 note="dropped with --skip", change=PatchChange(ChangeKind.DROPPED)),
)


def test_a_finished_rebase_in_text() -> None:
    report = RebaseReport(**TARGET, dry_run=False, state="finished", outcomes=FINISHED_OUTCOMES, seconds=3.26,
                          notes=("a note", "another"), added=("six.patch",), commands=3, tool_seconds=7.54,
                          elapsed_seconds=2280.0)
    assert rebase_text(report) == """\
rebase of the patch stack onto b102 (aaaaaaaaaaaa)
  from the pin b100 (bbbbbbbbbbbb)
  b102 is newer than the pin (2 commits on)
  note: a note
  note: another

  1. clean                              one.patch
       patches/: unchanged
  2. applied with offset                two.patch
       patches/: refreshed, context only (line numbers, index lines)
  3. merged three-way                   three.patch
       patches/: CONTENT CHANGED (changed lines) -> three-b.patch
       hunk: d.c at line 12: int f()
       hunk: d.c
  4. empty: already upstream (dropped)  four.patch
       patches/: removed
       upstream since cccccccccccc "ggml: four, upstream"
  5. skipped (dropped)                  five.patch
       patches/: removed
       hunk: f.c at line 9
       dropped with --skip
  +. added while resolving: six.patch

finished: 1 clean, 1 applied with offset, 1 merged three-way, 1 empty: already upstream (dropped), 1 skipped (dropped) (3.3 s)
in all: 3 commands, 7.5 s in the tool, 38 min since `rebase --onto`
patches/: 1 with changed content (review these), 1 refreshed context only, 2 dropped
pin: b102 = aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
"""


def test_a_rebase_stopped_at_a_conflict_in_text() -> None:
    outcomes = (
        PatchOutcome(1, "one.patch", "s1", ("a.c",), S.RESOLVED, hunks=(FailedHunk("a.c", 3, None),),
                     note="resolved by hand\nsecond line"),
        PatchOutcome(2, "two.patch", "s2", ("b.c",), S.CONFLICT, hunks=(FailedHunk("b.c", None, "void g()"),),
                     conflicts=(ConflictRegion("b.c", 10, 16), ConflictRegion("c.h", 1, 5))),
        PatchOutcome(3, "three.patch", "s3", ("c.c",)),
    )
    report = RebaseReport(**FORK, dry_run=False, state="stopped", outcomes=outcomes, seconds=1.0,
                          workdir="/w/llama.cpp", commands=2, tool_seconds=4.0)
    assert rebase_text(report) == """\
rebase of the patch stack onto b102 (aaaaaaaaaaaa) from the source someone-fork
  from the pin b100 (bbbbbbbbbbbb)
  b102 is newer than the pin (2 commits on)

  1. conflict resolved by hand  one.patch
       hunk: a.c at line 3
       resolved by hand
       second line
  2. CONFLICT                   two.patch
       hunk: b.c: void g()
       conflict: b.c lines 10-16
       conflict: c.h lines 1-5
  3. not tried                  three.patch

stopped: 1 conflict resolved by hand, 1 CONFLICT, 1 not tried (1.0 s)
in all: 2 commands, 4.0 s in the tool
next: resolve the conflicts in /w/llama.cpp, `git add` the files, then `hiraishin rebase --continue` (or `--skip` \
to drop this patch, `--abort` to restore everything)
"""


def test_dry_runs_in_text() -> None:
    outcomes = (PatchOutcome(1, "one.patch", "s1", ("a.c",), S.CLEAN),
                PatchOutcome(2, "two.patch", "s2", ("b.c",), S.CONFLICT),
                PatchOutcome(3, "three.patch", "s3", ("c.c",), S.CONFLICT))
    stop = RebaseReport(**FORK, dry_run=True, state="would stop", outcomes=outcomes, seconds=0.04)
    assert rebase_text(stop) == """\
rebase of the patch stack onto b102 (aaaaaaaaaaaa) from the source someone-fork (dry run: nothing was changed)
  from the pin b100 (bbbbbbbbbbbb)
  b102 is newer than the pin (2 commits on)

  1. clean     one.patch
  2. CONFLICT  two.patch
  3. CONFLICT  three.patch

would stop: 1 clean, 2 CONFLICT (0.0 s)
a rebase would stop at two.patch; patches after a conflict were tried with it left out (2 conflict(s) in all)
"""
    finish = RebaseReport(**TARGET, dry_run=True, state="would finish", outcomes=outcomes[:1], seconds=0.5)
    assert rebase_text(finish).splitlines()[-2:] == [
        "would finish: 1 clean (0.5 s)",
        "patches/: 0 with changed content (review these), 0 refreshed context only, 0 dropped",
    ]


def test_where_the_pin_moves_and_how_long_it_all_took() -> None:
    one = (PatchOutcome(1, "one.patch", "s1", ("a.c",), S.CLEAN),)
    to_fork = RebaseReport(**FORK, dry_run=False, state="finished", outcomes=one, seconds=0.5)
    assert rebase_text(to_fork).splitlines()[-1] == f"pin: b102 = {A} in https://example.invalid/fork.git"
    assert "in all:" not in rebase_text(to_fork)  # one command: nothing to add up
    for elapsed, said in ((59.4, "59 s"), (60.0, "1 min"), (3599.0, "60 min"), (3600.0, "1.0 h"), (5400.0, "1.5 h")):
        report = dataclasses.replace(to_fork, commands=2, tool_seconds=1.25, elapsed_seconds=elapsed)
        assert f"in all: 2 commands, 1.2 s in the tool, {said} since `rebase --onto`" in rebase_text(report)


def test_a_rebase_in_json() -> None:
    report = RebaseReport(**TARGET, dry_run=True, state="would stop", outcomes=(FINISHED_OUTCOMES[0], FULL,
                          PatchOutcome(4, "four.patch", "s", (), S.CONFLICT)), seconds=3.25, workdir="/w",
                          notes=("n",), commands=2, tool_seconds=5.0, elapsed_seconds=9.0)
    text = rebase_json(report)
    data = json.loads(text)
    assert list(data)[:2] == ["kind", "version"] and text.endswith("}\n")
    assert text.splitlines()[1] == '  "kind": "rebase",'
    assert data == {
        "kind": "rebase", "version": 1, **TARGET, "dry_run": True, "state": "would stop", "seconds": 3.25,
        "workdir": "/w", "added": [], "notes": ["n"], "commands": 2, "tool_seconds": 5.0, "elapsed_seconds": 9.0,
        "patches": [as_data(o) for o in report.outcomes], "stopped_at": "four.patch",
        "counts": {"clean": 1, "three-way": 1, "conflict": 1},
    }
    assert "outcomes" not in data
    assert json.loads(rebase_json(dataclasses.replace(report, outcomes=report.outcomes[:2])))["stopped_at"] is None


# Oldest first, as rebase.scan orders its rows.
SCAN = ScanReport("b100", B, ("one.patch", "two.patch", "three.patch"), (
    ScanRow("x-1", "5" * 40, "diverged", False, (S.RESOLVED, S.SKIPPED, S.CONFLICT), (None, None, None), 0.1),
    ScanRow("b099", "1" * 40, "older", False, (S.CLEAN, S.OFFSET, S.CLEAN), (None, None, None), 0.1),
    ScanRow("b100", B, "same", False, (S.CLEAN, S.CLEAN, S.CLEAN), (None, None, None), 0.1),
    ScanRow("b101", "2" * 40, "newer", True, (S.THREE_WAY, S.CLEAN, S.EMPTY),
            (None, None, UpstreamCommit("3" * 40, "up: three")), 0.1),
    ScanRow("b102", "4" * 40, "diverged", True, (S.CLEAN, S.CONFLICT, S.PENDING), (None, None, None), 0.1),
), 2.345)
STATUSES = ("statuses: clean, offset (applies as written at other line numbers), 3-way (needs git's three-way merge), "
            "CONFLICT, empty (already upstream). After a conflict the later patches are tried with the conflicting one "
            "left out, so a column shows each patch's own fate.")


def test_a_scan_in_text() -> None:
    lines = scan_text(SCAN).split("\n")
    assert lines[:2] == ["compatibility of the stack (3 patches) with 5 upstream ref(s); pin b100 (bbbbbbbbbbbb)", ""]
    cells = [re.split(r"\s{2,}", line.strip()) for line in lines[2:9]]
    assert cells == [
        ["upstream ref", "commit", "vs pin", "#1", "#2", "#3", "first conflict"],
        ["─" * len(lines[3])],
        ["x-1", "555555555555", "diverged, earlier", "resolved", "skipped", "CONFLICT", "#3"],
        ["b099", "111111111111", "older", "clean", "offset", "clean", "-"],
        ["b100", "bbbbbbbbbbbb", "same", "clean", "clean", "clean", "-"],
        ["b101", "222222222222", "newer", "3-way", "clean", "empty", "-"],
        ["b102", "444444444444", "diverged, later", "clean", "CONFLICT", "-", "#2"],
    ]
    assert all(line == line.rstrip() for line in lines)
    assert lines[9:] == [
        "", "patches:", "  #1  one.patch", "  #2  two.patch", "  #3  three.patch",
        '  on b101, three.patch is already upstream since 333333333333 "up: three"', "", STATUSES, "",
        "newer than the pin: applies up to b101; stops applying at b102, first at patch 2 (two.patch)",
        "older than the pin: applies up to b099; stops applying at x-1, first at patch 3 (three.patch)",
        "(2.3 s)", "",
    ]


def test_a_scan_of_one_patch_on_one_ref() -> None:
    one = ScanReport("b100", B, ("one.patch",), (ScanRow("b101", "2" * 40, "newer", True, (S.CLEAN,), (None,), 0.1),),
                     0.5)
    text = scan_text(one)
    assert text.startswith("compatibility of the stack (1 patch) with 1 upstream ref(s); pin b100 (bbbbbbbbbbbb)\n")
    assert text.endswith(f"\n{STATUSES}\n\nnewer than the pin: the stack applies on all 1 ref(s) scanned\n(0.5 s)\n")


def test_a_scan_in_json() -> None:
    text = scan_json(SCAN)
    data = json.loads(text)
    assert list(data)[:2] == ["kind", "version"] and text.splitlines()[1] == '  "kind": "scan",'
    assert [row["first_conflict"] for row in data["rows"]] == ["three.patch", None, None, None, "two.patch"]
    assert data["rows"][3]["upstreamed_in"] == [None, None, {"commit": "3" * 40, "subject": "up: three"}]
    assert data["rows"][0] == {"ref": "x-1", "commit": "5" * 40, "relation": "diverged", "later": False,
                               "statuses": ["resolved", "skipped", "conflict"], "upstreamed_in": [None, None, None],
                               "seconds": 0.1, "first_conflict": "three.patch"}
    assert data["summary"] == scan_summary(SCAN)
    assert {key: data[key] for key in ("kind", "version", "pin_ref", "pin_commit", "patches", "seconds")} == {
        "kind": "scan", "version": 1, "pin_ref": "b100", "pin_commit": B,
        "patches": ["one.patch", "two.patch", "three.patch"], "seconds": 2.345}


def _row(ref: str, relation: str, later: bool, *statuses: PatchStatus) -> ScanRow:
    return ScanRow(ref, "0" * 40, relation, later, statuses, (None,) * len(statuses), 0.0)


def test_scan_summaries() -> None:
    def summary(*rows: ScanRow) -> list[str]:
        return scan_summary(ScanReport("b100", B, ("one.patch", "two.patch"), rows, 0.0))

    # No row applies before the first conflict: nothing to say it applies up to.
    assert summary(_row("b101", "newer", True, S.CONFLICT, S.CLEAN)) == [
        "newer than the pin: stops applying at b101, first at patch 1 (one.patch)"]
    # The pin's own row is where the walk starts, when it applies.
    assert summary(_row("b100", "same", False, S.CLEAN, S.CLEAN), _row("b101", "newer", True, S.CLEAN, S.CONFLICT)) == [
        "newer than the pin: applies up to b100; stops applying at b101, first at patch 2 (two.patch)"]
    assert summary(_row("b100", "same", False, S.CONFLICT, S.CLEAN), _row("b101", "newer", True, S.CLEAN, S.CONFLICT)) == [
        "newer than the pin: stops applying at b101, first at patch 2 (two.patch)"]
    # The first conflict on each side, walking away from the pin; the pin row alone says nothing.
    assert summary(_row("b098", "older", False, S.CONFLICT, S.CLEAN), _row("b099", "older", False, S.CLEAN, S.CLEAN),
                   _row("b100", "same", False, S.CLEAN, S.CLEAN), _row("b101", "newer", True, S.CLEAN, S.CLEAN),
                   _row("b102", "newer", True, S.CLEAN, S.CONFLICT), _row("b103", "newer", True, S.CONFLICT, S.CLEAN)) == [
        "newer than the pin: applies up to b101; stops applying at b102, first at patch 2 (two.patch)",
        "older than the pin: applies up to b099; stops applying at b098, first at patch 1 (one.patch)",
    ]
    assert summary(_row("b099", "older", False, S.CLEAN, S.CLEAN), _row("b098", "older", False, S.CLEAN, S.EMPTY)) == [
        "older than the pin: the stack applies on all 2 ref(s) scanned"]
    assert summary(_row("b100", "same", False, S.CONFLICT, S.CONFLICT)) == []


def test_write_puts_text_and_json_side_by_side(tmp_path: Path) -> None:
    written = write(tmp_path / "rebase-report", "text\n", "{}\n")
    assert written == (tmp_path / "rebase-report.txt", tmp_path / "rebase-report.json")
    assert (written[0].read_text(), written[1].read_text()) == ("text\n", "{}\n")


def test_a_scan_table_laid_out_exactly() -> None:
    # Flush left, two spaces between columns, the status columns centred under their number.
    report = ScanReport("b100", B, ("one.patch",), (
        ScanRow("b101", "2" * 40, "newer", True, (S.CONFLICT,), (None,), 0.1),
        ScanRow("b102", "3" * 40, "newer", True, (S.PENDING,), (None,), 0.1)), 0.5)
    assert scan_text(report).splitlines()[2:6] == [
        "upstream ref   commit         vs pin      #1      first conflict",
        "─" * 64,
        "b101           222222222222   newer    CONFLICT   #1",
        "b102           333333333333   newer       -       -",
    ]


def test_a_wide_scan_table_is_never_cut() -> None:
    names = tuple(f"patch-{number}.patch" for number in range(40))
    report = ScanReport("b100", B, names, (ScanRow("b101", "2" * 40, "newer", True, (S.THREE_WAY,) * 40,
                                                   (None,) * 40, 0.1),), 0.5)
    lines = scan_text(report).splitlines()
    cells = [re.split(r"\s{2,}", line.strip()) for line in lines[2:lines.index("patches:") - 1]]
    assert cells[0] == ["upstream ref", "commit", "vs pin", *(f"#{n}" for n in range(1, 41)), "first conflict"]
    assert cells[2] == ["b101", "222222222222", "newer", *["3-way"] * 40, "-"]
    assert len(cells) == 3 and "…" not in scan_text(report)


def test_hours_are_seconds_over_3600() -> None:
    from hiraishin_build.report import _duration

    # 7381 s is 2.0503 h: "2.1 h" (over 3601 it would be 2.0497, "2.0 h").
    assert [_duration(s) for s in (7381.0, 4.4, 4.6, 89.0, 91.0)] == ["2.1 h", "4 s", "5 s", "1 min", "2 min"]
