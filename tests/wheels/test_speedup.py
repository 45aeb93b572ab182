"""The expected-speedup table: the model, the best draft length, the report and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hiraishin_llama import speedup

FLAT = {b: 10.0 for b in range(1, 17)}


@pytest.mark.parametrize(("acceptance", "draft_length", "tokens"), [
    (0.0, 5, 1.0), (1.0, 3, 4.0), (0.5, 1, 1.5), (0.5, 2, 1.75), (0.9, 15, (1 - 0.9 ** 16) / 0.1)])
def test_expected_tokens(acceptance: float, draft_length: int, tokens: float) -> None:
    assert speedup.expected_tokens(acceptance, draft_length) == pytest.approx(tokens)


@pytest.mark.parametrize("acceptance", [-0.1, 1.5])
def test_an_acceptance_rate_outside_0_1_is_refused(acceptance: float) -> None:
    with pytest.raises(ValueError, match="not in \\[0, 1\\]"):
        speedup.expected_tokens(acceptance, 3)


def test_free_verify_and_free_drafts_give_the_expected_tokens() -> None:
    # Passes of any size cost one one-token pass and drafting is free: the speedup is the tokens per iteration.
    assert speedup.speedup(FLAT, 0.8, 0.0, 7) == pytest.approx(speedup.expected_tokens(0.8, 7))
    assert speedup.best_draft(FLAT, 0.8, 0.0) == speedup.BestDraft(15, pytest.approx(speedup.expected_tokens(0.8, 15)))


def test_the_draft_cost_and_the_verify_time_both_count() -> None:
    passes = {1: 4.0, 2: 5.0, 3: 6.0}
    # k = 2: 1.75 tokens * 4 ms / (2 * 0.1 * 4 ms + 6 ms)
    assert speedup.speedup(passes, 0.5, 0.1, 2) == pytest.approx(1.75 * 4.0 / (0.8 + 6.0))
    # A costly draft shortens the best draft: free drafts favour k = 2, drafts at 60% of a pass k = 1.
    assert speedup.best_draft(passes, 0.9, 0.0).draft_length == 2
    assert speedup.best_draft(passes, 0.9, 0.6).draft_length == 1


def test_only_measured_sizes_are_draft_lengths() -> None:
    passes = {1: 10.0, 2: 10.0, 9: 10.0}
    assert speedup.best_draft(passes, 0.9, 0.0).draft_length == 8


@pytest.mark.parametrize(("passes", "message"), [
    ({2: 5.0, 3: 6.0}, "b = 1"), ({1: 5.0}, "2 or more tokens")])
def test_without_the_needed_passes_there_is_no_table(passes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        speedup.best_draft(passes, 0.5, 0.02)


def test_table_rows_cover_every_setting_with_exact_and_stock() -> None:
    verify = [{"b": b, "exact_ms": 4.0 + b, "stock_ms": 4.0 + b / 2} for b in (1, 2, 3, 16)]
    rows = speedup.speedup_table(verify)
    assert [(r.acceptance, r.draft_cost) for r in rows] == [
        (a, c) for a in (0.5, 0.6, 0.7, 0.8, 0.9) for c in (0.02, 0.05, 0.10)]
    row = rows[2]  # a = 0.5, 10% drafts
    assert row.exact == speedup.BestDraft(1, pytest.approx(1.5 * 5.0 / (0.5 + 6.0)))
    assert row.stock == speedup.BestDraft(1, pytest.approx(1.5 * 4.5 / (0.45 + 5.0)))
    # tokens per second: each speedup over its own plain decoding (5 ms exact, 4.5 ms stock per token)
    assert (row.exact_plain_ms, row.stock_plain_ms) == (5.0, 4.5)
    assert row.exact_over_stock == pytest.approx((row.exact.speedup / 5.0) / (row.stock.speedup / 4.5))
    # Slower passes never make exact the faster one.
    assert all(r.exact_over_stock <= 1.0 for r in rows)
    document = speedup.table_json(rows)
    assert len(document["rows"]) == 15 and "best k" in document["model"]
    assert [speedup.SpeedupRow.from_json(row) for row in json.loads(json.dumps(document))["rows"]] == rows
    text = speedup.render(rows)
    assert "  0.50        10%     1.15   1     1.24   1        0.838" in text


def test_exact_passes_that_are_faster_throughout_give_more_tokens_per_second_at_the_same_speedup() -> None:
    # Exact passes 20% faster at every b: the same speedup over each mode's own plain decoding, 1.25x the tokens.
    verify = [{"b": b, "exact_ms": 0.8*(4.0 + b), "stock_ms": 4.0 + b} for b in range(1, 17)]
    for row in speedup.speedup_table(verify):
        assert row.exact.speedup == pytest.approx(row.stock.speedup)
        assert row.exact_over_stock == pytest.approx(1.25)


def _bench_report(verify: list[dict]) -> dict:
    return {"tool": "hiraishin-llama-bench", "results": {"Q4_K_M": {"verify": verify}}}


def test_cli_prints_the_table_of_a_report_and_of_a_results_file(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    verify = [{"b": b, "exact_ms": 4.0 + b, "stock_ms": 4.0 + b / 2} for b in (1, 2, 3, 16)]
    report = tmp_path / "bench.json"
    report.write_text(json.dumps(_bench_report(verify)))
    recorded = tmp_path / "recorded.json"
    recorded.write_text(json.dumps({"name": "x", "raw": {"bench.json": _bench_report(verify)}}))
    for path in (report, recorded):
        assert speedup.main([str(path)]) == 0
        out = capsys.readouterr().out
        assert out.startswith("Q4_K_M:\nexpected speculative speedup")
        assert "  0.50        10%     1.15   1     1.24   1        0.838" in out


@pytest.mark.parametrize(("content", "message"), [
    ("not json", "cannot read"),
    ('{"name": "x"}', "is not a hiraishin-llama-bench report (missing 'results')"),
    (json.dumps(_bench_report([{"b": 2, "exact_ms": 1.0, "stock_ms": 1.0}])), "b = 1"),
])
def test_cli_bad_input_exits_2_with_the_reason(content: str, message: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert speedup.main([str(path)]) == 2
    assert message in capsys.readouterr().err
