"""benchmarks/server_slots.py's throughput mode against the stand-in llama-server of test_server_exact.py: one
server per slot count, switch state and drafting, its tokens counted over the request phase, and the ratios
the several-slots issue asks for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.test_server_exact import venv  # noqa: F401 (fixture)
from tests.helpers import load_benchmark

server_slots = load_benchmark("server_slots")


def test_throughput_runs_every_slot_count_switch_and_drafting(venv: Path, tmp_path: Path,  # noqa: F811
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_FAULT", "")
    result = server_slots.throughput(venv, tmp_path / "model.gguf", tmp_path, counts=[1, 2], switches=("on", "off"),
                                     prompts=("a", "bb", "ccc"), requests_per_slot=2, n_predict=10, kv_unified=True)
    runs = result["runs"]
    assert [(r["slots"], r["draft"], r["switch"]) for r in runs] == [
        (1, False, "on"), (1, False, "off"), (1, True, "on"), (1, True, "off"),
        (2, False, "on"), (2, False, "off"), (2, True, "on"), (2, True, "off")]
    # N clients take requests_per_slot requests each, and every answer's tokens are counted
    assert [r["requests"] for r in runs] == [2] * 4 + [4] * 4
    assert [r["tokens"] for r in runs] == [20] * 4 + [40] * 4
    for run in runs:
        assert 0 < run["requests_s"] <= run["seconds"]
        assert run["tokens_per_s"] == pytest.approx(run["tokens"] / run["requests_s"], rel=0.01)
        assert run["speculative"] == run["draft"]
    # each server was started with its own -np and its own log
    assert sorted(p.name for p in tmp_path.glob("np*.log")) == sorted(
        f"np{n}-{d}-{s}.log" for n in (1, 2) for d in ("draft", "plain") for s in ("on", "off"))
    assert [row["slots"] for row in result["summary"]] == [1, 2]
    assert set(result["summary"][0]) == {"slots", "exact_over_stock_plain", "exact_over_stock_draft",
                                         "exact_draft_over_stock_plain"}


def test_the_summary_divides_the_right_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a rate of its own for every run, so a ratio taken from the wrong pair of runs shows
    rates = {(False, "on"): 90.0, (False, "off"): 100.0, (True, "on"): 180.0, (True, "off"): 200.0}

    def fake_answers(venv_dir, args, env, log, prompts, n_predict, clients, banned=()):
        draft = "-md" in args
        switch = "on" if env == server_slots.SWITCH_ENV[True] else "off"
        return {}, {"requests_s": 1.0, "tokens": rates[draft, switch], "seconds": 2.0, "slots": 1}

    monkeypatch.setattr(server_slots, "answers", fake_answers)
    result = server_slots.throughput(Path("venv"), Path("m.gguf"), tmp_path, counts=[4], switches=("on", "off"),
                                     prompts=("a",), requests_per_slot=1, n_predict=4, kv_unified=False)
    assert result["summary"] == [{"slots": 4, "exact_over_stock_plain": 0.9, "exact_over_stock_draft": 0.9,
                                  "exact_draft_over_stock_plain": 1.8}]
    # one switch state only: no ratio to give
    result = server_slots.throughput(Path("venv"), Path("m.gguf"), tmp_path, counts=[4], switches=("on",),
                                     prompts=("a",), requests_per_slot=1, n_predict=4, kv_unified=False)
    assert result["summary"][0]["exact_over_stock_plain"] is None


def test_banned_tokens_reach_every_request(monkeypatch: pytest.MonkeyPatch, venv: Path, tmp_path: Path) -> None:  # noqa: F811
    asked = []
    real = server_slots.complete

    def spy(base, prompt, n_predict, timeout_s, banned=()):
        asked.append(banned)
        return real(base, prompt, n_predict, timeout_s, banned)

    monkeypatch.setattr(server_slots, "complete", spy)
    server_slots.throughput(venv, tmp_path / "model.gguf", tmp_path, counts=[2], switches=("on",), prompts=("a",),
                            requests_per_slot=1, n_predict=4, kv_unified=True, banned=(3, 4))
    assert asked and set(asked) == {(3, 4)}


@pytest.mark.parametrize("text, counts", [("1,2,4,8", [1, 2, 4, 8]), ("4", [4])])
def test_slot_counts(text: str, counts: list[int]) -> None:
    assert server_slots.counts_of(text) == counts


@pytest.mark.parametrize("text", ["0,2", "9", "2,2", "two", "1,,2"])
def test_bad_slot_counts_are_refused_naming_the_text(text: str) -> None:
    with pytest.raises(ValueError, match=text.replace(",", ",")):
        server_slots.counts_of(text)


def test_a_draft_model_drafts_for_the_drafting_servers_and_their_acceptance_is_reported(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    started = []

    def fake_answers(venv_dir, args, env, log, prompts, n_predict, clients, banned=()):
        started.append(args)
        draft = "-md" in args
        return {}, {"requests_s": 1.0, "tokens": 100, "seconds": 2.0, "slots": 1,
                    "draft_n": 80 if draft else 0, "draft_n_accepted": 60 if draft else 0}

    monkeypatch.setattr(server_slots, "answers", fake_answers)
    result = server_slots.throughput(Path("venv"), Path("target.gguf"), tmp_path, counts=[2], switches=("on", "off"),
                                     prompts=("a",), requests_per_slot=1, n_predict=4, kv_unified=False,
                                     draft_model=Path("draft.gguf"))
    drafting = [args for args in started if "-md" in args]
    assert len(drafting) == 2 and len(started) == 4
    assert all(args[args.index("-md") + 1] == "draft.gguf" and args[args.index("-m") + 1] == "target.gguf"
               for args in drafting)
    assert [(r["draft"], r["acceptance"]) for r in result["runs"]] == [
        (False, None), (False, None), (True, 0.75), (True, 0.75)]
    assert result["draft_model"] == "draft.gguf"
    # without one, the model drafts for itself
    started.clear()
    server_slots.throughput(Path("venv"), Path("target.gguf"), tmp_path, counts=[2], switches=("on",),
                            prompts=("a",), requests_per_slot=1, n_predict=4, kv_unified=False)
    assert [args[args.index("-md") + 1] for args in started if "-md" in args] == ["target.gguf"]


@pytest.mark.parametrize("extra, message", [
    (["--draft-model", "{model}"], "--draft-model goes with --throughput"),
    (["--throughput", "2", "--draft-model", "{missing}"], "no such file"),
])
def test_draft_model_misuse_is_refused_before_any_server_starts(extra: list[str], message: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    argv = [arg.format(model=model, missing=tmp_path / "absent.gguf") for arg in extra]
    monkeypatch.setattr("sys.argv", ["server_slots.py", "--venv", str(tmp_path), "--model", str(model), *argv])
    monkeypatch.setattr(server_slots, "answers", lambda *a, **k: pytest.fail("a server was started"))
    with pytest.raises(SystemExit) as exit_info:
        server_slots.main()
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_report_keeps_every_measured_run_when_a_later_server_fails(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    # a device call's time limit or a server dying half-way through the table: the runs before it stay in the JSON
    calls = []

    def fourth_server_dies(venv_dir, args, env, log, prompts, n_predict, clients, banned=()):
        calls.append(args)
        if len(calls) == 4:
            raise RuntimeError("llama-server exited with status 134")
        return {}, {"requests_s": 1.0, "tokens": 100.0 + len(calls), "seconds": 2.0, "slots": 1}

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    report = tmp_path / "throughput.json"
    monkeypatch.setattr(server_slots, "answers", fourth_server_dies)
    monkeypatch.setattr(server_slots, "report_header", lambda tool, venv_dir, device: {"tool": tool})
    monkeypatch.setattr("sys.argv", ["server_slots.py", "--venv", str(tmp_path), "--model", str(model),
                                     "--throughput", "1,2", "--log-dir", str(tmp_path / "logs"), "--json", str(report)])
    with pytest.raises(RuntimeError, match="status 134"):
        server_slots.main()
    kept = json.loads(report.read_text())["throughput"]
    assert kept["complete"] is False
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith("throughput")] == ["throughput.json"]
    assert [(r["slots"], r["draft"], r["switch"]) for r in kept["runs"]] == [(1, False, "on"), (1, False, "off"),
                                                                           (1, True, "on")]
    # the ratios of the pairs measured, none for the pair the failure broke or the slot count never reached
    assert kept["summary"] == [{"slots": 1, "exact_over_stock_plain": round(101 / 102, 3), "exact_over_stock_draft": None,
                                "exact_draft_over_stock_plain": round(103 / 102, 3)},
                               {"slots": 2, "exact_over_stock_plain": None, "exact_over_stock_draft": None,
                                "exact_draft_over_stock_plain": None}]


def test_a_finished_table_says_it_is_complete(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(server_slots, "answers", lambda *a, **k: ({}, {"requests_s": 1.0, "tokens": 10, "seconds": 1.0,
                                                                        "slots": 1}))
    seen = []
    result = server_slots.throughput(Path("venv"), Path("m.gguf"), tmp_path, counts=[1], switches=("on", "off"),
                                     prompts=("a",), requests_per_slot=1, n_predict=4, kv_unified=False,
                                     after_each_run=lambda partial: seen.append((len(partial["runs"]),
                                                                                 partial["complete"])))
    assert seen == [(1, False), (2, False), (3, False), (4, False)]
    assert result["complete"] is True and len(result["runs"]) == 4
