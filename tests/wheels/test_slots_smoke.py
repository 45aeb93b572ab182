"""hiraishin-llama-smoke's slots case (several sequences side by side, as a server's slots), without a build:
when it runs, what it expects (report only unless the build claims several slots exact on the backend), the
replay subcommand and arguments it runs, and the options that leave it out.

The stand-in replay and model fixtures are those of test_moe_smoke.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hiraishin_llama import smoke
from test_moe_smoke import claim, made_models, moe_model, names, on_cuda, run, stand_in  # noqa: F401 (fixtures)

CPU_BUILD = {"recipe": "cpu", "exact_backends": ["cpu"]}
CUDA_BUILD = {"recipe": "cu13-sm90", "exact_backends": ["cuda"]}


def arg(report: dict, flag: str) -> str:
    args = report["args"]
    return args[args.index(flag) + 1]


def test_slots_cases_are_reported_until_the_build_claims_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    claim(monkeypatch, CPU_BUILD)
    assert names(smoke.slots_cases("cpu", "Q4_K_M")) == [("Q4_K_M kv=f16 slots=4 kvu=on switch on", "none"),
                                                        ("Q4_K_M kv=f16 slots=4 kvu=on switch off", "none")]
    claim(monkeypatch, {**CPU_BUILD, "exact_slots_backends": ["cpu"]})
    assert [case.expect for case in smoke.slots_cases("cpu", "Q4_K_M")] == ["identical", "differ"]
    # a claim for a backend the build is not exact on at all counts for nothing
    claim(monkeypatch, {"recipe": "cpu", "exact_backends": [], "exact_slots_backends": ["cpu"]})
    assert {case.expect for case in smoke.slots_cases("cpu", "Q4_K_M")} == {"none"}
    # a CPU claim says nothing of CUDA
    claim(monkeypatch, {**CUDA_BUILD, "exact_slots_backends": ["cpu"]})
    assert {case.expect for case in smoke.slots_cases("cuda", "Q4_K_M")} == {"none"}


def test_cuda_runs_a_kv_stream_per_slot_past_the_split_that_would_follow_the_stream_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(smoke, "exact_slots_backends", lambda: {"cuda"})
    on, off = smoke.slots_cases("cuda", "Q4_K_M")
    assert on.name == "Q4_K_M kv=f16 slots=4 kvu=off switch on" and (on.expect, off.expect) == ("identical", "differ")
    run_ = smoke.SLOTS_RUNS["cuda"]
    # past 16 of the vector kernel's 128-cell tiles, and the prompt and generated tokens fit the cells per slot
    assert run_.n_prompt > 16 * 128 and run_.n_prompt + run_.n_gen <= run_.ctx
    assert not run_.kv_unified and smoke.SLOTS_RUNS["cpu"].kv_unified


@pytest.mark.parametrize("backend", ["cuda", "cpu"])
def test_every_request_takes_every_verify_batch_size(backend: str) -> None:
    # each slot takes the sizes 1..16 in turn, so a request of n_gen tokens holds one batch of each size
    assert smoke.SLOTS_RUNS[backend].n_gen >= sum(range(1, 17))
    assert 2 <= smoke.SLOTS_RUNS[backend].slots <= 8


def test_the_default_cpu_run_ends_with_the_slots_case_and_its_control(stand_in: Path, made_models: list,  # noqa: F811
                                                                      tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--batches", "2,16")
    assert code == 0, out + err
    slots = [c for c in report["cases"] if c["slots"]]
    assert report["cases"][-2:] == slots
    assert [(c["name"], c["expect"]) for c in slots] == [("Q4_K_M kv=f16 slots=4 kvu=on switch on", "none"),
                                                         ("Q4_K_M kv=f16 slots=4 kvu=on switch off", "none")]
    replay = slots[0]["report"]
    assert replay["args"][0] == "slots"
    cpu = smoke.SLOTS_RUNS["cpu"]
    assert (arg(replay, "--slots"), arg(replay, "--kv-unified")) == (str(cpu.slots), "on")
    assert (arg(replay, "--n-prompt"), arg(replay, "--n-gen"), arg(replay, "--ctx")) == (
        str(cpu.n_prompt), str(cpu.n_gen), str(cpu.ctx))
    assert arg(replay, "--batches") == "2,16"
    # the one-sequence cases keep the replay subcommand and the run's own prompt
    assert report["cases"][0]["report"]["args"][0] == "replay"
    assert arg(report["cases"][0]["report"], "--n-prompt") == str(smoke.DEFAULT_N_PROMPT)
    assert report["slots"] == {"cases": 2, "run": {"slots": 4, "kv_unified": True, "n_prompt": 40, "n_gen": 140,
                                                    "ctx": 512},
                               "exact_slots_backends": []}
    assert "slots cases are reported, not judged" in out


def test_a_claimed_backend_judges_the_slots_case(stand_in: Path, made_models: list, tmp_path: Path,  # noqa: F811
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    claim(monkeypatch, {**CPU_BUILD, "exact_slots_backends": ["cpu"]})
    code, out, err, report = run(tmp_path, capsys, "--batches", "2", "--no-moe", "--no-hybrid")
    assert code == 0, out + err
    assert [(c["expect"], c["passed"]) for c in report["cases"] if c["slots"]] == [("identical", True),
                                                                                   ("differ", True)]
    assert report["slots"]["exact_slots_backends"] == ["cpu"]
    assert "slots cases are reported" not in out


def test_on_cuda_the_slots_case_has_a_stream_per_slot(on_cuda: Path, made_models: list, tmp_path: Path,  # noqa: F811
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--no-hybrid", "--no-moe", "--no-types", "--kv", "f16",
                                 "--quants", "Q6_K", "--batches", "2")
    assert code == 0, out + err
    slots = [c for c in report["cases"] if c["slots"]]
    assert [c["name"] for c in slots] == ["Q6_K kv=f16 slots=4 kvu=off switch on",
                                          "Q6_K kv=f16 slots=4 kvu=off switch off"]
    assert arg(slots[0]["report"], "--kv-unified") == "off"
    assert arg(slots[0]["report"], "--n-prompt") == str(smoke.SLOTS_RUNS["cuda"].n_prompt)


def test_no_slots_leaves_the_case_out(stand_in: Path, made_models: list, tmp_path: Path,  # noqa: F811
                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--batches", "2", "--no-slots")
    assert code == 0, out + err
    assert report["slots"]["cases"] == 0 and not any(c["slots"] for c in report["cases"])


def test_a_users_moe_model_gets_no_slots_case(on_cuda: Path, moe_model: Path, tmp_path: Path,  # noqa: F811
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, report = run(tmp_path, capsys, "--model", str(moe_model), "--kv", "f16", "--batches", "2")
    assert code == 0, out + err
    assert not any(c["slots"] for c in report["cases"])


def test_the_control_note_counts_the_slots_cases_own_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    # A slots control that showed nothing is judged at the case's own prompt length, not the run's.
    claim(monkeypatch, {**CPU_BUILD, "exact_slots_backends": ["cpu"]})
    _, off = smoke.slots_cases("cpu", "Q4_K_M")
    args = smoke.build_parser().parse_args(["--batches", "2"])
    args.n_gen = smoke.DEFAULT_N_GEN["cpu"]
    note = smoke.control_note(off, smoke.CaseResult(off, 1, False), args, "cpu")
    last = smoke.SLOTS_RUNS["cpu"].n_prompt + smoke.SLOTS_RUNS["cpu"].n_gen - 1
    assert note is not None and f"reaches KV position {last} only" in note
