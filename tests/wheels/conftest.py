"""Shared fixtures for the wheel's tests.

Tests that run compiled tools find them through HIRAISHIN_LLAMA_BIN_DIR (a
directory holding llama-quantize and hiraishin-replay) and are skipped when
it is not set.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Run against the source tree when the package is not installed.
_WHEELS_DIR = Path(__file__).resolve().parents[2] / "wheels"
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
