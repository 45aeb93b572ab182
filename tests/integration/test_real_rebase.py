"""Rebase of the real stack on the real upstream, from the local cache.

Skips, saying why, where the cache lacks the pin or the older release tag
these tests move to (run `hiraishin upstream fetch` to enable them).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from hiraishin_build import rebase
from hiraishin_build.cache import UpstreamCache
from hiraishin_build.project import Project
from hiraishin_build.report import ChangeKind, PatchStatus
from hiraishin_build.stack import apply_stack

REPO_ROOT = Path(__file__).resolve().parents[2]
# An older release tag of the base on which the whole stack still applies.
OLDER = "feature-turboquant-kv-cache-b9075-4f33166"
# Older still: its vector flash-attention kernel predates the turbo V loops the
# turbo patch rewrites, so that patch conflicts there and the rest applies.
OLDEST = "feature-turboquant-kv-cache-b8983-9e3fb40"
REQUIRED_REFS = (OLDER, OLDEST)
TURBO_PATCH = "ggml-cuda-turbo-v-loops-over-every-4-element-group-a-thread.patch"

pytestmark = pytest.mark.integration


@pytest.fixture
def project(tmp_path: Path) -> Project:
    project = Project(tmp_path / "project")
    shutil.copytree(REPO_ROOT / "recipes", project.root / "recipes")
    shutil.copytree(REPO_ROOT / "patches", project.patches_dir)
    return project


def test_dry_run_onto_an_older_tag(real_cache: UpstreamCache) -> None:
    started = time.monotonic()
    report = rebase.dry_run(Project(REPO_ROOT), real_cache, OLDER)
    elapsed = time.monotonic() - started
    assert report.relation == "older" and report.stopped_at is None
    assert all(o.status in (PatchStatus.CLEAN, PatchStatus.OFFSET) for o in report.outcomes)
    assert all(o.change is not None and o.change.kind in (ChangeKind.IDENTICAL, ChangeKind.CONTEXT)
               for o in report.outcomes)
    assert elapsed < 20, f"a dry run took {elapsed:.1f} s"


def test_dry_run_names_the_patch_that_conflicts_on_a_much_older_tag(real_cache: UpstreamCache) -> None:
    report = rebase.dry_run(Project(REPO_ROOT), real_cache, OLDEST)
    conflicting = [o for o in report.outcomes if o.status is PatchStatus.CONFLICT]
    assert [o.name for o in conflicting] == [TURBO_PATCH]
    assert {hunk.file for hunk in conflicting[0].hunks} == {"ggml/src/ggml-cuda/fattn-vec.cuh"}
    # after a conflict the dry run goes on without it, so every other patch has its own verdict
    assert all(o.status in (PatchStatus.CLEAN, PatchStatus.OFFSET, PatchStatus.THREE_WAY)
               for o in report.outcomes if o.name != TURBO_PATCH)


def test_rebase_there_and_back_is_byte_identical(real_cache: UpstreamCache, project: Project) -> None:
    before = {p.name: p.read_bytes() for p in project.patches_dir.iterdir()}
    pin_before = project.pin_file.read_bytes()
    apply_stack(project, real_cache, project.default_workdir)
    there = rebase.start(project, real_cache, OLDER, project.default_workdir)
    assert there.state == "finished" and project.pin().ref == OLDER
    back = rebase.start(project, real_cache, Project(REPO_ROOT).pin().ref, project.default_workdir)
    assert back.state == "finished"
    assert {p.name: p.read_bytes() for p in project.patches_dir.iterdir()} == before
    assert project.pin_file.read_bytes() == pin_before
