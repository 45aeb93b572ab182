"""hiraishin-llama-smoke's hybrid cases (models with recurrent layers), without a build: which run, what they
expect (report only unless the build claims hybrids exact on the backend), the options that choose them, and
that a model of one's own with recurrent layers is recognised from its metadata.

The stand-in replay and model fixtures are those of test_moe_smoke.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hiraishin_llama import modelinfo, smoke, synthetic
from test_moe_smoke import claim, made_models, names, on_cuda, run, stand_in  # noqa: F401 (fixtures)

CPU_BUILD = {"recipe": "cpu", "exact_backends": ["cpu"]}


def test_hybrid_cases_are_reported_until_the_build_claims_hybrids(monkeypatch: pytest.MonkeyPatch) -> None:
    claim(monkeypatch, CPU_BUILD)
    assert names(smoke.hybrid_cases("cpu")) == [
        ("tiny-qwen35 Q4_K_M kv=f16 switch on", "none"), ("tiny-qwen35 Q4_K_M kv=f16 switch off", "none"),
        ("tiny-nemotron-h Q4_K_M kv=f16 switch on", "none"), ("tiny-nemotron-h Q4_K_M kv=f16 switch off", "none"),
        ("tiny-qwen35moe Q4_K_M kv=f16 switch on", "none"), ("tiny-qwen35moe Q4_K_M kv=f16 switch off", "none"),
        ("tiny-nemotron-h-moe Q4_K_M kv=f16 switch on", "none"),
        ("tiny-nemotron-h-moe Q4_K_M kv=f16 switch off", "none")]
    # the hybrids with experts are judged only where the build claims MoE models exact too
    claim(monkeypatch, {**CPU_BUILD, "exact_hybrid_backends": ["cpu"]})
    assert [case.expect for case in smoke.hybrid_cases("cpu")] == ["identical", "differ"] * 2 + ["none"] * 4
    claim(monkeypatch, {**CPU_BUILD, "exact_hybrid_backends": ["cpu"], "exact_moe_backends": ["cpu"]})
    assert [case.expect for case in smoke.hybrid_cases("cpu")] == ["identical", "differ"] * 4
    # a claim for a backend the build is not exact on at all counts for nothing
    claim(monkeypatch, {"recipe": "cpu", "exact_backends": [], "exact_hybrid_backends": ["cpu"]})
    assert {case.expect for case in smoke.hybrid_cases("cpu")} == {"none"}


def test_a_hybrid_claim_does_not_make_a_moe_model_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    claim(monkeypatch, {**CPU_BUILD, "exact_hybrid_backends": ["cpu"]})
    cases = smoke.default_cases("cpu", ["Q4_K_M"], ["f16"], moe=True, hybrid=True, preset="x")
    assert {case.expect for case in cases} == {"none"}
    claim(monkeypatch, {**CPU_BUILD, "exact_hybrid_backends": ["cpu"], "exact_moe_backends": ["cpu"]})
    cases = smoke.default_cases("cpu", ["Q4_K_M"], ["f16"], moe=True, hybrid=True, preset="x")
    assert [case.expect for case in cases] == ["identical", "differ"]


@pytest.mark.parametrize("backend", ["cuda", "cpu"])
def test_every_hybrid_model_reaches_its_recurrent_and_its_attention_layers(backend: str) -> None:
    for model in smoke.HYBRID_MODELS[backend]:
        preset = synthetic.get_preset(model.preset)
        assert preset.architecture in synthetic.HYBRID_ARCHITECTURES, model
        assert model.n_layer <= preset.n_layer, model
        kinds = preset.layer_kinds(model.n_layer)
        assert "M" in kinds and "*" in kinds, (model, kinds)
        # the expert layers too, where the model has them (qwen35moe: every layer's FFN; nemotron-h-moe: "E")
        assert not preset.is_moe or preset.architecture == synthetic.QWEN35MOE or "E" in kinds, (model, kinds)
    assert all(case.n_gen == smoke.HYBRID_N_GEN and case.hybrid for case in smoke.hybrid_cases(backend))
    # 200 tokens after the 64-token prompt cross KV cell 256, where verify batches are cut
    assert smoke.DEFAULT_N_PROMPT + smoke.HYBRID_N_GEN > 256


def test_the_cuda_hybrids_have_the_real_shapes() -> None:
    presets = {model.preset for model in smoke.HYBRID_MODELS["cuda"]}
    assert presets == {"qwen35", "nemotron-h", "qwen35moe", "nemotron-h-moe"}
    assert not any(name.startswith("tiny-") for name in presets)


def test_the_default_cpu_run_ends_with_the_hybrid_cases(stand_in: Path, made_models: list, tmp_path: Path,  # noqa: F811
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--batches", "2", "--no-slots")
    assert code == 0, out + err
    assert made_models == [("qwen3-8b", 1, ("Q4_K_M",)), ("qwen3moe", 1, ("Q4_K_M",)),
                           ("tiny-qwen35", 4, ("Q4_K_M",)), ("tiny-nemotron-h", 5, ("Q4_K_M",)),
                           ("tiny-qwen35moe", 4, ("Q4_K_M",)), ("tiny-nemotron-h-moe", 5, ("Q4_K_M",))]
    assert [(c["name"], c["expect"], c["hybrid"]) for c in report["cases"]][4:] == [
        (f"{preset} Q4_K_M kv=f16 switch {switch}", "none", True)
        for preset in ("tiny-qwen35", "tiny-nemotron-h", "tiny-qwen35moe", "tiny-nemotron-h-moe")
        for switch in ("on", "off")]
    hybrid_case = report["cases"][4]
    assert hybrid_case["report"]["args"][hybrid_case["report"]["args"].index("--n-gen") + 1] == "200"
    assert report["hybrid"] == {"cases": 8, "exact_hybrid_backends": [],
                                "synthetic": [{"preset": preset, "quant": "Q4_K_M", "n_layer": n_layer, "kv_types": ["f16"]}
                                              for preset, n_layer in (("tiny-qwen35", 4), ("tiny-nemotron-h", 5),
                                                                      ("tiny-qwen35moe", 4),
                                                                      ("tiny-nemotron-h-moe", 5))]}
    assert "hybrid cases are reported, not judged" in out
    assert not any(c["hybrid"] for c in report["cases"][:4])


def test_a_claimed_backend_judges_its_hybrid_cases(stand_in: Path, made_models: list, tmp_path: Path,  # noqa: F811
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    claim(monkeypatch, {**CPU_BUILD, "exact_hybrid_backends": ["cpu"]})
    code, out, err, report = run(tmp_path, capsys, "--batches", "2", "--no-moe")
    assert code == 0, out + err
    assert [c["expect"] for c in report["cases"] if c["hybrid"]] == ["identical", "differ"] * 2 + ["none"] * 4
    assert "hybrid cases are reported" not in out


def test_the_cuda_run_makes_the_full_shaped_hybrids(on_cuda: Path, made_models: list, tmp_path: Path,  # noqa: F811
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--kv", "f16", "--quants", "Q4_K_M", "--batches", "2", "--no-moe")
    assert code == 0, out + err
    assert made_models[1:] == [("qwen35", 4, ("Q4_K_M",)), ("nemotron-h", 8, ("Q4_K_M",)),
                               ("qwen35moe", 4, ("Q4_K_M",)), ("nemotron-h-moe", 6, ("Q4_K_M",))]
    assert report["models"]["nemotron-h Q4_K_M"].endswith("nemotron-h-8l-seed1-Q4_K_M.gguf")


def test_no_hybrid_leaves_them_out(stand_in: Path, made_models: list, tmp_path: Path,  # noqa: F811
                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--batches", "2", "--no-hybrid")
    assert code == 0, out + err
    assert [preset for preset, _, _ in made_models] == ["qwen3-8b", "qwen3moe"]
    assert report["hybrid"]["cases"] == 0 and report["hybrid"]["synthetic"] == []


def test_a_hybrid_preset_makes_the_quants_cases_hybrid_cases(stand_in: Path, made_models: list,  # noqa: F811
                                                             tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--preset", "tiny-qwen35", "--n-layer", "4", "--quants", "Q4_K_M",
                                 "--kv", "f16", "--batches", "2", "--no-moe")
    assert code == 0, out + err
    # the default hybrid cases would hold the same model under the same name: the chosen one stands for them
    assert made_models == [("tiny-qwen35", 4, ("Q4_K_M",))]
    assert [(c["name"], c["expect"], c["hybrid"]) for c in report["cases"]] == [
        ("tiny-qwen35 Q4_K_M kv=f16 switch on", "none", True), ("tiny-qwen35 Q4_K_M kv=f16 switch off", "none", True)]


def test_hybrid_flags_are_refused_with_a_model_of_ones_own(stand_in: Path, tmp_path: Path,  # noqa: F811
                                                           capsys: pytest.CaptureFixture[str],
                                                           tiny_model: Path) -> None:
    code, _, err, _ = run(tmp_path, capsys, "--model", str(tiny_model), "--no-hybrid")
    assert code == 2
    assert "--hybrid/--no-hybrid applies to the synthetic models only" in err


@pytest.fixture(scope="module")
def hybrid_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real tiny-qwen35 file of one layer (a gated delta net), F16: its metadata has the ssm.* keys."""
    return synthetic.make_model("tiny-qwen35", seed=1, n_layer=1,
                                out_path=tmp_path_factory.mktemp("hybrid") / "my-hybrid.gguf")


def test_model_kind_reads_recurrent_layers(hybrid_gguf: Path, tiny_model: Path) -> None:
    kind = modelinfo.model_kind(hybrid_gguf)
    assert kind is not None and kind.architecture == "qwen35" and kind.recurrent and not kind.is_moe
    assert not modelinfo.model_kind(tiny_model).recurrent


def test_a_users_hybrid_model_is_reported(stand_in: Path, hybrid_gguf: Path, tmp_path: Path,  # noqa: F811
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--model", str(hybrid_gguf), "--batches", "2")
    assert code == 0, out + err
    assert [(c["name"], c["expect"], c["hybrid"]) for c in report["cases"]] == [
        ("my-hybrid.gguf kv=f16 switch on", "none", True), ("my-hybrid.gguf kv=f16 switch off", "none", True)]
    assert "hybrid cases are reported, not judged" in out


def test_the_help_says_what_the_hybrid_cases_are(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        smoke.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--no-hybrid leaves them out" in text
    assert "qwen35 and nemotron-h Q4_K_M at their real shapes" in text
    assert "exact_hybrid_backends" in text
