"""Synthetic hybrid recurrent models (qwen35: gated delta nets, nemotron_h: Mamba-2): presets, layer placement,
tensors and metadata.

The tiny presets keep these fast; the tests that run llama-quantize or hiraishin-replay take them
from HIRAISHIN_LLAMA_BIN_DIR or the built wheel and skip without (see conftest.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import gguf
import numpy as np
import pytest

from hiraishin_llama import synthetic

from tests.wheels.synthetic_checks import (assert_deterministic, assert_draws_do_not_depend_on_layer_count,
                                          assert_replay_on_the_cpu, assert_server_state, embedding_and_output_layout, make_models,
                                          metadata_field, tensor_layout)

from tests.helpers import fresh_venv, load_benchmark

HYBRID_PRESETS = ("tiny-qwen35", "tiny-nemotron-h")


@pytest.fixture(scope="module")
def hybrid_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny hybrid presets at seed 1 (F16), written once for this module."""
    return make_models(tmp_path_factory.mktemp("hybrid"), HYBRID_PRESETS)





# --- presets ---

def test_public_preset_api() -> None:
    assert synthetic.get_preset("qwen35").architecture == synthetic.QWEN35 == "qwen35"
    assert synthetic.get_preset("tiny-qwen35").architecture == synthetic.QWEN35
    assert synthetic.get_preset("nemotron-h").architecture == synthetic.NEMOTRON_H == "nemotron_h"
    assert synthetic.get_preset("tiny-nemotron-h").architecture == synthetic.NEMOTRON_H
    for name in ("qwen35", "nemotron-h", *HYBRID_PRESETS):
        assert not synthetic.get_preset(name).is_moe, name
    assert {synthetic.QWEN35, synthetic.NEMOTRON_H} <= set(synthetic.ARCHITECTURES)


def test_qwen35_preset_has_the_real_shapes() -> None:
    # The 27B dense Qwen3.5/3.6's config.json, with a llama-sized vocabulary.
    p = synthetic.get_preset("qwen35")
    assert (p.n_embd, p.n_head, p.n_head_kv, p.head_dim, p.n_ff) == (5120, 24, 4, 256, 17408)
    assert (p.n_layer, p.context_length, p.n_vocab, p.full_attention_interval) == (64, 262144, 32000, 4)
    assert (p.ssm_d_conv, p.ssm_d_state, p.ssm_n_group, p.ssm_dt_rank, p.ssm_d_inner) == (4, 128, 16, 48, 6144)
    assert (p.rope_dim, p.rope_sections, p.rope_freq_base, p.rms_norm_eps) == (64, (11, 11, 10, 0), 1e7, 1e-6)


def test_nemotron_h_preset_has_the_real_shapes() -> None:
    # Nemotron-H-8B-Base-8K's config.json, with a llama-sized vocabulary.
    p = synthetic.get_preset("nemotron-h")
    assert (p.n_embd, p.n_head, p.n_head_kv, p.head_dim, p.n_ff) == (4096, 32, 8, 128, 21504)
    assert (p.n_layer, p.context_length, p.n_vocab, p.rms_norm_eps) == (52, 8192, 32000, 1e-5)
    assert (p.ssm_d_conv, p.ssm_d_state, p.ssm_n_group, p.ssm_dt_rank, p.ssm_d_inner) == (4, 128, 8, 128, 8192)
    assert p.layer_pattern == "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
    assert [p.layer_pattern.count(kind) for kind in "M*-"] == [24, 4, 24]


@pytest.mark.parametrize("name", ("qwen35", "nemotron-h", *HYBRID_PRESETS))
def test_hybrid_rows_suit_k_quants(name: str) -> None:
    p = synthetic.get_preset(name)
    for spec in synthetic._tensor_specs(p, p.n_layer):
        if len(spec.shape) >= 2 and spec.dtype == np.float16:
            assert spec.shape[-1] % 256 == 0, spec.name


@pytest.mark.parametrize("name", ("qwen35", "tiny-qwen35"))
def test_qwen35_presets_stay_on_cudas_gated_delta_net_and_conv_kernels(name: str) -> None:
    # CUDA runs the gated delta net for heads of 16, 32, 64 or 128 and the causal convolution for
    # channel counts that are multiples of 128 and the usual kernel widths; elsewhere the op falls
    # back to the CPU and the measurement stops being one of the GPU.
    p = synthetic.get_preset(name)
    assert p.ssm_d_state in (16, 32, 64, 128)
    assert (2 * p.ssm_d_state * p.ssm_n_group + p.ssm_d_inner) % 128 == 0
    assert p.ssm_d_conv in (3, 4, 5, 9, 15)


