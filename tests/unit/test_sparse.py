import subprocess
from pathlib import Path

import pytest

from hiraishin_build.sparse import SparseRules

from ..conftest import EXCLUDES, Upstream


@pytest.mark.parametrize(
    ("path", "excluded"),
    [
        ("docs/build.md", True),
        ("docs/ops/CUDA.csv", True),
        ("docs", False),  # a file named like the directory pattern stays
        ("models/ggml-vocab-big.gguf", True),
        ("models/templates/chat.jinja", False),
        ("tools/server/public/bundle.js", True),
        ("tools/server/server.cpp", False),
        ("ggml/src/ggml-cuda/docs/x.md", False),  # patterns are anchored at the root
    ],
)
def test_python_matching(path: str, excluded: bool) -> None:
    assert SparseRules(EXCLUDES).excluded(path) is excluded


def test_python_matching_agrees_with_git(upstream: Upstream, tmp_path: Path) -> None:
    """The blob prefetch (Python) and the checkout (git) must agree on every path,
    or a checkout would ask for a blob the cache never fetched."""
    rules = SparseRules(EXCLUDES)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(upstream.path), str(clone)], check=True)
    subprocess.run(
        ["git", "-C", str(clone), "sparse-checkout", "set", "--no-cone", "--stdin"],
        input="\n".join(rules.git_patterns()) + "\n", text=True, check=True,
    )
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", upstream.commit], check=True)
    listed = subprocess.run(
        ["git", "-C", str(clone), "ls-files", "-t"], check=True, capture_output=True, text=True
    ).stdout.splitlines()
    assert listed, "git listed no files"
    for line in listed:
        tag, path = line.split(" ", 1)
        assert (tag == "S") == rules.excluded(path), path


@pytest.mark.parametrize("pattern", ["", "/docs/", "!docs/", "docs/**", " docs/"])
def test_rejects_patterns_it_cannot_match_like_git(pattern: str) -> None:
    with pytest.raises(ValueError):
        SparseRules((pattern,))
