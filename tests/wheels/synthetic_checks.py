"""Checks that the tests of synthetic.py's preset families (test_synthetic_moe.py, test_synthetic_hybrid.py) share:
reading a written model's metadata and tensor layout, and the two properties every preset's models must have
(the same seed gives the same bytes; a tensor's values do not depend on how many layers the model has)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import gguf
import numpy as np
from hiraishin_llama import synthetic


def make_models(directory: Path, names: tuple[str, ...]) -> dict[str, Path]:
    """Each preset at seed 1, all its layers (F16)."""
    return {name: synthetic.make_model(name, seed=1, n_layer=None, out_path=directory / f"{name}.gguf")
            for name in names}


def metadata_field(reader: gguf.GGUFReader, key: str):
    field = reader.get_field(key)
    assert field is not None, f"missing metadata key {key}"
    return field.contents()


def tensor_layout(path: Path) -> dict[str, tuple[list[int], str]]:
    return {t.name: (t.shape.tolist(), t.tensor_type.name) for t in gguf.GGUFReader(path).tensors}


def embedding_and_output_layout(p: synthetic.Preset) -> dict[str, tuple[list[int], str]]:
    d = p.n_embd
    return {"token_embd.weight": ([d, p.n_vocab], "F16"), "output_norm.weight": ([d], "F32"),
            "output.weight": ([d, p.n_vocab], "F16")}


def assert_deterministic(name: str, made: Path, tmp_path: Path) -> None:
    """The same seed writes the same bytes, another seed others."""
    again = synthetic.make_model(name, seed=1, n_layer=None, out_path=tmp_path / "again.gguf")
    assert synthetic.sha256_of(again) == synthetic.sha256_of(made)
    other = synthetic.make_model(name, seed=2, n_layer=None, out_path=tmp_path / "seed2.gguf")
    assert synthetic.sha256_of(other) != synthetic.sha256_of(made)


def assert_draws_do_not_depend_on_layer_count(name: str, made: Path, tmp_path: Path,
                                              residual: tuple[str, ...], skip_prefix: str | None = None) -> None:
    """A one-layer model holds the full model's first-layer values, but the ``residual`` projections (scaled by
    the layer count) and the tensors named from ``skip_prefix`` (a block whose index follows the layer count,
    as an MTP block's does)."""
    one_layer = synthetic.make_model(name, seed=1, n_layer=1, out_path=tmp_path / "one.gguf")
    full = {t.name: t for t in gguf.GGUFReader(made).tensors}
    for tensor in gguf.GGUFReader(one_layer).tensors:
        if skip_prefix and tensor.name.startswith(skip_prefix):
            continue
        if not tensor.name.endswith(residual):
            assert np.array_equal(tensor.data, full[tensor.name].data), tensor.name


# A prompt past the 512 cells from which the CPU's stock flash attention splits one query's KV range over the
# threads (a batch's queries each keep theirs whole): the switch-off control then differs on every x86 CPU. A
# short prompt leaves only the products to differ, and on a CPU with AMX tiles stock Q4_K_M products of a batch
# add as one row's do: the control came out identical there.
REPLAY_PROMPT = 600
REPLAY_CTX = 1024


def assert_replay_on_the_cpu(model: Path, replay_tool: Path, report: Path, switch: str, identical: bool) -> None:
    """A short CPU replay of ``model`` at b = 2, 3, 4, 5, 8 and 16 after a prompt of REPLAY_PROMPT tokens, with
    the switch as given: every position identical to one-token decoding (``identical``), or some differing past
    b = 1 (the control)."""
    result = subprocess.run([str(replay_tool), "replay", "--model", str(model), "--batches", "2,3,4,5,8,16",
                             "--n-prompt", str(REPLAY_PROMPT), "--n-gen", "96", "--ctx", str(REPLAY_CTX),
                             "--threads", "2",
                             "--json", str(report)],
                            check=False, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "GGML_BATCH_INVARIANT": switch, "GGML_CUDA_BATCH_INVARIANT": switch})
    assert result.returncode == 0, result.stdout + result.stderr
    differing = {row["b"]: row["positions_differ"] for row in json.loads(report.read_text())["results"]}
    assert differing[1] == 0
    if identical:
        assert all(count == 0 for count in differing.values()), differing
    else:
        assert any(count > 0 for b, count in differing.items() if b > 1), differing


def assert_server_state(state: dict, n_prompts: int, identical: bool) -> None:
    """Of benchmarks/server_exact.py's switch_state: both servers answered every prompt, the draft server
    speculated with some drafts accepted and some rejected (so verify batches keep part of what they drafted, and
    a recurrent state is restored to a point inside them), and its replies are the plain server's (``identical``)
    or part from them somewhere (the control)."""
    for run in (state["draft"], state["plain"]):
        assert run.failure is None and run.served == n_prompts, (run.failure, run.log_tail)
    drafted = sum(answer.draft_n for answer in state["draft"].answers)
    accepted = sum(answer.draft_n_accepted for answer in state["draft"].answers)
    assert state["draft"].speculative and 0 < accepted < drafted, (accepted, drafted)
    if identical:
        assert state["identical"] == state["compared"] == n_prompts, state["per_prompt"]
    else:
        assert state["identical"] < state["compared"], state["per_prompt"]


class SwitchStates:
    """benchmarks/server_exact.py's switch_state for each switch state, made on first use and kept: a module's
    tests share one plain and one drafting run of ``model`` per state. ``options`` go to switch_state."""

    def __init__(self, venv: Path, model: Path, log_dir: Path, **options) -> None:
        self.venv, self.model, self.log_dir, self.options = venv, model, log_dir, options
        self._states: dict[bool, dict] = {}

    def __call__(self, switch_on: bool) -> dict:
        if switch_on not in self._states:
            from tests.helpers import load_benchmark

            self._states[switch_on] = load_benchmark("server_exact").switch_state(
                self.venv, self.model, self.log_dir, switch_on=switch_on, plain_after_failure=False, **self.options)
        return self._states[switch_on]