@pytest.mark.parametrize("name", ("nemotron-h", "tiny-nemotron-h"))
def test_nemotron_h_presets_stay_on_cudas_mamba2_kernels(name: str) -> None:
    # CUDA's Mamba-2 scan needs a state of 128 or 256 and heads a multiple of 16 wide; its
    # convolution channel counts that are multiples of 128.
    p = synthetic.get_preset(name)
    assert p.ssm_d_state in (128, 256)
    assert (p.ssm_d_inner // p.ssm_dt_rank) % 16 == 0
    assert (p.ssm_d_inner + 2 * p.ssm_n_group * p.ssm_d_state) % 128 == 0


def test_qwen35_layer_kinds_put_full_attention_on_every_fourth_layer() -> None:
    # llama.cpp: layer i is recurrent iff (i + 1) % full_attention_interval != 0.
    p = synthetic.get_preset("tiny-qwen35")
    assert p.layer_kinds(4) == "MMM*"
    assert p.layer_kinds(9) == "MMM*MMM*M"
    assert dataclasses.replace(p, full_attention_interval=2).layer_kinds(4) == "M*M*"


def test_nemotron_h_layer_kinds_follow_and_repeat_the_pattern() -> None:
    p = synthetic.get_preset("tiny-nemotron-h")
    assert p.layer_kinds(5) == "M-M*-"
    assert p.layer_kinds(3) == "M-M"
    assert p.layer_kinds(7) == "M-M*-M-"


@pytest.mark.parametrize(("changes", "message"), [
    ({"ssm_d_inner": 256}, "ssm_d_inner == ssm_d_state \\* ssm_dt_rank"),
    ({"ssm_dt_rank": 3, "ssm_d_inner": 384}, "ssm_dt_rank 3 .* multiple of ssm_n_group 2"),
    ({"ssm_d_conv": 0}, "needs positive .*ssm_d_conv=0"),
    ({"full_attention_interval": 1}, "full_attention_interval >= 2"),
    ({"full_attention_interval": 0}, "full_attention_interval >= 2"),
    ({"rope_sections": (3, 3, 3, 0)}, "rope_sections summing to rope_dim / 2 = 8"),
    ({"rope_sections": (4, 4)}, "4 non-negative rope_sections"),
    ({"rope_dim": 15}, "rope_dim must be even"),
    ({"rope_dim": 128}, "at most head_dim 64"),
    ({"layer_pattern": "MMM*"}, "layer_pattern is for nemotron_h"),
    ({"n_expert": 16, "n_expert_used": 4, "n_ff_exp": 256}, "has no experts"),
])
def test_inconsistent_qwen35_presets_are_rejected(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(synthetic.get_preset("tiny-qwen35"), **changes)


@pytest.mark.parametrize(("changes", "message"), [
    ({"layer_pattern": ""}, "needs a layer_pattern"),
    ({"layer_pattern": "M-MX-"}, "needs a layer_pattern"),
    ({"layer_pattern": "M-M*"}, "layer_pattern has 4 layers, n_layer is 5"),
    ({"ssm_d_inner": 500}, "ssm_d_inner 500 must be a multiple of ssm_dt_rank 8"),
    ({"ssm_n_group": 3}, "ssm_dt_rank 8 .* multiple of ssm_n_group 3"),
    ({"n_head_kv": 0}, "attention layers need n_head_kv > 0"),
    ({"n_ff": 0}, "MLP layers need n_ff > 0"),
    ({"full_attention_interval": 4}, "has no rope"),
    ({"rope_sections": (3, 3, 2, 0)}, "has no rope"),
    ({"ssm_d_state": 0}, "needs positive"),
])
def test_inconsistent_nemotron_h_presets_are_rejected(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(synthetic.get_preset("tiny-nemotron-h"), **changes)


@pytest.mark.parametrize("changes", [{"ssm_d_state": 128}, {"full_attention_interval": 4},
                                     {"layer_pattern": "M*"}, {"rope_sections": (16, 16, 0, 0)}])
def test_recurrent_fields_on_other_architectures_are_rejected(changes: dict) -> None:
    with pytest.raises(ValueError, match="recurrent layers of qwen35, nemotron_h, qwen35moe, nemotron_h_moe; a qwen3 model has none"):
        dataclasses.replace(synthetic.get_preset("tiny"), **changes)


# --- tensors and metadata ---

def test_qwen35_tensors(hybrid_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-qwen35")
    d, hd = p.n_embd, p.head_dim
    n_q, n_kv = p.n_head * hd, p.n_head_kv * hd
    conv = 2 * p.ssm_d_state * p.ssm_n_group + p.ssm_d_inner
    # ggml order (ne0 first), as llama_model_qwen35::load_arch_tensors creates them.
    expected = embedding_and_output_layout(p)
    for layer in range(p.n_layer):
        blk = f"blk.{layer}"
        expected.update({
            f"{blk}.attn_norm.weight": ([d], "F32"),
            f"{blk}.post_attention_norm.weight": ([d], "F32"),
            f"{blk}.ffn_gate.weight": ([d, p.n_ff], "F16"),
            f"{blk}.ffn_up.weight": ([d, p.n_ff], "F16"),
            f"{blk}.ffn_down.weight": ([p.n_ff, d], "F16"),
        })
        if layer == 3:  # full attention
            expected.update({
                f"{blk}.attn_q.weight": ([d, 2 * n_q], "F16"),
                f"{blk}.attn_k.weight": ([d, n_kv], "F16"),
                f"{blk}.attn_v.weight": ([d, n_kv], "F16"),
                f"{blk}.attn_q_norm.weight": ([hd], "F32"),
                f"{blk}.attn_k_norm.weight": ([hd], "F32"),
                f"{blk}.attn_output.weight": ([n_q, d], "F16"),
            })
        else:  # gated delta net
            expected.update({
                f"{blk}.attn_qkv.weight": ([d, conv], "F16"),
                f"{blk}.attn_gate.weight": ([d, p.ssm_d_inner], "F16"),
                f"{blk}.ssm_conv1d.weight": ([p.ssm_d_conv, conv], "F32"),
                f"{blk}.ssm_dt.bias": ([p.ssm_dt_rank], "F32"),
                f"{blk}.ssm_a": ([p.ssm_dt_rank], "F32"),
                f"{blk}.ssm_beta.weight": ([d, p.ssm_dt_rank], "F16"),
                f"{blk}.ssm_alpha.weight": ([d, p.ssm_dt_rank], "F16"),
                f"{blk}.ssm_norm.weight": ([p.ssm_d_state], "F32"),
                f"{blk}.ssm_out.weight": ([p.ssm_d_inner, d], "F16"),
            })
    assert tensor_layout(hybrid_models["tiny-qwen35"]) == expected


def test_nemotron_h_tensors(hybrid_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-nemotron-h")
    d, di, nh = p.n_embd, p.ssm_d_inner, p.ssm_dt_rank
    n_q, n_kv = p.n_head * p.head_dim, p.n_head_kv * p.head_dim
    conv = di + 2 * p.ssm_n_group * p.ssm_d_state
    # As llama_model_nemotron_h::load_arch_tensors creates them for the pattern M-M*-.
    mamba = {"attn_norm.weight": ([d], "F32"), "ssm_in.weight": ([d, 2 * di + 2 * p.ssm_n_group * p.ssm_d_state + nh],
                                                                 "F16"),
             "ssm_conv1d.weight": ([p.ssm_d_conv, conv], "F32"), "ssm_conv1d.bias": ([conv], "F32"),
             "ssm_dt.bias": ([nh], "F32"), "ssm_a": ([1, nh], "F32"), "ssm_d": ([1, nh], "F32"),
             "ssm_norm.weight": ([di // p.ssm_n_group, p.ssm_n_group], "F32"), "ssm_out.weight": ([di, d], "F16")}
    mlp = {"attn_norm.weight": ([d], "F32"), "ffn_up.weight": ([d, p.n_ff], "F16"),
           "ffn_down.weight": ([p.n_ff, d], "F16")}
    attention = {"attn_norm.weight": ([d], "F32"), "attn_q.weight": ([d, n_q], "F16"),
                 "attn_k.weight": ([d, n_kv], "F16"), "attn_v.weight": ([d, n_kv], "F16"),
                 "attn_output.weight": ([n_q, d], "F16")}
    expected = embedding_and_output_layout(p)
    for layer, kind in enumerate((mamba, mlp, mamba, attention, mlp)):
        expected.update({f"blk.{layer}.{name}": value for name, value in kind.items()})
    assert tensor_layout(hybrid_models["tiny-nemotron-h"]) == expected


def test_qwen35_metadata(hybrid_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-qwen35")
    reader = gguf.GGUFReader(hybrid_models["tiny-qwen35"])
    assert metadata_field(reader, "general.architecture") == "qwen35"
    expected = {
        "block_count": p.n_layer, "context_length": p.context_length, "embedding_length": p.n_embd,
        "feed_forward_length": p.n_ff, "attention.head_count": p.n_head, "attention.head_count_kv": p.n_head_kv,
        "attention.key_length": p.head_dim, "attention.value_length": p.head_dim,
        "rope.dimension_count": p.rope_dim, "rope.dimension_sections": list(p.rope_sections),
        "ssm.conv_kernel": p.ssm_d_conv, "ssm.inner_size": p.ssm_d_inner, "ssm.state_size": p.ssm_d_state,
        "ssm.time_step_rank": p.ssm_dt_rank, "ssm.group_count": p.ssm_n_group,
        "full_attention_interval": p.full_attention_interval,
    }
    for key, value in expected.items():
        assert metadata_field(reader, f"qwen35.{key}") == value, key
    assert metadata_field(reader, "qwen35.rope.freq_base") == pytest.approx(p.rope_freq_base)
    assert metadata_field(reader, "qwen35.attention.layer_norm_rms_epsilon") == pytest.approx(p.rms_norm_eps)


def test_nemotron_h_metadata(hybrid_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-nemotron-h")
    reader = gguf.GGUFReader(hybrid_models["tiny-nemotron-h"])
    assert metadata_field(reader, "general.architecture") == "nemotron_h"
    # Per layer of M-M*-: llama.cpp reads both zero as Mamba-2, KV heads alone as attention, an FFN as an MLP.
    assert metadata_field(reader, "nemotron_h.feed_forward_length") == [0, p.n_ff, 0, 0, p.n_ff]
    assert metadata_field(reader, "nemotron_h.attention.head_count_kv") == [0, 0, 0, p.n_head_kv, 0]
    expected = {
        "block_count": p.n_layer, "context_length": p.context_length, "embedding_length": p.n_embd,
        "attention.head_count": p.n_head, "attention.key_length": p.head_dim, "attention.value_length": p.head_dim,
        "ssm.conv_kernel": p.ssm_d_conv, "ssm.inner_size": p.ssm_d_inner, "ssm.state_size": p.ssm_d_state,
        "ssm.time_step_rank": p.ssm_dt_rank, "ssm.group_count": p.ssm_n_group,
    }
    for key, value in expected.items():
        assert metadata_field(reader, f"nemotron_h.{key}") == value, key
    assert metadata_field(reader, "nemotron_h.attention.layer_norm_rms_epsilon") == pytest.approx(p.rms_norm_eps)
    # No rope, and nothing of qwen35's layer placement.
    assert not [f for f in reader.fields if f.startswith("nemotron_h.rope") or "full_attention" in f]


def test_full_size_metadata_places_the_layers(tmp_path: Path) -> None:
    # The real shapes' header only (a sparse shape model): per-layer arrays follow the 52-layer pattern.
    reader = gguf.GGUFReader(synthetic.write_shape_model("nemotron-h", None, tmp_path / "shape.gguf"))
    pattern = synthetic.get_preset("nemotron-h").layer_pattern
    kv = metadata_field(reader, "nemotron_h.attention.head_count_kv")
    assert [i for i, n in enumerate(kv) if n] == [i for i, kind in enumerate(pattern) if kind == "*"]
    assert sum(1 for n in metadata_field(reader, "nemotron_h.feed_forward_length") if n) == 24
    tensors = {t.name: t.shape.tolist() for t in reader.tensors}
    assert tensors["blk.7.attn_q.weight"] == [4096, 4096] and "blk.7.ssm_in.weight" not in tensors
    assert tensors["blk.0.ssm_in.weight"] == [4096, 2 * 8192 + 2 * 8 * 128 + 128]


@pytest.mark.parametrize("name", HYBRID_PRESETS)
def test_hybrid_weights_are_finite_and_signed(name: str, hybrid_models: dict[str, Path]) -> None:
    tensors = {t.name: np.asarray(t.data, dtype=np.float32) for t in gguf.GGUFReader(hybrid_models[name]).tensors}
    assert all(np.isfinite(data).all() for data in tensors.values())
    a = tensors["blk.0.ssm_a"]
    # decays exp(dt * a) < 1 need a < 0, and the heads get different rates
    assert (a < 0).all() and len(np.unique(a)) == a.size
    low, high = synthetic.MAMBA2_A_RANGE if name == "tiny-nemotron-h" else synthetic.GDN_A_RANGE
    assert a.min() >= low and a.max() < high
    assert np.all(tensors["blk.0.ssm_norm.weight"] == 1.0)
    conv = tensors["blk.0.ssm_conv1d.weight"]
    p = synthetic.get_preset(name)
    assert conv.std() == pytest.approx(1.0 / np.sqrt(p.ssm_d_conv), rel=0.05)
    if name == "tiny-nemotron-h":
        assert np.all(tensors["blk.0.ssm_d"] == 1.0)
        bias = tensors["blk.0.ssm_dt.bias"]
        assert bias.min() >= synthetic.MAMBA2_DT_BIAS_RANGE[0] and bias.max() < synthetic.MAMBA2_DT_BIAS_RANGE[1]


@pytest.mark.parametrize("name", HYBRID_PRESETS)
def test_hybrid_models_are_deterministic(name: str, hybrid_models: dict[str, Path], tmp_path: Path) -> None:
    assert_deterministic(name, hybrid_models[name], tmp_path)


@pytest.mark.parametrize("name", HYBRID_PRESETS)
def test_hybrid_draws_do_not_depend_on_layer_count(name: str, hybrid_models: dict[str, Path], tmp_path: Path) -> None:
    residual = ("attn_output.weight", "ssm_out.weight", "ffn_down.weight")
    assert_draws_do_not_depend_on_layer_count(name, hybrid_models[name], tmp_path, residual)


def test_cli_help_lists_the_hybrid_presets(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        synthetic.main(["--help"])
    text = capsys.readouterr().out
    for name in ("qwen35", "nemotron-h", *HYBRID_PRESETS):
        assert synthetic.describe_preset(name) in text, name


# --- with the real tools ---

@pytest.mark.parametrize("name", HYBRID_PRESETS)
@pytest.mark.parametrize(("switch", "identical"), [("1", True), ("0", False)])
def test_tiny_hybrid_is_exact_on_the_cpu_with_the_switch_on(name: str, switch: str, identical: bool, quantizer: Path,
                                                           replay_tool: Path, hybrid_models: dict[str, Path],
                                                           tmp_path: Path) -> None:
    """The recurrent layers' convolutions, scans and state updates on the CPU backend: every verify batch's
    logits are those of one-token decoding with the switch on, and differ with it off (the control)."""
    model = synthetic.quantize(hybrid_models[name], tmp_path / "q.gguf", "Q4_K_M", quantizer)
    assert_replay_on_the_cpu(model, replay_tool, tmp_path / "replay.json", switch, identical)


@pytest.fixture(scope="module")
def speculation_models(hybrid_models: dict[str, Path], quantizer: Path,
                       tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each tiny hybrid as a Q4_K_M target and its Q8_0 as the draft: the same weights, so the draft agrees
    often but not always (about a fifth of its tokens are accepted)."""
    directory = tmp_path_factory.mktemp("speculation")
    return {name: (synthetic.quantize(f16, directory / f"{name}-Q4_K_M.gguf", "Q4_K_M", quantizer),
                   synthetic.quantize(f16, directory / f"{name}-Q8_0.gguf", "Q8_0", quantizer))
            for name, f16 in hybrid_models.items()}


@pytest.mark.parametrize("name", HYBRID_PRESETS)
@pytest.mark.parametrize(("switch", "identical"), [("1", True), ("0", False)])
def test_speculation_on_a_tiny_hybrid_rolls_rejected_drafts_back_exactly(
        name: str, switch: str, identical: bool, speculation_models: dict[str, tuple[Path, Path]],
        replay_tool: Path, tmp_path: Path) -> None:
    """Greedy speculation whose drafts are often rejected: each rejection is undone as llama-server undoes it,
    from a checkpoint of the recurrent state, the accepted tokens decoded again as one batch. With the switch
    on the text is plain greedy decoding's for 600 tokens (KV windows of 256 crossed) and every re-decoded
    batch chooses the token its verify pass chose; off (the control) the text departs from it."""
    target, draft = speculation_models[name]
    report = tmp_path / "spec.json"
    result = subprocess.run([str(replay_tool), "spec", "--model", str(target), "--draft-model", str(draft),
                             "--n-gen", "600", "--prompts", "2", "--threads", "2",
                             "--expect", "identical" if identical else "differ", "--json", str(report)],
                            check=False, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "GGML_BATCH_INVARIANT": switch, "GGML_CUDA_BATCH_INVARIANT": switch})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "restored from a checkpoint" in result.stdout
    rows = json.loads(report.read_text())["results"]
    for row in rows:
        assert row["tokens_compared"] == 600 and 0 < row["acceptance_rate"] < 1, row
        assert row["checkpoint_restores"] > 50, row
    if identical:
        assert all(row["identical"] and row["redecode_mismatches"] == 0 for row in rows), rows
    else:
        assert not all(row["identical"] for row in rows), rows


server_exact = load_benchmark("server_exact")
# The synthetic vocabulary's byte tokens (<0x00>..<0xFF>, after <unk>, <s> and </s>): a lone byte's piece is not
# UTF-8, and llama-server's reply parser refuses such a reply, so no request may generate them.
BYTE_TOKENS = tuple(range(3, 3 + synthetic.N_BYTE_TOKENS))
SERVER_PROMPTS = server_exact.PROMPTS[:2]


@pytest.fixture(scope="module")
def server_venv(tmp_path_factory: pytest.TempPathFactory, cpu_wheel: Path) -> Path:
    venv = fresh_venv(tmp_path_factory.mktemp("hybrid-server") / "venv")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(cpu_wheel)], check=True)
    return venv


@pytest.mark.parametrize("name", HYBRID_PRESETS)
@pytest.mark.parametrize(("switch_on", "identical"), [(True, True), (False, False)], ids=["on", "off"])
def test_llama_server_with_a_draft_gives_a_hybrid_s_plain_greedy_tokens(
        name: str, switch_on: bool, identical: bool, speculation_models: dict[str, tuple[Path, Path]],
        server_venv: Path, tmp_path: Path) -> None:
    """The wheel's llama-server with a draft model (one slot), whose drafts it rejects more than half the time, so
    it keeps restoring the target's recurrent state from its checkpoint: with the switch on each greedy reply is
    the plain server's, token for token; off (the control) they part."""
    target, draft = speculation_models[name]
    state = server_exact.switch_state(server_venv, target, tmp_path, switch_on=switch_on, prompts=SERVER_PROMPTS,
                                      n_predict=200, draft_n_max=8, draft_model=draft, banned=BYTE_TOKENS)
    assert_server_state(state, len(SERVER_PROMPTS), identical)


@pytest.mark.parametrize(("switch", "identical"), [("1", True), ("0", False)])
def test_a_gated_delta_net_without_its_fused_operator_is_exact_as_one_token_steps(
        switch: str, identical: bool, quantizer: Path, replay_tool: Path, hybrid_models: dict[str, Path],
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A device without the fused GATED_DELTA_NET, as LLAMA_FUSED_GDN=0 makes the CPU: one token takes the
    autoregressive form and a batch the chunked one, which adds in another order; batch-invariant mode builds a
    verify batch as one-token steps instead (stack revision 29), so every b gives one-token decoding's logits
    with the switch on. Without those steps the switch-on replay differs from b = 2
    (benchmarks/faults/fault-gdn-without-one-token-steps.diff, revision_29_gdn_one_token_steps_cpu)."""
    monkeypatch.setenv("LLAMA_FUSED_GDN", "0")
    model = synthetic.quantize(hybrid_models["tiny-qwen35"], tmp_path / "q.gguf", "Q4_K_M", quantizer)
    assert_replay_on_the_cpu(model, replay_tool, tmp_path / "replay.json", switch, identical)
    # the knob took effect: llama.cpp said it built the unfused forms
    verbose = subprocess.run([str(replay_tool), "replay", "--model", str(model), "--batches", "2", "--n-prompt", "4",
                              "--n-gen", "4", "--ctx", "64", "--threads", "2", "--verbose"],
                             check=False, capture_output=True, text=True, timeout=300)
    assert verbose.returncode == 0, verbose.stderr
    assert "LLAMA_FUSED_GDN=0: fused gated delta net off" in verbose.stdout + verbose.stderr
