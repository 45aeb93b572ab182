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
# so four patches conflict there, and the tensor-core mat-vec patch with them (its
# dispatch and test cases sit in the code the mmvq and tests patches add).
OLDER = "feature-turboquant-kv-cache-b9964-519f0c5"
CONFLICTING_ON_OLDER = [
    "ggml-cuda-batch-invariant-mmvq-up-to-16-columns.patch",
    "speculative-keep-verify-batches-inside-one-256-cell-kv-windo.patch",
    "tests-batch-invariance-of-mul-mat-and-flash-attn-ext-in-test.patch",
    "speculative-the-draft-context-holds-a-verify-batch-s-outputs.patch",
    "ggml-cuda-batch-invariant-q4-k-q5-k-q6-k-and-q8-0-mat-vec-on.patch",
    # these two change mmvq-bi-mma.cu, which the patch before them adds (and which the dry run leaves out there)
    "ggml-cuda-batch-invariant-q4-k-and-q6-k-mat-vec-in-superbloc.patch",
    "ggml-cuda-batch-invariant-q4-k-and-q6-k-one-column-products.patch",
    # changes mmvq.cu after the patches above, and test-batch-invariance.cpp, which the tests patch adds
    "ggml-cuda-batch-invariant-mul-mat-id-as-one-token-launches-f.patch",
    "tests-mul-mat-id-and-moe-ffn-cases-in-test-batch-invariance.patch",
    # change lines of mmvq.cu and test-batch-invariance.cpp that patches above add
    "ggml-cuda-batch-invariant-mul-mat-id-launches-of-four-rows-p.patch",
    "tests-every-weight-type-of-ggml-s-type-table-in-test-batch-i.patch",
    # adds its cases next to those of the MUL_MAT_ID patch above, in test-backend-ops.cpp
    "tests-every-weight-type-of-ggml-s-type-table-in-test-backend.patch",
    # the TQ weight dispatch it changes in ggml_cuda_mul_mat is written differently there (one else-if chain)
    "ggml-cuda-batch-invariant-f16-mat-vec-sums-in-float-tq3-1s-u.patch",
    # changes the MUL_MAT_ID lines of mmvq.cu that the MUL_MAT_ID patches above add
    "ggml-cuda-batch-invariant-mul-mat-id-on-a-warp-per-token-and.patch",
    # change mmvq-bi-mma.cu, which the dry run leaves out there (see above), and the verify-batch perf cases of
    # test-backend-ops.cpp that the tests patch above adds
    "ggml-cuda-batch-invariant-q5-k-mat-vec-in-superblock-order.patch",
    "ggml-cuda-batch-invariant-q2-k-mat-vec-in-superblock-order.patch",
    "tests-verify-batch-perf-cases-of-iq4-xs-q2-k-q3-k-f16-and-bf.patch",
    "ggml-cuda-batch-invariant-q3-k-mat-vec-in-superblock-order.patch",
    # changes the float dispatch and the fused-mmvf check of ggml-cuda.cu that the MUL_MAT_ID patch above adds
    "ggml-cuda-batch-invariant-f16-and-bf16-products-on-mmf-at-ev.patch",
    # adds its cases after the MoE FFN cases of the tests patch above, in test-backend-ops.cpp
    "tests-batch-invariance-of-the-recurrent-ops-in-test-backend.patch",
    # changes the float dispatch of ggml-cuda.cu that the F16 and BF16 patch above adds
    "ggml-cuda-batch-invariant-f16-and-bf16-products-of-one-and-t.patch",
    # changes the batch-invariant flash-attention lines of ops.cpp and ggml-cpu.c that the CPU patch adds
    "ggml-cpu-batch-invariant-flash-attention-independent-of-the.patch",
    # adds its cases before the recurrent ops' cases of the tests patch above, in test-backend-ops.cpp
    "tests-flash-attention-of-one-sequence-in-a-kv-cache-shared-w.patch",
    # changes the batch-invariant flash-attention condition of ops.cpp that the patch above rewrites
    "ggml-cpu-batch-invariant-mode-at-every-batch-size-prompts-in.patch",
    # adds its cases after the KV-layout cases of the tests patch above, in test-backend-ops.cpp
    "tests-prompt-sized-batch-invariance-cases-in-test-backend-op.patch",
    # the one-slot rule of server.cpp it changes is added by the speculative patch above, which conflicts there
    "server-several-slots-with-drafts-in-batch-invariant-mode-on.patch",
    # the lines of llama-context.cpp before llama_context's constructor, where it adds its helper, read differently there
    "llama-batch-invariant-mode-cuts-ubatches-to-the-tokens-a-gpu.patch",
    # adds its case next to the KV-layout case of the tests patch above, in test-backend-ops.cpp
    "tests-flash-attention-of-one-slot-s-kv-stream-beside-others.patch",
    # changes the KV-layout case that the tests patch above adds
    "tests-the-kv-layout-flash-attention-case-lays-out-its-cells.patch",
    # the fused gated delta net flags and probes of llama-context.cpp it extends read differently there
    "llama-batch-invariant-mode-runs-a-gated-delta-net-batch-as-o.patch",
    # changes the batch-invariant lines of ggml-cpu.c and repack.cpp that the every-batch-size CPU patch above writes
    "ggml-cpu-batch-invariant-mode-keeps-the-repacked-gemm-and-sg.patch",
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
