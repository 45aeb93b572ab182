"""Synthetic GGUF models: determinism, layout, metadata and error handling (no compiled tools needed)."""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np
import pytest

from hiraishin_llama import synthetic

TINY = synthetic.PRESETS["tiny"]


def _field(reader: gguf.GGUFReader, key: str):
    field = reader.get_field(key)
    assert field is not None, f"missing metadata key {key}"
    return field.contents()


def test_same_seed_gives_same_bytes(tiny_model: Path, tmp_path: Path) -> None:
    again = synthetic.make_model("tiny", seed=1, n_layer=None, out_path=tmp_path / "again.gguf")
    assert synthetic.sha256_of(again) == synthetic.sha256_of(tiny_model)


def test_different_seed_gives_different_weights(tiny_model: Path, tmp_path: Path) -> None:
    other = synthetic.make_model("tiny", seed=2, n_layer=None, out_path=tmp_path / "seed2.gguf")
    first = gguf.GGUFReader(tiny_model).tensors[0]
    second = gguf.GGUFReader(other).tensors[0]
    assert first.name == second.name == "token_embd.weight"
    assert not np.array_equal(first.data, second.data)


def test_tensor_draws_do_not_depend_on_layer_count(tiny_model: Path, tmp_path: Path) -> None:
    # Each tensor has its own random stream; only the residual projections
    # (attn_output, ffn_down) are rescaled with depth.
    one_layer = synthetic.make_model("tiny", seed=1, n_layer=1, out_path=tmp_path / "one.gguf")
    full = {t.name: t for t in gguf.GGUFReader(tiny_model).tensors}
    for tensor in gguf.GGUFReader(one_layer).tensors:
        if tensor.name.endswith(("attn_output.weight", "ffn_down.weight")):
            continue
        assert np.array_equal(tensor.data, full[tensor.name].data), tensor.name


def test_metadata_describes_a_qwen3_model(tiny_model: Path) -> None:
    reader = gguf.GGUFReader(tiny_model)
    assert _field(reader, "general.architecture") == "qwen3"
    assert _field(reader, "general.file_type") == int(gguf.LlamaFileType.MOSTLY_F16)
    assert _field(reader, "qwen3.block_count") == TINY.n_layer
    assert _field(reader, "qwen3.embedding_length") == TINY.n_embd
    assert _field(reader, "qwen3.feed_forward_length") == TINY.n_ff
    assert _field(reader, "qwen3.attention.head_count") == TINY.n_head
    assert _field(reader, "qwen3.attention.head_count_kv") == TINY.n_head_kv
    assert _field(reader, "qwen3.attention.key_length") == TINY.head_dim
    assert _field(reader, "qwen3.attention.value_length") == TINY.head_dim
    assert _field(reader, "qwen3.context_length") == TINY.context_length
    assert _field(reader, "qwen3.rope.freq_base") == pytest.approx(TINY.rope_freq_base)
    assert _field(reader, "qwen3.attention.layer_norm_rms_epsilon") == pytest.approx(TINY.rms_norm_eps)
    assert _field(reader, "hiraishin.synthetic.preset") == "tiny"
    assert _field(reader, "hiraishin.synthetic.seed") == 1


def test_vocabulary_is_a_loadable_sentencepiece_vocab(tiny_model: Path) -> None:
    reader = gguf.GGUFReader(tiny_model)
    assert _field(reader, "tokenizer.ggml.model") == "llama"
    tokens = _field(reader, "tokenizer.ggml.tokens")
    token_types = _field(reader, "tokenizer.ggml.token_type")
    scores = _field(reader, "tokenizer.ggml.scores")
    assert len(tokens) == len(token_types) == len(scores) == TINY.n_vocab
    # llama.cpp maps token text to id, so duplicates would break loading.
    assert len(set(tokens)) == len(tokens)
    assert tokens[:3] == ["<unk>", "<s>", "</s>"]
    assert tokens[synthetic.FIRST_BYTE_ID + 0x0A] == "<0x0A>"  # the newline byte llama.cpp looks up
    assert all(t == int(gguf.TokenType.BYTE) for t in token_types[3:3 + 256])
    assert _field(reader, "tokenizer.ggml.bos_token_id") == synthetic.BOS_ID
    assert _field(reader, "tokenizer.ggml.eos_token_id") == synthetic.EOS_ID
    assert _field(reader, "tokenizer.ggml.unknown_token_id") == synthetic.UNK_ID


