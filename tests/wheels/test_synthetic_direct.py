"""Directly written quantized models (``--direct``): types from llama-quantize's dry run,
random blocks with scales sized like the F16 draws.

A stand-in llama-quantize that answers --dry-run the way the real one does lets these
run without compiled tools; the comparison with the real quantizer runs where
HIRAISHIN_LLAMA_BIN_DIR holds one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf.quants import dequantize

from hiraishin_llama import synthetic

T = gguf.GGMLQuantizationType

# What the real llama-quantize prints for one tensor it quantizes and one it keeps.
DRY_RUN_SAMPLE = """\
llama_model_quantize_impl: model size  =     7.01 MiB
[   1/  25] output.weight                        - [   256,   4096,      1,      1], type =    f16, size =     2.00 MiB ->     0.82 MiB (q6_K)
[   2/  25] output_norm.weight                   - [   256,      1,      1,      1], type =    f32, size =    0.001 MiB
[   3/  25] token_embd.weight                    - [   256,   4096,      1,      1], type =    f16, size =     2.00 MiB ->     0.56 MiB (q4_K)
"""


def _stand_in_quantizer(tmp_path: Path, plan: str = "q4_K", extra: str = "", exit_code: int = 0) -> Path:
    """A llama-quantize whose --dry-run lists every tensor of the model: matrices as `plan`, vectors kept."""
    script = tmp_path / "llama-quantize"
    script.write_text(f"""#!{sys.executable}
