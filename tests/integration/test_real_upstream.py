"""The real stack on the real pinned upstream, from the local cache.

These run where `hiraishin upstream fetch` has filled the cache (the default
user cache, or HIRAISHIN_CACHE_DIR) and skip, saying why, elsewhere: CI has no
network to fetch llama.cpp.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from hiraishin_build.cache import UpstreamCache
from hiraishin_build.project import Project
from hiraishin_build.stack import apply_stack, check_stack, export_stack

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def test_check_passes_quickly(real_cache: UpstreamCache) -> None:
    started = time.monotonic()
    result = check_stack(Project(REPO_ROOT), real_cache)
    elapsed = time.monotonic() - started
    assert result.patches
    assert elapsed < 15, f"patches check took {elapsed:.1f} s"


def test_apply_and_export_leave_the_stack_unchanged(real_cache: UpstreamCache, tmp_path: Path) -> None:
    project = Project(tmp_path / "project")
    shutil.copytree(REPO_ROOT / "recipes", project.root / "recipes")
    shutil.copytree(REPO_ROOT / "patches", project.patches_dir)
    before = {p.name: p.read_bytes() for p in project.patches_dir.iterdir()}
    result = apply_stack(project, real_cache, project.default_workdir)
    workdir = project.default_workdir
    # The sparse checkout has what a build needs and not what a mirror may lack.
    assert (workdir / "ggml/src/ggml-cuda/mmvq.cu").is_file()
    assert (workdir / "CMakeLists.txt").is_file()
    assert not (workdir / "tools/server/public/bundle.js").exists()
    assert not (workdir / "docs").exists()
    assert "ggml_cuda_batch_invariant" in (workdir / "ggml/src/ggml-cuda/common.cuh").read_text()
    assert len(result.applied) == len(before) - 1
    exported = export_stack(project, workdir)
    assert not exported.changed
    assert {p.name: p.read_bytes() for p in project.patches_dir.iterdir()} == before


def test_the_real_pins_version_counts_commits_and_sorts_above_the_last_release(real_cache: UpstreamCache) -> None:
    """b10018-1.2.0 is a fork's release name; its commit is 10400 commits deep. Read from the name
    the version would be 10018.x, below the released 10354.13, and the check must refuse it."""
    from hiraishin_build.errors import VersionNotNewer
    from hiraishin_build.releases import RELEASES_FILE, load_releases, require_newer
    from hiraishin_build.sdist import stack_revision, upstream_build_number

    project = Project(REPO_ROOT)
    pin, store = project.pin(), real_cache.store()
    releases = load_releases(REPO_ROOT / RELEASES_FILE)
    build = upstream_build_number(store, pin)
    if pin.ref == "b10018-1.2.0":
        assert build == 10400
    version = f"{build}.{stack_revision(project)}"
    require_newer(version, pin, releases, store)
    named = re.search(r"b(\d+)", pin.ref)
    if named and int(named.group(1)) < build:
        with pytest.raises(VersionNotNewer):
            require_newer(f"{named.group(1)}.{stack_revision(project)}", pin, releases, store)
