"""Synthetic hybrids with experts, the two models this fork's users run: qwen35moe (Qwen3.6-35B-A3B: gated delta
nets, experts beside a gated shared expert, and its MTP head) and nemotron_h_moe (Nemotron-3-Nano-30B-A3B:
Mamba-2, relu^2 experts routed by biased sigmoid scores, a shared expert). Presets, tensors and metadata here;
the tests that run llama-quantize, hiraishin-replay or llama-server take them from HIRAISHIN_LLAMA_BIN_DIR or the
built wheel and skip without (see conftest.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import gguf
import pytest

from hiraishin_llama import synthetic

from tests.helpers import load_benchmark
from tests.wheels.synthetic_checks import (assert_deterministic, assert_draws_do_not_depend_on_layer_count,
                                          assert_replay_on_the_cpu, assert_server_state, embedding_and_output_layout, make_models,
                                          metadata_field, tensor_layout)

MOE_HYBRID_PRESETS = ("tiny-qwen35moe", "tiny-nemotron-h-moe")


@pytest.fixture(scope="module")
def moe_hybrid_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny presets at seed 1 (F16), written once for this module."""
    return make_models(tmp_path_factory.mktemp("moe-hybrid"), MOE_HYBRID_PRESETS)


# --- presets ---

def test_qwen35moe_preset_has_qwen36_35b_a3bs_shapes() -> None:
    # Qwen3.6-35B-A3B's config.json, with a llama-sized vocabulary.
    p = synthetic.get_preset("qwen35moe")
    assert p.architecture == synthetic.QWEN35MOE == "qwen35moe"
    assert (p.n_embd, p.n_head, p.n_head_kv, p.head_dim) == (2048, 16, 2, 256)
    assert (p.n_layer, p.context_length, p.full_attention_interval, p.n_nextn) == (40, 262144, 4, 1)
    assert (p.ssm_d_conv, p.ssm_d_state, p.ssm_n_group, p.ssm_dt_rank, p.ssm_d_inner) == (4, 128, 16, 32, 4096)
    assert (p.n_expert, p.n_expert_used, p.n_ff_exp, p.n_ff_shexp) == (256, 8, 512, 512)
    assert (p.rope_dim, p.rope_sections, p.rope_freq_base) == (64, (11, 11, 10, 0), 1e7)
    assert p.layer_kinds(40) == "MMM*" * 10


def test_nemotron_h_moe_preset_has_nemotron_3_nanos_shapes() -> None:
    # Nemotron-3-Nano-30B-A3B's config.json, with a llama-sized vocabulary.
    p = synthetic.get_preset("nemotron-h-moe")
    assert p.architecture == synthetic.NEMOTRON_H_MOE == "nemotron_h_moe"
    assert (p.n_embd, p.n_head, p.n_head_kv, p.head_dim, p.n_layer) == (2688, 32, 2, 128, 52)
    assert (p.ssm_d_conv, p.ssm_d_state, p.ssm_n_group, p.ssm_dt_rank, p.ssm_d_inner) == (4, 128, 8, 64, 4096)
    assert (p.n_expert, p.n_expert_used, p.n_ff_exp, p.n_ff_shexp) == (128, 6, 1856, 3712)
    assert (p.expert_weights_norm, p.expert_weights_scale) == (True, 2.5)
    assert p.layer_pattern == "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
    assert [p.layer_pattern.count(kind) for kind in "ME*"] == [23, 23, 6]


@pytest.mark.parametrize("name", ("qwen35moe", "nemotron-h-moe", *MOE_HYBRID_PRESETS))
def test_moe_hybrids_are_hybrids_with_experts(name: str) -> None:
    p = synthetic.get_preset(name)
    assert p.is_moe and p.architecture in synthetic.HYBRID_ARCHITECTURES


