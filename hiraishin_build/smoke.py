"""Install a wheel into a fresh virtual environment and run its smoke test there."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from . import progress, proc, timeouts
from .errors import ConfigError, IndexBuildError, SmokeFailed
from .fsutil import writable_directory
from .index import PROJECT, PYPI, WHEEL_NAME_FORM, IndexedWheel, build_index, parse_name, read_wheel, variant_of
from .wheelcheck import WheelInvalid

# hiraishin-llama-smoke's exit status for a usage error: bad arguments or model file, or a CUDA wheel with
# no GPU to test; nothing was judged.
SMOKE_EXIT_USAGE = 2
_SMOKE_ERROR_PREFIX = "hiraishin-llama-smoke: error: "
_WHEEL_HINT = "pass a hiraishin_llama-*.whl that `hiraishin wheel --recipe NAME` wrote (dist/wheels/<recipe>/)"


@dataclass(frozen=True)
class SmokeResult:
    report_path: Path
    passed: bool
    report: dict
    refused: str | None = None
    """hiraishin-llama-smoke's own message when it refused to run (a usage error: nothing was judged)."""


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def user_requirement(wheel: Path) -> str:
    """What a user of this wheel asks pip for: ``hiraishin-llama[cu13]==9079.4+cu13.sm90``."""
    return read_wheel(wheel, variant_of(wheel.name) or "").requirement()


def checked_wheel(wheel: Path) -> IndexedWheel:
    """The wheel's name, project and metadata, that every member reads back whole and that its RECORD vouches for
    every member, checked before any work: a file that is not a hiraishin-llama wheel as built stops here, not
    after a venv and an install. What is refused is bad input (ConfigError, exit 2), not a failed smoke test:
    nothing was tested."""
    if not wheel.is_file() or wheel.suffix != ".whl":
        raise ConfigError(f"{wheel} is not a wheel file", hint="build one with `hiraishin wheel --recipe NAME`")
    try:
        name, _, _, _ = parse_name(wheel)
    except IndexBuildError as error:
        raise ConfigError(error.message, hint=f"a wheel is named {WHEEL_NAME_FORM}") from None
    if name != canonicalize_name(PROJECT):
        raise ConfigError(f"{wheel} is a wheel of {name}, not a {PROJECT} wheel", hint=_WHEEL_HINT)
    try:
        return read_wheel(wheel, variant_of(wheel.name) or "")
    except IndexBuildError as error:
        cause = error.__cause__
        hint = cause.hint if isinstance(cause, WheelInvalid) else ("build it again with `hiraishin wheel --recipe "
                                                                   "NAME`, or download it again")
        raise ConfigError(error.message, hint=hint) from None


