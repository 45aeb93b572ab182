"""Synthetic mixture-of-experts models (qwen3moe, gpt-oss, qwen2moe): presets, tensors, metadata, direct writing.

The tiny presets keep these fast; the tests that run llama-quantize or hiraishin-replay take them
from HIRAISHIN_LLAMA_BIN_DIR or the built wheel and skip without (see conftest.py).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf.quants import dequantize

from hiraishin_llama import synthetic

from tests.wheels.synthetic_checks import (assert_deterministic, assert_draws_do_not_depend_on_layer_count,
                                          assert_replay_on_the_cpu, embedding_and_output_layout, make_models,
                                          metadata_field, tensor_layout)

T = gguf.GGMLQuantizationType
MOE_PRESETS = ("tiny-qwen3moe", "tiny-gpt-oss", "tiny-qwen2moe")


@pytest.fixture(scope="module")
def moe_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny MoE presets at seed 1 (F16), written once for this module."""
    return make_models(tmp_path_factory.mktemp("moe"), MOE_PRESETS)




def test_public_preset_api() -> None:
    for name in ("qwen3moe", "gpt-oss", "qwen2moe", "tiny-qwen3moe", "tiny-gpt-oss", "tiny-qwen2moe"):
        assert synthetic.get_preset(name).is_moe, name
    assert synthetic.get_preset("qwen2moe").architecture == synthetic.QWEN2MOE == "qwen2moe"
    assert not synthetic.get_preset("tiny").is_moe and not synthetic.get_preset("qwen3-8b").is_moe
    assert synthetic.get_preset("qwen3moe").architecture == synthetic.QWEN3MOE == "qwen3moe"
    assert synthetic.get_preset("gpt-oss").architecture == synthetic.GPT_OSS == "gpt-oss"
    assert synthetic.get_preset("tiny").architecture == synthetic.ARCHITECTURE == "qwen3"
    assert "MXFP4_MOE" in synthetic.QUANT_TYPES
    assert synthetic.normalize_quant_type("mxfp4_moe") == "MXFP4_MOE"


def test_qwen3moe_preset_has_the_real_shapes() -> None:
    # Qwen3-30B-A3B's config.json, with a llama-sized vocabulary.
    p = synthetic.get_preset("qwen3moe")
    assert (p.n_embd, p.n_head, p.n_head_kv, p.head_dim) == (2048, 32, 4, 128)
    assert (p.n_expert, p.n_expert_used, p.n_ff_exp, p.n_ff) == (128, 8, 768, 6144)
    assert (p.n_layer, p.context_length, p.n_vocab) == (48, 40960, 32000)
    assert (p.rope_freq_base, p.rms_norm_eps, p.sliding_window, p.rope_scaling_factor) == (1e6, 1e-6, 0, 0.0)


def test_gpt_oss_preset_has_the_real_shapes() -> None:
    # gpt-oss-20b's config.json, with a llama-sized vocabulary.
    p = synthetic.get_preset("gpt-oss")
    assert (p.n_embd, p.n_head, p.n_head_kv, p.head_dim) == (2880, 64, 8, 64)
    assert (p.n_expert, p.n_expert_used, p.n_ff_exp, p.n_ff) == (32, 4, 2880, 2880)
    assert (p.n_layer, p.context_length, p.n_vocab) == (24, 131072, 32000)
    assert (p.rope_freq_base, p.rms_norm_eps, p.sliding_window) == (150000.0, 1e-5, 128)
    assert (p.rope_scaling_factor, p.rope_scaling_orig_ctx) == (32.0, 4096)


def test_qwen2moe_preset_has_the_real_shapes() -> None:
    # Qwen1.5-MoE-A2.7B's config.json (intermediate_size 5632, moe_intermediate_size 1408,
    # shared_expert_intermediate_size 5632, 60 experts, 4 per token), with a llama-sized vocabulary.
    p = synthetic.get_preset("qwen2moe")
    assert (p.n_embd, p.n_head, p.n_head_kv, p.head_dim) == (2048, 16, 16, 128)
    assert (p.n_expert, p.n_expert_used, p.n_ff_exp, p.n_ff_shexp, p.n_ff) == (60, 4, 1408, 5632, 5632)
    assert (p.n_layer, p.context_length, p.n_vocab, p.rope_freq_base) == (24, 8192, 32000, 1e6)


