"""A long command shows where it is: steps done of the total and the elapsed time, as a live bar on a
terminal and, without one (a CI log), as a plain line at a fixed interval even while the command is silent.

The build is a stand-in that prints what `pip wheel -v` prints around a ninja build: scikit-build-core's
``*** `` steps and ninja's ``[N/M]`` lines.
"""

from __future__ import annotations

import io
import re
import sys
import time
from pathlib import Path

import pytest

from hiraishin_build import progress, proc
from hiraishin_build.errors import CommandError


def stand_in_build(tmp_path: Path, *lines_and_pauses: str | float, exit_code: int = 0) -> list[str]:
    """A command that prints each string and sleeps for each number, in order."""
    script = tmp_path / "build.py"
    steps = "\n".join(f"time.sleep({item})" if isinstance(item, float) else f"print({item!r}, flush=True)"
                      for item in lines_and_pauses)
    script.write_text(f"import sys, time\n{steps}\nsys.exit({exit_code})\n")
    return [sys.executable, str(script)]


LINE = re.compile(r"^building the cpu wheel: (?:(\d+)/(\d+) steps, )?(?:([A-Z][^,]*), )?(\d+ s|\d+ min \d+ s)$")


def test_elapsed_time_reads_as_a_person_says_it() -> None:
    assert progress.describe_elapsed(0.4) == "0 s"
    assert progress.describe_elapsed(45.9) == "45 s"
    assert progress.describe_elapsed(372) == "6 min 12 s"
    assert progress.describe_elapsed(3725) == "1 h 2 min"


def test_the_tracker_reads_ninja_steps_and_scikit_build_core_phases() -> None:
    now = [100.0]
    tracker = progress.Tracker("building the cpu wheel", clock=lambda: now[0])
    assert tracker.summary() == "building the cpu wheel: 0 s"
    # As `pip wheel -v` prints them: the backend's lines indented by two spaces.
    tracker.feed("Processing ./dist/hiraishin_llama-10354.7.tar.gz")
    tracker.feed("  Installing build dependencies: started")
    assert tracker.summary() == "building the cpu wheel: Installing build dependencies, 0 s"
    tracker.feed("  Installing build dependencies: finished with status 'done'")
    tracker.feed("  Preparing metadata (pyproject.toml): started")
    assert tracker.summary() == "building the cpu wheel: Preparing metadata, 0 s"
    tracker.feed("  *** scikit-build-core 1.1.2 using CMake 3.25.1 (wheel)")
    tracker.feed("  *** Configuring CMake...")
    now[0] += 61
    assert tracker.summary() == "building the cpu wheel: Configuring CMake, 1 min 1 s"
    tracker.feed("  -- Build files have been written to: /tmp/build")
    tracker.feed("  [212/535] Building CXX object ggml/src/CMakeFiles/ggml-cpu.dir/ggml-cpu/ops.cpp.o")
    now[0] += 311
    assert tracker.summary() == "building the cpu wheel: 212/535 steps, 6 min 12 s"
    assert tracker.completed == 212 and tracker.total == 535
    assert tracker.detail == "Building CXX object ggml/src/CMakeFiles/ggml-cpu.dir/ggml-cpu/ops.cpp.o"
    tracker.feed("  [535/535] Linking CXX executable bin/llama-server")
    tracker.feed("  *** Installing project into wheel...")
    assert tracker.summary() == "building the cpu wheel: 535/535 steps, Installing project into wheel, 6 min 12 s"


def test_smoke_cases_count_the_case_being_run() -> None:
    tracker = progress.Tracker("the smoke test", progress.SMOKE_CASES, clock=lambda: 0.0)
    tracker.feed("running Q4_K_M kv=f16 switch on (3/8) ...")
    assert tracker.summary() == "the smoke test: case 3 of 8, 0 s"
    assert tracker.completed == 2 and tracker.total == 8
    tracker.feed("  identical (41.0 s)")
    assert tracker.count() == "case 3 of 8"


