"""Every command runs under a time limit: a stalled fetch or a hung build is stopped, with a message
naming the limit and the setting that changes it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import pytest

from hiraishin_build import proc, timeouts
from hiraishin_build.errors import CommandTimedOut, ConfigError

from ..conftest import Upstream, make_project
from ..helpers import PLAIN, make_wheel, stand_in

# The shell's child sleeps too and holds the output pipe: the whole process group must go.
STALL = ["sh", "-c", "echo started; sleep 8 & sleep 8"]


def test_a_stalled_command_is_stopped_with_its_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIRAISHIN_COMMAND_TIMEOUT", "1")
    started = time.monotonic()
    with pytest.raises(CommandTimedOut) as info:
        proc.run(STALL, what="a stalled step")
    assert time.monotonic() - started < 5
    error = info.value
    assert error.exit_code == 14
    assert "a stalled step did not finish within 1 s" in str(error)
    assert "started" in error.output_tail
    assert "HIRAISHIN_COMMAND_TIMEOUT" in (error.hint or "")


def test_a_stalled_build_is_stopped_and_its_log_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIRAISHIN_BUILD_TIMEOUT", "1")
    started = time.monotonic()
    with pytest.raises(CommandTimedOut, match="building did not finish within 1 s") as info:
        proc.run_logged(STALL, log_path=tmp_path / "build.log", what="building", limit=timeouts.BUILD)
    assert time.monotonic() - started < 5
    assert "HIRAISHIN_BUILD_TIMEOUT" in (info.value.hint or "")
    assert (tmp_path / "build.log").read_text() == "started\n"


def test_a_quick_command_is_not_affected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIRAISHIN_COMMAND_TIMEOUT", "5")
    assert proc.run(["sh", "-c", "echo fine"]).stdout == "fine\n"


@pytest.mark.parametrize("value", ["soon", "-3", "nan"])
def test_a_bad_setting_is_a_configuration_error(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIRAISHIN_NETWORK_TIMEOUT", value)
    with pytest.raises(ConfigError, match="HIRAISHIN_NETWORK_TIMEOUT"):
        timeouts.NETWORK.seconds()


def test_defaults_are_generous_for_builds_and_shorter_for_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    for limit in (timeouts.NETWORK, timeouts.BUILD, timeouts.COMMAND):
        monkeypatch.delenv(limit.variable, raising=False)
    assert timeouts.BUILD.seconds() >= 3 * 3600
    assert 600 <= timeouts.NETWORK.seconds() < timeouts.BUILD.seconds()
    monkeypatch.setenv("HIRAISHIN_NETWORK_TIMEOUT", "0")
    assert timeouts.NETWORK.seconds() is None  # 0: no limit


def test_a_stalled_upstream_source_is_given_up_in_time(tmp_path: Path, upstream: Upstream, cache: object,
                                                      isolated_git_config: Path) -> None:
    # A remote that accepts the connection and never answers: git's ext:: transport running sleep.
    # The fetch first asks the source what it has (under HIRAISHIN_CONNECT_TIMEOUT), which is where it stalls.
    with isolated_git_config.open("a") as config:
        config.write('[protocol "ext"]\n\tallow = always\n')
    project = make_project(tmp_path / "project", upstream)
    started = time.monotonic()
    fetched = subprocess.run([sys.executable, "-m", "hiraishin_build.cli", "upstream", "fetch",
                              "--from", "ext::sh -c sleep% 20"], cwd=project.root, capture_output=True, text=True,
                             env={**__import__("os").environ, "HIRAISHIN_CONNECT_TIMEOUT": "2"})
    assert time.monotonic() - started < 15
    assert fetched.returncode == 4, fetched.stderr
    assert "cannot read the upstream source ext::sh -c sleep% 20: no answer within 2 s" in fetched.stderr
    assert "HIRAISHIN_CONNECT_TIMEOUT" in fetched.stderr and "Traceback" not in fetched.stderr


# -- stopped by a signal -----------------------------------------------------------
#
# SIGTERM (a CI runner cancelling a job, a service manager) and SIGHUP (a closed terminal) must stop the tool
# as Ctrl-C does: the commands it started lead process groups of their own, so the signal sent to the tool
# alone never reaches them, and what they kept in TMPDIR is theirs to remove only if they get to run.

# A long step that starts a child of its own (as pip starts the build backend, cmake starts ninja and the
# compilers, hiraishin-llama-smoke starts hiraishin-replay), keeps a scratch directory in TMPDIR and says where
# it is once everything runs.
LONG_STEP = '''
import os, subprocess, sys, tempfile
scratch = tempfile.mkdtemp(prefix="hiraishin-smoke-")
child = subprocess.Popen(["sleep", "300"])
with open(sys.argv[1] + ".part", "w") as out:
    out.write(f"{os.getpgid(0)} {child.pid} {scratch}\\n")
os.rename(sys.argv[1] + ".part", sys.argv[1])
print("[1/9] Building C object a.o", flush=True)
child.wait()
'''

# The tool's side: one command of the given kind under stopping_on_signals, as the commands of cli.py run.
RUNNER = '''
import sys
from pathlib import Path
from hiraishin_build import proc

@proc.stopping_on_signals()
def main(kind, started):
    step = [sys.executable, "-c", sys.argv[3], started]
    if kind == "run":
        proc.run(step, what="a long step")
    elif kind == "run_logged":
        proc.run_logged(step, log_path=Path(started).with_suffix(".log"), what="a long step", terminal=False)
    else:
        with proc.background(step, log_path=Path(started).with_suffix(".log")) as process:
            process.wait()

main(sys.argv[1], sys.argv[2])
'''


def running_in_group(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that still run (an exited one that nobody reaped runs nothing)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        state, _, group = text[text.rfind(")") + 2:].split()[:3]
        if int(group) == pgid and state != "Z":
            found.append(int(stat.parent.name))
    return found


def wait_for_file(path: Path, process: subprocess.Popen[str], timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while not path.is_file():
        assert process.poll() is None, f"it ended before the step ran: {process.communicate()}"
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout} s"
        time.sleep(0.05)
    return path.read_text()


def start(args: list[str], tmp_path: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> tuple[subprocess.Popen[str], Path]:
    """``args`` in a process of its own with a TMPDIR of its own, so that what is left in it can be seen;
    SIGINT as on a terminal (a shell without job control starts background commands with it ignored)."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    repo = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(args, cwd=cwd or tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TMPDIR": str(temporary), "PYTHONPATH": str(repo), **(env or {})},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return process, temporary


