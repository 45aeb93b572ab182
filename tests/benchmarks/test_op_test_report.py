"""benchmarks/op_test_report.py: console output of the op tests to JSON."""

from __future__ import annotations

from pathlib import Path

from ..helpers import load_benchmark

REPO = Path(__file__).resolve().parents[2]
op_test_report = load_benchmark("op_test_report")

BACKEND_OPS_LOG = """\
Testing 2 devices

Backend 1/2: CUDA0
  Device description: NVIDIA H200
  MUL_MAT_BATCH_INVARIANCE(type_a=q4_0,m=1024,k=4096,n=1): \x1b[1;32mOK\x1b[0m
  [batched != one token at a time: 5120 of 5120 values, max |diff| = 1.907e-06] [CONCAT] ERR = inf > 0.000500000   MUL_MAT_BATCH_INVARIANCE(type_a=q4_0,m=1024,k=4096,n=5): \x1b[1;31mFAIL\x1b[0m
ggml_cuda_init: a line of backend logging that lands inside a case line  FLASH_ATTN_EXT_BATCH_INVARIANCE(type_KV=f16,hs=128,nh_q=32,nh_kv=8,kv=512,n=2): \x1b[1;32mOK\x1b[0m
  FLASH_ATTN_EXT(hsk=128,hsv=128,nh=4,nr23=[1,1],kv=113,nb=1,type_KV=turbo4): not supported [CUDA0]
  3/4 tests passed
  Backend CUDA0: \x1b[1;31mFAIL\x1b[0m
Backend 2/2: CPU
  Skipping CPU backend
1/2 backends passed
\x1b[1;31mFAIL\x1b[0m
"""

BATCH_INVARIANCE_LOG = """\
  MUL_MAT q4_K  K=4096 N=4096 [CUDA0]            n= 1: identical
  MUL_MAT q4_K  K=4096 N=4096 [CUDA0]            n= 5:  5/ 5 columns differ, max |diff| = 9.918e-05
  CUDA0: 2 cases, 1 identical, 1 differing, 0 configurations skipped, 0 failures

Summary: 1 device(s), 2 cases, 1 identical, 1 differing, 0 configurations skipped, 0 failures
OK: without GGML_BATCH_INVARIANT batched and single results differ (as expected)
"""


def test_backend_ops_cases_verdicts_and_the_summary_counts() -> None:
    report = op_test_report.parse(BACKEND_OPS_LOG)
    cases = report["cases"]
    assert [(c["op"], c["verdict"]) for c in cases] == [
        ("MUL_MAT_BATCH_INVARIANCE", "OK"), ("MUL_MAT_BATCH_INVARIANCE", "FAIL"),
        ("FLASH_ATTN_EXT_BATCH_INVARIANCE", "OK"), ("FLASH_ATTN_EXT", "not supported [CUDA0]")]
    assert cases[1]["vars"] == "type_a=q4_0,m=1024,k=4096,n=5"
    assert cases[1]["message"].startswith("[batched != one token at a time: 5120 of 5120 values")
    assert (report["tests_passed"], report["tests_total"]) == (3, 4)
    assert report["complete"] is True


def test_a_run_cut_off_before_its_summary_is_marked_incomplete() -> None:
    cut = BACKEND_OPS_LOG.split("  3/4 tests passed")[0]
    report = op_test_report.parse(cut)
    assert report["complete"] is False and "tests_passed" not in report


def test_batch_invariance_program_cases() -> None:
    report = op_test_report.parse(BATCH_INVARIANCE_LOG)
    assert report["counts"] == {"identical": 1, "differ": 1}
    assert "CUDA0: 2 cases, 1 identical, 1 differing, 0 configurations skipped, 0 failures" in report["summary_lines"]
    differ = report["cases"][1]
    assert differ["n"] == 5 and differ["max_abs_diff"] == 9.918e-05
    assert report["complete"] is True
