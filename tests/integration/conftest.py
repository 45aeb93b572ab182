"""The real upstream cache, for the integration tests.

One rule decides whether they run: the cache (the default user cache, or
HIRAISHIN_CACHE_DIR) holds the pinned commit with every file a checkout needs,
and the refs the requesting module lists in ``REQUIRED_REFS`` with their files
(fetched from the cache's sources where it lacks them). Otherwise they
skip, saying what is missing and how to get it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hiraishin_build.cache import UpstreamCache
from hiraishin_build.errors import HiraishinError
from hiraishin_build.project import Project

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def real_cache(request: pytest.FixtureRequest) -> UpstreamCache:
    pin = Project(REPO_ROOT).pin()
    cache = UpstreamCache()
    lacking = []
    try:
        cache.require_complete(pin.commit, pin.checkout)
    except HiraishinError as exc:
        lacking.append(exc.message)
    else:
        refs = cache.refs()
        for ref in getattr(request.module, "REQUIRED_REFS", ()):
            if refs.lookup(ref) is None:
                lacking.append(f"the upstream cache {cache.git_dir} lacks the ref {ref}")
                continue
            # A seeded cache holds the refs of every tag but the files of a few: fetch the others now, once, so
            # that a machine that cannot reach the sources (CI) skips here instead of failing in the test.
            try:
                cache.prefetch_blobs(refs.resolve(ref).commit, pin.checkout)
            except HiraishinError as exc:
                lacking.append(f"the files of {ref} are not in the upstream cache {cache.git_dir} and could not be "
                               f"fetched ({exc.message.splitlines()[0]})")
    if lacking:
        pytest.skip("; ".join(lacking) + ": run `hiraishin upstream fetch` (or with --from <mirror>) to enable these tests")
    return cache
