"""What several test modules need: the CLI runner, snapshots, small wheels made here,
stand-in executables, fresh-venv installs and the benchmark-script loader.

Test modules import from here (``from ..helpers import ...``), never from one
another; fixtures live in the conftest.py files.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import functools
import hashlib
import http.server
import importlib.util
import io
import os
import shutil
import stat
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]

# -- the command line -------------------------------------------------------------


def hiraishin(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`hiraishin ARGS` in a process of its own, as a user runs it: real exit code, stdout and stderr.
    ``env`` is added to this process's environment."""
    return subprocess.run([sys.executable, "-m", "hiraishin_build.cli", *args], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, **(env or {})})


# -- snapshots ---------------------------------------------------------------------


def dir_snapshot(directory: Path) -> dict[str, bytes]:
    """The files directly in ``directory`` (e.g. patches/), name -> bytes."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def tree_snapshot(workdir: Path) -> dict[str, object]:
    """A git work tree as a user would compare it: files, refs, HEAD, the tool's state file, status."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(workdir), *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    files = {
        str(p.relative_to(workdir)): p.read_bytes()
        for p in sorted(workdir.rglob("*")) if p.is_file() and ".git" not in p.relative_to(workdir).parts
    }
    state = workdir / ".git" / "hiraishin-state.json"
    return {
        "files": files,
        "refs": git("for-each-ref", "--format=%(refname) %(objectname)"),
        "head": git("symbolic-ref", "HEAD"),
        "state": state.read_bytes() if state.is_file() else None,
        "status": git("status", "--porcelain"),
    }


# -- wheels made here --------------------------------------------------------------

EXEC = (0o100755 << 16)
PLAIN = (0o100644 << 16)


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(directory: Path, files: dict[str, tuple[bytes, int]], version: str = "9079.2",
               tag: str = "py3-none-linux_x86_64", metadata: str = "") -> Path:
    """A minimal valid wheel: the given files plus METADATA (with ``metadata`` lines appended),
    WHEEL and a correct RECORD."""
    info = f"hiraishin_llama-{version}.dist-info"
    entries = dict(files)
    entries.setdefault("hiraishin_llama/__init__.py", (b"", PLAIN))
    entries.setdefault("hiraishin_llama/_version.py", (f'__version__ = "{version}"\n'.encode(), PLAIN))
    entries[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: hiraishin-llama\nVersion: {version}\n"
                                   f"Requires-Python: >=3.10\n{metadata}".encode(), PLAIN)
    entries[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(), PLAIN)
    path = directory / f"hiraishin_llama-{version}-{tag}.whl"
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, (data, mode) in entries.items():
            zinfo = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            zinfo.external_attr = mode
            archive.writestr(zinfo, data)
            rows.append(f"{name},{record_hash(data)},{len(data)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*rows, f"{info}/RECORD,,"]) + "\n")
    return path


def record_is_consistent(wheel: Path) -> bool:
    """RECORD lists every file of the wheel with its right hash and size."""
    with zipfile.ZipFile(wheel) as archive:
        record_name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(archive.read(record_name).decode())))
        if {row[0] for row in rows} != set(archive.namelist()):
            return False
        for name, digest, size in rows:
            if name == record_name:
                continue
            data = archive.read(name)
            if digest != record_hash(data) or int(size) != len(data):
                return False
    return True


# -- stand-in executables ----------------------------------------------------------


def stand_in(bin_dir: Path, name: str, script: str) -> Path:
    """An executable ``bin_dir/name`` running the shell ``script`` (put ``bin_dir`` first on PATH to use it)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script.strip() + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# -- the replay tool's C++ parts ---------------------------------------------------

REPLAY_SRC = REPO / "wheels" / "src" / "replay"


def compile_replay_test(source: Path, binary: Path) -> None:
    """Compile a C++ test of the replay tool's headers (C++17, warnings as errors), or skip the test, saying
    why, where this machine has no C++ compiler."""
    compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip(f"no C++ compiler to build {binary.name}")
    subprocess.run([compiler, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{REPLAY_SRC}", "-o",
                    str(binary), str(source)], check=True, capture_output=True, text=True)


# -- fresh virtual environments ----------------------------------------------------


def fresh_venv(where: Path) -> Path:
    """A new venv at ``where`` (with pip), returned as its directory."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True)
    return where


def pip_install(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``pip install ARGS`` in ``venv``, isolated from any user or site pip configuration
    (no extra index or find-links can supply the package)."""
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--isolated",
                           "--disable-pip-version-check", "--no-cache-dir", *args],
                          check=False, capture_output=True, text=True)


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


# -- benchmark scripts -------------------------------------------------------------


def load_benchmark(name: str) -> ModuleType:
    """benchmarks/NAME.py as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses in the script look their module up by name
    spec.loader.exec_module(module)
    return module


README = Path(__file__).resolve().parents[1] / "README.md"


def readme_server_command(target: Path, draft: Path) -> list[str]:
    """The arguments of the README's ``llama-server -m target.gguf -md draft.gguf ...`` line, with real
    model paths: tests start the server as the README tells users to."""
    lines = [line.strip() for line in README.read_text().splitlines()
             if line.strip().startswith("llama-server ") and "-md" in line]
    assert lines, f"{README} shows no `llama-server ... -md ...` command"
    words = lines[0].split()[1:]
    return [str(target) if w == "target.gguf" else str(draft) if w == "draft.gguf" else w for w in words]


# -- HTTP on 127.0.0.1 (an index site, release assets) ------------------------


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """A file server that does not log every request to stderr."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


@contextlib.contextmanager
def served(directory: Path, handler: type[http.server.SimpleHTTPRequestHandler] = QuietHandler) -> Iterator[str]:
    """``directory`` over HTTP on a free port of 127.0.0.1, for the block: its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