def test_tensors_have_qwen3_names_shapes_and_types(tiny_model: Path) -> None:
    n_q = TINY.n_head * TINY.head_dim
    n_kv = TINY.n_head_kv * TINY.head_dim
    # Shapes in ggml order (ne0 first), as GGUFReader reports them.
    expected = {
        "token_embd.weight": ([TINY.n_embd, TINY.n_vocab], "F16"),
        "output_norm.weight": ([TINY.n_embd], "F32"),
        "output.weight": ([TINY.n_embd, TINY.n_vocab], "F16"),
    }
    for layer in range(TINY.n_layer):
        blk = f"blk.{layer}"
        expected.update({
            f"{blk}.attn_norm.weight": ([TINY.n_embd], "F32"),
            f"{blk}.attn_q.weight": ([TINY.n_embd, n_q], "F16"),
            f"{blk}.attn_k.weight": ([TINY.n_embd, n_kv], "F16"),
            f"{blk}.attn_v.weight": ([TINY.n_embd, n_kv], "F16"),
            f"{blk}.attn_q_norm.weight": ([TINY.head_dim], "F32"),
            f"{blk}.attn_k_norm.weight": ([TINY.head_dim], "F32"),
            f"{blk}.attn_output.weight": ([n_q, TINY.n_embd], "F16"),
            f"{blk}.ffn_norm.weight": ([TINY.n_embd], "F32"),
            f"{blk}.ffn_gate.weight": ([TINY.n_embd, TINY.n_ff], "F16"),
            f"{blk}.ffn_up.weight": ([TINY.n_embd, TINY.n_ff], "F16"),
            f"{blk}.ffn_down.weight": ([TINY.n_ff, TINY.n_embd], "F16"),
        })
    actual = {t.name: (t.shape.tolist(), t.tensor_type.name) for t in gguf.GGUFReader(tiny_model).tensors}
    assert actual == expected


def test_weights_are_finite_and_scaled(tiny_model: Path) -> None:
    tensors = {t.name: t for t in gguf.GGUFReader(tiny_model).tensors}
    q = tensors["blk.0.attn_q.weight"].data.astype(np.float32)
    assert np.isfinite(q).all()
    assert q.std() == pytest.approx(1.0 / np.sqrt(TINY.n_embd), rel=0.05)
    assert np.all(tensors["blk.0.attn_norm.weight"].data == 1.0)


def test_qwen3_8b_preset_has_the_real_shapes() -> None:
    preset = synthetic.get_preset("qwen3-8b")
    assert (preset.n_embd, preset.n_head, preset.n_head_kv, preset.head_dim) == (4096, 32, 8, 128)
    assert (preset.n_ff, preset.n_vocab, preset.context_length) == (12288, 32000, 40960)
    assert preset.n_layer == 4
    assert preset.rope_freq_base == 1e6 and preset.rms_norm_eps == 1e-6


def test_vocab_layout_for_the_large_preset() -> None:
    tokens, scores, token_types = synthetic.build_vocab(32000)
    assert len(tokens) == len(set(tokens)) == len(scores) == len(token_types) == 32000


def test_unknown_preset_lists_valid_presets(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="deepseek2, gemma3, glm4moe, gpt-oss, nemotron-h, nemotron-h-moe, qwen2, "
                       "qwen2moe, qwen3-8b, qwen35, qwen35moe, qwen3moe, tiny, tiny-deepseek2, tiny-gemma3, "
                       "tiny-glm4moe, tiny-gpt-oss, tiny-nemotron-h, tiny-nemotron-h-moe, tiny-qwen2, tiny-qwen2moe, "
                       "tiny-qwen35, tiny-qwen35moe, tiny-qwen3moe$"):
        synthetic.make_model("llama-70b", seed=1, n_layer=None, out_path=tmp_path / "x.gguf")


@pytest.mark.parametrize("n_layer", [0, -1])
def test_bad_layer_count_is_rejected(tmp_path: Path, n_layer: int) -> None:
    with pytest.raises(ValueError, match="n_layer"):
        synthetic.make_model("tiny", seed=1, n_layer=n_layer, out_path=tmp_path / "x.gguf")


def test_negative_seed_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="seed"):
        synthetic.make_model("tiny", seed=-1, n_layer=None, out_path=tmp_path / "x.gguf")


def test_missing_output_directory_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        synthetic.make_model("tiny", seed=1, n_layer=None, out_path=tmp_path / "missing" / "x.gguf")


def test_too_small_vocabulary_is_rejected() -> None:
    with pytest.raises(ValueError, match="too small"):
        synthetic.build_vocab(200)