def gguf_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a model for llama-server, or None: it must be a readable GGUF file."""
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except FileNotFoundError:
        return "no such file"
    except IsADirectoryError:
        return "is a directory, not a model file"
    except OSError as error:
        return f"cannot be read: {error.strerror or error}"
    if magic != b"GGUF":
        return "is not a GGUF model (a .gguf file begins with the 4 bytes 'GGUF')"
    return None


def refusal_message(smoke_log: Path) -> str:
    """What hiraishin-llama-smoke said when it refused to run: its last ``error:`` line, else its last line."""
    lines = [line.strip() for line in smoke_log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(_SMOKE_ERROR_PREFIX)]
    if errors:
        return errors[-1].removeprefix(_SMOKE_ERROR_PREFIX)
    return lines[-1] if lines else f"it exited with status {SMOKE_EXIT_USAGE} and printed nothing"


def _install_command(venv: Path, wheel: Path, out_dir: Path, *, from_index: bool, find_links: Path | None,
                     deps_index: str) -> list[str]:
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet"]
    if not from_index:
        return [*pip, *(["--no-index", "--find-links", str(find_links)] if find_links else []), str(wheel)]
    # As a user installs it: from a PEP 503 index holding this wheel alone, with its extra.
    variant = variant_of(wheel.name)
    assert variant is not None  # checked by smoke_wheel
    staged, site = out_dir / "staged", out_dir / "site"
    for stale in (staged, site):
        shutil.rmtree(stale, ignore_errors=True)
    staged.mkdir()
    shutil.copy2(wheel, staged / wheel.name)
    build_index(staged, site)
    dependencies = ["--find-links", str(find_links)] if find_links else ["--extra-index-url", deps_index]
    return [*pip, "--index-url", (site / variant / "simple").as_uri(), *dependencies, user_requirement(wheel)]


def smoke_wheel(
    wheel: Path,
    out_dir: Path,
    *,
    system_site_packages: bool = False,
    find_links: Path | None = None,
    from_index: bool = False,
    deps_index: str = PYPI,
    smoke_args: tuple[str, ...] = (),
    serve_model: Path | None = None,
) -> SmokeResult:
    """Install ``wheel`` into a new venv under ``out_dir``, run its smoke test
    there, and, with ``serve_model``, check that its llama-server answers.

    ``from_index`` installs it as a user would: ``hiraishin-llama[<extra>]==<version>``
    from the wheel's own index, its dependencies from ``find_links`` or ``deps_index``.
    When hiraishin-llama-smoke refuses ``smoke_args`` (its usage error), the result's
    ``refused`` holds its message.
    """
    # Everything that can be checked is checked before the venv, which takes seconds to make, and the smoke
    # test, which takes minutes.
    checked_wheel(wheel)
    if from_index and variant_of(wheel.name) is None:
        raise ConfigError(f"{wheel.name} has no variant label (+cpu, +cu13.sm90), so it has no index of its own",
                          hint="build it with `hiraishin wheel --recipe NAME`")
    if serve_model is not None:
        problem = gguf_problem(serve_model)
        if problem:
            raise ConfigError(f"--serve-model {serve_model}: {problem}", hint="pass a .gguf model file")
    timeouts.check_settings(timeouts.COMMAND, timeouts.NETWORK, timeouts.BUILD)
    writable_directory(out_dir, what="the smoke test's output directory", given_as="--out")
    venv = out_dir / "venv"
    proc.run(
        [sys.executable, "-m", "venv", "--clear", *(["--system-site-packages"] if system_site_packages else []), str(venv)],
        what="creating the smoke-test virtual environment",
    )
    install = _install_command(venv, wheel, out_dir, from_index=from_index, find_links=find_links,
                               deps_index=deps_index)
    proc.run_logged(install, log_path=out_dir / "install.log", what=f"installing {wheel.name}",
                    hint="with no package index, pass --find-links DIR holding the wheel's dependencies",
                    limit=timeouts.NETWORK)
    print(proc.run([str(venv / "bin" / "hiraishin-llama"), "--version"], what="hiraishin-llama --version").stdout)
    report_path = out_dir / "smoke.json"
    smoke = [str(venv / "bin" / "hiraishin-llama-smoke"), "--json", str(report_path), *smoke_args]
    # Its lines as they come ("running Q4_K_M kv=f16 switch on (3/8) ..."), and the case it is on.
    smoke_log = out_dir / "smoke.log"
    report_path.unlink(missing_ok=True)  # a report of an earlier run must not stand for this one
    returncode = proc.run_logged(smoke, log_path=smoke_log, what="the smoke test", limit=timeouts.BUILD,
                                 check=False, echo=True, steps=progress.SMOKE_CASES)
    if returncode == SMOKE_EXIT_USAGE:
        return SmokeResult(report_path, False, {}, refused=refusal_message(smoke_log))
    if not report_path.is_file():
        raise SmokeFailed(
            f"the smoke test wrote no report (exit status {returncode})",
            hint=f"see {smoke_log}\n" + proc.tail(smoke_log.read_text(errors="replace"), 10),
        )
    report = json.loads(report_path.read_text())
    if serve_model is not None:
        served = serve_check(venv, serve_model, out_dir / "server.log")
        report["serve_check"] = served.as_dict()
        report_path.write_text(json.dumps(report, indent=2) + "\n")
        print(f"llama-server answered {served.tokens_predicted} tokens: {served.completion!r}")
    return SmokeResult(report_path, returncode == 0 and report.get("passed", False), report)


@dataclass(frozen=True)
class ServeResult:
    model: str
    port: int
    startup_s: float
    completion: str
    tokens_predicted: int
    request_s: float

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def llama_server(venv: Path, args: Sequence[str], log_path: Path, *, timeout_s: float = 120.0,
                 env: Mapping[str, str] | None = None) -> Iterator[tuple[str, float]]:
    """The wheel's llama-server with ``args`` on a free loopback port, ready: yields its base URL and
    how long it took to start; stopped on leaving, however the block ends."""
    import time
    import urllib.error
    import urllib.request

    port = _free_port()
    command = [str(venv / "bin" / "llama-server"), *args, "--host", "127.0.0.1", "--port", str(port)]
    started = time.monotonic()
    with proc.background(command, log_path=log_path, env=env) as process:
        base = f"http://127.0.0.1:{port}"
        while True:
            if process.poll() is not None:
                raise SmokeFailed(f"llama-server exited with status {process.returncode} before it was ready",
                                  hint=f"see {log_path}:\n" + proc.tail(log_path.read_text(errors="replace"), 10))
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() - started > timeout_s:
                raise SmokeFailed(f"llama-server did not become ready in {timeout_s:.0f} s", hint=f"see {log_path}")
            time.sleep(0.5)
        yield base, time.monotonic() - started


@contextlib.contextmanager
def rpc_worker(venv: Path, log_path: Path, *, threads: int = 2, timeout_s: float = 60.0,
               env: Mapping[str, str] | None = None,
               args: Sequence[str] = ()) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The wheel's rpc-server (a worker of a model split across machines) on a free loopback port, listening:
    yields its HOST:PORT for --rpc and its process; stopped on leaving, however the block ends. ``args``: more
    rpc-server arguments, e.g. ``--device CUDA0``."""
    import time

    port = _free_port()
    command = [str(venv / "bin" / "rpc-server"), "--host", "127.0.0.1", "--port", str(port),
               "--threads", str(threads),
               *args]
    started = time.monotonic()
    with proc.background(command, log_path=log_path, env=env) as process:
        # Listening once its banner is in the log: it flushes the banner (the mode included) after it binds
        # (patches/ggml-rpc-a-worker-says-whether-it-computes-in-batch-invarian.patch). A connection would
        # tell too, but the server would take it for a client.
        while True:
            if process.poll() is not None:
                raise SmokeFailed(f"rpc-server exited with status {process.returncode} before it listened",
                                  hint=f"see {log_path}:\n" + proc.tail(log_path.read_text(errors="replace"), 10))
            if "  transport" in log_path.read_text(errors="replace"):
                break
            if time.monotonic() - started > timeout_s:
                raise SmokeFailed(f"rpc-server did not listen on 127.0.0.1:{port} in {timeout_s:.0f} s",
                                  hint=f"see {log_path}")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}", process


def serve_check(venv: Path, model: Path, log_path: Path, *, timeout_s: float = 120.0,
                prompt: str = "The capital of France is", n_predict: int = 16) -> ServeResult:
    """Start the wheel's llama-server on loopback, ask one completion, stop it."""
    import time
    import urllib.request

    problem = gguf_problem(model)
    if problem:
        raise SmokeFailed(f"--serve-model {model}: {problem}", hint="pass a .gguf model file")
    with llama_server(venv, ["-m", str(model), "-c", "2048", "-np", "1"], log_path, timeout_s=timeout_s) as (base, startup):
        body = json.dumps({"prompt": prompt, "n_predict": n_predict, "temperature": 0}).encode()
        request = urllib.request.Request(f"{base}/completion", data=body, headers={"Content-Type": "application/json"})
        asked = time.monotonic()
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer = json.loads(response.read())
        took = time.monotonic() - asked
    content = answer.get("content", "")
    if not content.strip():
        raise SmokeFailed("llama-server answered an empty completion", hint=f"see {log_path}")
    port = int(base.rsplit(":", 1)[1])
    return ServeResult(str(model), port, round(startup, 2), content, int(answer.get("tokens_predicted", 0)), round(took, 2))