@pytest.mark.parametrize("name", MOE_PRESETS)
def test_tiny_moe_rows_suit_k_quants(name: str) -> None:
    p = synthetic.get_preset(name)
    for spec in synthetic._tensor_specs(p, p.n_layer):
        if len(spec.shape) >= 2 and not spec.f32:
            assert spec.shape[-1] % 256 == 0, spec.name


@pytest.mark.parametrize(("changes", "message"), [
    ({"architecture": "llama"}, "unknown architecture"),
    ({"n_expert": 0}, "n_expert_used <= n_expert"),
    ({"n_expert_used": 17}, "n_expert_used <= n_expert"),
    ({"n_ff_exp": 0}, "n_ff_exp > 0"),
    ({"sliding_window": 0}, "sliding_window"),
    ({"rope_scaling_orig_ctx": 0}, "YaRN"),
    ({"n_ff_shexp": 256}, "n_ff_shexp .* must be positive for qwen2moe, qwen35moe, nemotron_h_moe, .*and 0 otherwise"),
])
def test_inconsistent_presets_are_rejected(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(synthetic.get_preset("tiny-gpt-oss"), **changes)


@pytest.mark.parametrize(("changes", "message"), [
    ({"n_ff_shexp": 0}, "n_ff_shexp .* must be positive for qwen2moe"),
    ({"n_head": 8}, "n_head \\* head_dim == n_embd"),
])
def test_inconsistent_qwen2moe_presets_are_rejected(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(synthetic.get_preset("tiny-qwen2moe"), **changes)


def test_a_dense_preset_with_experts_is_rejected() -> None:
    with pytest.raises(ValueError, match="has no experts"):
        dataclasses.replace(synthetic.get_preset("tiny"), n_expert=4, n_expert_used=2, n_ff_exp=256)


def _assert_experts(reader: gguf.GGUFReader, arch: str, p: synthetic.Preset) -> None:
    """The architecture name and the expert counts every MoE architecture writes under its own prefix."""
    assert metadata_field(reader, "general.architecture") == arch
    assert metadata_field(reader, f"{arch}.expert_count") == p.n_expert
    assert metadata_field(reader, f"{arch}.expert_used_count") == p.n_expert_used
    assert metadata_field(reader, f"{arch}.expert_feed_forward_length") == p.n_ff_exp


def test_qwen3moe_metadata(moe_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-qwen3moe")
    reader = gguf.GGUFReader(moe_models["tiny-qwen3moe"])
    _assert_experts(reader, "qwen3moe", p)
    expected = {
        "block_count": p.n_layer, "context_length": p.context_length, "embedding_length": p.n_embd,
        "feed_forward_length": p.n_ff, "attention.head_count": p.n_head, "attention.head_count_kv": p.n_head_kv,
        "attention.key_length": p.head_dim, "attention.value_length": p.head_dim,
        "rope.dimension_count": p.head_dim,
    }
    for key, value in expected.items():
        assert metadata_field(reader, f"qwen3moe.{key}") == value, key
    assert metadata_field(reader, "qwen3moe.rope.freq_base") == pytest.approx(p.rope_freq_base)
    assert metadata_field(reader, "qwen3moe.attention.layer_norm_rms_epsilon") == pytest.approx(p.rms_norm_eps)
    # qwen3moe has neither sliding windows nor rope scaling.
    assert not [f for f in reader.fields if "sliding_window" in f or "rope.scaling" in f]


def test_gpt_oss_metadata(moe_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-gpt-oss")
    reader = gguf.GGUFReader(moe_models["tiny-gpt-oss"])
    _assert_experts(reader, "gpt-oss", p)
    assert metadata_field(reader, "gpt-oss.attention.sliding_window") == p.sliding_window
    assert metadata_field(reader, "gpt-oss.rope.scaling.type") == "yarn"
    assert metadata_field(reader, "gpt-oss.rope.scaling.factor") == pytest.approx(p.rope_scaling_factor)
    assert metadata_field(reader, "gpt-oss.rope.scaling.original_context_length") == p.rope_scaling_orig_ctx
    assert metadata_field(reader, "gpt-oss.rope.freq_base") == pytest.approx(150000.0)
    assert metadata_field(reader, "gpt-oss.attention.layer_norm_rms_epsilon") == pytest.approx(1e-5)
    # Real gpt-oss GGUFs write no SWA pattern: llama.cpp's default period 2 applies.
    assert reader.get_field("gpt-oss.attention.sliding_window_pattern") is None


def test_qwen2moe_metadata(moe_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-qwen2moe")
    reader = gguf.GGUFReader(moe_models["tiny-qwen2moe"])
    _assert_experts(reader, "qwen2moe", p)
    assert metadata_field(reader, "qwen2moe.expert_shared_feed_forward_length") == p.n_ff_shexp
    assert metadata_field(reader, "qwen2moe.feed_forward_length") == p.n_ff


def _expert_layout(p: synthetic.Preset, blk: str, biases: bool) -> dict[str, tuple[list[int], str]]:
    e, ff, d = p.n_expert, p.n_ff_exp, p.n_embd
    layout = {
        f"{blk}.ffn_gate_inp.weight": ([d, e], "F32"),
        f"{blk}.ffn_gate_exps.weight": ([d, ff, e], "F16"),
        f"{blk}.ffn_up_exps.weight": ([d, ff, e], "F16"),
        f"{blk}.ffn_down_exps.weight": ([ff, d, e], "F16"),
    }
    if biases:
        layout.update({
            f"{blk}.ffn_gate_inp.bias": ([e], "F32"),
            f"{blk}.ffn_gate_exps.bias": ([ff, e], "F32"),
            f"{blk}.ffn_up_exps.bias": ([ff, e], "F32"),
            f"{blk}.ffn_down_exps.bias": ([d, e], "F32"),
        })
    return layout


def test_qwen3moe_tensors(moe_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-qwen3moe")
    n_q, n_kv, d = p.n_head * p.head_dim, p.n_head_kv * p.head_dim, p.n_embd
    # ggml order (ne0 first), as llama_model_qwen3moe::load_arch_tensors creates them.
    expected = {
        "token_embd.weight": ([d, p.n_vocab], "F16"),
        "output_norm.weight": ([d], "F32"),
        "output.weight": ([d, p.n_vocab], "F16"),
    }
    for layer in range(p.n_layer):
        blk = f"blk.{layer}"
        expected.update({
            f"{blk}.attn_norm.weight": ([d], "F32"),
            f"{blk}.attn_q.weight": ([d, n_q], "F16"),
            f"{blk}.attn_k.weight": ([d, n_kv], "F16"),
            f"{blk}.attn_v.weight": ([d, n_kv], "F16"),
            f"{blk}.attn_q_norm.weight": ([p.head_dim], "F32"),
            f"{blk}.attn_k_norm.weight": ([p.head_dim], "F32"),
            f"{blk}.attn_output.weight": ([n_q, d], "F16"),
            f"{blk}.ffn_norm.weight": ([d], "F32"),
            **_expert_layout(p, blk, biases=False),
        })
    assert tensor_layout(moe_models["tiny-qwen3moe"]) == expected



def _biased_qkv_layout(p: synthetic.Preset, blk: str) -> dict[str, tuple[list[int], str]]:
    n_q, n_kv, d = p.n_head * p.head_dim, p.n_head_kv * p.head_dim, p.n_embd
    return {
        f"{blk}.attn_norm.weight": ([d], "F32"),
        f"{blk}.attn_q.weight": ([d, n_q], "F16"), f"{blk}.attn_q.bias": ([n_q], "F32"),
        f"{blk}.attn_k.weight": ([d, n_kv], "F16"), f"{blk}.attn_k.bias": ([n_kv], "F32"),
        f"{blk}.attn_v.weight": ([d, n_kv], "F16"), f"{blk}.attn_v.bias": ([n_kv], "F32"),
    }


def test_gpt_oss_tensors(moe_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-gpt-oss")
    n_q, d = p.n_head * p.head_dim, p.n_embd
    # As llama_model_openai_moe::load_arch_tensors creates them.
    expected = embedding_and_output_layout(p)
    for layer in range(p.n_layer):
        blk = f"blk.{layer}"
        expected.update({
            **_biased_qkv_layout(p, blk),
            f"{blk}.attn_output.weight": ([n_q, d], "F16"),
            f"{blk}.attn_output.bias": ([d], "F32"),
            f"{blk}.attn_sinks.weight": ([p.n_head], "F32"),
            f"{blk}.post_attention_norm.weight": ([d], "F32"),
            **_expert_layout(p, blk, biases=True),
        })
    assert tensor_layout(moe_models["tiny-gpt-oss"]) == expected


def test_qwen2moe_tensors(moe_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-qwen2moe")
    d, sh = p.n_embd, p.n_ff_shexp
    # As llama_model_qwen2moe::load_arch_tensors creates them: q and output are n_embd x n_embd.
    assert p.n_head * p.head_dim == d
    expected = embedding_and_output_layout(p)
    for layer in range(p.n_layer):
        blk = f"blk.{layer}"
        expected.update({
            **_biased_qkv_layout(p, blk),
            f"{blk}.attn_output.weight": ([d, d], "F16"),
            f"{blk}.ffn_norm.weight": ([d], "F32"),
            **_expert_layout(p, blk, biases=False),
            f"{blk}.ffn_gate_inp_shexp.weight": ([d], "F32"),
            f"{blk}.ffn_gate_shexp.weight": ([d, sh], "F16"),
            f"{blk}.ffn_up_shexp.weight": ([d, sh], "F16"),
            f"{blk}.ffn_down_shexp.weight": ([sh, d], "F16"),
        })
    assert tensor_layout(moe_models["tiny-qwen2moe"]) == expected


@pytest.mark.parametrize("name", MOE_PRESETS)
def test_moe_models_are_deterministic(name: str, moe_models: dict[str, Path], tmp_path: Path) -> None:
    assert_deterministic(name, moe_models[name], tmp_path)


@pytest.mark.parametrize("name", MOE_PRESETS)
def test_moe_draws_do_not_depend_on_layer_count(name: str, moe_models: dict[str, Path], tmp_path: Path) -> None:
    residual = ("attn_output.weight", "attn_output.bias", "ffn_down_exps.weight", "ffn_down_exps.bias",
                "ffn_down_shexp.weight")
    assert_draws_do_not_depend_on_layer_count(name, moe_models[name], tmp_path, residual)


def test_moe_weights_are_scaled(moe_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-gpt-oss")
    tensors = {t.name: t for t in gguf.GGUFReader(moe_models["tiny-gpt-oss"]).tensors}
    gate = np.asarray(tensors["blk.0.ffn_gate_exps.weight"].data, dtype=np.float32)
    assert gate.std() == pytest.approx(1.0 / np.sqrt(p.n_embd), rel=0.02)
    # Experts are independent draws, not copies of one.
    assert not np.array_equal(gate[0], gate[1])
    router = np.asarray(tensors["blk.0.ffn_gate_inp.weight"].data)
    assert router.dtype == np.float32 and router.std() == pytest.approx(1.0 / np.sqrt(p.n_embd), rel=0.1)
    assert np.asarray(tensors["blk.0.attn_q.bias"].data).std() == pytest.approx(synthetic.BIAS_STD, rel=0.2)
    assert np.isfinite(np.asarray(tensors["blk.0.attn_sinks.weight"].data)).all()
    assert np.all(np.asarray(tensors["blk.0.post_attention_norm.weight"].data) == 1.0)


@pytest.mark.parametrize("name", ("qwen3moe", "gpt-oss"))
def test_shape_model_of_a_real_moe_is_sparse(name: str, tmp_path: Path) -> None:
    shape = synthetic.write_shape_model(name, 1, tmp_path / "shape.gguf")
    reader = gguf.GGUFReader(shape)
    assert shape.stat().st_blocks * 512 < 10**8
    tensors = {t.name: t for t in reader.tensors}
    p = synthetic.get_preset(name)
    assert tensors["blk.0.ffn_gate_exps.weight"].shape.tolist() == [p.n_embd, p.n_ff_exp, p.n_expert]
    assert tensors["blk.0.ffn_down_exps.weight"].shape.tolist() == [p.n_ff_exp, p.n_embd, p.n_expert]
    assert tensors["blk.0.ffn_gate_inp.weight"].tensor_type == T.F32


# --- direct writing of the types llama-quantize plans for MoE models ---

@pytest.mark.parametrize("qtype", [T.Q5_0, T.MXFP4])
@pytest.mark.parametrize("std", [0.02, 1.0 / np.sqrt(2880), 0.0031])
def test_new_block_writers_give_the_requested_standard_deviation(qtype: T, std: float) -> None:
    # Rows of 2880, as gpt-oss has; the constants are derived by hand, gguf's reference dequantization checks them.
    spec = synthetic._TensorSpec("blk.0.ffn_up_exps.weight", (4, 64, 2880), std)
    blocks = synthetic._materialize_quantized(spec, qtype, seed=5)
    weights = dequantize(blocks, qtype)
    assert weights.size == 4 * 64 * 2880
    assert weights.std() == pytest.approx(std, rel=0.03)
    assert abs(weights.mean()) < std * 0.02


def test_mxfp4_exponents_straddle_the_target() -> None:
    spec = synthetic._TensorSpec("w", (64, 1024), 0.02)
    exponents = synthetic._materialize_quantized(spec, T.MXFP4, seed=3).reshape(-1, 17)[:, 0]
    # sqrt(34.25) * 2**(e - 128) is 0.0114 for e = 119 and 0.0229 for e = 120, which bracket 0.02.
    assert set(np.unique(exponents).tolist()) == {119, 120}


def test_mxfp4_std_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="e8m0"):
        synthetic._materialize_quantized(synthetic._TensorSpec("w", (2, 64), 1e-40), T.MXFP4, seed=1)


def test_rows_that_do_not_fit_the_block_are_refused() -> None:
    with pytest.raises(ValueError, match="no multiple of the block size 256"):
        synthetic._materialize_quantized(synthetic._TensorSpec("w", (2, 2880), 0.02), T.Q4_K, seed=1)


def test_new_writers_are_deterministic() -> None:
    spec = synthetic._TensorSpec("w", (3, 320), 0.05)
    for qtype in (T.Q5_0, T.MXFP4, T.Q5_1):
        first = synthetic._materialize_quantized(spec, qtype, seed=9)
        assert np.array_equal(first, synthetic._materialize_quantized(spec, qtype, seed=9)), qtype.name
        assert not np.array_equal(first, synthetic._materialize_quantized(spec, qtype, seed=10)), qtype.name


def _planning_quantizer(tmp_path: Path, plans: dict[str, str]) -> Path:
    """A stand-in llama-quantize whose --dry-run gives each tensor the first plan whose key its name
    contains (vectors and F32 tensors kept), so the direct writer's dispatch runs without tools."""
    script = tmp_path / "llama-quantize"
    script.write_text(f"""#!{sys.executable}
import sys, gguf
plans = {plans!r}
tensors = gguf.GGUFReader(sys.argv[2]).tensors
for i, t in enumerate(tensors, 1):
    dims = ", ".join(f"{{int(d):6d}}" for d in list(t.shape) + [1] * (4 - len(t.shape)))
    source = t.tensor_type.name.lower()
    plan = next((v for k, v in plans.items() if k in t.name), None)
    tail = "" if source == "f32" or plan is None else f" ->     0.10 MiB ({{plan}})"
    print(f"[{{i:4d}}/{{len(tensors):4d}}] {{t.name:36s}} - [{{dims}}], type = {{source:>6s}}, size =     0.20 MiB{{tail}}")
""")
    script.chmod(0o755)
    return script


def test_direct_moe_model_writes_every_planned_type(tmp_path: Path) -> None:
    plans = {"exps": "mxfp4", "attn_q.": "q5_0", "attn_k.": "bf16", "attn_v.": "q5_1", "attn_output": "q8_0",
             "token_embd": "q4_K", "output.": "q6_K"}
    quantizer = _planning_quantizer(tmp_path, plans)
    model = synthetic.make_direct_model("tiny-gpt-oss", 1, None, "MXFP4_MOE", tmp_path / "m.gguf", quantizer)
    reader = gguf.GGUFReader(model)
    assert metadata_field(reader, "general.file_type") == int(gguf.LlamaFileType.MOSTLY_MXFP4_MOE)
    f16 = synthetic.make_model("tiny-gpt-oss", 1, None, tmp_path / "f16.gguf")
    reference = {t.name: t for t in gguf.GGUFReader(f16).tensors}
    seen = set()
    for tensor in reader.tensors:
        ref = reference[tensor.name]
        assert tensor.shape.tolist() == ref.shape.tolist(), tensor.name
        if ref.tensor_type == T.F32:
            assert tensor.tensor_type == T.F32, tensor.name
            assert np.array_equal(tensor.data, ref.data), tensor.name  # routers, biases, sinks, norms as drawn
            continue
        seen.add(tensor.tensor_type)
        weights = dequantize(tensor.data, tensor.tensor_type)
        assert weights.std() == pytest.approx(np.asarray(ref.data, np.float32).std(), rel=0.1), tensor.name
    assert seen == {T.MXFP4, T.Q5_0, T.BF16, T.Q5_1, T.Q8_0, T.Q4_K, T.Q6_K}


def test_bf16_tensors_are_the_f16_draws_rounded(tmp_path: Path) -> None:
    quantizer = _planning_quantizer(tmp_path, {"attn_q.weight": "bf16"})
    model = synthetic.make_direct_model("tiny-qwen3moe", 1, 1, "Q8_0", tmp_path / "m.gguf", quantizer)
    f16 = synthetic.make_model("tiny-qwen3moe", 1, 1, tmp_path / "f16.gguf")
    direct = {t.name: t for t in gguf.GGUFReader(model).tensors}["blk.0.attn_q.weight"]
    ref = {t.name: t for t in gguf.GGUFReader(f16).tensors}["blk.0.attn_q.weight"]
    assert direct.tensor_type == T.BF16
    weights = dequantize(direct.data, T.BF16)
    assert np.allclose(weights, np.asarray(ref.data, np.float32), rtol=1 / 128, atol=0)


def test_cli_writes_a_moe_model(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                moe_models: dict[str, Path]) -> None:
    out = tmp_path / "cli.gguf"
    assert synthetic.main(["--preset", "tiny-gpt-oss", "--out", str(out)]) == 0
    assert synthetic.sha256_of(out) == synthetic.sha256_of(moe_models["tiny-gpt-oss"])


def test_cli_help_lists_the_moe_presets(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        synthetic.main(["--help"])
    text = capsys.readouterr().out
    for name in ("qwen3moe", "gpt-oss", "qwen2moe", "tiny-qwen3moe", "tiny-gpt-oss", "tiny-qwen2moe", "MXFP4_MOE"):
        assert name in text
    assert synthetic.describe_preset("gpt-oss") in text


# --- with the real tools ---

@pytest.mark.parametrize("name", MOE_PRESETS)
@pytest.mark.parametrize("qtype", synthetic.QUANT_TYPES)
def test_direct_moe_model_matches_real_quantization(name: str, qtype: str, quantizer: Path,
                                                    moe_models: dict[str, Path], tmp_path: Path) -> None:
    direct = synthetic.make_direct_model(name, 1, None, qtype, tmp_path / "direct.gguf", quantizer)
    real = synthetic.quantize(moe_models[name], tmp_path / "real.gguf", qtype, quantizer)
    real_layout = tensor_layout(real)
    assert tensor_layout(direct) == real_layout
    # llama-quantize keeps the router in F32.
    assert real_layout["blk.0.ffn_gate_inp.weight"][1] == "F32"
    if qtype == "MXFP4_MOE":
        assert {t for n, (_, t) in real_layout.items() if "_exps.weight" in n} == {"MXFP4"}
    assert abs(direct.stat().st_size - real.stat().st_size) < 4096


def test_gpt_oss_rows_of_2880_get_the_fallback_types(quantizer: Path, tmp_path: Path) -> None:
    # The real gpt-oss shapes at one layer: only the header is read (a sparse shape model).
    shape = synthetic.write_shape_model("gpt-oss", 1, tmp_path / "shape.gguf")
    types = synthetic.planned_tensor_types(shape, "Q4_K_M", quantizer)
    assert types["blk.0.ffn_gate_exps.weight"] == T.Q5_0  # Q4_K falls back for rows of 2880
    assert types["blk.0.attn_output.weight"] == T.Q4_K  # rows of n_head * head_dim = 4096
    assert types["output.weight"] == T.Q8_0
    assert types["blk.0.ffn_gate_inp.weight"] == T.F32
    assert set(types.values()) <= {*synthetic._direct_types(), T.F32, T.F16, T.BF16}


@pytest.mark.parametrize("name", MOE_PRESETS)
def test_tiny_moe_model_decodes(name: str, quantizer: Path, replay_tool: Path, moe_models: dict[str, Path],
                                tmp_path: Path) -> None:
    model = synthetic.quantize(moe_models[name], tmp_path / "q.gguf", "Q8_0", quantizer)
    result = subprocess.run([str(replay_tool), "replay", "--model", str(model), "--batches", "2,4", "--n-prompt", "8",
                             "--n-gen", "12", "--ctx", "256", "--threads", "2"],
                            check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verdict" in result.stdout + result.stderr


def test_qwen2moe_rows_of_1408_get_the_fallback_types(quantizer: Path, tmp_path: Path) -> None:
    # The real Qwen1.5-MoE-A2.7B shapes at one layer (a sparse shape model: only the header is read).
    shape = synthetic.write_shape_model("qwen2moe", 1, tmp_path / "shape.gguf")
    types = synthetic.planned_tensor_types(shape, "Q4_K_M", quantizer)
    assert types["blk.0.ffn_down_exps.weight"] not in (T.Q4_K, T.Q6_K)  # rows of 1408: no K-quant
    assert types["blk.0.ffn_gate_exps.weight"] == T.Q4_K and types["blk.0.ffn_gate_shexp.weight"] == T.Q4_K
    assert types["blk.0.ffn_gate_inp_shexp.weight"] == T.F32


@pytest.mark.parametrize(("switch", "identical"), [("1", True), ("0", False)])
def test_tiny_qwen2moe_is_exact_on_the_cpu_with_the_switch_on(switch: str, identical: bool, quantizer: Path,
                                                             replay_tool: Path, moe_models: dict[str, Path],
                                                             tmp_path: Path) -> None:
    """The shared expert's products, its sigmoid gate and the sum with the routed experts, on the CPU backend:
    every verify batch's logits are those of one-token decoding with the switch on, and differ with it off
    (the control that shows the comparison can fail)."""
    model = synthetic.quantize(moe_models["tiny-qwen2moe"], tmp_path / "q.gguf", "Q4_K_M", quantizer)
    assert_replay_on_the_cpu(model, replay_tool, tmp_path / "replay.json", switch, identical)