@pytest.mark.parametrize("kind", ["run", "run_logged", "background"])
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGHUP"])
def test_a_signal_stops_the_command_with_its_process_group_and_removes_its_temporary_files(
        kind: str, signal_name: str, tmp_path: Path) -> None:
    number = signal.Signals[signal_name]
    started = tmp_path / "started"
    process, temporary = start([sys.executable, "-c", RUNNER, kind, str(started), LONG_STEP], tmp_path)
    pgid, child, scratch = wait_for_file(started, process).split()
    assert running_in_group(int(pgid)) and Path(scratch).is_dir() and Path(scratch).is_relative_to(temporary)
    process.send_signal(number)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 128 + number, stderr
    assert f"stopped by {signal_name}" in stderr and "Traceback" not in stderr
    assert running_in_group(int(pgid)) == []  # the step and its child, not only the step
    assert list(temporary.iterdir()) == []  # the step's scratch went with its temporary directory


def test_a_command_that_ends_leaves_no_temporary_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    seen = proc.run(["sh", "-c", 'echo "$TMPDIR"; touch "$TMPDIR/left"']).stdout.strip()
    assert Path(seen).parent == tmp_path and Path(seen).name.startswith("hiraishin-tmp-")
    assert list(tmp_path.iterdir()) == []


# hiraishin-llama-smoke of a stand-in wheel: the long step above, as the real one runs hiraishin-replay.
SMOKE_PACKAGE = '''import os, subprocess, sys, tempfile

def version():
    print("hiraishin-llama 9079.4+cpu")

def smoke():
    scratch = tempfile.mkdtemp(prefix="hiraishin-smoke-")
    child = subprocess.Popen(["sleep", "300"])
    started = os.environ["STAND_IN_STARTED"]
    with open(started + ".part", "w") as out:
        out.write(f"{os.getpgid(0)} {child.pid} {scratch}\\n")
    os.rename(started + ".part", started)
    print("running Q8_0 kv=f16 switch on (1/2) ...", flush=True)
    child.wait()
'''


def test_sigterm_stops_a_smoke_test_whole(tmp_path: Path) -> None:
    """`hiraishin smoke` stopped by SIGTERM: no hiraishin-llama-smoke or hiraishin-replay left running, no
    scratch directory left in TMPDIR, exit 143."""
    entry_points = ("[console_scripts]\nhiraishin-llama = hiraishin_llama:version\n"
                    "hiraishin-llama-smoke = hiraishin_llama:smoke\n")
    wheel = make_wheel(tmp_path / "dist", {
        "hiraishin_llama/__init__.py": (SMOKE_PACKAGE.encode(), PLAIN),
        "hiraishin_llama-9079.4+cpu.dist-info/entry_points.txt": (entry_points.encode(), PLAIN),
    }, version="9079.4+cpu", tag="py3-none-any")
    empty = tmp_path / "no-dependencies"
    empty.mkdir()
    started = tmp_path / "started"
    process, temporary = start(
        [sys.executable, "-m", "hiraishin_build.cli", "smoke", str(wheel), "--find-links", str(empty),
         "--out", str(tmp_path / "smoke")], tmp_path,
        env={"STAND_IN_STARTED": str(started), "PIP_CONFIG_FILE": "/dev/null"})
    pgid, _, scratch = wait_for_file(started, process).split()
    assert Path(scratch).is_relative_to(temporary)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "the smoke test: stopped after" in stderr and "stopped by SIGTERM" in stderr
    assert "Traceback" not in stderr
    assert running_in_group(int(pgid)) == []
    assert list(temporary.iterdir()) == []
    assert (tmp_path / "smoke" / "smoke.log").is_file()  # what it printed is kept


