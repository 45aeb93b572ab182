"""hiraishin-llama-smoke: bad input is a usage error (exit 2, one line), a failed
guarantee (exit 1) is only a real difference, and a run that could not be made
is neither (exit 3).

A stand-in hiraishin-replay answers as the real one does: exit 2 with one line
for a file that is not GGUF, an unknown cache type or a batch size outside
1..16; otherwise a report whose positions differ only with the switch off.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from hiraishin_llama import runtime, smoke

STAND_IN_REPLAY = f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
value = lambda flag, default=None: args[args.index(flag) + 1] if flag in args else default
def usage(message):
    print("hiraishin-replay: error: " + message, file=sys.stderr)
    sys.exit(2)
with open(value("--model"), "rb") as handle:
    if handle.read(4) != b"GGUF":
        usage("--model: '" + value("--model") + "' is not a GGUF file (its first 4 bytes are not \\"GGUF\\")")
if value("--cache-type-k") not in ("f16", "q8_0", "q4_0", "turbo2", "turbo3", "turbo4"):
    usage("--cache-type-k: unknown cache type")
batches = [int(b) for b in value("--batches").split(",")]
if any(b < 1 or b > 16 for b in batches):
    usage("--batches: batch sizes must be between 1 and 16")
if os.environ.get("STAND_IN_CANNOT_LOAD"):
    # As the real tool reports a model llama.cpp cannot load: its message, then llama.cpp's error lines.
    model = value("--model")
    print("hiraishin-replay: error: --model: llama.cpp could not load '" + model + "'"
          "\\n  llama.cpp: gguf_init_from_file_impl: failed to read key-value pairs"
          "\\n  llama.cpp: llama_model_load: error loading model: llama_model_loader: failed to load model from " + model +
          "\\n  llama.cpp: llama_model_load_from_file_impl: failed to load model", file=sys.stderr)
    sys.exit(2)
if os.environ.get("STAND_IN_CRASH"):
    print("hiraishin-replay: runtime failure: out of memory", file=sys.stderr)
    sys.exit(3)
on = os.environ.get("GGML_BATCH_INVARIANT") == "1" and os.environ.get("GGML_CUDA_BATCH_INVARIANT") == "1"
differ = 0 if on and not os.environ.get("STAND_IN_DIFFER") else 7
# Stock differences that begin only at a KV position, as the CPU's at b = 2 and 3 begin at 256.
last_position = int(value("--n-prompt")) + int(value("--n-gen")) - 1
if not on and last_position < int(os.environ.get("STAND_IN_DIFFER_FROM", "0")):
    differ = 0
# A fault only a model split between GPU and CPU shows (as the scheduler's op offload once did).
if "--ngl" in args and os.environ.get("STAND_IN_SPLIT_DIFFERS"):
    differ = 5
results = [{{"b": b, "positions_differ": 0 if b == 1 else differ}} for b in [1, *batches]]
expect = value("--expect")
passed = expect == "none" or (expect == "identical") == (differ == 0)
open(value("--json"), "w").write(json.dumps({{"results": results, "passed": passed, "ngl": value("--ngl")}}))
sys.exit(0 if passed else 1)
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    replay = bin_dir / "hiraishin-replay"
    replay.write_text(STAND_IN_REPLAY)
    replay.chmod(0o755)
    monkeypatch.setenv("HIRAISHIN_LLAMA_BIN_DIR", str(bin_dir))
    # A CPU wheel that claims the CPU backend: the cases are judged.
    runtime.build_info.cache_clear()
    monkeypatch.setattr(runtime, "build_info", lambda: {"recipe": "cpu", "exact_backends": ["cpu"]})
    monkeypatch.setattr(runtime, "gpus", lambda: [])
    return bin_dir


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = smoke.main([*args, "--work-dir", str(tmp_path / "models"), "--json", str(tmp_path / "smoke.json")])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_usage_error(code: int, out: str, err: str, *expected: str) -> None:
    assert code == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for text in expected:
        assert text in lines[0]
    assert "FAILED" not in out + err and "Traceback" not in err


def test_a_file_that_is_not_a_model_is_a_usage_error(stand_in: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_text("not a model\n")
    assert_usage_error(*run(tmp_path, capsys, "--model", str(bad)), f"--model {bad}", "not a GGUF file")


@pytest.mark.parametrize("args, expected", [
    (["--kv", "bogus"], ("--kv", "'bogus'", "f16, q8_0, q4_0, turbo2, turbo3, turbo4")),
    (["--kv", "f16,"], ("--kv", "f16, q8_0")),
    (["--batches", "17"], ("--batches", "between 1 and 16")),
    (["--batches", "abc"], ("--batches", "like 2-16, 2- (2 to 16) or 2,4,8")),
    (["--batches", "0,2"], ("--batches", "between 1 and 16")),
    (["--quants", "Q4_X"], ("--quants", "'Q4_X'", "Q4_K_M, Q6_K, Q8_0")),
    (["--n-gen", "0"], ("--n-gen", "at least 1")),
])
def test_bad_arguments_are_usage_errors(args: list[str], expected: tuple[str, ...], stand_in: Path, tiny_model: Path,
                                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = [] if "--quants" in args else ["--model", str(tiny_model)]
    assert_usage_error(*run(tmp_path, capsys, *model, *args), *expected)
    assert not (tmp_path / "models").exists()  # refused before any work


def test_batch_ranges_are_read_as_the_bench_reads_them(stand_in: Path, tiny_model: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2-4,16")
    assert code == 0, out + err
    report = json.loads((tmp_path / "smoke.json").read_text())
    assert report["batches"] == [2, 3, 4, 16] and report["passed"] is True
    assert "PASSED" in out


def test_each_case_says_which_it_is_and_how_it_ended(stand_in: Path, tiny_model: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2", "--no-slots")
    assert code == 0, out + err
    lines = out.splitlines()
    # the coverage check comes first, then a blank line
    lines = lines[lines.index("") + 1:]
    assert lines[0] == f"running {tiny_model.name} kv=f16 switch on (1/2) ..."
    assert re.fullmatch(r"  identical \(\d+\.\d s\)", lines[1])
    assert lines[2] == f"running {tiny_model.name} kv=f16 switch off (2/2) ..."
    assert re.fullmatch(r"  differs, as the control must \(\d+\.\d s\)", lines[3])


def test_a_real_difference_fails_the_guarantee(stand_in: Path, tiny_model: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_DIFFER", "1")
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2,3")
    assert code == 1
    assert "switch on" in out and "FAILED" in out


def test_a_replay_that_cannot_run_is_an_error_not_a_failed_guarantee(
        stand_in: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_CRASH", "1")
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2")
    assert code == 3, out + err
    assert "out of memory" in out and "FAILED" not in out
    assert json.loads((tmp_path / "smoke.json").read_text())["passed"] is False


def test_a_usage_error_found_by_the_replay_tool_is_passed_on(stand_in: Path, tiny_model: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever the smoke test does not check itself, the replay tool refuses with exit 2: so does the smoke test.
    monkeypatch.setattr(smoke, "KV_CACHE_TYPES", (*smoke.KV_CACHE_TYPES, "q5_1"))
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--kv", "q5_1")
    assert code == 2 and "unknown cache type" in err and "FAILED" not in out


def test_by_default_every_batch_size_2_to_16_is_replayed(stand_in: Path, tiny_model: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # A fault planted at a single width outside a sample (7, 10, 11, 13-15 were left out before)
    # must be reached by the default run.
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model))
    assert code == 0, out + err
    assert json.loads((tmp_path / "smoke.json").read_text())["batches"] == list(range(2, 17))


@pytest.fixture
def cuda_stand_in(stand_in: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(runtime, "build_info", lambda: {"recipe": "cu13-sm90", "exact_backends": ["cuda"]})
    monkeypatch.setattr(runtime, "built_architectures", lambda: ["90"])
    monkeypatch.setattr(runtime, "gpus", lambda: [runtime.Gpu("NVIDIA H200", "90")])
    monkeypatch.setattr(runtime, "environment_warnings", lambda: [])
    return stand_in


def test_on_cuda_a_model_split_between_gpu_and_cpu_is_a_case_of_its_own(
        cuda_stand_in: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2", "--kv", "f16", "--partial-offload", "2", "--no-slots")
    assert code == 0, out + err
    running = [line for line in out.splitlines() if line.startswith("running")]
    assert running[1] == f"running {tiny_model.name} kv=f16 ngl=2 switch on (2/3) ..."
    report = json.loads((tmp_path / "smoke.json").read_text())
    assert [(c["gpu_layers"], c["report"]["ngl"]) for c in report["cases"]] == [(None, None), (2, "2"), (None, None)]


def test_a_difference_only_the_split_model_shows_fails_the_guarantee(
        cuda_stand_in: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_SPLIT_DIFFERS", "1")
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2", "--kv", "f16", "--partial-offload", "2")
    assert code == 1, out + err
    row = next(line for line in out.splitlines() if "ngl=2 switch on" in line and not line.startswith("running"))
    assert row.split()[-2:] == ["5", "FAILED"]


def test_with_a_model_of_its_own_the_split_is_not_guessed(
        cuda_stand_in: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2")
    assert code == 0, out + err
    assert "ngl=" not in out


def test_an_open_batch_range_runs_to_the_largest_verify_batch(stand_in: Path, tiny_model: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # '2-' once ran b = 2 alone: an open range means up to 16, the largest verify batch.
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2-")
    assert code == 0, out + err
    assert json.loads((tmp_path / "smoke.json").read_text())["batches"] == list(range(2, 17))


def test_the_help_says_what_an_open_range_means(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        smoke.main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "an open range (2-: 2 to 16, the largest verify batch)" in help_text


def test_a_short_control_without_a_difference_says_it_proves_nothing_and_how_long_to_run(
        stand_in: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # On the CPU the stock kernels differed at b = 2 and 3 only from KV position 256 on.
    monkeypatch.setenv("STAND_IN_DIFFER_FROM", "256")
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--n-gen", "16", "--batches", "2")
    assert code == 1, out + err
    note = next(line for line in out.splitlines() if line.startswith("note: "))
    assert "switch off: the control proves nothing at this length" in note
    assert "reaches KV position 79 only" in note and "from position 256 on" in note
    assert "raise --n-gen to 200 or more" in note
    assert json.loads((tmp_path / "smoke.json").read_text())["notes"] == [note.removeprefix("note: ")]
    # Run as long as the note says, the same control shows its difference.
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--n-gen", "200", "--batches", "2")
    assert code == 0 and "note:" not in out, out + err


def test_a_control_without_a_difference_at_full_length_gets_no_excuse(
        stand_in: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_DIFFER_FROM", "100000")
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2")
    assert code == 1 and "FAILED" in out
    assert "note:" not in out and json.loads((tmp_path / "smoke.json").read_text())["notes"] == []


def test_a_short_run_that_includes_b_4_is_not_excused_by_position_256(
        stand_in: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # At b >= 4 the CPU's stock kernels differed from the first position, so 256 explains nothing; the
    # note says only that the run is shorter than the default one.
    monkeypatch.setenv("STAND_IN_DIFFER_FROM", "256")
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--n-gen", "16", "--batches", "2,4")
    assert code == 1, out + err
    note = next(line for line in out.splitlines() if line.startswith("note: "))
    assert "256" not in note and "--n-gen 16 is below the default 200" in note


def test_the_report_lists_only_exact_backends_this_wheel_has(stand_in: Path, tiny_model: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # stack.json names every backend the stack makes exact; a CPU wheel has no CUDA backend.
    monkeypatch.setattr(runtime, "build_info", lambda: {"recipe": "cpu", "exact_backends": ["cuda", "cpu"]})
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2")
    assert code == 0, out + err
    assert json.loads((tmp_path / "smoke.json").read_text())["exact_backends"] == ["cpu"]


@pytest.mark.parametrize("guarantee_holds", [True, False], ids=["passed", "failed"])
def test_a_report_that_cannot_be_written_after_the_run_is_said_and_keeps_a_failure(
        guarantee_holds: bool, stand_in: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The path is checked before the run; a file system that fills up during it still gets one clear line.
    def disk_full(path: Path, report: dict) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(smoke, "write_report", disk_full)
    if not guarantee_holds:
        monkeypatch.setenv("STAND_IN_DIFFER", "1")
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2")
    assert code == (2 if guarantee_holds else 1), out + err
    assert ("PASSED" if guarantee_holds else "FAILED") + ", but the report could not be written" in out
    assert err.strip().splitlines() == [
        f"hiraishin-llama-smoke: error: --json {tmp_path / 'smoke.json'}: cannot be written (no space left on device); "
        "free space or give a writable path and run again"]


def test_on_cuda_a_split_that_leaves_nothing_on_the_cpu_is_refused(
        cuda_stand_in: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(tmp_path, capsys, "--n-layer", "4", "--partial-offload", "4")
    assert_usage_error(code, out, err, "--partial-offload 4: the synthetic model has 4 layers", "give 1 to 3")
    assert not (tmp_path / "models").exists()


def test_a_cuda_wheel_testing_the_cpu_refuses_a_split_it_cannot_make(
        stand_in: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # --allow-cpu on a machine without a GPU: the CPU backend runs, and there is nothing to offload to.
    monkeypatch.setattr(runtime, "build_info", lambda: {"recipe": "cu13-sm90", "exact_backends": ["cuda", "cpu"]})
    monkeypatch.setattr(runtime, "built_architectures", lambda: ["90"])
    monkeypatch.setattr(runtime, "environment_warnings", lambda: [])
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--allow-cpu", "--partial-offload", "2")
    assert_usage_error(code, out, err, "--partial-offload 2", "tests the CPU backend (no CUDA GPU is visible)",
                       "leave --partial-offload out")
    # 0 asks for no split, which holds anywhere.
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--allow-cpu", "--partial-offload", "0",
                         "--batches", "2")
    assert code == 0, out + err


def test_a_model_of_its_own_is_checked_for_coverage_before_its_cases_run(
        stand_in: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2")
    assert code == 0, out + err
    check, _ = out.split("\nrunning ", 1)
    assert check.splitlines()[:2] == [f"model: {tiny_model.name} (qwen3; 2 layers)", "cpu: covered (dense F16)"]
    report = json.loads((tmp_path / "smoke.json").read_text())["coverage"]
    assert report["checked"] is True and report["backends"]["cpu"]["covered"] is True
    # A build that claims nothing exact covers nothing; its cases still run, to show where the model differs.
    monkeypatch.setattr(runtime, "build_info", lambda: {"recipe": "cpu", "exact_backends": []})
    code, out, err = run(tmp_path, capsys, "--model", str(tiny_model), "--batches", "2")
    assert "cpu: NOT covered: build: this wheel's patch stack does not claim cpu exact" in out
    assert "the cases run all the same" in out and f"running {tiny_model.name} kv=f16 switch on" in out
    assert json.loads((tmp_path / "smoke.json").read_text())["coverage"]["covered"] is False
