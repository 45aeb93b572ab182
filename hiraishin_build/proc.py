"""The one way this tool runs another program.

Every call is logged (at debug level, with the environment variables it sets),
the program is looked up first so a missing tool gets a clear message, and a
failure raises :class:`CommandError` carrying the tail of the output.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import CommandError
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


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    check: bool = True,
    what: str | None = None,
    hint: str | None = None,
    timeout: float | None = None,
) -> Completed:
    """Run a program and capture its output.

    ``env`` holds only the variables to add or override; they are logged so a
    failing command can be re-run by hand. ``what`` names the operation in the
    error message ("applying patch X") rather than the bare command line.
    ``timeout`` (seconds) ends the program and everything it started (git
    runs upload-pack, ssh or a remote helper as children) and raises
    :class:`CommandError` with exit status 124, whatever ``check`` says.
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
    if timeout is not None:
        return _run_with_timeout(argv, cwd=cwd, env=full_env, input=input, check=check, what=what, hint=hint,
                                 timeout=timeout)
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=full_env,
        input=input,
        capture_output=True,
        text=True,
        errors="replace",
    )
    result = Completed(argv, proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise CommandError(
            f"{what or argv[0]} failed",
            command=argv,
            returncode=proc.returncode,
            output_tail=tail(result.output),
            hint=hint,
        )
    return result


TIMEOUT_STATUS = 124


def _run_with_timeout(
    argv: list[str], *, cwd: Path | None, env: Mapping[str, str] | None, input: str | None, check: bool,
    what: str | None, hint: str | None, timeout: float,
) -> Completed:
    # A session of its own, so that the whole process group can be ended:
    # killing git alone would leave its upload-pack or ssh child running.
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        output = (stdout + ("\n" if stdout and stderr else "") + stderr).strip()
        raise CommandError(
            f"{what or argv[0]} timed out after {timeout:g} s",
            command=argv,
            returncode=TIMEOUT_STATUS,
            output_tail=tail(output),
            hint=hint,
        ) from None
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
) -> None:
    """Run a long program, writing all its output to ``log_path`` and showing
    its progress lines (ninja's ``[n/m]``, pip's and CMake's steps) as it goes.

    For builds that take minutes: the person watching sees where it is, and
    on failure the error carries the tail and names the full log.
    """
    from collections import deque

    from rich.markup import escape

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
    with log_path.open("w", encoding="utf-8") as log, console.status(escape(what)) as status:
        process = subprocess.Popen(argv, cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1)
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            line = line.rstrip()
            last_lines.append(line)
            if line.startswith("[") or line.startswith("*** ") or line.startswith("-- Build files"):
                status.update(escape(f"{what}: {line[:120]}"))
        returncode = process.wait()
    if returncode != 0:
        raise CommandError(f"{what} failed (full log: {log_path})", command=argv, returncode=returncode,
                           output_tail="\n".join(last_lines), hint=hint)
