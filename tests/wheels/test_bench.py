"""hiraishin-llama-bench: arguments, the exact/stock table, the floor and the report.

A stand-in hiraishin-replay (answering bench and spec with reports of the real
format, slower with the switch on) and a stand-in llama-quantize (answering
--dry-run) run the whole program without compiled tools; the real tools run
where HIRAISHIN_LLAMA_BIN_DIR holds them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import gguf
import pytest

from hiraishin_llama import bench

# Stand-in timings: a pass of b tokens costs 4 + b ms with the switch on and 4 + b/2 off.
STAND_IN_REPLAY = f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
mode = args[0]
value = lambda flag, default=None: args[args.index(flag) + 1] if flag in args else default
exact = os.environ.get("GGML_CUDA_BATCH_INVARIANT") == "1"
report = {{"mode": mode, "model_desc": "qwen3 ?B Q4_K - Medium", "n_layer": 2,
          "env": {{"GGML_CUDA_BATCH_INVARIANT": os.environ.get("GGML_CUDA_BATCH_INVARIANT")}}}}
if os.environ.get("STAND_IN_FAIL") == mode:
    print("hiraishin-replay: runtime failure: out of memory", file=sys.stderr)
    sys.exit(3)
if mode == "bench":
    batches = [int(b) for b in value("--batches").split(",")]
    per_b = lambda b: 4.0 + (b if exact else b / 2)
    report["verify_passes"] = [{{"b": b, "median_ms": per_b(b), "samples_ms": [per_b(b)] * int(value("--reps"))}}
                               for b in batches]
    report["plain"] = {{"tokens_per_s": 250.0 if exact else 251.0}}
    mib = int(value("--bandwidth-mib"))
    report["copy_bandwidth"] = {{"gb_per_s": 4000.0, "bytes_copied": mib << 20}} if mib else None
else:
    prompts = int(value("--prompts"))
    report["results"] = [{{"plain_tokens_per_s": 240.0, "spec_tokens_per_s": 300.0 if exact else 320.0,
                           "acceptance_rate": 1.0 if "--draft-model" not in args else 0.5,
                           "identical": exact}} for _ in range(prompts)]
open(value("--json"), "w").write(json.dumps(report))
"""

QUICK = ["--preset", "tiny", "--n-layer", "2", "--quants", "Q4_K_M", "--batches", "1-3,16", "--reps", "3",
         "--warmup", "1", "--plain-tokens", "8", "--spec-tokens", "8", "--spec-prompts", "2"]


@pytest.fixture
def stand_in_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from test_synthetic_direct import _stand_in_quantizer

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stand_in_quantizer(bin_dir)
    replay = bin_dir / "hiraishin-replay"
    replay.write_text(STAND_IN_REPLAY)
    replay.chmod(0o755)
    monkeypatch.setenv("HIRAISHIN_LLAMA_BIN_DIR", str(bin_dir))
    return bin_dir


def _run_main(tmp_path: Path, *extra: str) -> tuple[int, dict | None]:
    report = tmp_path / "report.json"
    status = bench.main([*QUICK, "--work-dir", str(tmp_path / "models"), "--json", str(report), *extra])
    return status, json.loads(report.read_text()) if report.is_file() else None


@pytest.mark.parametrize("text, sizes", [
    ("1-16", tuple(range(1, 17))),
    ("1,2,4,8", (1, 2, 4, 8)),
    ("2-4,16,3", (2, 3, 4, 16)),
])
def test_batch_sizes_parse(text: str, sizes: tuple[int, ...]) -> None:
    assert bench.parse_batches(text) == sizes


@pytest.mark.parametrize("text", ["0-4", "1-17", "a", "", "4-x"])
def test_bad_batch_sizes_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="batch sizes"):
        bench.parse_batches(text)


def test_rows_pair_exact_with_stock_and_the_floor() -> None:
    exact = {"verify_passes": [{"b": 1, "median_ms": 4.0}, {"b": 9, "median_ms": 13.0}]}
    stock = {"verify_passes": [{"b": 1, "median_ms": 4.0}, {"b": 9, "median_ms": 8.0}]}
    rows = bench.verify_rows(exact, stock, bytes_per_pass=4 * 10**9, bandwidth_gb_per_s=4000.0)
    assert [(r.b, r.ratio, r.floor_ms) for r in rows] == [(1, 1.0, 1.0), (9, 1.625, 1.0)]
    assert bench.verify_rows(exact, stock, 4 * 10**9, None)[0].floor_ms is None


def test_pass_bytes_leave_out_the_gathered_embeddings(tiny_model: Path) -> None:
    tensors = gguf.GGUFReader(tiny_model).tensors
    total = sum(int(t.n_bytes) for t in tensors)
    embeddings = next(int(t.n_bytes) for t in tensors if t.name == "token_embd.weight")
    assert bench.pass_bytes(tiny_model) == total - embeddings


