"""Tests that run the compiled tools (llama-quantize, hiraishin-replay) on the tiny synthetic model.

They are skipped unless HIRAISHIN_LLAMA_BIN_DIR points at a directory holding the binaries.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import gguf
import pytest

from hiraishin_llama import synthetic

# Enough generated tokens to exercise the comparison while keeping each run well under a second on a CPU.
N_GEN = 48

REPLAY_RESULT_FIELDS = {
    "b", "positions_compared", "positions_differ", "argmax_flips", "max_abs_diff", "first_diff_pos",
    "ms_per_batch_mean", "ms_per_batch_median", "identical",
}
REPORT_FIELDS = {
    "tool", "version", "mode", "model_path", "model_size_bytes", "model_desc", "n_vocab", "n_layer", "devices",
    "ctx", "fa", "cache_type_k", "cache_type_v", "n_prompt", "n_gen", "seed", "env", "results", "verdict",
    "expect", "passed",
}


def _run(tool: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tool), *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env} if env else None)


@pytest.mark.parametrize("qtype", synthetic.QUANT_TYPES)
def test_quantization_is_deterministic(quantizer: Path, tiny_model: Path, tmp_path: Path, qtype: str) -> None:
    first = synthetic.quantize(tiny_model, tmp_path / "first.gguf", qtype, quantizer)
    second = synthetic.quantize(tiny_model, tmp_path / "second.gguf", qtype.lower(), quantizer)
    assert synthetic.sha256_of(first) == synthetic.sha256_of(second)

    reader = gguf.GGUFReader(first)
    types = {t.name: t.tensor_type for t in reader.tensors}
    assert types["blk.0.attn_norm.weight"] == gguf.GGMLQuantizationType.F32
    # the float targets keep their matrices as floats of that type, every other one quantizes them
    float_target = {"F16": gguf.GGMLQuantizationType.F16, "BF16": gguf.GGMLQuantizationType.BF16}.get(qtype)
    if float_target is not None:
        assert types["blk.0.ffn_up.weight"] == float_target
    else:
        assert types["blk.0.ffn_up.weight"] not in (gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.BF16,
                                                    gguf.GGMLQuantizationType.F32)
    assert reader.get_field("general.architecture").contents() == "qwen3"


def test_replay_b1_is_bit_identical(replay_tool: Path, tiny_model: Path, tmp_path: Path) -> None:
    # b=1 replays the exact one-token steps; any difference would mean the
    # harness compares misaligned positions.
    report_path = tmp_path / "replay.json"
    result = _run(replay_tool, "replay", "--model", str(tiny_model), "--n-gen", str(N_GEN), "--batches", "1",
                  "--expect", "identical", "--json", str(report_path))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_path.read_text())
    assert [r["b"] for r in report["results"]] == [1]
    b1 = report["results"][0]
    assert b1["positions_compared"] == N_GEN
    assert b1["positions_differ"] == 0 and b1["first_diff_pos"] is None
    assert report["verdict"] == "identical" and report["passed"] is True


def test_plain_decoding_fingerprint_is_reproducible_and_tracks_the_tokens(
        replay_tool: Path, tiny_model: Path, tmp_path: Path) -> None:
    # The fingerprints compare plain decoding across builds (patched vs stock), so two runs of
    # one build must agree, and a different decoding (another prompt) must not.
    plains = []
    for seed in (1, 1, 2):
        report_path = tmp_path / f"replay-{len(plains)}.json"
        result = _run(replay_tool, "replay", "--model", str(tiny_model), "--n-gen", str(N_GEN), "--batches", "1",
                      "--seed", str(seed), "--json", str(report_path))
        assert result.returncode == 0, result.stdout + result.stderr
        plains.append(json.loads(report_path.read_text())["plain"])
    for plain in plains:
        assert len(plain["tokens_fnv1a64"]) == 16 and len(plain["logits_fnv1a64"]) == 16
    assert plains[0]["tokens_fnv1a64"] == plains[1]["tokens_fnv1a64"]
    assert plains[0]["logits_fnv1a64"] == plains[1]["logits_fnv1a64"]
    assert plains[0]["logits_fnv1a64"] != plains[2]["logits_fnv1a64"]


def test_replay_report_has_every_field(replay_tool: Path, tiny_model: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "replay.json"
    result = _run(replay_tool, "--model", str(tiny_model), "--n-gen", str(N_GEN), "--batches", "2,5,16",
                  "--json", str(report_path))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_path.read_text())
    assert REPORT_FIELDS <= report.keys()
    assert report["mode"] == "replay" and report["expect"] == "none" and report["passed"] is True
    assert report["n_vocab"] == synthetic.PRESETS["tiny"].n_vocab
    assert set(report["env"]) == {"GGML_CUDA_BATCH_INVARIANT", "GGML_BATCH_INVARIANT"}
    assert [r["b"] for r in report["results"]] == [1, 2, 5, 16]
    for row in report["results"]:
        assert REPLAY_RESULT_FIELDS <= row.keys()
        # Only full batches are replayed.
        assert row["positions_compared"] == (N_GEN // row["b"]) * row["b"]
    assert report["results"][0]["positions_differ"] == 0


@pytest.mark.parametrize("args, message", [
    (["--model", "/nonexistent/model.gguf"], "does not exist"),
    (["--cache-type-k", "q5_1"], "valid types: f16, q8_0, q4_0, turbo2, turbo3, turbo4"),
    (["--batches", "2,x"], "--batches"),
    (["--n-gen", "5000"], "KV cells"),
    (["--expect", "maybe"], "--expect"),
    (["--n-draft", "4"], "spec subcommand only"),
])
def test_replay_usage_errors_exit_2(replay_tool: Path, tiny_model: Path, args: list[str], message: str) -> None:
    if "--model" not in args:
        args = ["--model", str(tiny_model), *args]
    result = _run(replay_tool, "replay", *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_replay_rejects_a_file_that_is_not_gguf(replay_tool: Path, tmp_path: Path) -> None:
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 not a model")
    result = _run(replay_tool, "--model", str(not_gguf))
    assert result.returncode == 2
    assert "not a GGUF file" in result.stderr


def test_spec_without_drafts_reproduces_plain_decoding(replay_tool: Path, tiny_model: Path) -> None:
    # With no draft tokens every verify batch is a single token, which is plain decoding.
    result = _run(replay_tool, "spec", "--model", str(tiny_model), "--n-gen", str(N_GEN), "--n-draft", "0",
                  "--expect", "identical")
    assert result.returncode == 0, result.stdout + result.stderr


def test_spec_self_draft_report(replay_tool: Path, tiny_model: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "spec.json"
    result = _run(replay_tool, "spec", "--model", str(tiny_model), "--n-gen", str(N_GEN), "--prompts", "2",
                  "--json", str(report_path))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_path.read_text())
    assert REPORT_FIELDS <= report.keys()
    assert report["mode"] == "spec" and report["self_draft"] is True
    assert [r["seed"] for r in report["results"]] == [1, 2]
    for row in report["results"]:
        assert row["tokens_compared"] == N_GEN
        assert 0.0 <= row["acceptance_rate"] <= 1.0
        assert row["largest_verify_batch"] <= 16
        assert row["identical"] == (row["first_mismatch"] is None)


def test_synthetic_vocabulary_tokenizes_text(tokenize_tool: Path, tiny_model: Path) -> None:
    # llama-server and llama-cli need text -> tokens; byte fallback covers characters outside a-z.
    result = _run(tokenize_tool, "-m", str(tiny_model), "-p", "Hello world, 42!", "--ids", "--log-disable")
    assert result.returncode == 0, result.stderr
    ids = json.loads(result.stdout.strip().splitlines()[-1])
    assert ids[0] == synthetic.BOS_ID
    assert len(ids) > 3 and all(0 <= i < synthetic.PRESETS["tiny"].n_vocab for i in ids)


def test_cli_quantizes_to_the_same_bytes_as_the_api(quantizer: Path, tiny_model: Path, tmp_path: Path) -> None:
    expected = synthetic.quantize(tiny_model, tmp_path / "api.gguf", "Q4_K_M", quantizer)
    out = tmp_path / "cli.gguf"
    assert synthetic.main(["--preset", "tiny", "--seed", "1", "--out", str(out), "--quant", "Q4_K_M",
                           "--quantizer", str(quantizer)]) == 0
    assert synthetic.sha256_of(out) == synthetic.sha256_of(expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["api.gguf", "cli.gguf"]


@pytest.mark.parametrize("args, message", [
    (["replay", "--reps", "3"], "--reps applies to the bench subcommand only, not to replay"),
    (["bench", "--timing-reps", "3"], "--timing-reps applies to the replay subcommand only, not to bench"),
    (["bench", "--draft-model", "x.gguf"], "applies to the spec subcommand only"),
    (["bench", "--n-prompt", "4090", "--n-gen", "1", "--batches", "8"], "needs 4098 KV cells"),
    (["bench", "--bandwidth-mib", "-1"], "--bandwidth-mib must be between 0"),
])
def test_bench_usage_errors_exit_2(replay_tool: Path, tiny_model: Path, args: list[str], message: str) -> None:
    result = _run(replay_tool, *args, "--model", str(tiny_model))
    assert result.returncode == 2
    assert message in result.stderr


def test_bench_report_has_every_field(replay_tool: Path, tiny_model: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "bench.json"
    result = _run(replay_tool, "bench", "--model", str(tiny_model), "--n-gen", "8", "--batches", "1,4",
                  "--reps", "3", "--warmup", "1", "--bandwidth-mib", "8", "--json", str(report_path))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_path.read_text())
    assert report["mode"] == "bench" and report["reps"] == 3 and report["warmup"] == 1
    assert [p["b"] for p in report["verify_passes"]] == [1, 4]
    for row in report["verify_passes"]:
        assert len(row["samples_ms"]) == 3
        assert row["min_ms"] <= row["median_ms"] <= row["max_ms"]
        assert row["n_past"] == report["n_prompt"]
    assert report["plain"]["steps"] == 8 and report["plain"]["tokens_per_s"] > 0
    assert report["copy_bandwidth"]["bytes_copied"] == 8 << 20
    assert report["copy_bandwidth"]["gb_per_s"] > 0
    assert 0 < report["model_tensor_bytes"] <= report["model_size_bytes"]


@pytest.mark.parametrize("args, message", [
    (["slots", "--slots", "1"], "--slots"),
    (["slots", "--kv-unified", "maybe"], "--kv-unified expects on or off, got 'maybe'"),
    (["replay", "--slots", "4"], "--slots applies to the slots subcommand only, not to replay"),
    (["spec", "--kv-unified", "off"], "--kv-unified applies to the slots subcommand only, not to spec"),
    (["slots", "--batches", "2,x"], "--batches"),
])
def test_slots_usage_errors_exit_2(replay_tool: Path, tiny_model: Path, args: list[str], message: str) -> None:
    result = _run(replay_tool, *args, "--model", str(tiny_model))
    assert result.returncode == 2
    assert message in result.stderr


# The binary's own default is the switch off; the wheel's launchers turn it on.
SWITCH_ON = {"GGML_BATCH_INVARIANT": "1", "GGML_CUDA_BATCH_INVARIANT": "1"}
SWITCH_OFF = {"GGML_BATCH_INVARIANT": "0", "GGML_CUDA_BATCH_INVARIANT": "0"}


@pytest.mark.parametrize("kv_unified", ["on", "off"])
def test_slots_side_by_side_give_each_request_its_logits_alone(replay_tool: Path, tiny_model: Path, tmp_path: Path,
                                                              kv_unified: str) -> None:
    # The CPU backend in batch-invariant mode: three slots whose prompt chunks and verify batches of 1, 2, 5 and 16
    # tokens share batches give every position the bits of its request alone.
    report_path = tmp_path / "slots.json"
    result = _run(replay_tool, "slots", "--model", str(tiny_model), "--slots", "3", "--kv-unified", kv_unified,
                  "--n-prompt", "40", "--n-gen", str(N_GEN), "--batches", "2,5,16", "--ctx", "128",
                  "--expect", "identical", "--json", str(report_path), env=SWITCH_ON)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_path.read_text())
    assert report["mode"] == "slots" and report["slots"] == 3 and report["kv_unified"] == (kv_unified == "on")
    assert [r["b"] for r in report["results"]] == [1, 2, 5, 16]
    # two rounds of requests, each slot's second taken when its first ends
    assert [r["slot"] for r in report["requests"]] == [0, 1, 2, 0, 1, 2]
    assert [r["seed"] for r in report["requests"]] == [1, 2, 3, 4, 5, 6]
    assert all(r["positions_differ"] == 0 and r["positions_compared"] == N_GEN for r in report["requests"])
    # every generated position is compared once, in a batch of its size
    assert sum(r["positions_compared"] for r in report["results"]) == 6 * N_GEN
    assert all(r["batches"] > 0 for r in report["results"])
    assert report["passed"] is True and report["verdict"] == "identical"


def test_slots_with_the_switch_off_differ_and_say_so(replay_tool: Path, tiny_model: Path, tmp_path: Path) -> None:
    # the control: stock kernels and KV placement make a request's logits depend on the requests beside it
    report_path = tmp_path / "slots.json"
    result = _run(replay_tool, "slots", "--model", str(tiny_model), "--slots", "3", "--n-prompt", "40",
                  "--n-gen", str(N_GEN), "--batches", "2,5,16", "--ctx", "128", "--expect", "differ",
                  "--json", str(report_path), env=SWITCH_OFF)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_path.read_text())
    assert any(r["positions_differ"] > 0 for r in report["requests"])
    # and --expect identical fails on it, with exit status 1
    failed = _run(replay_tool, "slots", "--model", str(tiny_model), "--slots", "3", "--n-prompt", "40",
                  "--n-gen", str(N_GEN), "--batches", "2,5,16", "--ctx", "128", "--expect", "identical", env=SWITCH_OFF)
    assert failed.returncode == 1 and "expect identical: FAILED" in failed.stdout
