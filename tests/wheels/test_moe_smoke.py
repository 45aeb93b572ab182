"""hiraishin-llama-smoke's mixture-of-experts cases, without a build: which run, what they expect (report
only unless the build claims MoE models exact), their names, the options that choose them, and that a case
with its experts on the CPU runs the replay with --cpu-moe and fails loudly when that moved nothing.

A stand-in hiraishin-replay answers as the real one does (see test_smoke_input.py); the synthetic models
are stood in for too, so these tests do not wait for the MoE presets of synthetic.py or make any model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
from hiraishin_llama import modelinfo, runtime, smoke, synthetic

STAND_IN_REPLAY = f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
value = lambda flag, default=None: args[args.index(flag) + 1] if flag in args else default
if "--cpu-moe" in args and os.environ.get("STAND_IN_OLD_REPLAY"):
    print("hiraishin-replay: error: unknown option '--cpu-moe' (see --help)", file=sys.stderr)
    sys.exit(2)
on = os.environ.get("GGML_BATCH_INVARIANT") == "1" and os.environ.get("GGML_CUDA_BATCH_INVARIANT") == "1"
differ = 0 if on else 7
batches = [int(b) for b in value("--batches").split(",")]
results = [{{"b": b, "positions_differ": 0 if b == 1 else differ}} for b in [1, *batches]]
expect = value("--expect")
passed = expect == "none" or (expect == "identical") == (differ == 0)
placed = 0 if "--cpu-moe" not in args or os.environ.get("STAND_IN_NO_EXPERTS") else 96
report = {{"results": results, "passed": passed, "args": args, "n_expert": int(os.environ.get("STAND_IN_N_EXPERT", "128")),
           "tensors_overridden": placed}}
open(value("--json"), "w").write(json.dumps(report))
sys.exit(0 if passed else 1)
"""

CUDA_BUILD = {"recipe": "cu13-sm90", "cuda_architectures": "90-real", "exact_backends": ["cuda"]}


def claim(monkeypatch: pytest.MonkeyPatch, build: dict) -> None:
    """The build's info (stack.json and build_info.json) as ``build`` says."""
    monkeypatch.setattr(runtime, "build_info", lambda: build)


def names(cases: list[smoke.Case]) -> list[tuple[str, str]]:
    return [(case.name, case.expect) for case in cases]


# --- the case lists -------------------------------------------------------------------------------------


def test_cuda_moe_cases_are_reported_while_the_build_claims_no_moe(monkeypatch: pytest.MonkeyPatch) -> None:
    # The stack claims CUDA exact for dense models; its patches leave MUL_MAT_ID of several tokens out.
    claim(monkeypatch, CUDA_BUILD)
    assert names(smoke.moe_cases("cuda")) == [
        ("qwen3moe Q4_K_M kv=f16 switch on", "none"),
        ("qwen3moe Q4_K_M kv=q8_0 switch on", "none"),
        ("qwen3moe Q4_K_M kv=f16 experts=CPU switch on", "none"),
        ("qwen3moe Q4_K_M kv=f16 switch off", "none"),
        ("qwen3moe Q4_K_M kv=f16 experts=CPU switch off", "none"),
        ("gpt-oss MXFP4_MOE kv=f16 switch on", "none"),
        ("gpt-oss MXFP4_MOE kv=f16 switch off", "none"),
    ]
    cases = smoke.moe_cases("cuda")
    assert all(c.moe and c.n_gen == smoke.MOE_N_GEN for c in cases)
    assert [c.experts_on_cpu for c in cases].count(True) == 2