# A build backend standing in for scikit-build-core: it prints ninja's first step, then waits on a child as
# cmake waits on ninja and ninja on the compilers.
BACKEND = '''import os, subprocess, tempfile

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    scratch = tempfile.mkdtemp(prefix="stand-in-build-")
    child = subprocess.Popen(["sleep", "300"])
    started = os.environ["STAND_IN_STARTED"]
    with open(started + ".part", "w") as out:
        out.write(f"{os.getpgid(0)} {child.pid} {scratch}\\n")
    print("[1/9] Building C object ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o", flush=True)
    os.rename(started + ".part", started)
    child.wait()
'''
PYPROJECT = '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'


def stand_in_sdist(tmp_path: Path, packed: bool) -> Path:
    """An sdist of the stand-in backend: the directory it unpacks to, or the .tar.gz."""
    source = tmp_path / "sdist" / "hiraishin_llama-9079.4"
    source.mkdir(parents=True)
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / "backend.py").write_text(BACKEND)
    if not packed:
        return source
    tarball = source.with_name(source.name + ".tar.gz")
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(source, arcname=source.name)
    shutil.rmtree(source)
    return tarball


def start_wheel_build(tmp_path: Path, upstream: Upstream, packed: bool) -> tuple[subprocess.Popen[str], Path, Path,
                                                                                 Path, str]:
    """`hiraishin wheel --recipe cpu` of the stand-in sdist, started and waited for until its step runs."""
    project = make_project(tmp_path / "project", upstream)
    shutil.copy(Path(__file__).resolve().parents[2] / "recipes" / "cpu.toml", project.recipes_dir / "cpu.toml")
    bin_dir = tmp_path / "bin"  # the cpu recipe needs a C and a C++ compiler; these only need to be found
    for compiler in ("cc", "c++"):
        stand_in(bin_dir, compiler, 'echo "cc (stand-in) 12.2.0"')
    sdist = stand_in_sdist(tmp_path, packed)
    started = tmp_path / "started"
    process, temporary = start(
        [sys.executable, "-m", "hiraishin_build.cli", "wheel", "--recipe", "cpu", "--sdist", str(sdist),
         "--no-build-isolation"], tmp_path, cwd=project.root,
        env={"STAND_IN_STARTED": str(started), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
             "PIP_CONFIG_FILE": "/dev/null"})
    pgid = wait_for_file(started, process).split()[0]
    return process, temporary, sdist, project.root / "build" / "cpu", pgid


def test_sigterm_stops_a_wheel_build_whole(tmp_path: Path, upstream: Upstream) -> None:
    """`hiraishin wheel` stopped by SIGTERM: pip, the backend and what it started are gone, so are pip's
    temporary directories (the unpacked sdist, the build tracker), and it exits 143."""
    process, temporary, _, _, pgid = start_wheel_build(tmp_path, upstream, packed=True)
    assert list(temporary.iterdir())  # pip's, and the backend's scratch
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "stopped by SIGTERM" in stderr and "Traceback" not in stderr
    assert running_in_group(int(pgid)) == []
    assert list(temporary.iterdir()) == []


@pytest.mark.parametrize("packed", [True, False], ids=["tarball", "unpacked"])
def test_ctrl_c_during_a_build_says_what_was_stopped_and_what_a_re_run_does(
        packed: bool, tmp_path: Path, upstream: Upstream) -> None:
    process, temporary, sdist, build_dir, pgid = start_wheel_build(tmp_path, upstream, packed)
    log = sdist.parent / "wheels" / "cpu" / "build-cpu.log"
    deadline = time.monotonic() + 30
    while "[1/9]" not in (log.read_text() if log.is_file() else ""):  # the tool has read the step's line
        assert time.monotonic() < deadline, "the build's first step never reached its log"
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert running_in_group(int(pgid)) == [] and list(temporary.iterdir()) == []
    stopped = [line for line in stderr.splitlines() if line.startswith("building the cpu wheel: stopped after")]
    assert len(stopped) == 1, stderr
    assert "(1/9 steps); a re-run " in stopped[0]
    if packed:
        assert (f"a re-run starts over: pip unpacks {sdist.name} into a new temporary directory each time, so "
                "every step is compiled again") in stopped[0]
    else:
        assert (f"a re-run with --sdist {sdist} resumes: CMake configures again, then ninja compiles only the "
                f"steps it had not finished in {build_dir}") in stopped[0]
    assert "Traceback" not in stderr
