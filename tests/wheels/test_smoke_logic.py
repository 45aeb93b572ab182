"""The smoke test's decisions, without a build: which cases run, what they
expect, how the environment is judged and reported."""

from __future__ import annotations

import pytest

from hiraishin_llama import _launch, runtime, smoke


@pytest.fixture
def cuda_build(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime.build_info.cache_clear()
    runtime.gpus.cache_clear()
    monkeypatch.setattr(runtime, "build_info", lambda: {
        "recipe": "cu13-sm90", "cuda_architectures": "90-real", "exact_backends": ["cuda"]})


def test_cuda_cases_expect_identical_and_a_failing_negative_control(cuda_build: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "gpus", lambda: [runtime.Gpu("NVIDIA H200", "90")])
    assert smoke.backend_in_use() == "cuda"
    cases = smoke.default_cases("cuda", ["Q4_K_M", "Q6_K"], ["f16", "q8_0", "turbo4"])
    exact = [c for c in cases if c.batch_invariant]
    controls = [c for c in cases if not c.batch_invariant]
    assert len(exact) == 6 and all(c.expect == "identical" for c in exact)
    assert [(c.quant, c.kv, c.expect) for c in controls] == [("Q4_K_M", "f16", "differ"), ("Q6_K", "f16", "differ")]


def test_cuda_adds_one_split_model_case_the_cpu_none(cuda_build: None) -> None:
    cuda = smoke.default_cases("cuda", ["Q4_K_M", "Q6_K"], ["f16", "q8_0"], gpu_layers=2)
    split = [c for c in cuda if c.gpu_layers is not None]
    assert [(c.quant, c.kv, c.gpu_layers, c.batch_invariant, c.expect) for c in split] == [
        ("Q4_K_M", "f16", 2, True, "identical")]
    assert split[0].name == "Q4_K_M kv=f16 ngl=2 switch on"
    assert all(c.gpu_layers is None for c in smoke.default_cases("cpu", ["Q4_K_M"], ["f16"], gpu_layers=2))


def test_unclaimed_backend_is_reported_not_judged(cuda_build: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "gpus", lambda: [])
    assert smoke.backend_in_use() == "cpu"
    cases = smoke.default_cases("cpu", ["Q4_K_M"], ["f16"])
    assert {c.expect for c in cases} == {"none"}


def test_claimed_cpu_backend_is_judged_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime.build_info.cache_clear()
    monkeypatch.setattr(runtime, "build_info", lambda: {"recipe": "cpu", "exact_backends": ["cuda", "cpu"]})
    cases = smoke.default_cases("cpu", ["Q4_K_M"], ["f16"])
    assert [(c.batch_invariant, c.expect) for c in cases] == [(True, "identical"), (False, "differ")]


def test_wrong_gpu_names_the_right_index(cuda_build: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "gpus", lambda: [runtime.Gpu("NVIDIA GeForce RTX 4090", "89")])
    monkeypatch.setattr(runtime, "nvidia_library_dirs", lambda: [])
    warnings = runtime.environment_warnings()
    assert any("compute capability 8.9" in w and "cu13-sm89 index" in w for w in warnings)
    assert any("pip install 'hiraishin-llama[cu13]'" in w for w in warnings)


def test_no_gpu_says_cpu_backend(cuda_build: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "gpus", lambda: [])
    assert runtime.environment_warnings() == ["no CUDA GPU found: the CPU backend is in use"]


def test_switch_is_on_by_default_and_the_user_can_turn_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "nvidia_library_dirs", lambda: [])
    env = _launch.program_environment({"PATH": "/bin"})
    assert env["GGML_CUDA_BATCH_INVARIANT"] == "1" and env["GGML_BATCH_INVARIANT"] == "1"
    off = _launch.program_environment({"PATH": "/bin", "GGML_CUDA_BATCH_INVARIANT": "0"})
    # Off by one name is off for every backend: both names go to the program.
    assert off["GGML_CUDA_BATCH_INVARIANT"] == "0" and off["GGML_BATCH_INVARIANT"] == "0"


def test_table_shows_differing_positions_per_batch_size() -> None:
    case = smoke.Case("Q4_K_M", "f16", False, "differ")
    report = {"results": [{"b": 2, "positions_differ": 599}, {"b": 16, "positions_differ": 599}]}
    table = smoke.render_table([smoke.CaseResult(case, 0, True, report=report)], [2, 3, 16])
    row = next(line for line in table.splitlines() if line.startswith("Q4_K_M kv=f16 switch off"))
    assert row.split()[-4:] == ["599", "-", "599", "ok"]
    failed = smoke.render_table([smoke.CaseResult(smoke.Case("Q6_K", "f16", True, "identical"), 1, False,
                                                  report={"results": [{"b": 2, "positions_differ": 12}]})], [2])
    assert "FAILED" in failed


def test_cuda_wheel_without_a_gpu_is_an_error_not_a_pass(cuda_build: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runtime, "gpus", lambda: [])
    assert smoke.main(["--json", "/dev/null"]) == 2
    assert "no CUDA GPU is visible" in capsys.readouterr().err


def test_missing_model_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    runtime.build_info.cache_clear()
    monkeypatch.setattr(runtime, "build_info", lambda: {"recipe": "cpu"})
    monkeypatch.setattr(runtime, "gpus", lambda: [])
    with pytest.raises(SystemExit) as exit_info:
        smoke.main(["--model", "/nonexistent/model.gguf", "--json", "/dev/null"])
    assert exit_info.value.code == 2
    assert "--model /nonexistent/model.gguf: no such file" in capsys.readouterr().err


def test_nvidia_wheels_are_found_on_sys_path_too(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    # e.g. a venv made with --system-site-packages, whose NVIDIA wheels live in the system's site-packages
    system_site, elsewhere = tmp_path / "system-site-packages", tmp_path / "elsewhere"
    for site in (system_site, elsewhere):
        (site / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(system_site))
    found = runtime.nvidia_library_dirs()
    assert system_site / "nvidia" / "cu13" / "lib" in found
    assert elsewhere / "nvidia" / "cu13" / "lib" not in found