def test_a_build_that_claims_moe_has_its_moe_cases_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    claim(monkeypatch, {**CUDA_BUILD, "exact_moe_backends": ["cuda"]})
    expects = {c.name: c.expect for c in smoke.moe_cases("cuda")}
    assert expects["qwen3moe Q4_K_M kv=q8_0 switch on"] == "identical"
    assert expects["gpt-oss MXFP4_MOE kv=f16 switch off"] == "differ"
    # experts on the CPU need a claim of their own
    assert expects["qwen3moe Q4_K_M kv=f16 experts=CPU switch on"] == "none"
    assert expects["qwen3moe Q4_K_M kv=f16 experts=CPU switch off"] == "none"
    claim(monkeypatch, {**CUDA_BUILD, "exact_moe_backends": ["cuda"], "exact_moe_experts_on_cpu_backends": ["cuda"]})
    expects = {c.name: c.expect for c in smoke.moe_cases("cuda")}
    assert expects["qwen3moe Q4_K_M kv=f16 experts=CPU switch on"] == "identical"
    assert expects["qwen3moe Q4_K_M kv=f16 experts=CPU switch off"] == "differ"
    # A claim the wheel's backends do not back (a CPU wheel has no CUDA) is no claim.
    claim(monkeypatch, {"recipe": "cpu", "exact_backends": ["cpu", "cuda"], "exact_moe_backends": ["cuda"]})
    assert smoke.exact_moe_backends() == set()
    assert {c.expect for c in smoke.moe_cases("cpu")} == {"none"}


def test_the_cpu_backend_runs_qwen3moe_at_full_shapes_and_no_experts_case(monkeypatch: pytest.MonkeyPatch) -> None:
    claim(monkeypatch, {"recipe": "cpu", "exact_backends": ["cpu"], "exact_moe_backends": ["cpu"]})
    assert names(smoke.moe_cases("cpu")) == [("qwen3moe Q4_K_M kv=f16 switch on", "identical"),
                                             ("qwen3moe Q4_K_M kv=f16 switch off", "differ")]
    # Everything is on the CPU already: --cpu-moe would move nothing.
    assert [(m.preset, m.n_layer, m.experts_on_cpu_case) for m in smoke.MOE_MODELS["cpu"]] == [("qwen3moe", 1, False)]


def test_moe_runs_cross_kv_cell_256() -> None:
    # The 256-cut of verify batches is tested only if the replay reaches past KV cell 256.
    assert smoke.DEFAULT_N_PROMPT + smoke.MOE_N_GEN > 256


def test_dense_cases_keep_their_names(monkeypatch: pytest.MonkeyPatch) -> None:
    claim(monkeypatch, CUDA_BUILD)
    cases = smoke.default_cases("cuda", ["Q4_K_M"], ["f16"], gpu_layers=2)
    assert [c.name for c in cases] == ["Q4_K_M kv=f16 switch on", "Q4_K_M kv=f16 ngl=2 switch on",
                                       "Q4_K_M kv=f16 switch off"]
    assert not any(c.moe or c.experts_on_cpu for c in cases)


def test_a_moe_model_of_ones_own_gets_an_experts_on_cpu_case_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    claim(monkeypatch, CUDA_BUILD)
    cases = smoke.default_cases("cuda", ["model.gguf"], ["f16", "q8_0"], moe=True)
    assert names(cases) == [
        ("model.gguf kv=f16 switch on", "none"), ("model.gguf kv=q8_0 switch on", "none"),
        ("model.gguf kv=f16 experts=CPU switch on", "none"),
        ("model.gguf kv=f16 switch off", "none"), ("model.gguf kv=f16 experts=CPU switch off", "none")]
    # Its experts run at CPU speed: the case is as long as the split-model case, which still crosses 256.
    assert [c.n_gen for c in cases if c.experts_on_cpu] == [smoke.SPLIT_N_GEN] * 2
    assert not any(c.experts_on_cpu for c in smoke.default_cases("cpu", ["model.gguf"], ["f16"], moe=True))


