"""benchmarks/kernel_session_report.py: what kernel_session.sh leaves in $OUT, as one JSON report."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from ..helpers import load_benchmark

kernel_session_report = load_benchmark("kernel_session_report")

ESC = "\x1b"
# test-backend-ops perf as the CUDA backend prints it: the first case's time comes two lines after its name, behind
# the backend's own logging; the second case's on the same line.
PERF_ON = f"""ggml_cuda_init: found 1 CUDA devices
Testing 2 devices
  MUL_MAT(type_a=q4_K,type_b=f32,m=4096,n=16,k=4096,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1): ggml_backend_cuda_graph_compute: CUDA graph warmup complete
               50049 runs -    19.20 us/run - 402.65 MFLOP/run - {ESC}[1;34m 20.97 TFLOPS{ESC}[0m
  MUL_MAT(type_a=q6_K,type_b=f32,m=4096,n=16,k=4096,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1):      40000 runs -    26.50 us/run - 402.65 MFLOP/run
  Backend CUDA0: {ESC}[1;32mOK{ESC}[0m
2/2 backends passed
"""
# cut off by the session's time limit after one case
PERF_VARIANT = PERF_ON.split("  MUL_MAT(type_a=q6_K")[0]
OP_TESTS = f"""  MUL_MAT_BATCH_INVARIANCE(type_a=q8_0,m=1024,k=4096,n=1): {ESC}[1;32mOK{ESC}[0m
[batched != one token at a time: 5 of 8192 values] MUL_MAT_BATCH_INVARIANCE(type_a=q8_0,m=1024,k=4096,n=5): {ESC}[1;31mFAIL{ESC}[0m
  1/2 tests passed
"""
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def _ncu_row(section: str, metric: str, unit: str, value: str) -> str:
    return (f'"1","9","test-backend-ops","host","void mul_mat_vec_q4_K_bi_mma<12, 2>(const void *)","1","14",'
            f'"(32, 8, 1)","(512, 1, 1)","0","9.0","{section}","{metric}","{unit}","{value}"')


NCU = "\n".join([
    "==WARNING== Note: Running with unmodified GPU clocks.",
    HEADER,
    _ncu_row("GPU Speed Of Light Throughput", "Duration", "ns", "49,696"),
    _ncu_row("Scheduler Statistics", "Issued Warp Per Scheduler", "", "0.52"),
    _ncu_row("Command line profiler metrics", "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
             "inst", "3.23"),
]) + "\n"


def _session_output(out: Path, packed: dict[str, str], beside: dict[str, str]) -> Path:
    """An $OUT as the session leaves it: summary.txt beside, every other log in logs.tar.gz."""
    out.mkdir()
    for name, text in beside.items():
        (out / name).write_text(text)
    with tarfile.open(out / "logs.tar.gz", "w:gz") as tar:
        for name, text in packed.items():
            data = text.encode()
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return out


@pytest.fixture
def session(tmp_path: Path) -> Path:
    return _session_output(tmp_path / "out", beside={"summary.txt": "prebuilt build/wip.xz\n"}, packed={
        "gpu.txt": "NVIDIA H200, 9.0, 580.159.04\n",
        "perf-1.txt": PERF_ON,
        "perf-variant-wip-cp-async.txt": PERF_VARIANT,
        "tbo-bi-fault.txt": OP_TESTS,
        "ncu-bi-mma-1.csv": NCU,
    })


def test_a_time_printed_lines_after_its_case_belongs_to_that_case(session: Path) -> None:
    perf = kernel_session_report.report(session)["perf"]
    assert perf["perf-1"] == {"complete": True, "us": {"type_a=q4_K,type_b=f32,m=4096,n=16,k=4096": 19.20,
                                                       "type_a=q6_K,type_b=f32,m=4096,n=16,k=4096": 26.50}}


def test_a_perf_run_cut_off_by_its_time_limit_says_so(session: Path) -> None:
    perf = kernel_session_report.report(session)["perf"]["perf-variant-wip-cp-async"]
    assert perf == {"complete": False, "us": {"type_a=q4_K,type_b=f32,m=4096,n=16,k=4096": 19.20}}


def test_op_tests_keep_the_summary_counts_and_the_failed_cases(session: Path) -> None:
    tests = kernel_session_report.report(session)["op_tests"]["tbo-bi-fault"]
    assert tests == {"tests_passed": 1, "tests_total": 2, "complete": True,
                     "failed": ["type_a=q8_0,m=1024,k=4096,n=5"]}


def test_ncu_launches_carry_issue_rate_and_stall_reasons(session: Path) -> None:
    [launch] = kernel_session_report.report(session)["ncu"]["ncu-bi-mma-1"]
    assert launch["kernel"] == "mul_mat_vec_q4_K_bi_mma<12, 2>"
    assert launch["duration_us"] == pytest.approx(49.696)
    assert launch["issued_warps_per_scheduler"] == pytest.approx(0.52)
    assert launch["stall_long_scoreboard_cycles_per_instruction"] == pytest.approx(3.23)


def test_unpacked_logs_read_the_same_as_packed_ones(session: Path, tmp_path: Path) -> None:
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    with tarfile.open(session / "logs.tar.gz") as tar:
        tar.extractall(unpacked, filter="data")
    (unpacked / "summary.txt").write_text("prebuilt build/wip.xz\n")
    assert kernel_session_report.report(unpacked) == kernel_session_report.report(session)


def test_cli_writes_the_report_and_a_line_per_log(session: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert kernel_session_report.main([str(session), "--out", str(tmp_path / "report.json")]) == 0
    assert json.loads((tmp_path / "report.json").read_text())["gpu"] == "NVIDIA H200, 9.0, 580.159.04"
    out = capsys.readouterr().out
    assert "perf-variant-wip-cp-async: 1 cases (cut off before the end)" in out
    assert "tbo-bi-fault: 1/2 passed, 1 failed\n  FAIL type_a=q8_0,m=1024,k=4096,n=5\n" in out
    assert "  type_a=q6_K,type_b=f32,m=4096,n=16,k=4096 26.50 us\n" in out
    assert "49.7 us regs 0 occ 0.0% issue/sched 0.52 long-scoreboard 3.23 of 0.00 cycles/instr" in out


def test_a_directory_that_is_not_a_session_output_is_an_error(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("not a session\n")
    assert kernel_session_report.main([str(tmp_path), "--out", str(tmp_path / "report.json")]) == 2
    assert "no summary.txt; is this the output directory of kernel_session.sh?" in capsys.readouterr().err
    assert not (tmp_path / "report.json").exists()
