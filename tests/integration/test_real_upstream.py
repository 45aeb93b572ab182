"""The real stack on the real pinned upstream, from the local cache.

These run where `hiraishin upstream fetch` has filled the cache (the default
user cache, or HIRAISHIN_CACHE_DIR) and skip, saying why, elsewhere: CI has no
network to fetch llama.cpp.
"""

from __future__ import annotations

import json
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
    # On a 2-core CI machine the check (apply the stack, re-export it, blame every patch's lines for the curation
    # rule) took 13 to 17 s at 17 patches; the bound catches a doubling, not the machine's load.
    assert elapsed < 30, f"patches check took {elapsed:.1f} s"


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


# Not weight types: the integer types and F64, and Q8_1 and Q8_K, only the activations' side of the dot products.
# The op tests over ggml's type table (test-batch-invariance --types-only, MUL_MAT_BATCH_INVARIANCE) leave out the
# same ones.
NOT_WEIGHT_TYPES = {"I8", "I16", "I32", "I64", "F64", "Q8_1", "Q8_K", "COUNT"}


def _pinned_ggml_types(cache: UpstreamCache) -> set[str]:
    pin = Project(REPO_ROOT).pin()
    (_, _, header), = cache.store().files(pin.commit, lambda path: path == "ggml/include/ggml.h")
    body = re.search(r"enum ggml_type \{(.*?)\};", header.decode(), re.S)
    assert body, "ggml.h at the pin has no `enum ggml_type`: the type table moved"
    # commented-out entries are types whose support was removed
    return {m[1] for m in re.finditer(r"^\s*GGML_TYPE_(\w+)\s*=\s*\d+", body[1], re.M)} - NOT_WEIGHT_TYPES


def test_the_coverage_data_names_every_weight_type_of_the_pinned_ggml(real_cache: UpstreamCache) -> None:
    """The guarantee's table (docs/guarantee.md, generated from coverage.json) and the op tests iterate the same
    table: a type the base adds must get its line in every backend's dense table, covered or with its reason."""
    expected = _pinned_ggml_types(real_cache)
    assert {"Q4_K", "IQ4_XS", "MXFP4", "TQ3_1S", "TURBO4_0"} <= expected and "Q8_K" not in expected
    data = json.loads((REPO_ROOT / "wheels" / "hiraishin_llama" / "coverage.json").read_text())
    for backend, tables in data["backends"].items():
        named = set(tables["dense"]["types"])
        assert named == expected, (f"{backend} dense: missing {sorted(expected - named)}, "
                                   f"not in ggml's table {sorted(named - expected)}")
