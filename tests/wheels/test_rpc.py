"""A model split across machines through llama.cpp's RPC backend, with the CPU wheel: rpc-server workers on
127.0.0.1 and hiraishin-replay with --rpc, as a user starts them from the installed wheel.

The model is Qwen3-8B-shaped (two layers, Q4_K_M as llama-quantize lays it out, written directly), after a
prompt of 600 tokens: past 512 cells the CPU's stock flash attention splits one query's KV range over the threads,
so the switch-off control differs on any x86 CPU (with a short prompt only the products could differ, and on a
CPU with AMX tiles stock Q4_K_M products of a batch add as one row's do). With --ngl 2 the worker holds the second
layer, the client the first layer and the output matrix (llama.cpp offloads the output only when N exceeds the
layer count).

Needs a built, repaired CPU wheel (HIRAISHIN_CPU_WHEEL, or dist/wheels/cpu/: see conftest.py); skips without.
Every process is bounded in time and stopped when its test ends.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hiraishin_build.smoke import rpc_worker
from hiraishin_llama import synthetic
from tests.helpers import fresh_venv, load_benchmark, pip_install

N_GEN = 48
N_PROMPT = 600
# every verify width the guarantee names
BATCHES = ",".join(str(b) for b in range(2, 17))
REPLAY_TIMEOUT_S = 600
OFF = {"GGML_BATCH_INVARIANT": "0"}


@pytest.fixture(scope="module")
def venv(cpu_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CPU wheel installed in a fresh venv, as a user installs it."""
    where = fresh_venv(tmp_path_factory.mktemp("rpc") / "venv")
    # with its dependencies, as a user's pip installs it (llama-server's launcher reads the model with gguf)
    result = pip_install(where, str(cpu_wheel))
    assert result.returncode == 0, result.stdout + result.stderr
    if not (where / "bin" / "rpc-server").is_file():
        pytest.fail(f"{cpu_wheel.name} has no rpc-server console script (built before GGML_RPC was on?)")
    return where


@pytest.fixture(scope="module")
def split_model(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    quantizer = venv / "bin" / synthetic.QUANTIZER_NAME
    out = tmp_path_factory.mktemp("rpc-model") / "qwen3-8b-2l-Q4_K_M.gguf"
    return synthetic.make_direct_model("qwen3-8b", 1, 2, "Q4_K_M", out, quantizer)


def replay(venv: Path, model: Path, endpoint: str, report: Path, *, expect: str, env: dict[str, str] | None = None,
           n_gen: int = N_GEN, batches: str = BATCHES) -> subprocess.CompletedProcess[str]:
    import os

    command = [str(venv / "bin" / "hiraishin-replay"), "replay", "--model", str(model), "--rpc", endpoint,
               "--ngl", "2", "--threads", "2", "--n-prompt", str(N_PROMPT), "--n-gen", str(n_gen), "--batches", batches,
               "--ctx", "1024", "--expect", expect, "--json", str(report)]
    return subprocess.run(command, capture_output=True, text=True, timeout=REPLAY_TIMEOUT_S,
                          env={**os.environ, **(env or {})})


def differing(report: Path) -> dict[int, int]:
    """Positions differing from one-token decoding, per verify width b >= 2 (the report also holds b = 1)."""
    return {r["b"]: r["positions_differ"] for r in json.loads(report.read_text())["results"] if r["b"] >= 2}


def test_a_split_across_a_worker_is_exact_at_every_b(venv: Path, split_model: Path, tmp_path: Path) -> None:
    with rpc_worker(venv, tmp_path / "worker.log") as (endpoint, _):
        result = replay(venv, split_model, endpoint, tmp_path / "on.json", expect="identical")
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert differing(tmp_path / "on.json") == dict.fromkeys(range(2, 17), 0)
    report = json.loads((tmp_path / "on.json").read_text())
    assert report["rpc_servers"] == [endpoint]
    # the worker's device took layers: it is one of the run's devices, and the worker served a client
    assert any(device["name"].startswith("RPC") for device in report["devices"]), report["devices"]
    worker_log = (tmp_path / "worker.log").read_text()
    assert "hiraishin-llama: batch-invariant mode on" in worker_log  # the console script's line
    assert "batch-invariant: on" in worker_log  # the worker's own banner, what a client checks
    assert "Accepted client connection" in worker_log


def test_the_control_with_the_switch_off_everywhere_differs(venv: Path, split_model: Path, tmp_path: Path) -> None:
    with rpc_worker(venv, tmp_path / "worker.log", env=OFF) as (endpoint, _):
        result = replay(venv, split_model, endpoint, tmp_path / "off.json", expect="differ", env=OFF)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert any(differ > 0 for differ in differing(tmp_path / "off.json").values())
    assert "batch-invariant: off" in (tmp_path / "worker.log").read_text()


def test_a_worker_whose_mode_is_off_is_refused(venv: Path, split_model: Path, tmp_path: Path) -> None:
    with rpc_worker(venv, tmp_path / "worker.log", env=OFF) as (endpoint, _):
        started = time.monotonic()
        result = replay(venv, split_model, endpoint, tmp_path / "refused.json", expect="identical")
    assert time.monotonic() - started < 60
    assert result.returncode == 3, result.stdout + result.stderr
    # the worker is named, with what is wrong and how to fix it; nothing was computed
    assert f"RPC server {endpoint} computes with batch-invariant mode off while this process has it on" in result.stderr
    assert "GGML_BATCH_INVARIANT=1" in result.stderr
    assert f"runtime failure: --rpc: the RPC server {endpoint} could not be used\n  llama.cpp: RPC server" in result.stderr
    assert not (tmp_path / "refused.json").exists()


def test_a_client_with_the_mode_off_uses_a_worker_with_it_on(venv: Path, split_model: Path, tmp_path: Path) -> None:
    # nothing is promised with the client's mode off, so nothing is refused
    with rpc_worker(venv, tmp_path / "worker.log") as (endpoint, _):
        result = replay(venv, split_model, endpoint, tmp_path / "mixed.json", expect="none", env=OFF,
                        n_gen=8, batches="2")
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]


