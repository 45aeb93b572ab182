"""benchmarks/ncu_report.py: Nsight Compute CSV, interleaved with the program's output, to a per-launch summary."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ..helpers import load_benchmark

REPO = Path(__file__).resolve().parents[2]
ncu_report = load_benchmark("ncu_report")

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type",'
          '"Rule Description","Estimated Speedup Type","Estimated Speedup"')


def _row(launch: int, kernel: str, section: str, metric: str, unit: str, value: str) -> str:
    return (f'"{launch}","1","hiraishin-replay","host","{kernel}","1","14","(32, 4, 1)","(342, 1, 1)","0","9.0",'
            f'"{section}","{metric}","{unit}","{value}","","","","",""')


KERNEL = "void mul_mat_vec_q<12, 16, 0, 0, 1>(const void *, const void *, unsigned int)"
CSV = "\n".join([
    "==PROF== Connected to process 2775",
    "hiraishin-replay 0.1.0: bench",  # the program's own output lands between ncu's rows
    HEADER,
    _row(0, KERNEL, "GPU Speed Of Light Throughput", "Duration", "ns", "46,240"),
    _row(0, KERNEL, "Launch Statistics", "Registers Per Thread", "register/thread", "254"),
    "   1      4.172      4.249",
    _row(0, KERNEL, "Occupancy", "Achieved Occupancy", "%", "11.90"),
    _row(1, "void mul_mat_q<12, 16, 0>(const char *)", "GPU Speed Of Light Throughput", "Duration", "us", "14.3"),
    _row(1, "void mul_mat_q<12, 16, 0>(const char *)", "Compute Workload Analysis", "Issue Slots Busy", "%", "23.4"),
]) + "\n"


def test_launches_are_summarized_with_units_normalized(tmp_path: Path) -> None:
    path = tmp_path / "ncu.csv"
    path.write_text(CSV)
    launches = ncu_report.summarize(path)
    assert [launch["kernel"] for launch in launches] == ["mul_mat_vec_q<12, 16, 0, 0, 1>", "mul_mat_q<12, 16, 0>"]
    assert launches[0]["duration_us"] == pytest.approx(46.24)
    assert launches[0]["registers_per_thread"] == 254
    assert launches[0]["achieved_occupancy_pct"] == pytest.approx(11.9)
    assert launches[1]["duration_us"] == pytest.approx(14.3)
    assert launches[1]["issue_slots_busy_pct"] == pytest.approx(23.4)


def test_output_without_ncu_rows_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("==PROF== Connected to process 1\nno kernels matched\n")
    assert ncu_report.main([str(path)]) == 2
    assert "no ncu CSV rows" in capsys.readouterr().err


def test_cli_writes_json_and_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ncu-matmul-exact.csv"
    path.write_text(CSV)
    assert ncu_report.main([str(path), "--out", str(tmp_path / "summary.json")]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary) == ["ncu-matmul-exact.csv"] and len(summary["ncu-matmul-exact.csv"]) == 2
    assert "mul_mat_vec_q<12, 16, 0, 0, 1>" in capsys.readouterr().out


def test_the_recorded_summary_is_what_the_recorded_csv_gives(tmp_path: Path) -> None:
    # The committed summary must be reproducible from the committed raw output.
    recorded = json.loads((REPO / "benchmarks/results/ncu-verify-b16-h200-rev5.json").read_text())["raw"]
    for name, launches in recorded["ncu-summary.json"].items():
        raw = tmp_path / name
        raw.write_bytes(gzip.decompress((REPO / "benchmarks/results/ncu" / f"{name}.gz").read_bytes()))
        assert ncu_report.summarize(raw) == launches, name
