"""The one way this tool runs another program.

Every call is logged (at debug level, with the environment variables it sets),
the program is looked up first so a missing tool gets a clear message, and a
failure raises :class:`CommandError` carrying the tail of the output. Every
call runs under a time limit (timeouts.py): past it, the command and every
process it started are stopped and :class:`CommandTimedOut` says which limit
fired and how to change it.

Every command also runs in a temporary directory of its own (its ``TMPDIR``),
removed once it has ended, and a command stopped on the way is stopped whole:
Ctrl-C, SIGTERM or SIGHUP (see :func:`stopping_on_signals`) kill its process
group and remove that directory, so neither a running program nor what it
kept in ``/tmp`` (pip's build trees, the smoke test's scratch) outlives the tool.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import fsutil, progress, timeouts
from .mainthread import signals_left_to_main_thread
from .errors import CommandError, CommandTimedOut
from .log import get_logger

OUTPUT_TAIL_LINES = 25
# How long a killed process group may take to be gone before its temporary directory is removed anyway.
STOP_WAIT_S = 10.0
# The signals that stop the tool as Ctrl-C does: a service manager's or CI runner's stop, a closed terminal.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


# Test hooks, read from the environment: the interrupt harness (tests/unit/test_interrupts.py) stops a command
# at its N-th subprocess, as a user or a service manager would, to prove that no instant loses anything.
#   HIRAISHIN_TEST_INTERRUPT=N:SIGNAL  the tool sends itself SIGNAL (INT, TERM or KILL) while its N-th subprocess runs
#   HIRAISHIN_TEST_PAUSE=N=FILE        before its N-th subprocess it writes FILE and waits until FILE is removed
INTERRUPT_ENV = "HIRAISHIN_TEST_INTERRUPT"
PAUSE_ENV = "HIRAISHIN_TEST_PAUSE"
_started = 0


def _test_hooks(process: subprocess.Popen[str] | None) -> None:
    """Called with each subprocess just started (None: before starting it)."""
    interrupt, pause = os.environ.get(INTERRUPT_ENV), os.environ.get(PAUSE_ENV)
    if not interrupt and not pause:
        return
    if process is None:
        number, _, marker = (pause or "").partition("=")
        if marker and number == str(_started + 1):
            Path(marker).write_text(f"{os.getpid()}\n", encoding="utf-8")
            while Path(marker).exists():
                time.sleep(0.02)
        return
    number, _, name = (interrupt or "").partition(":")
    if number == str(_started):
        os.kill(os.getpid(), getattr(signal, f"SIG{name}"))
        time.sleep(5)  # the signal arrives on the way; a handled one raises here


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


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived. A BaseException, as KeyboardInterrupt is: it unwinds every ``finally`` (so each
    command is stopped and each temporary directory removed) and no ``except Exception`` takes it for a failure."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """128 + the signal number, as a shell reports a process ended by that signal."""
        return 128 + self.signum


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """Stop as on Ctrl-C when SIGTERM or SIGHUP arrives, then exit with 128 + the signal's number.

    The commands this tool runs lead process groups of their own, so a signal
    sent to the tool alone never reaches them: without this, SIGTERM would end
    the tool and leave them running. Usable as a decorator of a command.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return

    def raise_terminated(signum: int, frame: object) -> None:
        # A second signal while the first is being handled must not cut the cleanup short.
        for number in STOP_SIGNALS:
            signal.signal(number, _ignore_during_cleanup)
        raise Terminated(signum)

    previous = {number: signal.signal(number, raise_terminated) for number in STOP_SIGNALS}
    try:
        yield
    except Terminated as stop:
        name = signal.Signals(stop.signum).name
        sys.stderr.write(f"stopped by {name}: the commands it ran were stopped and their temporary files removed\n")
        sys.stderr.flush()
        raise SystemExit(stop.exit_code) from None
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _ignore_during_cleanup(signum: int, frame: object) -> None:
    """A Python-level handler, not SIG_IGN: programs started meanwhile must not inherit an ignored SIGTERM."""


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs; a member that has exited but is not reaped yet (a zombie,
    which a container's init may never reap) runs nothing and does not count."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc_root = Path("/proc")
    if not proc_root.is_dir():
        return True
    for stat in proc_root.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # it ended while being read
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ")".
        fields = text[text.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def _stop(process: subprocess.Popen[str]) -> None:
    """Kill the command and everything it started (it leads its own process group), and wait until they are gone,
    so that nothing writes into the temporary directory that is removed next."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_WAIT_S
    while _group_alive(process.pid) and time.monotonic() < deadline:
        time.sleep(0.02)


@contextlib.contextmanager
def _own_temporary_directory() -> Iterator[dict[str, str]]:
    """The variables that give a command a temporary directory of its own, removed when it ends: a killed program
    cannot remove what it put there, and nothing else would."""
    with fsutil.scratch_directory("hiraishin-tmp-") as path:
        yield {"TMPDIR": str(path)}


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
    seconds = limit.seconds()
    global _started
    _test_hooks(None)
    # Its own process group, so a timeout stops what it started too; no stdin, so nothing waits on input.
    with _own_temporary_directory() as temporary, \
            subprocess.Popen(argv, cwd=cwd, env={**os.environ, **(env or {}), **temporary},
                             stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                             start_new_session=True) as process:
        _started += 1
        try:
            _test_hooks(process)
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
    if_stopped: str | None = None,
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
    ``if_stopped`` ends the last line when it is stopped on the way (Ctrl-C,
    SIGTERM): what a re-run will do.
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
    seconds = limit.seconds()
    fired = threading.Event()
    tracker = progress.Tracker(what, steps)
    on_terminal = console.is_terminal if terminal is None else terminal
    with _own_temporary_directory() as temporary, log_path.open("w", encoding="utf-8") as log, \
            progress.shown(tracker, terminal=on_terminal, console=console, interval=interval,
                           if_stopped=if_stopped) as display:
        process = subprocess.Popen(argv, cwd=cwd, env={**os.environ, **(env or {}), **temporary},
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, errors="replace", bufsize=1, start_new_session=True)

        def stop_on_time() -> None:
            fired.set()
            _stop(process)

        watchdog = threading.Timer(seconds, stop_on_time) if seconds is not None else None
        try:
            if watchdog is not None:
                watchdog.daemon = True
                with signals_left_to_main_thread():
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


@contextlib.contextmanager
def background(
    args: Sequence[str | os.PathLike[str]],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    hint: str | None = None,
    grace_s: float = 20.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """A program that serves while the block runs (llama-server), its output written to ``log_path``.

    On leaving, however the block ends, it is asked to stop (SIGTERM to its
    process group), killed with everything it started after ``grace_s``
    seconds, and its temporary directory removed.
    """
    argv = [os.fspath(a) for a in args]
    if shutil.which(argv[0]) is None:
        raise CommandError(f"{argv[0]} is not installed or not on PATH", command=argv, returncode=127,
                           output_tail="", hint=hint)
    env_prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    get_logger().debug("$ %s%s (in the background, log: %s)", env_prefix + " " if env_prefix else "",
                       shlex.join(argv), log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with _own_temporary_directory() as temporary, log_path.open("wb") as log:
        process = subprocess.Popen(argv, env={**os.environ, **(env or {}), **temporary}, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield process
        finally:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=grace_s)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass  # gone already, or past its grace
            # What it started may outlive it; and after the grace, it goes too.
            _stop(process)
            process.wait()