@pytest.mark.parametrize("name", ("qwen35moe", "tiny-qwen35moe", "nemotron-h-moe", "tiny-nemotron-h-moe"))
def test_moe_hybrids_stay_on_cudas_recurrent_kernels(name: str) -> None:
    # As test_synthetic_hybrid's checks: the gated delta net for heads of 16..128 and conv channels a multiple of
    # 128; Mamba-2 with a state of 128 or 256 and heads a multiple of 16 wide.
    p = synthetic.get_preset(name)
    if p.architecture == synthetic.QWEN35MOE:
        assert p.ssm_d_state in (16, 32, 64, 128)
        assert (2 * p.ssm_d_state * p.ssm_n_group + p.ssm_d_inner) % 128 == 0
    else:
        assert p.ssm_d_state in (128, 256) and (p.ssm_d_inner // p.ssm_dt_rank) % 16 == 0
        assert (p.ssm_d_inner + 2 * p.ssm_n_group * p.ssm_d_state) % 128 == 0


@pytest.mark.parametrize(("name", "changes", "message"), [
    ("tiny-qwen35moe", {"n_ff_shexp": 0}, "n_ff_shexp .* must be positive for qwen2moe, qwen35moe, nemotron_h_moe"),
    ("tiny-qwen35moe", {"n_nextn": 2}, "n_nextn .* must be 0 or 1 for qwen35moe"),
    ("tiny-qwen35moe", {"n_expert": 0, "n_expert_used": 0, "n_ff_exp": 0}, "needs 0 < n_expert_used"),
    ("tiny-qwen35moe", {"expert_weights_scale": 2.5}, "read by nemotron_h_moe's graph only"),
    ("tiny-qwen35moe", {"ssm_d_inner": 256}, "qwen35moe needs ssm_d_inner == ssm_d_state"),
    ("tiny-nemotron-h-moe", {"layer_pattern": "M-M*-"}, "layer_pattern of 'M\\*E' characters .*experts"),
    ("tiny-nemotron-h-moe", {"n_nextn": 1}, "n_nextn .* 0 otherwise"),
    ("tiny-nemotron-h-moe", {"n_ff": 0}, "experts layers need n_ff > 0"),
    ("tiny-nemotron-h-moe", {"expert_weights_scale": -1.0}, "expert_weights_scale must be a finite number >= 0"),
    ("tiny-nemotron-h", {"layer_pattern": "MEM*E"}, "layer_pattern of 'M\\*-' characters"),
    ("tiny-qwen35", {"n_nextn": 1}, "n_nextn .* 0 otherwise"),
])
def test_inconsistent_moe_hybrid_presets_are_rejected(name: str, changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(synthetic.get_preset(name), **changes)


# --- tensors and metadata ---

def _experts(p: synthetic.Preset, gated: bool) -> dict[str, tuple[list[int], str]]:
    d, e, ff = p.n_embd, p.n_expert, p.n_ff_exp
    layout = {"ffn_gate_inp.weight": ([d, e], "F32"), "ffn_up_exps.weight": ([d, ff, e], "F16"),
              "ffn_down_exps.weight": ([ff, d, e], "F16"), "ffn_up_shexp.weight": ([d, p.n_ff_shexp], "F16"),
              "ffn_down_shexp.weight": ([p.n_ff_shexp, d], "F16")}
    if gated:
        layout.update({"ffn_gate_exps.weight": ([d, ff, e], "F16"), "ffn_gate_inp_shexp.weight": ([d], "F32"),
                       "ffn_gate_shexp.weight": ([d, p.n_ff_shexp], "F16")})
    else:
        layout["exp_probs_b.bias"] = ([e], "F32")
    return layout


def test_qwen35moe_tensors_with_the_mtp_block(moe_hybrid_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-qwen35moe")
    d, hd = p.n_embd, p.head_dim
    n_q, n_kv = p.n_head * hd, p.n_head_kv * hd
    conv = 2 * p.ssm_d_state * p.ssm_n_group + p.ssm_d_inner
    # ggml order, as llama_model_qwen35moe::load_arch_tensors creates them (load_block_trunk, load_block_mtp).
    norms = {"attn_norm.weight": ([d], "F32"), "post_attention_norm.weight": ([d], "F32")}
    attention = {"attn_q.weight": ([d, 2 * n_q], "F16"), "attn_k.weight": ([d, n_kv], "F16"),
                 "attn_v.weight": ([d, n_kv], "F16"), "attn_q_norm.weight": ([hd], "F32"),
                 "attn_k_norm.weight": ([hd], "F32"), "attn_output.weight": ([n_q, d], "F16")}
    gdn = {"attn_qkv.weight": ([d, conv], "F16"), "attn_gate.weight": ([d, p.ssm_d_inner], "F16"),
           "ssm_conv1d.weight": ([p.ssm_d_conv, conv], "F32"), "ssm_dt.bias": ([p.ssm_dt_rank], "F32"),
           "ssm_a": ([p.ssm_dt_rank], "F32"), "ssm_beta.weight": ([d, p.ssm_dt_rank], "F16"),
           "ssm_alpha.weight": ([d, p.ssm_dt_rank], "F16"), "ssm_norm.weight": ([p.ssm_d_state], "F32"),
           "ssm_out.weight": ([p.ssm_d_inner, d], "F16")}
    mtp = {"nextn.eh_proj.weight": ([2 * d, d], "F16"), "nextn.enorm.weight": ([d], "F32"),
           "nextn.hnorm.weight": ([d], "F32")}
    expected = embedding_and_output_layout(p)
    for layer, kind in enumerate((gdn, gdn, gdn, attention, {**attention, **mtp})):
        layout = {**norms, **kind, **_experts(p, gated=True)}
        expected.update({f"blk.{layer}.{name}": value for name, value in layout.items()})
    assert tensor_layout(moe_hybrid_models["tiny-qwen35moe"]) == expected


def test_nemotron_h_moe_tensors(moe_hybrid_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-nemotron-h-moe")
    d, di, nh = p.n_embd, p.ssm_d_inner, p.ssm_dt_rank
    conv = di + 2 * p.ssm_n_group * p.ssm_d_state
    # As llama_model_nemotron_h::load_arch_tensors creates them for the pattern MEM*E (n_expert != 0).
    mamba = {"ssm_in.weight": ([d, 2 * di + 2 * p.ssm_n_group * p.ssm_d_state + nh], "F16"),
             "ssm_conv1d.weight": ([p.ssm_d_conv, conv], "F32"), "ssm_conv1d.bias": ([conv], "F32"),
             "ssm_dt.bias": ([nh], "F32"), "ssm_a": ([1, nh], "F32"), "ssm_d": ([1, nh], "F32"),
             "ssm_norm.weight": ([di // p.ssm_n_group, p.ssm_n_group], "F32"), "ssm_out.weight": ([di, d], "F16")}
    n_q, n_kv = p.n_head * p.head_dim, p.n_head_kv * p.head_dim
    attention = {"attn_q.weight": ([d, n_q], "F16"), "attn_k.weight": ([d, n_kv], "F16"),
                 "attn_v.weight": ([d, n_kv], "F16"), "attn_output.weight": ([n_q, d], "F16")}
    experts = _experts(p, gated=False)
    expected = embedding_and_output_layout(p)
    for layer, kind in enumerate((mamba, experts, mamba, attention, experts)):
        layout = {"attn_norm.weight": ([d], "F32"), **kind}
        expected.update({f"blk.{layer}.{name}": value for name, value in layout.items()})
    assert tensor_layout(moe_hybrid_models["tiny-nemotron-h-moe"]) == expected


def test_qwen35moe_metadata_counts_the_mtp_block(moe_hybrid_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-qwen35moe")
    reader = gguf.GGUFReader(moe_hybrid_models["tiny-qwen35moe"])
    assert metadata_field(reader, "general.architecture") == "qwen35moe"
    # block_count holds the trunk and the MTP block; llama.cpp's n_layer() is block_count - nextn_predict_layers.
    expected = {"block_count": p.n_layer + 1, "nextn_predict_layers": 1, "expert_count": p.n_expert,
                "expert_used_count": p.n_expert_used, "expert_feed_forward_length": p.n_ff_exp,
                "expert_shared_feed_forward_length": p.n_ff_shexp,
                "full_attention_interval": p.full_attention_interval, "attention.key_length": p.head_dim}
    for key, value in expected.items():
        assert metadata_field(reader, f"qwen35moe.{key}") == value, key


def test_nemotron_h_moe_metadata_marks_the_expert_layers(moe_hybrid_models: dict[str, Path]) -> None:
    p = synthetic.get_preset("tiny-nemotron-h-moe")
    reader = gguf.GGUFReader(moe_hybrid_models["tiny-nemotron-h-moe"])
    assert metadata_field(reader, "general.architecture") == "nemotron_h_moe"
    # Per layer of MEM*E: an FFN length marks the expert layers, KV heads the attention layer.
    assert metadata_field(reader, "nemotron_h_moe.feed_forward_length") == [0, p.n_ff, 0, 0, p.n_ff]
    assert metadata_field(reader, "nemotron_h_moe.attention.head_count_kv") == [0, 0, 0, p.n_head_kv, 0]
    expected = {"expert_count": p.n_expert, "expert_used_count": p.n_expert_used,
                "expert_feed_forward_length": p.n_ff_exp, "expert_shared_feed_forward_length": p.n_ff_shexp,
                "expert_shared_count": 1, "expert_weights_norm": True}
    for key, value in expected.items():
        assert metadata_field(reader, f"nemotron_h_moe.{key}") == value, key
    assert metadata_field(reader, "nemotron_h_moe.expert_weights_scale") == pytest.approx(2.5)
    assert not [f for f in reader.fields if f.startswith("nemotron_h_moe.rope") or "nextn" in f]


@pytest.mark.parametrize("name", MOE_HYBRID_PRESETS)
def test_moe_hybrid_models_are_deterministic(name: str, moe_hybrid_models: dict[str, Path], tmp_path: Path) -> None:
    assert_deterministic(name, moe_hybrid_models[name], tmp_path)


@pytest.mark.parametrize("name", MOE_HYBRID_PRESETS)
def test_moe_hybrid_draws_do_not_depend_on_layer_count(name: str, moe_hybrid_models: dict[str, Path],
                                                       tmp_path: Path) -> None:
    # A one-layer qwen35moe has its MTP block as blk.1 where the full model has it as blk.4: compare only the
    # trunk's first layer, and the residual writes (scaled by the layer count) not at all.
    assert_draws_do_not_depend_on_layer_count(name, moe_hybrid_models[name], tmp_path,
                                              residual=("ssm_out.weight", "attn_output.weight", "ffn_down_exps.weight",
                                                        "ffn_down_shexp.weight", "ffn_down.weight"),
                                              skip_prefix="blk.1.")


# --- with the real tools ---

@pytest.fixture(scope="module")
def quantized(moe_hybrid_models: dict[str, Path], quantizer: Path,
              tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each tiny preset as a Q4_K_M target and its Q8_0 as a draft of the same weights."""
    directory = tmp_path_factory.mktemp("moe-hybrid-q")
    return {name: (synthetic.quantize(f16, directory / f"{name}-Q4_K_M.gguf", "Q4_K_M", quantizer),
                   synthetic.quantize(f16, directory / f"{name}-Q8_0.gguf", "Q8_0", quantizer))
            for name, f16 in moe_hybrid_models.items()}


@pytest.mark.parametrize("name", MOE_HYBRID_PRESETS)
@pytest.mark.parametrize(("switch", "identical"), [("1", True), ("0", False)])
def test_tiny_moe_hybrid_is_exact_on_the_cpu_with_the_switch_on(name: str, switch: str, identical: bool,
                                                               replay_tool: Path,
                                                               quantized: dict[str, tuple[Path, Path]],
                                                               tmp_path: Path) -> None:
    """Recurrent layers, routed and shared experts on the CPU: every verify batch's logits are one-token
    decoding's with the switch on, and differ with it off (the control)."""
    assert_replay_on_the_cpu(quantized[name][0], replay_tool, tmp_path / "replay.json", switch, identical)


@pytest.mark.parametrize("name", MOE_HYBRID_PRESETS)
def test_unaligned_verify_batches_are_exact_on_a_tiny_moe_hybrid(name: str, replay_tool: Path,
                                                                quantized: dict[str, tuple[Path, Path]],
                                                                tmp_path: Path) -> None:
    """Verify batches that cross multiples of 256 KV cells (--no-256-guard, as a caller that does not cut them):
    still one-token decoding's logits at every b on the CPU."""
    report = tmp_path / "replay.json"
    result = subprocess.run([str(replay_tool), "replay", "--model", str(quantized[name][0]), "--no-256-guard",
                             "--batches", "3,5,7,12,15", "--n-prompt", "200", "--n-gen", "360", "--ctx", "1024",
                             "--threads", "2", "--expect", "identical", "--json", str(report)],
                            check=False, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "GGML_BATCH_INVARIANT": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    rows = json.loads(report.read_text())["results"]
    assert all(row["positions_differ"] == 0 for row in rows), rows


@pytest.mark.parametrize("name", MOE_HYBRID_PRESETS)
def test_speculation_on_a_tiny_moe_hybrid_rolls_rejected_drafts_back_exactly(
        name: str, replay_tool: Path, quantized: dict[str, tuple[Path, Path]], tmp_path: Path) -> None:
    """Greedy speculation with a Q8_0 draft of the same weights, rejected often: with the switch on the text is
    plain greedy decoding's for 600 tokens, every rejection undone from a checkpoint of the recurrent state."""
    target, draft = quantized[name]
    report = tmp_path / "spec.json"
    result = subprocess.run([str(replay_tool), "spec", "--model", str(target), "--draft-model", str(draft),
                             "--n-gen", "600", "--prompts", "2", "--threads", "2", "--expect", "identical",
                             "--json", str(report)],
                            check=False, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "GGML_BATCH_INVARIANT": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    for row in json.loads(report.read_text())["results"]:
        assert row["tokens_compared"] == 600 and row["identical"] and row["redecode_mismatches"] == 0, row
        assert 0 < row["acceptance_rate"] < 1 and row["checkpoint_restores"] > 0, row


@pytest.mark.parametrize(("n_draft", "switch", "identical"), [(1, "1", True), (15, "1", True), (8, "0", False)])
def test_hiraishin_replay_drafting_with_the_mtp_block_gives_plain_greedy_tokens(
        n_draft: int, switch: str, identical: bool, replay_tool: Path, quantized: dict[str, tuple[Path, Path]],
        tmp_path: Path) -> None:
    """hiraishin-replay spec --mtp: tiny-qwen35moe's MTP block drafts (mirroring every target batch beside the
    target's hidden states, as llama-server's draft-mtp does), verify batches are not cut at 256 cells, and each
    rejection restores the recurrent state from a checkpoint. Switch on: the plain greedy tokens for 600 tokens at
    draft lengths 1 and 15; off (the control): they part."""
    report = tmp_path / "spec.json"
    result = subprocess.run([str(replay_tool), "spec", "--model", str(quantized["tiny-qwen35moe"][0]), "--mtp",
                             "--no-256-guard", "--n-draft", str(n_draft), "--n-gen", "600", "--prompts", "2",
                             "--threads", "2", "--expect", "identical" if identical else "differ",
                             "--json", str(report)],
                            check=False, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "GGML_BATCH_INVARIANT": switch})
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(report.read_text())
    assert data["mtp"] and not data["self_draft"] and not data["guard_256"]
    for row in data["results"]:
        assert row["tokens_compared"] == 600 and 0 < row["acceptance_rate"] < 1, row
        assert row["checkpoint_restores"] > 0, row
    assert all(row["identical"] for row in data["results"]) == identical, data["results"]


@pytest.mark.parametrize(("args", "message"), [
    (["--draft-model", "x.gguf"], "--mtp drafts with the model's own MTP block; leave out --draft-model"),
    ([], "has no MTP block"),
])
def test_hiraishin_replay_refuses_mtp_it_cannot_run(args: list[str], message: str, replay_tool: Path,
                                                    quantized: dict[str, tuple[Path, Path]]) -> None:
    # the second case: tiny-nemotron-h-moe has no MTP block
    result = subprocess.run([str(replay_tool), "spec", "--model", str(quantized["tiny-nemotron-h-moe"][0]), "--mtp",
                             "--n-gen", "8", "--threads", "2", *args], check=False, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2 and message in result.stderr, result.stdout + result.stderr


server_exact = load_benchmark("server_exact")
# The synthetic vocabulary's byte tokens: a lone byte's piece is not UTF-8, and llama-server's reply parser
# refuses such a reply, so no request may generate them.
BYTE_TOKENS = tuple(range(3, 3 + synthetic.N_BYTE_TOKENS))
SERVER_PROMPTS = server_exact.PROMPTS[:2]


@pytest.mark.parametrize(("switch_on", "identical"), [(True, True), (False, False)], ids=["on", "off"])
def test_llama_server_drafting_with_the_mtp_head_gives_plain_greedy_tokens(
        switch_on: bool, identical: bool, quantized: dict[str, tuple[Path, Path]], server_venv: Path,
        tmp_path: Path) -> None:
    """The wheel's llama-server with --spec-type draft-mtp on tiny-qwen35moe: the model's own MTP block (which
    sees the next token's embedding, so it agrees with the trunk now and then) drafts up to 8 tokens and the
    target verifies them. With the switch on each greedy reply is the plain server's,
    token for token; off (the control) they part."""
    target, _ = quantized["tiny-qwen35moe"]
    state = server_exact.switch_state(server_venv, target, tmp_path, switch_on=switch_on, prompts=SERVER_PROMPTS,
                                      n_predict=200, draft_n_max=8, banned=BYTE_TOKENS, mtp=True)
    # some drafts accepted, most rejected (about 5% accepted on the CPU)
    assert_server_state(state, len(SERVER_PROMPTS), identical)
