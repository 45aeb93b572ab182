"""Interrupt safety as a property: a writing command stopped at any of its subprocesses, by Ctrl-C (SIGINT),
a service manager (SIGTERM) or `kill -9`, leaves patches/ as it was or as the finished command writes it,
leaves no temporary files (but after SIGKILL, which no process can clean up after), and the next command
leads back to a working state without loss. Two writing commands at once: one waits for nothing and is
refused at once, naming the other; the other finishes.

The tool stops itself through its test hook (proc.py: HIRAISHIN_TEST_INTERRUPT=N:SIGNAL), so every
subprocess of a run is a stopping point. The sweep covers every point with every signal when
HIRAISHIN_INTERRUPT_SWEEP=1 (the slow job); by default every third point, and the first and last.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hiraishin_build.errors import RebaseLocked, WorkTreeLocked
from hiraishin_build.proc import INTERRUPT_ENV, PAUSE_ENV

from ..conftest import StackProject, commit_in_workdir, sh_git
from ..helpers import dir_snapshot, hiraishin

SIGNALS = ("INT", "TERM", "KILL")
FULL_SWEEP = os.environ.get("HIRAISHIN_INTERRUPT_SWEEP") == "1"
MAX_POINTS = 80
COMMON = "ggml/src/ggml-cuda/common.cuh"


def stopping_points(count: int) -> list[int]:
    every = range(1, count + 1)
    return list(every) if FULL_SWEEP else sorted({1, count, *every[::3]})


def subprocess_count(args: list[str], project: Path, env: dict[str, str]) -> int:
    """How many subprocesses a run of ``args`` starts: the first N at which the hook no longer stops it,
    minus one. Measured on a copy, so the project itself is untouched."""
    for n in range(1, MAX_POINTS):
        copy = project.parent / f"count-{n}"
        shutil.copytree(project, copy, symlinks=True)
        try:
            done = hiraishin(*args, cwd=copy, env={**env, INTERRUPT_ENV: f"{n}:INT"})
        finally:
            shutil.rmtree(copy)
        if done.returncode == 0:
            return n - 1
    raise AssertionError(f"{args} started {MAX_POINTS} subprocesses or more")


def leftovers(project: Path, tmp: Path) -> list[str]:
    found = [p.name for p in tmp.iterdir()]
    found += [p.name for p in project.iterdir() if p.name.startswith(".patches")]
    return found


def commits_on_work_branch(stack: StackProject) -> list[str]:
    return sh_git(stack.workdir, "log", "--format=%s", f"{stack.upstream.commit}..HEAD").splitlines()


@pytest.fixture
def quiet_tmp(tmp_path: Path) -> Path:
    path = tmp_path / "TMPDIR"
    path.mkdir()
    return path


def test_the_hook_stops_the_tool_at_the_subprocess_it_names(stack_project: StackProject, quiet_tmp: Path) -> None:
    root = stack_project.project.root
    for signal_name, code in (("INT", 130), ("TERM", 143), ("KILL", -9)):
        stopped = hiraishin("patches", "apply", "--force", cwd=root,
                            env={INTERRUPT_ENV: f"2:{signal_name}", "TMPDIR": str(quiet_tmp)})
        assert stopped.returncode == code, (signal_name, stopped.stderr)
        assert hiraishin("patches", "apply", cwd=root).returncode == 0


@pytest.mark.parametrize("signal_name", SIGNALS)
def test_an_apply_stopped_anywhere_loses_nothing_and_the_next_apply_finishes_it(
        stack_project: StackProject, quiet_tmp: Path, signal_name: str) -> None:
    root = stack_project.project.root
    env = {"TMPDIR": str(quiet_tmp)}
    patches_before = dir_snapshot(stack_project.project.patches_dir)
    subjects = commits_on_work_branch(stack_project)
    count = subprocess_count(["patches", "apply", "--force"], root, env)
    assert count >= 4
    for n in stopping_points(count):
        stopped = hiraishin("patches", "apply", "--force", cwd=root, env={**env, INTERRUPT_ENV: f"{n}:{signal_name}"})
        assert stopped.returncode != 0, f"not stopped at subprocess {n} of {count}"
        assert dir_snapshot(stack_project.project.patches_dir) == patches_before, n
        if signal_name != "KILL":
            assert leftovers(root, quiet_tmp) == [], n
        # the export a user might try first deletes nothing, and says how to go on
        export = hiraishin("patches", "export", cwd=root, env=env)
        assert dir_snapshot(stack_project.project.patches_dir) == patches_before, (n, export.stderr)
        if export.returncode != 0:
            assert "hiraishin patches apply" in export.stderr, export.stderr
        # the next apply, without --force, gets back to the whole stack
        again = hiraishin("patches", "apply", cwd=root, env=env)
        assert again.returncode == 0, (n, again.stderr)
        assert commits_on_work_branch(stack_project) == subjects, n
        assert dir_snapshot(stack_project.project.patches_dir) == patches_before, n


@pytest.mark.parametrize("signal_name", SIGNALS)
def test_an_export_stopped_anywhere_leaves_patches_old_or_new_and_the_next_export_finishes_it(
        stack_project: StackProject, tmp_path: Path, quiet_tmp: Path, signal_name: str) -> None:
    root, patches = stack_project.project.root, stack_project.project.patches_dir
    env = {"TMPDIR": str(quiet_tmp)}
    common = (stack_project.workdir / COMMON).read_text()
    commit_in_workdir(stack_project.workdir, COMMON, common + "bool another_switch();\n", "common: another switch")
    before = dir_snapshot(patches)
    finished = tmp_path / "finished"
    shutil.copytree(root, finished, symlinks=True)
    assert hiraishin("patches", "export", cwd=finished, env=env).returncode == 0
    after = dir_snapshot(finished / "patches")
    assert after != before
    count = subprocess_count(["patches", "export"], root, env)
    work_head = sh_git(stack_project.workdir, "rev-parse", "HEAD")
    state = stack_project.workdir / ".git" / "hiraishin-state.json"
    unexported_state = state.read_bytes()
    for n in stopping_points(count):
        # each stop starts from the unexported branch
        shutil.rmtree(patches)
        patches.mkdir()
        for name, data in before.items():
            (patches / name).write_bytes(data)
        state.write_bytes(unexported_state)
        stopped = hiraishin("patches", "export", cwd=root, env={**env, INTERRUPT_ENV: f"{n}:{signal_name}"})
        assert stopped.returncode != 0, f"not stopped at subprocess {n} of {count}"
        assert dir_snapshot(patches) in (before, after), n
        if signal_name != "KILL":
            assert leftovers(root, quiet_tmp) == [], n
        again = hiraishin("patches", "export", cwd=root, env=env)
        assert again.returncode == 0, (n, again.stderr)
        assert dir_snapshot(patches) == after, n
        assert sh_git(stack_project.workdir, "rev-parse", "HEAD") == work_head


def _paused(args: list[str], root: Path, marker: Path, at: int) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-m", "hiraishin_build.cli", *args], cwd=root, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, PAUSE_ENV: f"{at}={marker}"})
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the paused command never reached its pause"
        time.sleep(0.05)
    return process


WRITING_COMMANDS = {"apply": ["patches", "apply", "--force"], "export": ["patches", "export"],
                    "rebase": ["rebase", "--onto", "PIN"]}


@pytest.mark.parametrize(("first", "second"), [(WRITING_COMMANDS[a], WRITING_COMMANDS[b])
                                               for a in WRITING_COMMANDS for b in WRITING_COMMANDS])
def test_a_second_writing_command_is_refused_at_once_while_the_first_finishes(
        stack_project: StackProject, tmp_path: Path, first: list[str], second: list[str]) -> None:
    root = stack_project.project.root
    before = dir_snapshot(stack_project.project.patches_dir)
    subjects = commits_on_work_branch(stack_project)
    marker = tmp_path / "paused"
    first, second = ([stack_project.upstream.tag if word == "PIN" else word for word in args] for args in (first, second))
    running = _paused(first, root, marker, at=2)
    try:
        refused = hiraishin(*second, cwd=root)
    finally:
        marker.unlink()
        out, err = running.communicate(timeout=60)
    assert refused.returncode in (WorkTreeLocked.exit_code, RebaseLocked.exit_code), refused.stderr
    assert "another hiraishin" in refused.stderr and "pid" in refused.stderr, refused.stderr
    assert running.returncode == 0, err
    assert dir_snapshot(stack_project.project.patches_dir) == before
    assert commits_on_work_branch(stack_project) == subjects


@pytest.mark.parametrize("signal_name", SIGNALS)
def test_an_sdist_stopped_anywhere_leaves_no_partial_file_and_no_temporary_tree(
        wheel_project: StackProject, tmp_path: Path, quiet_tmp: Path, signal_name: str) -> None:
    root = wheel_project.project.root
    env = {"TMPDIR": str(quiet_tmp)}
    reference = tmp_path / "reference"
    assert hiraishin("sdist", "--out", str(reference), cwd=root, env=env).returncode == 0
    written, = reference.iterdir()
    count = subprocess_count(["sdist", "--out", str(tmp_path / "counting")], root, env)
    out = tmp_path / "out"
    for n in stopping_points(count):
        stopped = hiraishin("sdist", "--out", str(out), cwd=root, env={**env, INTERRUPT_ENV: f"{n}:{signal_name}"})
        assert stopped.returncode != 0, f"not stopped at subprocess {n} of {count}"
        # nothing, or a whole sdist: never a partial file under the sdist's name
        assert [p.name for p in out.iterdir()] in ([], [written.name]) if out.exists() else True, n
        if signal_name != "KILL":
            assert leftovers(root, quiet_tmp) == [], (n, leftovers(root, quiet_tmp))
    assert hiraishin("sdist", "--out", str(out), cwd=root, env=env).returncode == 0
    assert (out / written.name).read_bytes() == written.read_bytes()


def cache_refs(cache_dir: Path) -> str:
    return sh_git(cache_dir / "upstream.git", "for-each-ref", "--format=%(refname) %(objectname)")


@pytest.mark.parametrize("signal_name", SIGNALS)
def test_a_fetch_stopped_anywhere_leaves_the_cache_s_refs_old_or_new(
        stack_project: StackProject, tmp_path: Path, quiet_tmp: Path, signal_name: str) -> None:
    root, upstream = stack_project.project.root, stack_project.upstream
    cache_dir = Path(os.environ["HIRAISHIN_CACHE_DIR"])
    env = {"TMPDIR": str(quiet_tmp)}
    upstream.commit_change("ggml/src/ggml-cuda/fattn.cu", "// newer\n", "newer", tag="b102")
    before = cache_refs(cache_dir)
    finished = tmp_path / "finished-cache"
    shutil.copytree(cache_dir, finished, symlinks=True)
    args = ["upstream", "fetch", "--from", str(upstream.path)]
    assert hiraishin(*args, cwd=root, env={**env, "HIRAISHIN_CACHE_DIR": str(finished)}).returncode == 0
    after = cache_refs(finished)
    assert after != before
    saved = tmp_path / "saved-cache"
    shutil.copytree(cache_dir, saved, symlinks=True)
    count = subprocess_count(args, root, env)
    for n in stopping_points(count):
        shutil.rmtree(cache_dir)
        shutil.copytree(saved, cache_dir, symlinks=True)
        stopped = hiraishin(*args, cwd=root, env={**env, INTERRUPT_ENV: f"{n}:{signal_name}"})
        assert stopped.returncode != 0, f"not stopped at subprocess {n} of {count}"
        refs = cache_refs(cache_dir)
        if signal_name == "KILL":
            # a fetch killed outright leaves its incoming refs (its journal), which the next fetch drops first
            refs = "\n".join(line for line in refs.splitlines() if not line.startswith("refs/hiraishin/incoming/"))
        else:
            assert leftovers(root, quiet_tmp) == [], n
        assert refs in (before, after), n
        again = hiraishin(*args, cwd=root, env=env)
        assert again.returncode == 0, (n, again.stderr)
        assert cache_refs(cache_dir) == after, n


@pytest.mark.parametrize("signal_name", ["INT", "TERM"])
def test_an_index_stopped_at_any_moment_leaves_the_site_old_or_new(tmp_path: Path, signal_name: str) -> None:
    """index starts no subprocess: it is stopped after a delay instead, over a sweep of delays that spans
    its run (the interpreter's start included)."""
    from ..helpers import make_wheel

    old_wheels, new_wheels, site = tmp_path / "old", tmp_path / "new", tmp_path / "site"
    published = make_wheel(old_wheels, {"hiraishin_llama/m.txt": (b"old", 0o100644 << 16)}, version="9079.2+cpu")
    # the next release beside the published wheel, which is never replaced
    new_wheels.mkdir()
    shutil.copy2(published, new_wheels / published.name)
    make_wheel(new_wheels, {"hiraishin_llama/m.txt": (b"new", 0o100644 << 16)}, version="9079.3+cpu")

    def tree(path: Path) -> dict[str, bytes]:
        return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}

    assert hiraishin("index", str(old_wheels), "--out", str(site), cwd=tmp_path).returncode == 0
    old = tree(site)
    finished = tmp_path / "finished"
    shutil.copytree(site, finished)
    assert hiraishin("index", str(new_wheels), "--out", str(finished), cwd=tmp_path).returncode == 0
    new = tree(finished)
    steps = 40 if FULL_SWEEP else 12
    for step in range(steps):
        shutil.rmtree(site)
        assert hiraishin("index", str(old_wheels), "--out", str(site), cwd=tmp_path).returncode == 0
        process = subprocess.Popen([sys.executable, "-m", "hiraishin_build.cli", "index", str(new_wheels), "--out",
                                    str(site)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.1 + step * 0.05)
        process.send_signal(getattr(signal, f"SIG{signal_name}"))
        process.communicate(timeout=60)
        assert tree(site) in (old, new), step
        assert [p.name for p in site.parent.iterdir() if ".hiraishin-" in p.name] == [], step
