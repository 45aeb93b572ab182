"""The one way this tool runs another program.

Every call is logged (at debug level, with the environment variables it sets),
the program is looked up first so a missing tool gets a clear message, and a
failure raises :class:`CommandError` carrying the tail of the output. Every
call runs under a time limit (timeouts.py): past it, the command and every
process it started are stopped and :class:`CommandTimedOut` says which limit
fired and how to change it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import progress, timeouts
from .errors import CommandError, CommandTimedOut
from .log import get_logger

OUTPUT_TAIL_LINES = 25


@dataclass(frozen=True)
class Completed:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return (self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr).strip()


def tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _stop(process: subprocess.Popen[str]) -> None:
    """Kill the command and everything it started (it leads its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _timed_out(argv: list[str], what: str, limit: timeouts.Limit, seconds: float, output: str,
               log_path: Path | None = None) -> CommandTimedOut:
    log = f" (full log: {log_path})" if log_path else ""
    return CommandTimedOut(
        f"{what} did not finish within {timeouts.describe(seconds)} and was stopped{log}",
        command=argv,
        returncode=-signal.SIGKILL,
        output_tail=tail(output),
        hint=f"{limit.bounds} is stopped after {limit.variable} seconds (default "
             f"{timeouts.describe(limit.default_s)}) so that a stall cannot wait forever; if it is only slow, "
             f"raise it: {limit.variable}=SECONDS (0: no limit)",
    )


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    check: bool = True,
    what: str | None = None,
    hint: str | None = None,
    limit: timeouts.Limit = timeouts.COMMAND,
) -> Completed:
    """Run a program and capture its output.

    ``env`` holds only the variables to add or override; they are logged so a
    failing command can be re-run by hand. ``what`` names the operation in the
    error message ("applying patch X") rather than the bare command line.
    ``limit`` is the kind of step, which sets how long it may run.
    """
    argv = [os.fspath(a) for a in args]
    program = shutil.which(argv[0])
    if program is None:
        raise CommandError(
            f"{argv[0]} is not installed or not on PATH",
            command=argv,
            returncode=127,
            output_tail="",
            hint=hint or f"install {argv[0]} and make sure it is on PATH",
        )
    env_prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    location = f" (in {cwd})" if cwd else ""
    get_logger().debug("$ %s%s%s", env_prefix + " " if env_prefix else "", shlex.join(argv), location)
    full_env = None if env is None else {**os.environ, **env}
    seconds = limit.seconds()
    # Its own process group, so a timeout stops what it started too; no stdin, so nothing waits on input.
    with subprocess.Popen(argv, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                          start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=seconds)
        except subprocess.TimeoutExpired:
            _stop(process)
            stdout, stderr = process.communicate()
            assert seconds is not None
            raise _timed_out(argv, what or argv[0], limit, seconds,
                             Completed(argv, -signal.SIGKILL, stdout or "", stderr or "").output) from None
        except BaseException:
            _stop(process)
            raise
    result = Completed(argv, process.returncode, stdout, stderr)
    if check and process.returncode != 0:
        raise CommandError(
            f"{what or argv[0]} failed",
            command=argv,
            returncode=process.returncode,
            output_tail=tail(result.output),
            hint=hint,
        )
    return result


def run_logged(
    args: Sequence[str | os.PathLike[str]],
    *,
    log_path: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    what: str,
    hint: str | None = None,
    limit: timeouts.Limit = timeouts.BUILD,
    check: bool = True,
    echo: bool = False,
    steps: progress.StepPattern = progress.NINJA,
    interval: float = progress.INTERVAL_S,
    terminal: bool | None = None,
) -> int:
    """Run a long program, writing all its output to ``log_path`` and showing where it is as it goes.

    For builds that take minutes: on a terminal a live bar shows the steps done
    of the total (``steps`` says how the program counts them: ninja's ``[n/m]``
    by default) and the elapsed time; without one (``terminal``: default, whether
    the console is one) a plain line every ``interval`` seconds says the same,
    so a CI log shows the build is alive. ``echo`` also passes every line on to
    stdout (a smoke test's own report). On failure the error carries the tail
    and names the full log; with ``check`` False the exit status is returned
    instead. ``limit`` bounds how long it may run (a build's by default).
    """
    from collections import deque

    from .log import console

    argv = [os.fspath(a) for a in args]
    if shutil.which(argv[0]) is None:
        raise CommandError(f"{argv[0]} is not installed or not on PATH", command=argv, returncode=127,
                           output_tail="", hint=hint)
    env_prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    get_logger().debug("$ %s%s (log: %s)", env_prefix + " " if env_prefix else "", shlex.join(argv), log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    last_lines: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
    full_env = None if env is None else {**os.environ, **env}
    seconds = limit.seconds()
    fired = threading.Event()
    tracker = progress.Tracker(what, steps)
    on_terminal = console.is_terminal if terminal is None else terminal
    with log_path.open("w", encoding="utf-8") as log, \
            progress.shown(tracker, terminal=on_terminal, console=console, interval=interval) as display:
        process = subprocess.Popen(argv, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
                                   start_new_session=True)

        def stop_on_time() -> None:
            fired.set()
            _stop(process)

        watchdog = threading.Timer(seconds, stop_on_time) if seconds is not None else None
        try:
            if watchdog is not None:
                watchdog.daemon = True
                watchdog.start()
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                log.flush()
                if echo:
                    sys.stdout.write(line)
                    sys.stdout.flush()
                line = line.rstrip()
                last_lines.append(line)
                tracker.feed(line)
                display.update()
            returncode = process.wait()
        except BaseException:
            _stop(process)
            process.wait()
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()
            if process.stdout is not None:
                process.stdout.close()
        if fired.is_set():
            tracker.outcome = "stopped at its time limit"
        elif returncode != 0:
            tracker.outcome = f"failed (exit status {returncode})"
    if fired.is_set():
        assert seconds is not None
        raise _timed_out(argv, what, limit, seconds, "\n".join(last_lines), log_path)
    if check and returncode != 0:
        raise CommandError(f"{what} failed (full log: {log_path})", command=argv, returncode=returncode,
                           output_tail="\n".join(last_lines), hint=hint)
    return returncode
