"""benchmarks/compare_plain.py: plain-decoding fingerprints across builds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..helpers import load_benchmark

REPO = Path(__file__).resolve().parents[2]
compare_plain = load_benchmark("compare_plain")


def smoke(path: Path, prints: dict[tuple[str, str, bool], tuple[str, str]], wrap: bool = False) -> Path:
    cases = [{"quant": q, "kv": kv, "batch_invariant": on,
              "report": {"plain": {"tokens_fnv1a64": t, "logits_fnv1a64": lg}}}
             for (q, kv, on), (t, lg) in prints.items()]
    data = {"cases": cases}
    path.write_text(json.dumps({"raw": {"notes.json": ["not a report"], "smoke.json": data}} if wrap else data))
    return path


SAME = {("Q4_K_M", "f16", True): ("aa", "11"), ("Q4_K_M", "f16", False): ("aa", "11"),
        ("Q4_K_M", "q8_0", True): ("bb", "22")}


def test_equal_fingerprints_across_builds_and_switch_states(tmp_path: Path) -> None:
    result = compare_plain.compare(smoke(tmp_path / "stack.json", SAME), [smoke(tmp_path / "stock.json", SAME, wrap=True)])
    assert result["all_identical"] and len(result["cases"]) == 2


def test_a_moved_logit_is_caught_between_builds_and_between_switch_states(tmp_path: Path) -> None:
    moved = {**SAME, ("Q4_K_M", "q8_0", True): ("bb", "23")}
    result = compare_plain.compare(smoke(tmp_path / "a.json", SAME), [smoke(tmp_path / "b.json", moved)])
    assert [r["identical"] for r in result["cases"]] == [True, False]
    switch_moves = {**SAME, ("Q4_K_M", "f16", False): ("aa", "12")}
    result = compare_plain.compare(smoke(tmp_path / "c.json", switch_moves), [smoke(tmp_path / "d.json", SAME)])
    assert not result["all_identical"]


def test_reports_without_fingerprints_are_refused(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"cases": [{"quant": "Q4_K_M", "kv": "f16", "report": {"plain": {"steps": 600}}}]}))
    with pytest.raises(SystemExit, match="no plain-decoding fingerprints"):
        compare_plain.fingerprints(old)


def test_a_case_one_build_lacks_is_not_compared_and_does_not_count_as_moved(tmp_path: Path) -> None:
    fewer = {k: v for k, v in SAME.items() if k[1] == "f16"}
    result = compare_plain.compare(smoke(tmp_path / "stack.json", SAME), [smoke(tmp_path / "stock.json", fewer)])
    assert result["compared"] == 1 and result["all_identical"]
    assert [r["identical"] for r in result["cases"]] == [True, None]
    moved = {("Q4_K_M", "f16", True): ("aa", "12")}
    result = compare_plain.compare(smoke(tmp_path / "s.json", SAME), [smoke(tmp_path / "m.json", moved)])
    assert not result["all_identical"]


def test_files_sharing_no_case_are_refused(tmp_path: Path) -> None:
    other = {("Q8_0", "f16", True): ("cc", "33")}
    with pytest.raises(SystemExit, match="share none"):
        compare_plain.compare(smoke(tmp_path / "a.json", SAME), [smoke(tmp_path / "b.json", other)])