def test_without_a_terminal_a_build_writes_a_plain_line_at_every_interval(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    command = stand_in_build(tmp_path, "  *** Configuring CMake...", 0.5, "  -- Build files have been written to: x",
                             "  [1/4] Building C object a.o", 0.4, "  [2/4] Building C object b.o", 0.4,
                             "  [3/4] Building CUDA object c.o", 0.4, "  [4/4] Linking CXX shared library libllama.so",
                             "  *** Installing project into wheel...", 0.3)
    log = tmp_path / "build-cpu.log"
    assert proc.run_logged(command, log_path=log, what="building the cpu wheel", interval=0.15, terminal=False) == 0
    lines = capsys.readouterr().err.strip().splitlines()
    *ticks, final = lines
    assert len(ticks) >= 8, lines
    for line in ticks:
        assert LINE.match(line), line
    assert any("Configuring CMake" in line for line in ticks)
    counts = [int(found.group(1)) for found in map(LINE.match, ticks) if found and found.group(1)]
    assert counts == sorted(counts) and counts[0] >= 1 and counts[-1] == 4
    assert any("4/4 steps, Installing project into wheel" in line for line in ticks)
    assert re.fullmatch(r"building the cpu wheel: done after \d+ s \(4/4 steps\)", final), final
    # The log holds everything the command printed; the progress lines go to the console only.
    assert log.read_text().splitlines()[0] == "  *** Configuring CMake..."
    assert "steps," not in log.read_text()


def test_a_silent_step_still_gets_a_line_at_every_interval() -> None:
    """A build step that prints nothing for minutes (one large CUDA file) must not leave a CI log silent."""
    written: list[tuple[float, str]] = []

    class Stream(io.StringIO):
        def write(self, text: str) -> int:
            written.append((time.monotonic(), text))
            return len(text)

    tracker = progress.Tracker("building the cu13-sm90 wheel")
    tracker.feed("[7/9] Building CUDA object ggml/src/ggml-cuda/fattn.cu.o")
    started = time.monotonic()
    with progress.shown(tracker, terminal=False, console=None, interval=0.1, stream=Stream()):
        time.sleep(0.75)
    times = [started] + [at for at, _ in written]
    assert len(written) >= 6
    assert max(later - earlier for earlier, later in zip(times, times[1:])) < 0.3
    assert all(text.startswith("building the cu13-sm90 wheel: 7/9 steps, ") for _, text in written[:-1])


def test_a_failed_build_says_where_it_stopped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    command = stand_in_build(tmp_path, "[1/3] Building C object a.o", "error: a.c:1: boom", exit_code=2)
    with pytest.raises(CommandError, match="building the cpu wheel failed") as info:
        proc.run_logged(command, log_path=tmp_path / "b.log", what="building the cpu wheel", interval=60,
                        terminal=False)
    assert "boom" in info.value.output_tail
    final = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.fullmatch(r"building the cpu wheel: failed \(exit status 2\) after \d+ s \(1/3 steps\)", final), final


def test_unchecked_and_echoed_the_exit_status_is_returned_and_every_line_passed_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    command = stand_in_build(tmp_path, "running Q4_K_M kv=f16 switch on (1/2) ...", "  identical (0.1 s)",
                             "running Q4_K_M kv=f16 switch off (2/2) ...", exit_code=1)
    code = proc.run_logged(command, log_path=tmp_path / "smoke.log", what="the smoke test", check=False, echo=True,
                           steps=progress.SMOKE_CASES, interval=60, terminal=False)
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out.splitlines() == ["running Q4_K_M kv=f16 switch on (1/2) ...", "  identical (0.1 s)",
                                         "running Q4_K_M kv=f16 switch off (2/2) ..."]
    assert re.fullmatch(r"the smoke test: failed \(exit status 1\) after \d+ s \(case 2 of 2\)",
                        captured.err.strip().splitlines()[-1])


def test_on_a_terminal_a_live_bar_counts_the_steps(tmp_path: Path) -> None:
    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, color_system=None)
    tracker = progress.Tracker("building the cpu wheel")
    with progress.shown(tracker, terminal=True, console=console) as display:
        for line in ("[1/2] Building C object a.o", "[2/2] Linking C shared library libggml.so"):
            tracker.feed(line)
            display.update()
    output = screen.getvalue()
    assert "building the cpu wheel: done after 0 s (2/2 steps)" in output


def test_a_build_stopped_on_the_way_says_what_a_re_run_does(tmp_path: Path) -> None:
    tracker = progress.Tracker("building the cpu wheel", clock=lambda: 0.0)
    tracker.feed("[212/535] Building CXX object ops.cpp.o")
    note = "a re-run with --sdist DIR resumes"
    assert progress.final_line(tracker, "stopped", note) == \
        "building the cpu wheel: stopped after 0 s (212/535 steps); a re-run with --sdist DIR resumes"
    assert progress.final_line(tracker, "done", note) == "building the cpu wheel: done after 0 s (212/535 steps)"
    tracker.outcome = "stopped at its time limit"  # the limit's error says what to do instead
    assert progress.final_line(tracker, "stopped", note).endswith("(212/535 steps)")
    stream = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        with progress.shown(progress.Tracker("building the cpu wheel"), terminal=False, console=None, interval=60,
                            stream=stream, if_stopped=note):
            raise KeyboardInterrupt
    assert stream.getvalue().strip().endswith("; a re-run with --sdist DIR resumes")
