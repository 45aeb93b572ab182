"""Console scripts that run the bundled llama.cpp programs.

Each one execs the real binary from ``bin/`` with the environment it needs:
batch-invariant mode as the two switch names ask (on when neither is set; see
switch.py), exported under both names so every backend agrees, and the NVIDIA runtime
wheels' library directories on the search path as a fallback for installs
where RPATH cannot reach them (purelib and platlib in different places).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import runtime, switch

BIN_DIR = Path(__file__).resolve().parent / "bin"
# Runs the test and benchmark programs against a build's bin/ directory instead of
# this installation's, e.g. a development build of the patched tree.
BIN_DIR_ENV = "HIRAISHIN_LLAMA_BIN_DIR"

# Our wheels exist for exact speculative decoding, so the mode is on by default
# here; GGML_CUDA_BATCH_INVARIANT=0 or GGML_BATCH_INVARIANT=0 turns it off.
DEFAULT_ON = True


def tool_dir() -> Path:
    """Where hiraishin-llama-smoke and -bench find hiraishin-replay and llama-quantize."""
    return Path(os.environ.get(BIN_DIR_ENV) or BIN_DIR)


def program_path(name: str) -> Path:
    path = BIN_DIR / name
    if not path.is_file():
        raise SystemExit(
            f"hiraishin-llama: {path} is missing from this installation; reinstall the wheel "
            "(pip install --force-reinstall hiraishin-llama)"
        )
    return path


def program_environment(base: dict[str, str] | None = None, *, program: str = "hiraishin-llama") -> dict[str, str]:
    """The environment a program runs in: the switch resolved and exported under
    both names (a warning on stderr for a value that is not an on/off word), and
    the NVIDIA runtime wheels' library directories as a fallback search path."""
    env = dict(os.environ if base is None else base)
    resolved = switch.resolve(env, default=DEFAULT_ON)
    for warning in resolved.warnings:
        print(f"{program}: warning: {warning}", file=sys.stderr)
    env.update(resolved.environment())
    library_dirs = [str(d) for d in runtime.nvidia_library_dirs()]
    if library_dirs:
        existing = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = os.pathsep.join([*library_dirs, *([existing] if existing else [])])
    return env


def switch_environment(batch_invariant: bool) -> dict[str, str]:
    """The programs' environment with batch-invariant mode explicitly on or off
    (the smoke test and the bench run both modes, whatever the user set)."""
    env = program_environment({k: v for k, v in os.environ.items() if k not in switch.NAMES})
    env.update(switch.Resolved(batch_invariant).environment())
    return env


# upstream's rpc-server, under the name its CMake target gives it; the console script is rpc-server
RPC_SERVER = "ggml-rpc-server"

# The programs whose output depends on the mode (what they generate, or how fast): each says on stderr
# which mode it runs in, so a log shows it; stdout stays the program's own.
REPORTS_MODE = frozenset({"llama-server", "llama-cli", "llama-speculative-simple", "llama-bench", RPC_SERVER})
# The programs that generate text with a model: in batch-invariant mode each also says whether the mode covers the
# model (-m) on the backend its layers run on (coverage.launch_line).
REPORTS_COVERAGE = frozenset({"llama-server", "llama-cli", "llama-speculative-simple"})


def run_program(name: str, args: list[str] | None = None) -> None:
    path = program_path(name)
    runtime.warn_about_environment(name)
    argv = [name, *(sys.argv[1:] if args is None else args)]
    if name in REPORTS_MODE:
        resolved = switch.resolve(os.environ, default=DEFAULT_ON)
        print(f"hiraishin-llama: {resolved.describe(default=DEFAULT_ON)}", file=sys.stderr, flush=True)
        if name in REPORTS_COVERAGE and resolved.on:
            from . import coverage  # only here: the other programs start without reading coverage.json

            line = coverage.launch_line(argv[1:])
            if line:
                print(f"hiraishin-llama: {line}", file=sys.stderr, flush=True)
    os.execve(path, argv, program_environment(program=name))


def llama_server() -> None:
    run_program("llama-server")


def llama_cli() -> None:
    run_program("llama-cli")


def llama_speculative_simple() -> None:
    run_program("llama-speculative-simple")


def llama_bench() -> None:
    run_program("llama-bench")


def llama_quantize() -> None:
    run_program("llama-quantize")


def hiraishin_replay() -> None:
    run_program("hiraishin-replay")


def rpc_server() -> None:
    # A worker computes in the mode it is started in; a batch-invariant client refuses one that is not.
    run_program(RPC_SERVER)
