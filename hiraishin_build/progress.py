"""Where a long command is: steps done of the total, and the time it has taken.

A wheel build runs for many minutes on a small machine, a smoke test for
several. Their output is written to a log; what a person sees is read from
it: ninja's ``[N/M]`` lines give the steps done of the total, pip's and
scikit-build-core's ``*** `` lines the phase before and after them.

On a terminal a live bar shows the steps, the elapsed time and the last
step's line. Elsewhere (a CI log, a pipe) a plain line is written at a fixed
interval, once a minute by default, whether or not the command printed
anything: ``building the cpu wheel: 212/535 steps, 6 min 12 s``.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Protocol

from rich.markup import escape

from .mainthread import signals_left_to_main_thread

INTERVAL_S = 60.0
"""How often a plain progress line is written where there is no terminal."""


@dataclass(frozen=True)
class StepPattern:
    """How a command announces its steps: a regex with the step number and the total as groups 1 and 2."""

    regex: re.Pattern[str]
    template: str
    """The count as shown, from {n} and {total}: "{n}/{total} steps"."""

    finished: bool
    """True when a line reports step n as done (ninja); False when it announces that step n starts."""

    def match(self, line: str) -> tuple[int, int] | None:
        found = self.regex.search(line)
        if found is None:
            return None
        return int(found.group(1)), int(found.group(2))


# Ninja writes "[N/M] Building CXX object ..." as each edge finishes when its output is not a terminal.
NINJA = StepPattern(re.compile(r"^\[(\d+)/(\d+)\] "), "{n}/{total} steps", finished=True)
# hiraishin-llama-smoke: "running Q4_K_M kv=f16 switch on (3/8) ..." as each case starts.
SMOKE_CASES = StepPattern(re.compile(r"^running .*\((\d+)/(\d+)\) \.\.\.$"), "case {n} of {total}", finished=False)

# What comes before and after the steps: pip's ("Installing build dependencies: started") and
# scikit-build-core's ("*** Configuring CMake...", "*** Installing project into wheel...").
_PHASES = (
    re.compile(r"^(Installing build dependencies|Getting requirements to build wheel|Preparing metadata)"
               r"(?: \(pyproject\.toml\))?: started$"),
    re.compile(r"^\*\*\* (?!scikit-build-core )(.+?)(?:\.\.\.)?$"),
)


def describe_elapsed(seconds: float) -> str:
    """45.2 -> '45 s'; 372 -> '6 min 12 s'; 3725 -> '1 h 2 min'."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"


class Tracker:
    """What the output read so far says about where the command is."""

    def __init__(self, what: str, steps: StepPattern = NINJA, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.steps = steps
        self.clock = clock
        self.started = clock()
        self.step: tuple[int, int] | None = None
        self.phase: str | None = None
        self.detail = ""
        """The line of the last step, without its counter."""

        self.outcome: str | None = None
        """How it ended, for the last line ("failed (exit status 1)"); set by the caller, "done" if not."""

        self._lock = threading.Lock()

    def feed(self, line: str) -> None:
        # `pip wheel -v` indents what the build backend prints by two spaces.
        line = line.strip()
        with self._lock:
            step = self.steps.match(line)
            if step is not None:
                self.step = step
                self.phase = None
                self.detail = self.steps.regex.sub("", line, count=1).strip()
                return
            for pattern in _PHASES:
                phase = pattern.match(line)
                if phase is not None:
                    self.phase = phase.group(1).strip()
                    return

    @property
    def completed(self) -> int:
        """Steps finished: what a bar fills to."""
        if self.step is None:
            return 0
        n, _ = self.step
        return n if self.steps.finished else n - 1

    @property
    def total(self) -> int | None:
        return None if self.step is None else self.step[1]

    def count(self) -> str:
        if self.step is None:
            return ""
        n, total = self.step
        return self.steps.template.format(n=n, total=total)

    def elapsed(self) -> float:
        return self.clock() - self.started

    def summary(self) -> str:
        """``building the cpu wheel: 212/535 steps, 6 min 12 s``: one line, for a log."""
        with self._lock:
            parts = [part for part in (self.count(), self.phase) if part]
        parts.append(describe_elapsed(self.elapsed()))
        return f"{self.what}: {', '.join(parts)}"


class Display(Protocol):
    def update(self) -> None: ...


class PlainLines:
    """Without a terminal: the tracker's summary every ``interval`` seconds, from a thread of its own, so a
    step that prints nothing for minutes (one large CUDA file) still shows that the command is alive."""

    def __init__(self, tracker: Tracker, interval: float, stream: IO[str] | None = None) -> None:
        self.tracker = tracker
        self.interval = interval
        self.stream = stream if stream is not None else sys.stderr
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)

    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._write(self.tracker.summary())

    def update(self) -> None:
        pass  # the thread writes at its interval, not per line

    def start(self) -> None:
        with signals_left_to_main_thread():
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class LiveBar:
    """On a terminal: a rich progress bar with the steps, the elapsed time and the last step's line."""

    def __init__(self, tracker: Tracker, console) -> None:  # type: ignore[no-untyped-def]
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.table import Column

        self.tracker = tracker
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[count]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[detail]}", table_column=Column(no_wrap=True)),
            console=console,
            transient=True,
        )
        self.console = console
        self.task = self.progress.add_task(escape(tracker.what), total=None, count="", detail="")

    def update(self) -> None:
        tracker = self.tracker
        detail = tracker.detail if tracker.step is not None and tracker.phase is None else (tracker.phase or "")
        count = tracker.count()
        # The last line fills what the bar, the count and the time leave of the width: those must never be cut.
        room = self.console.width - len(tracker.what) - len(count) - 45
        if len(detail) > room:
            detail = detail[:max(room - 1, 0)] + "…" if room > 1 else ""
        self.progress.update(self.task, completed=tracker.completed, total=tracker.total,
                             count=escape(count), detail=escape(detail))


@contextmanager
def shown(tracker: Tracker, *, terminal: bool, console, interval: float = INTERVAL_S,  # type: ignore[no-untyped-def]
          stream: IO[str] | None = None, if_stopped: str | None = None) -> Iterator[Display]:
    """Show ``tracker`` while the block runs: a live bar on a terminal, else a plain line every ``interval``.
    A last line says how it ended (``tracker.outcome``, else done, or stopped on an exception, then
    ``if_stopped``: what a re-run does)."""
    ended = "stopped"
    if terminal:
        bar = LiveBar(tracker, console)
        with signals_left_to_main_thread():
            bar.progress.start()  # rich's refresh thread
        try:
            try:
                yield bar
                bar.update()
            finally:
                bar.progress.stop()
            ended = "done"
        finally:
            console.print(escape(final_line(tracker, ended, if_stopped)), highlight=False, soft_wrap=True)
        return
    lines = PlainLines(tracker, interval, stream)
    lines.start()
    try:
        yield lines
        ended = "done"
    finally:
        lines.stop()
        lines._write(final_line(tracker, ended, if_stopped))


def final_line(tracker: Tracker, ended: str, if_stopped: str | None = None) -> str:
    """``building the cpu wheel: done after 22 min 4 s (535/535 steps)``; stopped on the way, with what a re-run
    does: ``building the cpu wheel: stopped after 6 min 12 s (212/535 steps); a re-run ...``."""
    count = tracker.count()
    line = (f"{tracker.what}: {tracker.outcome or ended} after {describe_elapsed(tracker.elapsed())}"
            + (f" ({count})" if count else ""))
    return line + (f"; {if_stopped}" if if_stopped and ended == "stopped" and tracker.outcome is None else "")
