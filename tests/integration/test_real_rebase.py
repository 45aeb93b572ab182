"""Rebase of the real stack on the real upstream, from the local cache.

Skips, saying why, where the cache lacks the pin or the release tags these
tests move to (run `hiraishin upstream fetch` from the pin's repository to
enable them).
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
# The previous pin (b10354, 46 commits before b10018-1.2.0), on which the whole stack applies.
PREVIOUS = "feature-turboquant-kv-cache-b10354-066cc29"
# An older release: it predates ggml_cuda_should_use_mmvq, the server's per-slot
# drafting, the new test-backend-ops cases and the draft context's output limit,
# so the patches that change those lines conflict there.
OLDER = "feature-turboquant-kv-cache-b9964-519f0c5"
CONFLICTING_ON_OLDER = [
    # mmvq.cu before ggml_cuda_should_use_mmvq: the mat-vec dispatch these change reads differently there
    "ggml-cuda-batch-invariant-mmvq-up-to-16-columns.patch",
    "ggml-cuda-batch-invariant-k-quant-and-q8-0-mat-vec-on-tensor.patch",
    "ggml-cuda-batch-invariant-mul-mat-id-and-top-k-moe-routing.patch",
    # the TQ weight dispatch of ggml_cuda_mul_mat is written differently there (one else-if chain)
    "ggml-cuda-batch-invariant-f16-bf16-and-tq3-1s-products.patch",
    # the flash-attention dispatch of ops.cpp it changes reads differently there
    "ggml-cpu-batch-invariant-mul-mat-and-flash-attention.patch",
    # the fused gated delta net flags and the lines before llama_context's constructor read differently there
    "llama-a-gated-delta-net-batch-as-one-token-steps-in-batch-in.patch",
    "llama-kv-cells-in-position-order-and-ubatch-cuts-in-batch-in.patch",
    # no per-slot drafting in the server, no output limit in the draft context
    "speculative-server-verify-batches-in-one-256-cell-kv-window.patch",
    # its cases sit next to test-backend-ops cases that release does not have
    "tests-batch-invariance-cases-in-test-backend-ops.patch",
]
REQUIRED_REFS = (PREVIOUS, OLDER)

pytestmark = pytest.mark.integration


@pytest.fixture
def project(tmp_path: Path) -> Project:
    project = Project(tmp_path / "project")
    shutil.copytree(REPO_ROOT / "recipes", project.root / "recipes")
    shutil.copytree(REPO_ROOT / "patches", project.patches_dir)
    return project


def test_dry_run_onto_the_previous_pin(real_cache: UpstreamCache) -> None:
    started = time.monotonic()
    report = rebase.dry_run(Project(REPO_ROOT), real_cache, PREVIOUS)
    elapsed = time.monotonic() - started
    assert report.relation == "older" and report.stopped_at is None
    assert all(o.status in (PatchStatus.CLEAN, PatchStatus.OFFSET) for o in report.outcomes)
    assert all(o.change is not None and o.change.kind in (ChangeKind.IDENTICAL, ChangeKind.CONTEXT)
               for o in report.outcomes)
    assert elapsed < 20, f"a dry run took {elapsed:.1f} s"


def test_dry_run_names_the_patches_that_conflict_on_an_older_tag(real_cache: UpstreamCache) -> None:
    report = rebase.dry_run(Project(REPO_ROOT), real_cache, OLDER)
    assert report.relation == "older"
    conflicting = [o for o in report.outcomes if o.status is PatchStatus.CONFLICT]
    assert [o.name for o in conflicting] == CONFLICTING_ON_OLDER
    assert {hunk.file for hunk in conflicting[0].hunks} >= {"ggml/src/ggml-cuda/mmvq.cu"}
    # after a conflict the dry run goes on without it, so every other patch has its own verdict
    assert all(o.status in (PatchStatus.CLEAN, PatchStatus.OFFSET, PatchStatus.THREE_WAY)
               for o in report.outcomes if o.name not in CONFLICTING_ON_OLDER)


def test_rebase_there_and_back_is_byte_identical(real_cache: UpstreamCache, project: Project) -> None:
    before = {p.name: p.read_bytes() for p in project.patches_dir.iterdir()}
    pin_before = project.pin_file.read_bytes()
    apply_stack(project, real_cache, project.default_workdir)
    there = rebase.start(project, real_cache, PREVIOUS, project.default_workdir)
    assert there.state == "finished" and project.pin().ref == PREVIOUS
    back = rebase.start(project, real_cache, Project(REPO_ROOT).pin().ref, project.default_workdir)
    assert back.state == "finished"
    assert {p.name: p.read_bytes() for p in project.patches_dir.iterdir()} == before
    assert project.pin_file.read_bytes() == pin_before