def test_whole_run_writes_the_table_and_report(stand_in_tools: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    status, report = _run_main(tmp_path)
    assert status == 0
    result = report["results"]["Q4_K_M"]
    assert [(r["b"], r["exact_ms"], r["stock_ms"]) for r in result["verify"]] == [
        (1, 5.0, 4.5), (2, 6.0, 5.0), (3, 7.0, 5.5), (16, 20.0, 12.0)]
    assert result["verify"][3]["ratio"] == pytest.approx(20.0 / 12.0)
    assert result["copy_bandwidth_gb_per_s"] == 4000.0
    assert result["verify"][0]["floor_ms"] == pytest.approx(result["model"]["pass_bytes"] / 4e12 * 1e3)
    assert result["plain_tokens_per_s"] == {"exact": 250.0, "stock": 251.0}
    assert set(result["spec"]) == {"self", "1-layer"}
    assert result["spec"]["1-layer"]["exact"]["acceptance_rate"] == 0.5
    assert result["spec"]["self"]["exact"]["identical_to_plain"] == 2
    assert result["spec"]["self"]["stock"]["identical_to_plain"] == 0
    assert result["reports"]["exact"]["env"]["GGML_CUDA_BATCH_INVARIANT"] == "1"
    assert result["reports"]["stock"]["env"]["GGML_CUDA_BATCH_INVARIANT"] == "0"
    assert report["config"]["batches"] == [1, 2, 3, 16]
    assert {"commit", "gpus", "driver", "build", "date"} <= report.keys()
    out = capsys.readouterr().out
    assert " 16     20.000     12.000        1.667" in out
    assert "speculative, 1-layer draft: exact 300.0 tok/s (50% accepted, 2/2 identical to plain)" in out
    # What exactness costs end to end, from these pass times (speedup.py): a = 0.5, 10% drafts, k = 1 both.
    table = result["expected_speedup"]
    assert len(table["rows"]) == 15
    assert table["rows"][2]["exact"] == {"draft_length": 1, "speedup": pytest.approx(1.5 * 5.0 / (0.5 + 6.0))}
    assert "expected speculative speedup over plain decoding" in out
    assert "  0.50        10%     1.15   1     1.24   1        0.838" in out
    # The models are kept and reused: a second run makes none.
    models = sorted(p.name for p in (tmp_path / "models").iterdir())
    assert models == ["tiny-1l-seed1-Q4_K_M-direct.gguf", "tiny-2l-seed1-Q4_K_M-direct.gguf"]
    assert "making" in out
    assert _run_main(tmp_path)[0] == 0
    assert "making" not in capsys.readouterr().out


def test_max_ratio_fails_the_run_only_above_the_limit(stand_in_tools: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    status, report = _run_main(tmp_path, "--no-spec", "--max-ratio", "1.5")
    assert status == 1
    assert report["over_max_ratio"] == ["Q4_K_M b=16: 1.667"]
    assert "exact/stock above 1.5: Q4_K_M b=16: 1.667" in capsys.readouterr().err
    # b = 1 is a single-token pass, not a verify pass: its ratio is never held to the limit.
    status, report = _run_main(tmp_path, "--no-spec", "--max-ratio", "1.7")
    assert status == 0 and report["over_max_ratio"] == []


def test_a_failing_measurement_is_reported(stand_in_tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("STAND_IN_FAIL", "spec")
    status, report = _run_main(tmp_path)
    assert status == 2 and report is None
    err = capsys.readouterr().err
    assert "hiraishin-replay spec with batch-invariant mode on failed (exit 3)" in err
    assert "out of memory" in err


@pytest.mark.parametrize("args, message", [
    (["--quants", "IQ2_XXS"], "unsupported quantization type"),
    (["--reps", "0"], "--reps must be at least 1"),
    (["--batches", "0-3"], "batch sizes must be between 1 and 16"),
    (["--preset", "nope"], "valid presets"),
])
def test_bad_arguments_exit_2_before_any_work(args: list[str], message: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.main([*args, "--work-dir", str(tmp_path / "models")])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "models").exists()


def test_real_replay_bench_report(replay_tool: Path, quantizer: Path, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIRAISHIN_LLAMA_BIN_DIR", str(replay_tool.parent))
    status, report = _run_main(tmp_path, "--bandwidth-mib", "16")
    assert status == 0
    result = report["results"]["Q4_K_M"]
    assert [r["b"] for r in result["verify"]] == [1, 2, 3, 16]
    for mode in ("exact", "stock"):
        passes = result["reports"][mode]["verify_passes"]
        assert all(len(p["samples_ms"]) == 3 and p["median_ms"] > 0 for p in passes)
        assert result["reports"][mode]["mode"] == "bench"
    assert result["copy_bandwidth_gb_per_s"] > 0
    assert result["spec"]["self"]["exact"]["identical_to_plain"] == 2
    assert {result["reports"][mode]["pass_rewind"] for mode in ("exact", "stock")} == {"KV cells removed"}


@pytest.mark.parametrize("preset, n_layer", [("tiny-qwen35", "4"), ("tiny-nemotron-h", "5")])
def test_real_replay_bench_times_a_hybrid_from_a_state_checkpoint(preset: str, n_layer: str, replay_tool: Path,
                                                                  quantizer: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # a recurrent state cannot drop the cells of a timed pass (llama_memory_seq_rm refuses): every pass of a
    # hybrid model starts from the state saved after the prompt
    monkeypatch.setenv("HIRAISHIN_LLAMA_BIN_DIR", str(replay_tool.parent))
    status, report = _run_main(tmp_path, "--preset", preset, "--n-layer", n_layer, "--no-spec", "--batches", "1,2,16")
    assert status == 0
    result = report["results"]["Q4_K_M"]
    for mode in ("exact", "stock"):
        assert result["reports"][mode]["pass_rewind"] == "recurrent state checkpoint"
        passes = result["reports"][mode]["verify_passes"]
        assert [p["b"] for p in passes] == [1, 2, 16]
        assert all(len(p["samples_ms"]) == 3 and p["median_ms"] > 0 for p in passes)


def test_without_the_one_token_pass_the_table_says_why(stand_in_tools: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    status, report = _run_main(tmp_path, "--no-spec", "--batches", "2,4")
    assert status == 0
    assert "b = 1" in report["results"]["Q4_K_M"]["expected_speedup"]["not_computed"]
    assert "expected speculative speedup: not computed (the one-token pass (b = 1) was not measured" in capsys.readouterr().out