def test_a_worker_killed_mid_run_ends_the_client_with_an_error(venv: Path, split_model: Path, tmp_path: Path) -> None:
    import os

    with rpc_worker(venv, tmp_path / "worker.log") as (endpoint, worker):
        command = [str(venv / "bin" / "hiraishin-replay"), "replay", "--model", str(split_model), "--rpc", endpoint,
                   "--ngl", "2", "--threads", "2", "--n-gen", "4000", "--ctx", "8192", "--batches", BATCHES,
                   "--expect", "none", "--json", str(tmp_path / "killed.json")]
        with (tmp_path / "client.log").open("wb") as log:
            client = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
            try:
                # killed once it computes: it has served the client's first graphs
                deadline = time.monotonic() + 120
                while "Accepted client connection" not in (tmp_path / "worker.log").read_text():
                    assert time.monotonic() < deadline and client.poll() is None, (tmp_path / "client.log").read_text()
                    time.sleep(0.2)
                time.sleep(3)
                os.killpg(worker.pid, signal.SIGKILL)
                code = client.wait(timeout=60)  # an error, not a hang
            finally:
                if client.poll() is None:
                    client.kill()
    assert code != 0
    assert "Remote RPC server crashed or returned malformed response" in (tmp_path / "client.log").read_text()


def test_llama_server_split_across_a_worker_speculates_the_plain_greedy_tokens(venv: Path, smollm2: Path,
                                                                               tmp_path: Path) -> None:
    """`llama-server --rpc HOST:PORT -ngl 16` with a self-draft (-md) against the same split without one, as
    benchmarks/server_exact.py runs them: the last 15 of SmolLM2's 30 layers on the worker."""
    server_exact = load_benchmark("server_exact")
    with rpc_worker(venv, tmp_path / "worker.log") as (endpoint, _):
        state = server_exact.switch_state(venv, smollm2, tmp_path, switch_on=True, prompts=server_exact.PROMPTS[:1],
                                          n_predict=64, extra=("--rpc", endpoint, "-ngl", "16"))
    plain, draft = state["plain"], state["draft"]
    assert not plain.failure and not draft.failure, (plain.failure, draft.failure, draft.log_tail)
    assert draft.speculative and sum(a.draft_n for a in draft.answers) > 0  # it did speculate
    assert (state["identical"], state["compared"]) == (1, 1), state["per_prompt"]
    # both servers computed on the worker (llama-server's log does not name devices at its default verbosity)
    assert (tmp_path / "worker.log").read_text().count("Accepted client connection") >= 2
