"""The curation check: a patch that rewrites lines an earlier patch added is reported."""

from __future__ import annotations

import pytest

from hiraishin_build.curation import Rewrite, find_rewrites, removed_ranges
from hiraishin_build.errors import CheckFailed
from hiraishin_build.stack import check_stack, export_stack

from ..conftest import StackProject, commit_in_workdir, sh_git

COMMON = "ggml/src/ggml-cuda/common.cuh"
MMVQ = "ggml/src/ggml-cuda/mmvq.cu"


def stack_commits(stack: StackProject) -> list[str]:
    return sh_git(stack.workdir, "rev-list", "--reverse", f"{stack.upstream.commit}..HEAD").splitlines()


def test_removed_ranges_reads_old_line_numbers_and_skips_insertions_and_new_files() -> None:
    diff = "\n".join([
        "diff --git a/x.c b/x.c", "--- a/x.c", "+++ b/x.c",
        "@@ -3,2 +3 @@ ctx", "-a", "-b", "+c",
        "@@ -9 +8,0 @@", "-d",
        "@@ -20,0 +19,4 @@", "+e", "+f", "+g", "+h",
        "diff --git a/new.c b/new.c", "new file mode 100644", "--- /dev/null", "+++ b/new.c",
        "@@ -0,0 +1,2 @@", "+x", "+y",
    ])
    assert removed_ranges(diff) == [("x.c", 3, 2), ("x.c", 9, 1)]


def test_a_curated_stack_has_no_rewrites(stack_project: StackProject) -> None:
    # the fixture's two patches change different files' upstream lines only
    commits = stack_commits(stack_project)
    assert find_rewrites(stack_project.workdir, stack_project.upstream.commit, commits, ["p1", "p2"]) == []
    check_stack(stack_project.project, stack_project.cache)


def test_a_patch_changing_lines_an_earlier_patch_added_is_named_with_the_lines(stack_project: StackProject) -> None:
    workdir = stack_project.workdir
    common = (workdir / COMMON).read_text()
    assert common.endswith("bool batch_invariant();\n")
    commit_in_workdir(workdir, COMMON, common.replace("bool batch_invariant();\n", "bool batch_invariant(void);\n"),
                      "common: the switch takes no arguments")
    commits = stack_commits(stack_project)
    names = ["mmvq.patch", "switch.patch", "fixup.patch"]
    rewrites = find_rewrites(workdir, stack_project.upstream.commit, commits, names)
    line = common.count("\n")  # the declaration is the file's last line
    assert rewrites == [Rewrite("fixup.patch", "switch.patch", COMMON, (line,))]
    assert str(rewrites[0]) == (f"fixup.patch rewrites 1 line(s) that switch.patch added: {COMMON}:{line}; "
                                "fold the change into switch.patch")


def test_a_patch_changing_only_upstream_lines_or_adding_beside_an_earlier_patch_is_no_rewrite(
        stack_project: StackProject) -> None:
    workdir = stack_project.workdir
    common = (workdir / COMMON).read_text()
    # an insertion right after the earlier patch's line, and a change of an upstream line
    first_line = common.splitlines(keepends=True)[0]
    changed = common.replace(first_line, first_line.rstrip("\n") + " // changed\n", 1) + "bool another();\n"
    commit_in_workdir(workdir, COMMON, changed, "common: beside the switch")
    commits = stack_commits(stack_project)
    assert find_rewrites(workdir, stack_project.upstream.commit, commits, ["a", "b", "c"]) == []


def test_check_fails_on_a_fixup_patch_and_names_the_patch_to_fold_it_into(stack_project: StackProject) -> None:
    workdir = stack_project.workdir
    mmvq = (workdir / MMVQ).read_text()
    assert "// block 20, batch-invariant\n" in mmvq
    commit_in_workdir(workdir, MMVQ, mmvq.replace("// block 20, batch-invariant\n", "// block 20, exact\n"),
                      "mmvq: say exact")
    export_stack(stack_project.project, workdir)
    with pytest.raises(CheckFailed) as raised:
        check_stack(stack_project.project, stack_project.cache)
    message = raised.value.message
    assert "mmvq-say-exact.patch rewrites 1 line(s) that mmvq-batch-invariant-block-20.patch added" in message
    assert f"{MMVQ}:" in message
