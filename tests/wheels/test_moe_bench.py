"""hiraishin-llama-bench with mixture-of-experts presets: the options (full-size layer counts, gpt-oss's
native MXFP4_MOE), what the report says was measured, and a floor that counts the experts a token reads.

The measurement itself is stood in for (test_bench.py runs it with a stand-in replay); the MoE presets of
synthetic.py are stood in for where they are not there yet, by the interface agreed for them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gguf
import numpy as np
import pytest
from hiraishin_llama import bench, modelinfo, synthetic


def write_gguf(path: Path, architecture: str, tensors: dict[str, tuple[int, ...]], n_expert: int = 0,
               n_expert_used: int = 0) -> Path:
    writer = gguf.GGUFWriter(path, architecture)
    if n_expert:
        writer.add_expert_count(n_expert)
        writer.add_expert_used_count(n_expert_used)
    for name, shape in tensors.items():
        writer.add_tensor(name, np.zeros(shape, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_floor_of_a_moe_model_counts_the_experts_one_token_uses(tmp_path: Path) -> None:
    # 8 experts, 2 used: a token reads a quarter of each expert tensor, all of the rest but the embeddings.
    model = write_gguf(tmp_path / "moe.gguf", "qwen3moe", {
        "token_embd.weight": (64, 16),
        "blk.0.attn_q.weight": (16, 16),
        "blk.0.ffn_gate_inp.weight": (8, 16),
        "blk.0.ffn_up_exps.weight": (8, 32, 16),
        "blk.0.ffn_gate_exps.weight": (8, 32, 16),
        "blk.0.ffn_down_exps.weight": (8, 16, 32),
        "blk.0.ffn_gate_exps.bias": (8, 32),
        "output.weight": (64, 16),
    }, n_expert=8, n_expert_used=2)
    dense = 4 * (16 * 16 + 8 * 16 + 64 * 16)
    experts = 4 * (3 * 8 * 32 * 16 + 8 * 32)
    assert bench.pass_bytes(model) == dense + experts // 4
    # A dense model is read whole, as before.
    dense_model = write_gguf(tmp_path / "dense.gguf", "qwen3", {"token_embd.weight": (64, 16),
                                                               "blk.0.ffn_up.weight": (32, 16)})
    assert bench.pass_bytes(dense_model) == 4 * 32 * 16


@pytest.fixture
def moe_presets(monkeypatch: pytest.MonkeyPatch) -> None:
    """qwen3moe (48 layers) and gpt-oss (24 layers) presets and MXFP4_MOE, stood in for where synthetic.py
    does not have them yet."""
    tiny = synthetic.PRESETS["tiny"]
    for name, n_layer in (("qwen3moe", 48), ("gpt-oss", 24)):
        if name not in synthetic.PRESETS:
            monkeypatch.setitem(synthetic.PRESETS, name, dataclasses.replace(tiny, name=name, n_layer=n_layer))
    if "MXFP4_MOE" not in synthetic.QUANT_TYPES:
        monkeypatch.setattr(synthetic, "QUANT_TYPES", (*synthetic.QUANT_TYPES, "MXFP4_MOE"))


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bench.BenchConfig, str]]:
    """Stands in for the measurement of each model: records what was asked, answers with a result whose
    model is the preset's (qwen3moe and gpt-oss with experts)."""
    asked: list[tuple[bench.BenchConfig, str]] = []
    architectures = {"qwen3moe": ("qwen3moe", 128, 8), "gpt-oss": ("gpt-oss", 32, 4)}

    def bench_model(config: bench.BenchConfig, quant: str, work_dir: Path, scratch: Path) -> dict:
        asked.append((config, quant))
        architecture, n_expert, n_expert_used = architectures.get(config.preset, ("qwen3", 0, 0))
        return {"model": {"preset": config.preset, "architecture": architecture, "n_expert": n_expert,
                          "n_expert_used": n_expert_used}, "verify": []}

    monkeypatch.setattr(bench, "bench_model", bench_model)
    monkeypatch.setattr(bench, "render", lambda quant, result, max_ratio: "")
    return asked


def run(tmp_path: Path, *args: str) -> dict:
    report = tmp_path / "bench.json"
    assert bench.main([*args, "--work-dir", str(tmp_path / "models"), "--json", str(report)]) == 0
    return json.loads(report.read_text())


@pytest.mark.parametrize("args, preset, n_layer, quants, architecture", [
    ([], "qwen3-8b", 36, ("Q4_K_M", "Q6_K"), "qwen3"),
    (["--preset", "qwen3moe", "--quants", "Q4_K_M"], "qwen3moe", 48, ("Q4_K_M",), "qwen3moe"),
    (["--preset", "qwen3moe", "--n-layer", "48", "--quants", "Q4_K_M"], "qwen3moe", 48, ("Q4_K_M",), "qwen3moe"),
    (["--preset", "gpt-oss", "--quants", "MXFP4_MOE"], "gpt-oss", 24, ("MXFP4_MOE",), "gpt-oss"),
    (["--preset", "gpt-oss"], "gpt-oss", 24, ("MXFP4_MOE",), "gpt-oss"),
    (["--preset", "qwen3moe", "--n-layer", "4"], "qwen3moe", 4, ("Q4_K_M", "Q6_K"), "qwen3moe"),
])
def test_the_preset_chooses_layers_and_quants_and_the_report_says_what_was_measured(
        args: list[str], preset: str, n_layer: int, quants: tuple[str, ...], architecture: str, moe_presets: None,
        measured: list, tmp_path: Path) -> None:
    report = run(tmp_path, *args)
    assert [(config.preset, config.n_layer, config.direct, quant) for config, quant in measured] == [
        (preset, n_layer, True, quant) for quant in quants]  # full-size models are written directly
    assert (report["preset"], report["architecture"], report["moe"]) == (preset, architecture, architecture != "qwen3")
    assert report["config"]["preset"] == preset and report["config"]["n_layer"] == n_layer


def test_a_moe_preset_is_refused_as_any_unknown_one_when_missing(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--preset", "no-such-moe", "--work-dir", str(tmp_path / "models")])
    assert exit_info.value.code == 2 and "valid presets" in capsys.readouterr().err


def test_a_real_tiny_moe_model_has_experts_and_a_smaller_floor(quantizer: Path, tmp_path: Path) -> None:
    if "tiny-qwen3moe" not in synthetic.PRESETS:
        pytest.skip("synthetic.py has no tiny-qwen3moe preset yet")
    model = synthetic.make_direct_model("tiny-qwen3moe", 1, None, "Q4_K_M", tmp_path / "tiny-moe.gguf", quantizer)
    kind = modelinfo.model_kind(model)
    assert kind is not None and kind.is_moe and kind.architecture == "qwen3moe"
    whole = sum(int(t.n_bytes) for t in gguf.GGUFReader(model).tensors if t.name not in bench.GATHERED_TENSORS)
    assert bench.pass_bytes(model, kind) < whole
