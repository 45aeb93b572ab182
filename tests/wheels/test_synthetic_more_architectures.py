"""Synthetic models of more architectures people speculate with: qwen2 (Qwen2.5-7B). Presets with the real
models' shapes, the tiny models' tensors and metadata, and, with the CPU tools (HIRAISHIN_LLAMA_BIN_DIR or the
built wheel; the tests skip without, see conftest.py), a replay of each tiny model: every verify batch's logits
one-token decoding's with the switch on, and some differing with it off (the control).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gguf
import pytest

from hiraishin_llama import synthetic

from tests.wheels.synthetic_checks import (assert_deterministic, assert_draws_do_not_depend_on_layer_count,
                                          assert_replay_on_the_cpu, embedding_and_output_layout, make_models,
                                          metadata_field, tensor_layout)

TINY_PRESETS = ("tiny-qwen2",)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny presets at seed 1 (F16), written once for this module."""
    return make_models(tmp_path_factory.mktemp("more-architectures"), TINY_PRESETS)


# --- presets ---

def test_qwen2_preset_has_qwen25_7bs_shapes() -> None:
    # Qwen2.5-7B's config.json: hidden_size 3584, num_attention_heads 28, num_key_value_heads 4 (head dim
    # 3584 / 28 = 128), intermediate_size 18944, num_hidden_layers 28, rope_theta 1e6, rms_norm_eps 1e-6; with a
    # llama-sized vocabulary (the real one has 152064 tokens).
    p = synthetic.get_preset("qwen2")
    assert p.architecture == synthetic.QWEN2 == "qwen2"
    assert (p.n_embd, p.n_head, p.n_head_kv, p.head_dim, p.n_ff, p.n_layer) == (3584, 28, 4, 128, 18944, 28)
    assert (p.rope_freq_base, p.rms_norm_eps, p.rope_dim, p.n_vocab) == (1e6, 1e-6, 0, 32000)
    assert not p.is_moe


@pytest.mark.parametrize(("name", "changes", "message"), [
    ("tiny-qwen2", {"head_dim": 128}, "'tiny-qwen2': qwen2 needs n_head \\* head_dim == n_embd"),
    ("tiny-qwen2", {"rope_dim": 32}, "'tiny-qwen2': qwen2 rotates all of each head; rope_dim must be 0"),
    ("tiny-qwen2", {"n_expert": 16, "n_expert_used": 4, "n_ff_exp": 256}, "'tiny-qwen2': a qwen2 model has no experts"),
])
def test_inconsistent_presets_are_refused(name: str, changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(synthetic.get_preset(name), **changes)


# --- tensors and metadata ---

def test_qwen2_tensors(models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-qwen2")
    d, n_kv = p.n_embd, p.n_head_kv * p.head_dim
    # As llama_model_qwen2::load_arch_tensors creates them: biases on q, k and v, no q/k norms.
    layout = {"attn_norm.weight": ([d], "F32"), "attn_q.weight": ([d, d], "F16"), "attn_q.bias": ([d], "F32"),
              "attn_k.weight": ([d, n_kv], "F16"), "attn_k.bias": ([n_kv], "F32"),
              "attn_v.weight": ([d, n_kv], "F16"), "attn_v.bias": ([n_kv], "F32"),
              "attn_output.weight": ([d, d], "F16"), "ffn_norm.weight": ([d], "F32"),
              "ffn_gate.weight": ([d, p.n_ff], "F16"), "ffn_up.weight": ([d, p.n_ff], "F16"),
              "ffn_down.weight": ([p.n_ff, d], "F16")}
    expected = embedding_and_output_layout(p)
    for layer in range(p.n_layer):
        expected.update({f"blk.{layer}.{name}": value for name, value in layout.items()})
    assert tensor_layout(models["tiny-qwen2"]) == expected


def test_qwen2_metadata(models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-qwen2")
    reader = gguf.GGUFReader(models["tiny-qwen2"])
    assert metadata_field(reader, "general.architecture") == "qwen2"
    expected = {"block_count": p.n_layer, "embedding_length": p.n_embd, "feed_forward_length": p.n_ff,
                "attention.head_count": p.n_head, "attention.head_count_kv": p.n_head_kv,
                "rope.dimension_count": p.head_dim}
    for key, value in expected.items():
        assert metadata_field(reader, f"qwen2.{key}") == value, key
    assert metadata_field(reader, "qwen2.rope.freq_base") == pytest.approx(1e6)
    assert not [f for f in reader.fields if "expert" in f or "sliding" in f]


@pytest.mark.parametrize("name", TINY_PRESETS)
def test_models_are_deterministic(name: str, models: dict[str, Path], tmp_path: Path) -> None:
    assert_deterministic(name, models[name], tmp_path)


# What each preset's layers write into the residual stream, scaled by the layer count.
RESIDUAL = {"tiny-qwen2": ("attn_output.weight", "ffn_down.weight")}


@pytest.mark.parametrize("name", TINY_PRESETS)
def test_draws_do_not_depend_on_layer_count(name: str, models: dict[str, Path], tmp_path: Path) -> None:
    assert_draws_do_not_depend_on_layer_count(name, models[name], tmp_path, residual=RESIDUAL[name])


def test_the_cli_writes_a_tiny_model(tmp_path: Path) -> None:
    for name in TINY_PRESETS:
        out = tmp_path / f"{name}.gguf"
        assert synthetic.main(["--preset", name, "--out", str(out)]) == 0
        assert metadata_field(gguf.GGUFReader(out), "hiraishin.synthetic.preset") == name


def test_describe_preset_names_the_architecture() -> None:
    assert synthetic.describe_preset("qwen2") == "qwen2, 28 layers, n_embd 3584, 28/4 heads of 128, n_ff 18944, vocab 32000"


# --- with the real tools ---

@pytest.fixture(scope="module")
def quantized(models: dict[str, Path], quantizer: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each tiny preset in Q4_K_M."""
    directory = tmp_path_factory.mktemp("more-architectures-q")
    return {name: synthetic.quantize(f16, directory / f"{name}-Q4_K_M.gguf", "Q4_K_M", quantizer)
            for name, f16 in models.items()}


@pytest.mark.parametrize("name", TINY_PRESETS)
@pytest.mark.parametrize(("switch", "identical"), [("1", True), ("0", False)])
def test_tiny_model_is_exact_on_the_cpu_with_the_switch_on(name: str, switch: str, identical: bool,
                                                          replay_tool: Path, quantized: dict[str, Path],
                                                          tmp_path: Path) -> None:
    """The tiny model loads, and every verify batch (b = 2, 3, 4, 5, 8, 16) after a 600-token prompt gives
    one-token decoding's logits with the switch on; off (the control), some position differs."""
    assert_replay_on_the_cpu(quantized[name], replay_tool, tmp_path / "replay.json", switch, identical)
