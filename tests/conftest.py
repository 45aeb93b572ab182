"""Fixtures: synthetic upstream repositories and hiraishin projects around them.

The synthetic upstream is shaped like llama.cpp where it matters to the tool:
CUDA sources under ggml/src/ggml-cuda/, docs/ and vocab files that work trees
leave out, several commits and tags.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hiraishin_build.cache import UpstreamCache
from hiraishin_build.pin import UpstreamPin, write_pin
from hiraishin_build.project import Project
from hiraishin_build.sparse import SparseRules

EXCLUDES = ("docs/", "models/ggml-vocab-*", "tools/server/public/")


def sh_git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    base_env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Upstream Dev",
        "GIT_AUTHOR_EMAIL": "dev@upstream.invalid",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_NAME": "Upstream Dev",
        "GIT_COMMITTER_EMAIL": "dev@upstream.invalid",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
        **(env or {}),
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=base_env
    ).stdout.strip()


MMVQ_CU = "".join(
    f"static int kernel_{i}(int ncols_dst) {{\n    // block {i}\n    return ncols_dst <= {i % 8 + 1} ? 4 : 1;\n}}\n\n"
    for i in range(40)
)
COMMON_CUH = "".join(f"int helper_{i}();\n" for i in range(30))
FATTN_CU = "".join(f"int fattn_{i}() {{ return {i}; }}\n" for i in range(1, 13))


@dataclass
class Upstream:
    path: Path
    tag: str
    commit: str
    base: str = ""
    """The commit before the pinned one (tag b100)."""

    def commit_change(self, path: str, text: str, message: str, tag: str | None = None) -> str:
        target = self.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        sh_git(self.path, "add", "-A")
        sh_git(self.path, "commit", "-q", "-m", message)
        commit = sh_git(self.path, "rev-parse", "HEAD")
        if tag:
            sh_git(self.path, "tag", "-a", "-m", tag, tag)
        return commit


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    repo = tmp_path / "upstream"
    repo.mkdir()
    sh_git(repo, "init", "-q", "--initial-branch=master")
    files = {
        "CMakeLists.txt": "project(llama)\n",
        "ggml/src/ggml-cuda/mmvq.cu": MMVQ_CU,
        "ggml/src/ggml-cuda/common.cuh": COMMON_CUH,
        "ggml/src/ggml-cuda/fattn.cu": FATTN_CU,
        "docs/build.md": "# build\n",
        "models/ggml-vocab-big.gguf": "vocab" * 100,
        "models/templates/chat.jinja": "{{ x }}\n",
        "tools/server/public/bundle.js": "js\n",
        "tools/server/server.cpp": "int main() {}\n",
        "scripts/win.bat": "echo one\r\necho two\r\n",
    }
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(text.encode())
    sh_git(repo, "add", "-A")
    sh_git(repo, "commit", "-q", "-m", "initial")
    sh_git(repo, "tag", "-a", "-m", "b100", "b100")
    up = Upstream(repo, "b100", "")
    up.base = sh_git(repo, "rev-parse", "HEAD")
    up.commit = up.commit_change(
        "ggml/src/ggml-cuda/fattn.cu", FATTN_CU.replace("return 5;", "return 50;"), "fattn 5", tag="b101"
    )
    up.tag = "b101"
    # A later commit, not pinned, so the tree has history beyond the pin.
    sh_git(repo, "commit", "-q", "--allow-empty", "-m", "later")
    return up


FORK_ONLY_FILE = "ggml/src/ggml-cuda/sumrows.cu"


@pytest.fixture
def fork(tmp_path: Path, upstream: Upstream) -> Upstream:
    """A fork of the synthetic upstream: its history, but none of its tags,
    and a tagged commit of its own on top of the pin that adds a file the
    upstream does not have (so only the fork can serve that file's content)."""
    path = tmp_path / "fork"
    subprocess.run(["git", "clone", "-q", "--no-local", str(upstream.path), str(path)], check=True, capture_output=True)
    for tag in sh_git(path, "tag").split():
        sh_git(path, "tag", "-d", tag)
    sh_git(path, "remote", "remove", "origin")
    sh_git(path, "checkout", "-q", "-B", "master", upstream.commit)
    forked = Upstream(path, "", "", base=upstream.base)
    forked.commit = forked.commit_change(FORK_ONLY_FILE, "int sumrows();\n", "fork: sumrows", tag="fork-b200")
    forked.tag = "fork-b200"
    return forked


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> UpstreamCache:
    root = tmp_path / "cache"
    monkeypatch.setenv("HIRAISHIN_CACHE_DIR", str(root))
    return UpstreamCache(root)


@pytest.fixture(autouse=True)
def fresh_tool_logger() -> Iterator[None]:
    """A CLI run in-process configures the tool's logger (its own handler, no propagation);
    later tests' caplog must still see its records."""
    import logging

    logger = logging.getLogger("hiraishin")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


@pytest.fixture(autouse=True)
def isolated_git_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Tests never read the developer's git configuration."""
    config = tmp_path_factory.mktemp("gitconfig") / "config"
    config.write_text("[user]\n\tname = Test Maintainer\n\temail = maintainer@example.invalid\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    yield config


def make_project(root: Path, upstream: Upstream) -> Project:
    root.mkdir(parents=True, exist_ok=True)
    pin = UpstreamPin(url=str(upstream.path), ref=upstream.tag, commit=upstream.commit, checkout=SparseRules(EXCLUDES))
    write_pin(root / "recipes" / "upstream.toml", pin)
    return Project(root)


PATCH_MESSAGE = """{subject}

Why: a test needs a patch.

What: changes {path}.

Verified: the unit tests.

Upstream: not applicable.
"""


def commit_in_workdir(workdir: Path, path: str, text: str, subject: str) -> str:
    target = workdir / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(text.encode())
    sh_git(workdir, "add", "-A")
    sh_git(
        workdir, "commit", "-q", "-m", PATCH_MESSAGE.format(subject=subject, path=path),
        env={"GIT_AUTHOR_NAME": "Test Maintainer", "GIT_AUTHOR_EMAIL": "maintainer@example.invalid"},
    )
    return sh_git(workdir, "rev-parse", "HEAD")


@dataclass
class StackProject:
    project: Project
    cache: UpstreamCache
    upstream: Upstream

    @property
    def workdir(self) -> Path:
        return self.project.default_workdir


@pytest.fixture
def stack_project(tmp_path: Path, upstream: Upstream, cache: UpstreamCache) -> StackProject:
    """A project whose stack holds two patches, exported by the tool itself."""
    from hiraishin_build.stack import export_stack
    from hiraishin_build.worktree import WorkTree

    project = make_project(tmp_path / "project", upstream)
    pin = project.pin()
    cache.fetch(str(upstream.path), pin)
    WorkTree(project.default_workdir).prepare(cache, pin.commit, pin.checkout, force=False)
    mmvq = (project.default_workdir / "ggml/src/ggml-cuda/mmvq.cu").read_text()
    commit_in_workdir(
        project.default_workdir, "ggml/src/ggml-cuda/mmvq.cu",
        mmvq.replace("    // block 20\n", "    // block 20, batch-invariant\n"), "mmvq: batch-invariant block 20",
    )
    common = (project.default_workdir / "ggml/src/ggml-cuda/common.cuh").read_text()
    commit_in_workdir(
        project.default_workdir, "ggml/src/ggml-cuda/common.cuh",
        common + "bool batch_invariant();\n", "common: declare the switch",
    )
    export_stack(project, project.default_workdir)
    return StackProject(project, cache, upstream)


@pytest.fixture
def wheel_project(stack_project: StackProject) -> StackProject:
    """The synthetic stack project plus a copy of the real wheels/ project, committed."""
    root = stack_project.project.root
    shutil.copytree(Path(__file__).resolve().parents[1] / "wheels", root / "wheels", ignore=shutil.ignore_patterns("__pycache__", "build"))
    (root / ".gitignore").write_text("/work/\n/dist/\n")
    sh_git(root, "init", "-q")
    sh_git(root, "add", "-A")
    sh_git(root, "commit", "-q", "-m", "project")
    return stack_project


def drop_object(repo: Path, object_id: str) -> None:
    """Rewrite a bare repository's packs without one object (as a mirror with absent blobs)."""
    sh_git(repo, "repack", "-a", "-d", "-q")
    everything = sh_git(repo, "rev-list", "--objects", "--all").splitlines()
    keep = "\n".join(line.split()[0] for line in everything if not line.startswith(object_id)) + "\n"
    staging = repo.parent / f"{repo.name}-newpack"
    staging.mkdir()
    subprocess.run(["git", "-C", str(repo), "pack-objects", "-q", str(staging / "pack")], input=keep, text=True, check=True)
    for pack in (repo / "objects" / "pack").glob("*"):
        pack.unlink()
    for pack in staging.iterdir():
        shutil.move(pack, repo / "objects" / "pack" / pack.name)
    assert subprocess.run(["git", "-C", str(repo), "cat-file", "-e", object_id], capture_output=True).returncode != 0