import sys, gguf
assert sys.argv[1] == "--dry-run", sys.argv
tensors = gguf.GGUFReader(sys.argv[2]).tensors
print("llama_model_quantize_impl: loading model")
for i, t in enumerate(tensors, 1):
    dims = ", ".join(f"{{int(d):6d}}" for d in list(t.shape) + [1] * (4 - len(t.shape)))
    kept = len(t.shape) == 1
    tail = "" if kept else " ->     0.10 MiB ({plan})"
    source = "f32" if kept else "f16"
    print(f"[{{i:4d}}/{{len(tensors):4d}}] {{t.name:36s}} - [{{dims}}], type = {{source:>6s}}, size =     0.20 MiB{{tail}}")
{extra}
sys.exit({exit_code})
""")
    script.chmod(0o755)
    return script


def test_dry_run_lines_are_parsed_into_types(tmp_path: Path) -> None:
    matches = {m["name"]: (m["source"], m["target"]) for m in synthetic._DRY_RUN_LINE.finditer(DRY_RUN_SAMPLE)}
    assert matches == {"output.weight": ("f16", "q6_K"), "output_norm.weight": ("f32", None),
                       "token_embd.weight": ("f16", "q4_K")}


@pytest.mark.parametrize("qtype", synthetic._direct_types())
def test_block_scales_give_the_requested_standard_deviation(qtype: gguf.GGMLQuantizationType) -> None:
    # The constants are derived by hand; dequantizing with gguf's reference code checks them.
    spec = synthetic._TensorSpec("blk.0.ffn_up.weight", (64, 1024), 0.02)
    blocks = synthetic._materialize_quantized(spec, qtype, seed=3)
    weights = dequantize(blocks, qtype)
    assert weights.shape == spec.shape
    assert weights.std() == pytest.approx(0.02, rel=0.05)
    assert abs(weights.mean()) < 0.02 * 0.05


def test_a_wrong_scale_constant_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # The check above must fail when a constant is off, e.g. Q4_K's taken for Q6_K's.
    wrong = synthetic._BlockScales(d_offset=208, std_per_d=synthetic._DIRECT_BLOCK_SCALES[T.Q4_K].std_per_d)
    monkeypatch.setitem(synthetic._DIRECT_BLOCK_SCALES, T.Q6_K, wrong)
    spec = synthetic._TensorSpec("w", (64, 1024), 0.02)
    weights = dequantize(synthetic._materialize_quantized(spec, T.Q6_K, seed=3), T.Q6_K)
    assert weights.std() != pytest.approx(0.02, rel=0.05)


def test_shape_model_is_sparse_and_loadable(tmp_path: Path) -> None:
    shape = synthetic.write_shape_model("qwen3-8b", 2, tmp_path / "shape.gguf")
    reader = gguf.GGUFReader(shape)
    f16_bytes = sum(int(t.n_bytes) for t in reader.tensors)
    assert shape.stat().st_size >= f16_bytes > 10**9
    assert shape.stat().st_blocks * 512 < 10**8  # the data section takes no disk
    assert [t.name for t in reader.tensors][:2] == ["token_embd.weight", "blk.0.attn_norm.weight"]


def test_direct_model_has_the_planned_types_and_is_deterministic(tmp_path: Path) -> None:
    quantizer = _stand_in_quantizer(tmp_path)
    first = synthetic.make_direct_model("tiny", 1, None, "Q4_K_M", tmp_path / "a.gguf", quantizer)
    second = synthetic.make_direct_model("tiny", 1, None, "Q4_K_M", tmp_path / "b.gguf", quantizer)
    assert synthetic.sha256_of(first) == synthetic.sha256_of(second)
    reader = gguf.GGUFReader(first)
    for tensor in reader.tensors:
        expected = T.F32 if len(tensor.shape) == 1 else T.Q4_K
        assert tensor.tensor_type == expected, tensor.name
    assert reader.get_field("general.file_type").contents() == int(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    assert reader.get_field("hiraishin.synthetic.weights").contents() == "direct"
    assert sorted(os.listdir(tmp_path)) == ["a.gguf", "b.gguf", "llama-quantize"]


def test_unsupported_planned_type_is_refused_without_leftovers(tmp_path: Path) -> None:
    quantizer = _stand_in_quantizer(tmp_path, plan="iq2_xxs")
    with pytest.raises(ValueError, match="cannot write .* directly as IQ2_XXS"):
        synthetic.make_direct_model("tiny", 1, None, "Q4_K_M", tmp_path / "m.gguf", quantizer)
    assert sorted(os.listdir(tmp_path)) == ["llama-quantize"]


def test_a_dry_run_that_misses_tensors_is_an_error(tmp_path: Path) -> None:
    quantizer = tmp_path / "llama-quantize"
    quantizer.write_text("#!/bin/sh\necho 'nothing useful'\n")
    quantizer.chmod(0o755)
    with pytest.raises(synthetic.QuantizationError, match="read a planned type for 0 of"):
        synthetic.make_direct_model("tiny", 1, None, "Q4_K_M", tmp_path / "m.gguf", quantizer)
    assert sorted(os.listdir(tmp_path)) == ["llama-quantize"]


def test_a_failing_dry_run_reports_its_output(tmp_path: Path) -> None:
    quantizer = _stand_in_quantizer(tmp_path, extra="print('quantize: bad things')", exit_code=1)
    with pytest.raises(synthetic.QuantizationError, match="bad things"):
        synthetic.make_direct_model("tiny", 1, None, "Q4_K_M", tmp_path / "m.gguf", quantizer)


def test_cli_direct_needs_quant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        synthetic.main(["--preset", "tiny", "--out", str(tmp_path / "x.gguf"), "--direct"])
    assert "--direct needs --quant" in capsys.readouterr().err


def test_cli_direct_writes_the_model(tmp_path: Path) -> None:
    quantizer = _stand_in_quantizer(tmp_path)
    out = tmp_path / "d.gguf"
    assert synthetic.main(["--preset", "tiny", "--out", str(out), "--quant", "Q4_K_M", "--direct",
                           "--quantizer", str(quantizer)]) == 0
    assert gguf.GGUFReader(out).tensors[0].tensor_type == T.Q4_K


def test_direct_model_matches_real_quantization_types(quantizer: Path, tiny_model: Path, tmp_path: Path) -> None:
    # With the real llama-quantize: every tensor has the type and shape that quantizing the F16 model gives.
    for qtype in synthetic.QUANT_TYPES:
        direct = synthetic.make_direct_model("tiny", 1, None, qtype, tmp_path / f"direct-{qtype}.gguf", quantizer)
        real = synthetic.quantize(tiny_model, tmp_path / f"real-{qtype}.gguf", qtype, quantizer)
        layout = {t.name: (t.tensor_type, tuple(t.shape)) for t in gguf.GGUFReader(direct).tensors}
        assert layout == {t.name: (t.tensor_type, tuple(t.shape)) for t in gguf.GGUFReader(real).tensors}, qtype
        assert abs(direct.stat().st_size - real.stat().st_size) < 4096


def test_direct_weights_have_the_f16_models_scale(tiny_model: Path, quantizer: Path, tmp_path: Path) -> None:
    direct = synthetic.make_direct_model("tiny", 1, None, "Q4_K_M", tmp_path / "d.gguf", quantizer)
    f16 = {t.name: t for t in gguf.GGUFReader(tiny_model).tensors}
    for tensor in gguf.GGUFReader(direct).tensors:
        if len(tensor.shape) == 1:
            continue
        weights = dequantize(tensor.data, tensor.tensor_type)
        reference = np.asarray(f16[tensor.name].data, dtype=np.float32)
        assert weights.std() == pytest.approx(reference.std(), rel=0.1), tensor.name


def test_a_direct_draft_holds_the_direct_targets_first_layer_block_for_block(tmp_path: Path) -> None:
    quantizer = _stand_in_quantizer(tmp_path)
    target = synthetic.make_direct_model("tiny", 1, 4, "Q4_K_M", tmp_path / "target.gguf", quantizer, deep_scale=0.1)
    draft = synthetic.make_direct_model("tiny", 1, 4, "Q4_K_M", tmp_path / "draft.gguf", quantizer, deep_scale=0.1,
                                        draft_layers=1)
    target_tensors = {t.name: t for t in gguf.GGUFReader(target).tensors}
    reader = gguf.GGUFReader(draft)
    assert reader.get_field("qwen3.block_count").contents() == 1
    names = [t.name for t in reader.tensors]
    assert names == [name for name in target_tensors if not name.startswith(("blk.1.", "blk.2.", "blk.3."))]
    for tensor in reader.tensors:
        assert tensor.tensor_type == target_tensors[tensor.name].tensor_type, tensor.name
        assert np.array_equal(tensor.data, target_tensors[tensor.name].data), tensor.name
    # the deeper layers' writes into the stream are a tenth of the plain model's scale
    plain = {t.name: t for t in gguf.GGUFReader(
        synthetic.make_direct_model("tiny", 1, 4, "Q4_K_M", tmp_path / "plain.gguf", quantizer)).tensors}
    for name in ("blk.1.attn_output.weight", "blk.3.ffn_down.weight"):
        ratio = (np.std(dequantize(target_tensors[name].data, T.Q4_K))
                 / np.std(dequantize(plain[name].data, T.Q4_K)))
        assert ratio == pytest.approx(0.1, rel=0.02), name
