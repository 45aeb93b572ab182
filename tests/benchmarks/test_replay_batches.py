"""benchmarks/replay_batches.py: the replay's batch widths at each b, held to the recorded H200 runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..helpers import load_benchmark

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
replay_batches = load_benchmark("replay_batches")


def test_a_batch_that_would_cross_256_is_cut_there_and_the_next_starts_at_256():
    batches = replay_batches.replay_batches(11, n_prompt=64, n_gen=600)
    widths = {64 + batch.first: batch.width for batch in batches}
    assert widths[240] == 11 and widths[251] == 5 and widths[256] == 11
    assert all(64 + batch.first + batch.width <= 256 or 64 + batch.first >= 256 for batch in batches[:20])
    # the trailing partial batch is left out, so every batch is at most b and they tile the compared positions
    assert sum(batch.width for batch in batches) <= 600
    assert [b.first for b in batches] == sorted(b.first for b in batches)


def test_without_the_guard_every_batch_holds_b():
    batches = replay_batches.replay_batches(11, n_prompt=64, n_gen=600, guard_256=False)
    assert {batch.width for batch in batches} == {11}
    assert len(batches) == 600 // 11


def test_the_widths_that_a_planted_fault_meets():
    assert replay_batches.batch_sizes_with_width(5, 64, 600) == {5: 64, 11: 251}
    assert replay_batches.batch_sizes_with_width(7, 64, 200) == {7: 64}
    for width in (11, 13, 14, 15):
        assert replay_batches.batch_sizes_with_width(width, 64, 600) == {width: 64}
    with pytest.raises(ValueError, match="at least 1"):
        replay_batches.replay_batches(0, 64, 600)


@pytest.mark.parametrize("name", ["smoke-h200-rev22-b10018-1.2.0.json", "smoke-h200-rev20-b10018-1.2.0.json",
                                  "fault-moe-warp-b7-iq4-xs-b5-smoke-h200-rev22.json"])
def test_the_mirror_counts_what_the_replay_compared_on_the_h200(name):
    assert replay_batches.check(RESULTS / name) == []


def test_the_iq4_xs_fault_differs_from_where_the_mirror_puts_its_5_token_batches():
    raw = json.loads((RESULTS / "fault-moe-warp-b7-iq4-xs-b5-smoke-h200-rev22.json").read_text())["raw"]["smoke.json"]
    case = next(c for c in raw["cases"] if c["name"] == "IQ4_XS kv=f16 switch on")
    first_diff = {r["b"]: r["first_diff_pos"] for r in case["report"]["results"] if r["positions_differ"]}
    assert first_diff == replay_batches.batch_sizes_with_width(5, case["report"]["n_prompt"], case["report"]["n_gen"])


def test_check_fails_on_a_report_whose_counts_the_mirror_does_not_give(tmp_path):
    report = {"mode": "replay", "model_path": "m.gguf", "n_prompt": 64, "n_gen": 600, "guard_256": True,
              "results": [{"b": 11, "positions_compared": 594}]}  # 54 x 11: the count without the guard
    path = tmp_path / "replay.json"
    path.write_text(json.dumps(report))
    assert replay_batches.check(path) == ["m.gguf b=11: the report compared 594 positions, the mirror counts 591"]
    assert replay_batches.main(["--check", str(path)]) == 1
    report["results"][0]["positions_compared"] = 591
    path.write_text(json.dumps(report))
    assert replay_batches.main(["--check", str(path)]) == 0