def test_the_table_is_as_wide_as_the_longest_name_and_says_why_moe_is_reported() -> None:
    case = smoke.Case("Q4_K_M", "f16", False, "none", preset="qwen3moe", moe=True, experts_on_cpu=True)
    report = {"results": [{"b": 2, "positions_differ": 190}]}
    table = smoke.render_table([smoke.CaseResult(case, 0, True, report=report)], [2, 16])
    row = next(line for line in table.splitlines() if line.startswith(case.name))
    assert row.split()[-4:] == ["none", "190", "-", "reported"]
    assert "experts=CPU cases are reported, not judged" in table
    assert "mixture-of-experts cases are reported" not in table
    on_gpu = smoke.Case("Q4_K_M", "f16", False, "none", preset="qwen3moe", moe=True)
    table = smoke.render_table([smoke.CaseResult(on_gpu, 0, True, report=report)], [2, 16])
    assert "mixture-of-experts cases are reported, not judged" in table
    assert "experts=CPU cases" not in table


# --- whole runs with the stand-in replay ------------------------------------------------------------------


def write_moe_gguf(path: Path, n_expert: int = 4) -> Path:
    """A GGUF whose metadata says qwen3moe with experts: all the smoke reads of a model (the stand-in
    replay does not load it)."""
    writer = gguf.GGUFWriter(path, "qwen3moe")
    writer.add_block_count(1)
    writer.add_expert_count(n_expert)
    writer.add_expert_used_count(2)
    writer.add_tensor("blk.0.ffn_up_exps.weight", np.zeros((n_expert, 4, 8), dtype=np.float32))
    writer.add_tensor("output.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def moe_model(tmp_path: Path) -> Path:
    return write_moe_gguf(tmp_path / "my-moe.gguf")


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("hiraishin-replay", STAND_IN_REPLAY), (synthetic.QUANTIZER_NAME, "#!/bin/sh\nexit 1\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("HIRAISHIN_LLAMA_BIN_DIR", str(bin_dir))
    claim(monkeypatch, {"recipe": "cpu", "exact_backends": ["cpu"]})
    monkeypatch.setattr(runtime, "gpus", lambda: [])
    return bin_dir


@pytest.fixture
def on_cuda(stand_in: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    claim(monkeypatch, {"recipe": "cu13-sm90", "exact_backends": ["cuda"]})
    monkeypatch.setattr(runtime, "built_architectures", lambda: ["90"])
    monkeypatch.setattr(runtime, "gpus", lambda: [runtime.Gpu("NVIDIA H200", "90")])
    monkeypatch.setattr(runtime, "environment_warnings", lambda: [])
    return stand_in


@pytest.fixture
def made_models(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, tuple[str, ...]]]:
    """Stands in for making the synthetic models: files that pass the GGUF check, and a list of what was asked."""
    asked: list[tuple[str, int, tuple[str, ...]]] = []

    def prepare(work_dir: Path, preset: str, n_layer: int, quants: list[str], seed: int,
                seconds: dict[str, float] | None = None) -> dict[str, Path]:
        asked.append((preset, n_layer, tuple(quants)))
        work_dir.mkdir(parents=True, exist_ok=True)
        made = {}
        for quant in quants:
            made[quant] = smoke.model_file(work_dir, preset, n_layer, seed, quant)
            made[quant].write_bytes(b"GGUF")
            if seconds is not None:
                seconds[made[quant].name] = 2.5  # each file "took" 2.5 s
        return made

    monkeypatch.setattr(smoke, "prepare_models", prepare)
    return asked


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str, dict | None]:
    report = tmp_path / "smoke.json"
    try:
        code = smoke.main([*args, "--work-dir", str(tmp_path / "models"), "--json", str(report)])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err, json.loads(report.read_text()) if report.is_file() else None


def test_the_default_cuda_run_has_the_moe_cases_after_the_dense_ones(on_cuda: Path, made_models: list, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--no-hybrid", "--no-slots", "--kv", "f16", "--quants", "Q4_K_M", "--batches", "2")
    assert code == 0, out + err
    assert made_models == [("qwen3-8b", 4, ("Q4_K_M",)), ("qwen3moe", 2, ("Q4_K_M",)), ("gpt-oss", 2, ("MXFP4_MOE",))]
    running = [line for line in out.splitlines() if line.startswith("running")]
    assert running[3:] == [f"running {name} ({n}/10) ..." for n, name in enumerate([
        "qwen3moe Q4_K_M kv=f16 switch on", "qwen3moe Q4_K_M kv=q8_0 switch on",
        "qwen3moe Q4_K_M kv=f16 experts=CPU switch on", "qwen3moe Q4_K_M kv=f16 switch off",
        "qwen3moe Q4_K_M kv=f16 experts=CPU switch off", "gpt-oss MXFP4_MOE kv=f16 switch on",
        "gpt-oss MXFP4_MOE kv=f16 switch off"], start=4)]
    cases = {c["name"]: c for c in report["cases"]}
    experts = cases["qwen3moe Q4_K_M kv=f16 experts=CPU switch on"]
    assert "--cpu-moe" in experts["report"]["args"] and experts["experts_on_cpu"] and experts["moe"]
    assert "--cpu-moe" not in cases["qwen3moe Q4_K_M kv=q8_0 switch on"]["report"]["args"]
    assert experts["report"]["args"][experts["report"]["args"].index("--n-gen") + 1] == str(smoke.MOE_N_GEN)
    assert cases["Q4_K_M kv=f16 switch on"]["expect"] == "identical" and experts["expect"] == "none"
    assert report["models"]["gpt-oss MXFP4_MOE"].endswith("gpt-oss-2l-seed1-MXFP4_MOE.gguf")
    assert report["moe"] == {"cases": 7, "exact_moe_backends": [],
                             "synthetic": [{"preset": "qwen3moe", "quant": "Q4_K_M", "kv_types": ["f16", "q8_0"],
                                            "n_layer": 2, "experts_on_cpu_case": True},
                                           {"preset": "gpt-oss", "quant": "MXFP4_MOE", "kv_types": ["f16"],
                                            "n_layer": 2, "experts_on_cpu_case": False}]}
    assert "qwen3moe Q4_K_M kv=f16 experts=CPU switch off" in out.split("case", 1)[1]  # in the table


def test_no_moe_leaves_them_out(on_cuda: Path, made_models: list, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--no-hybrid", "--kv", "f16", "--quants", "Q4_K_M", "--batches", "2", "--no-moe")
    assert code == 0, out + err
    assert made_models == [("qwen3-8b", 4, ("Q4_K_M",))]
    assert report["moe"]["cases"] == 0 and not any(c["moe"] for c in report["cases"])


def test_the_cpu_run_has_one_qwen3moe_layer(stand_in: Path, made_models: list, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--no-hybrid", "--no-slots", "--batches", "2")
    assert code == 0, out + err
    assert made_models == [("qwen3-8b", 1, ("Q4_K_M",)), ("qwen3moe", 1, ("Q4_K_M",))]
    assert [c["name"] for c in report["cases"]][2:] == ["qwen3moe Q4_K_M kv=f16 switch on",
                                                        "qwen3moe Q4_K_M kv=f16 switch off"]


def test_a_moe_preset_makes_the_quants_cases_moe_cases(on_cuda: Path, made_models: list, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Until synthetic.py has its MoE presets, one stands in (the interface: a Preset with n_expert > 0).
    monkeypatch.setitem(synthetic.PRESETS, "qwen3moe", synthetic.PRESETS["tiny"])
    monkeypatch.setattr(smoke, "preset_is_moe", lambda preset: preset == "qwen3moe")
    code, out, err, report = run(tmp_path, capsys, "--no-hybrid", "--preset", "qwen3moe", "--n-layer", "2", "--quants", "Q4_K_M",
                                 "--kv", "f16", "--batches", "2", "--partial-offload", "0")
    assert code == 0, out + err
    # The default MoE cases would be the same models under the same names: the chosen ones stand for them.
    assert made_models == [("qwen3moe", 2, ("Q4_K_M",))]
    assert [(c["name"], c["expect"]) for c in report["cases"]] == [
        ("qwen3moe Q4_K_M kv=f16 switch on", "none"), ("qwen3moe Q4_K_M kv=f16 experts=CPU switch on", "none"),
        ("qwen3moe Q4_K_M kv=f16 switch off", "none"), ("qwen3moe Q4_K_M kv=f16 experts=CPU switch off", "none")]


def test_a_users_moe_model_is_reported_and_gets_its_experts_case(on_cuda: Path, moe_model: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--model", str(moe_model), "--kv", "f16", "--batches", "2")
    assert code == 0, out + err
    assert [(c["name"], c["expect"], c["moe"]) for c in report["cases"]] == [
        ("my-moe.gguf kv=f16 switch on", "none", True), ("my-moe.gguf kv=f16 experts=CPU switch on", "none", True),
        ("my-moe.gguf kv=f16 switch off", "none", True), ("my-moe.gguf kv=f16 experts=CPU switch off", "none", True)]
    assert "reported, not judged" in out


def test_a_users_dense_model_is_judged_as_before(on_cuda: Path, tiny_model: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--model", str(tiny_model), "--kv", "f16", "--batches", "2", "--no-slots")
    assert code == 0, out + err
    assert [(c["expect"], c["moe"], c["experts_on_cpu"]) for c in report["cases"]] == [
        ("identical", False, False), ("differ", False, False)]


def test_a_model_whose_metadata_cannot_be_read_is_not_judged_as_dense(stand_in: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(b"GGUF" + b"\0" * 12)
    _, _, err, report = run(tmp_path, capsys, "--model", str(cut), "--batches", "2")
    assert "could not be read, so it is not known to be dense" in err
    assert {c["expect"] for c in report["cases"]} == {"none"}


def test_experts_on_the_cpu_that_moved_nothing_is_an_error(on_cuda: Path, moe_model: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_NO_EXPERTS", "1")
    code, out, err, report = run(tmp_path, capsys, "--model", str(moe_model), "--kv", "f16", "--batches", "2")
    assert code == 3, out + err
    errors = [c["error"] for c in report["cases"] if c["error"]]
    assert len(errors) == 2 and all("--cpu-moe put no tensor of my-moe.gguf on the CPU" in e for e in errors)


def test_a_replay_without_cpu_moe_says_how_to_go_on(on_cuda: Path, moe_model: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_OLD_REPLAY", "1")
    code, _, err, report = run(tmp_path, capsys, "--model", str(moe_model), "--kv", "f16", "--batches", "2")
    assert code == 2 and report is None
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "unknown option '--cpu-moe'" in lines[0] and "predates --cpu-moe" in lines[0]


def test_moe_flags_are_refused_with_a_model_of_ones_own(stand_in: Path, moe_model: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err, _ = run(tmp_path, capsys, "--model", str(moe_model), "--no-moe")
    assert code == 2 and "--moe/--no-moe applies to the synthetic models only" in err


def test_the_help_says_what_the_moe_cases_are(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        smoke.main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--moe, --no-moe" in help_text
    assert "qwen3moe Q4_K_M with KV f16 and q8_0 and with its experts on the CPU" in help_text
    assert "exact_moe_backends" in help_text


def test_model_kind_reads_the_experts(moe_model: Path, tiny_model: Path) -> None:
    assert modelinfo.model_kind(moe_model) == modelinfo.ModelKind("qwen3moe", 4, 2)
    assert modelinfo.model_kind(tiny_model) == modelinfo.ModelKind("qwen3", 0, 0)
    assert not modelinfo.model_kind(tiny_model).is_moe


def test_the_synthetic_moe_presets_are_moe_when_they_exist() -> None:
    missing = [name for name in ("qwen3moe", "gpt-oss") if name not in synthetic.PRESETS]
    if missing:
        pytest.skip(f"synthetic.py has no {', '.join(missing)} preset yet")
    assert smoke.preset_is_moe("qwen3moe") and smoke.preset_is_moe("gpt-oss")
    assert not smoke.preset_is_moe("qwen3-8b")
    assert "MXFP4_MOE" in synthetic.QUANT_TYPES


# --- the weight-type cases of the default run -------------------------------------------------------------


def test_the_default_cuda_run_has_a_model_of_each_common_weight_type(on_cuda: Path, made_models: list,
                                                                    tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--no-hybrid", "--no-slots", "--kv", "f16", "--batches", "2", "--no-moe")
    assert code == 0, out + err
    # made with the main models, from the same F16 model
    assert made_models == [("qwen3-8b", 4, ("Q4_K_M", "Q6_K", "Q8_0", "Q5_K_M", "IQ4_XS", "BF16"))]
    names = [c["name"] for c in report["cases"]]
    assert names[-8:] == [f"{q} kv=f16 switch on" for q in ("Q8_0", "Q5_K_M", "IQ4_XS", "BF16")] + [
        f"{q} kv=f16 switch off" for q in ("Q8_0", "Q5_K_M", "IQ4_XS", "BF16")]
    expects = {c["name"]: c["expect"] for c in report["cases"]}
    assert expects["IQ4_XS kv=f16 switch on"] == "identical" and expects["BF16 kv=f16 switch off"] == "differ"
    types = report["types"]
    assert (types["quants"], types["cases"]) == (["Q8_0", "Q5_K_M", "IQ4_XS", "BF16"], 8)
    assert "F16" not in types["quants"]  # not covered on CUDA: its fused FFN differs
    # what they cost: their eight replays, and the making of their four models (not the main models')
    type_cases = [c for c in report["cases"] if c["quant"] in types["quants"]]
    assert all(isinstance(c["seconds"], float) and c["seconds"] >= 0 for c in report["cases"])
    assert types["seconds"] == pytest.approx(sum(c["seconds"] for c in type_cases), abs=0.2)
    assert types["model_seconds"] == 4 * 2.5 and len(report["model_seconds"]) == 6


def test_type_cases_are_judged_only_where_the_build_claims_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    claim(monkeypatch, CUDA_BUILD)
    assert names(smoke.type_cases("cuda", ["Q5_K_M", "BF16"])) == [
        ("Q5_K_M kv=f16 switch on", "identical"), ("BF16 kv=f16 switch on", "identical"),
        ("Q5_K_M kv=f16 switch off", "differ"), ("BF16 kv=f16 switch off", "differ")]
    claim(monkeypatch, {**CUDA_BUILD, "exact_backends": []})
    assert {case.expect for case in smoke.type_cases("cuda", ["Q8_0"])} == {"none"}
    assert smoke.TYPE_QUANTS["cpu"] == ()


def test_no_types_and_quants_leave_them_out(on_cuda: Path, made_models: list, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--no-hybrid", "--kv", "f16", "--batches", "2", "--no-moe", "--no-types")
    assert code == 0, out + err
    assert made_models == [("qwen3-8b", 4, ("Q4_K_M", "Q6_K"))]
    assert report["types"] == {"quants": [], "cases": 0, "seconds": 0, "model_seconds": 0}
    made_models.clear()
    code, out, err, report = run(tmp_path, capsys, "--no-hybrid", "--kv", "f16", "--batches", "2", "--no-moe", "--quants", "Q6_K")
    assert code == 0 and made_models == [("qwen3-8b", 4, ("Q6_K",))]


def test_types_with_quants_or_a_model_is_refused(on_cuda: Path, made_models: list, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err, _ = run(tmp_path, capsys, "--quants", "Q6_K", "--types")
    assert code == 2 and "with --quants, name the types in --quants instead" in err
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    code, _, err, _ = run(tmp_path, capsys, "--model", str(model), "--no-types")
    assert code == 2 and "--types/--no-types applies to the synthetic models only" in err
    assert made_models == []


def test_the_cpu_run_has_no_type_cases(stand_in: Path, made_models: list, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--no-hybrid", "--batches", "2", "--no-moe")
    assert code == 0, out + err
    assert made_models == [("qwen3-8b", 1, ("Q4_K_M",))] and report["types"]["cases"] == 0
