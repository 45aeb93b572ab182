"""Install a wheel into a fresh virtual environment and run its smoke test there."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import progress, proc, timeouts
from .errors import IndexBuildError, SmokeFailed
from .index import PYPI, IndexedWheel, build_index, read_wheel, variant_of


@dataclass(frozen=True)
class SmokeResult:
    report_path: Path
    passed: bool
    report: dict


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def user_requirement(wheel: Path) -> str:
    """What a user of this wheel asks pip for: ``hiraishin-llama[cu13]==9079.4+cu13.sm90``."""
    return read_wheel(wheel, variant_of(wheel.name) or "").requirement()


def checked_wheel(wheel: Path) -> IndexedWheel:
    """The wheel's name and metadata, read before any work: a file that is not a wheel stops here."""
    if not wheel.is_file() or wheel.suffix != ".whl":
        raise SmokeFailed(f"{wheel} is not a wheel file", hint="build one with `hiraishin wheel --recipe NAME`")
    try:
        return read_wheel(wheel, variant_of(wheel.name) or "")
    except IndexBuildError as error:
        raise SmokeFailed(error.message, hint="build one with `hiraishin wheel --recipe NAME`") from None


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
    """
    checked_wheel(wheel)  # before the venv, which takes seconds to make
    if from_index and variant_of(wheel.name) is None:
        raise SmokeFailed(f"{wheel.name} has no variant label (+cpu, +cu13.sm90), so it has no index of its own",
                          hint="build it with `hiraishin wheel --recipe NAME`")
    out_dir.mkdir(parents=True, exist_ok=True)
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
    returncode = proc.run_logged(smoke, log_path=smoke_log, what="the smoke test", limit=timeouts.BUILD,
                                 check=False, echo=True, steps=progress.SMOKE_CASES)
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
    how long it took to start; stopped on leaving."""
    import subprocess
    import time
    import urllib.error
    import urllib.request

    port = _free_port()
    command = [str(venv / "bin" / "llama-server"), *args, "--host", "127.0.0.1", "--port", str(port)]
    started = time.monotonic()
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   env=None if env is None else {**os.environ, **env})
        try:
            base = f"http://127.0.0.1:{port}"
            while True:
                if process.poll() is not None:
                    raise SmokeFailed(f"llama-server exited with status {process.returncode} before it was ready",
                                      hint=f"see {log_path}:\n" + proc.tail(log_path.read_text(), 10))
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
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def serve_check(venv: Path, model: Path, log_path: Path, *, timeout_s: float = 120.0,
                prompt: str = "The capital of France is", n_predict: int = 16) -> ServeResult:
    """Start the wheel's llama-server on loopback, ask one completion, stop it."""
    import time
    import urllib.request

    if not model.is_file():
        raise SmokeFailed(f"--serve-model {model}: no such file")
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