def test_bad_quant_type_lists_valid_types(tiny_model: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Q4_K_M, Q6_K, Q8_0, MXFP4_MOE"):
        synthetic.quantize(tiny_model, tmp_path / "q.gguf", "Q3_K_XL", "/bin/true")


def test_missing_quantizer_binary_is_reported(tiny_model: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="llama-quantize"):
        synthetic.quantize(tiny_model, tmp_path / "q.gguf", "Q8_0", tmp_path / "no-such-quantizer")


def test_missing_quantization_input_is_reported(tmp_path: Path) -> None:
    quantizer = tmp_path / "llama-quantize"
    quantizer.write_text("#!/bin/sh\nexit 0\n")
    quantizer.chmod(0o755)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        synthetic.quantize(tmp_path / "absent.gguf", tmp_path / "q.gguf", "Q8_0", quantizer)


def test_failing_quantizer_raises_with_its_output(tiny_model: Path, tmp_path: Path) -> None:
    quantizer = tmp_path / "llama-quantize"
    quantizer.write_text("#!/bin/sh\necho 'cannot quantize this'\nexit 3\n")
    quantizer.chmod(0o755)
    with pytest.raises(synthetic.QuantizationError, match="cannot quantize this"):
        synthetic.quantize(tiny_model, tmp_path / "q.gguf", "Q8_0", quantizer)
    assert not (tmp_path / "q.gguf").exists()


def test_find_quantizer_reports_an_empty_bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(synthetic.BIN_DIR_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=synthetic.BIN_DIR_ENV):
        synthetic.find_quantizer()


def test_cli_writes_the_model(tmp_path: Path, capsys: pytest.CaptureFixture[str], tiny_model: Path) -> None:
    out = tmp_path / "cli.gguf"
    assert synthetic.main(["--preset", "tiny", "--seed", "1", "--out", str(out)]) == 0
    assert synthetic.sha256_of(out) == synthetic.sha256_of(tiny_model)
    assert synthetic.sha256_of(out) in capsys.readouterr().out


def test_cli_reports_an_unknown_preset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert synthetic.main(["--preset", "nope", "--out", str(tmp_path / "x.gguf")]) == 2
    assert "valid presets" in capsys.readouterr().err
    assert not os.listdir(tmp_path)


def test_cli_reports_a_missing_quantizer_and_cleans_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "q.gguf"
    status = synthetic.main(["--preset", "tiny", "--out", str(out), "--quant", "Q8_0",
                             "--quantizer", str(tmp_path / "no-such-quantizer")])
    assert status == 2
    assert "llama-quantize" in capsys.readouterr().err
    assert not os.listdir(tmp_path)


# --- a target and its draft for speculative decoding ---

def _tensors(path: Path) -> dict[str, np.ndarray]:
    return {t.name: np.array(t.data) for t in gguf.GGUFReader(path).tensors}


def test_a_draft_holds_the_targets_first_layers_tensor_for_tensor(tmp_path: Path) -> None:
    target = synthetic.make_model("tiny", 1, 4, tmp_path / "target.gguf", deep_scale=0.25)
    draft = synthetic.make_model("tiny", 1, 4, tmp_path / "draft.gguf", deep_scale=0.25, draft_layers=1)
    target_tensors, draft_tensors = _tensors(target), _tensors(draft)
    reader = gguf.GGUFReader(draft)
    assert _field(reader, "qwen3.block_count") == 1
    # what it takes to make the file again: the target's layer count and scale
    assert _field(reader, "hiraishin.synthetic.n_layer") == 4
    assert _field(reader, "hiraishin.synthetic.deep_layer_scale") == 0.25
    assert _field(reader, "general.name") == "hiraishin-synthetic-tiny-L4-deep0.25-draft1-seed1"
    assert _field(gguf.GGUFReader(target), "general.name") == "hiraishin-synthetic-tiny-L4-deep0.25-seed1"
    assert not any(name.startswith("blk.1.") for name in draft_tensors)
    # the embedding, the first layer and the output are the target's own, byte for byte
    assert set(draft_tensors) == {name for name in target_tensors if not name.startswith(("blk.1.", "blk.2.", "blk.3."))}
    for name, data in draft_tensors.items():
        assert np.array_equal(data, target_tensors[name]), name


def test_deep_scale_scales_only_what_the_deeper_layers_write_into_the_stream(tmp_path: Path) -> None:
    plain = _tensors(synthetic.make_model("tiny", 1, 4, tmp_path / "plain.gguf"))
    damped = _tensors(synthetic.make_model("tiny", 1, 4, tmp_path / "damped.gguf", deep_scale=0.25))
    for name, data in plain.items():
        deeper_write = name.startswith(("blk.1.", "blk.2.", "blk.3.")) and name.endswith(
            ("attn_output.weight", "ffn_down.weight"))
        if deeper_write:
            # the same draws at a quarter of the scale (F16 rounding aside)
            np.testing.assert_allclose(damped[name].astype(np.float32), 0.25 * data.astype(np.float32),
                                       rtol=2e-3, atol=1e-7)
        else:
            assert np.array_equal(damped[name], data), name


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"draft_layers": 4}, "draft_layers must be from 1 to n_layer - 1 = 3"),
    ({"draft_layers": 0}, "draft_layers must be from 1 to n_layer - 1 = 3"),
    ({"deep_scale": 0.0}, "deep_scale must be a positive number"),
    ({"deep_scale": float("nan")}, "deep_scale must be a positive number"),
])
def test_bad_speculation_settings_are_refused_and_write_nothing(kwargs: dict, message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message):
        synthetic.make_model("tiny", 1, 4, tmp_path / "m.gguf", **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_speculation_settings_are_for_the_dense_presets(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="dense qwen3 presets, not tiny-qwen3moe"):
        synthetic.make_model("tiny-qwen3moe", 1, 2, tmp_path / "m.gguf", draft_layers=1)


def test_cli_writes_a_draft(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert synthetic.main(["--preset", "tiny", "--n-layer", "3", "--deep-layer-scale", "0.5", "--draft-layers", "1",
                           "--out", str(tmp_path / "draft.gguf")]) == 0
    assert _field(gguf.GGUFReader(tmp_path / "draft.gguf"), "qwen3.block_count") == 1
