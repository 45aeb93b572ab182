"""benchmarks/candidates/: unfinished kernel work kept on main stays usable and documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hiraishin_build import git
from hiraishin_build.cache import UpstreamCache
from hiraishin_build.project import Project
from hiraishin_build.stack import apply_stack

REPO_ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = REPO_ROOT / "benchmarks" / "candidates"


def candidate_diffs() -> list[Path]:
    return sorted(p for p in CANDIDATES.iterdir() if p.suffix in (".diff", ".patch"))


def test_every_candidate_has_its_state_in_the_readme() -> None:
    table = (CANDIDATES / "README.md").read_text()
    named = set(re.findall(r"^\| `([^`]+)` \|", table, re.M))
    assert {p.name for p in candidate_diffs()} == named


@pytest.mark.integration
def test_every_candidate_applies_to_the_stack(real_cache: UpstreamCache, tmp_path: Path) -> None:
    workdir = tmp_path / "llama.cpp"
    apply_stack(Project(REPO_ROOT), real_cache, workdir, scratch=True)
    stale = [p.name for p in candidate_diffs()
             if git.git(workdir, "apply", "--check", str(p), check=False).returncode != 0]
    assert not stale, f"no longer apply to the stack (fold them in or delete them): {stale}"
