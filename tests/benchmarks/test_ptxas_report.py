"""benchmarks/ptxas_report.py: registers and spills per kernel from an nvcc -Xptxas -v log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..helpers import load_benchmark

ptxas_report = load_benchmark("ptxas_report")

LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3fooILi2EEvPf' for 'sm_90'
ptxas info    : Function properties for _Z3fooILi2EEvPf
    48 bytes stack frame, 84 bytes spill stores, 68 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 48 bytes cumulative stack size, 4352 bytes smem
ptxas info    : Compiling entry function '_Z3barv' for 'sm_90'
ptxas info    : Function properties for _Z3barv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
"""


def test_each_kernel_gets_its_own_registers_stack_and_spills():
    kernels = ptxas_report.parse(LOG)
    assert kernels == [
        {"mangled": "_Z3fooILi2EEvPf", "arch": "sm_90", "stack": 48, "spill_stores": 84, "spill_loads": 68,
         "registers": 128},
        {"mangled": "_Z3barv", "arch": "sm_90", "stack": 0, "spill_stores": 0, "spill_loads": 0, "registers": 32},
    ]


def test_a_log_cut_before_a_kernels_registers_is_refused():
    with pytest.raises(ValueError, match="1 kernel.*_Z3barv"):
        ptxas_report.parse(LOG.rsplit("ptxas info    : Used 32", 1)[0])


def test_match_keeps_the_named_kernels(tmp_path: Path, capsys):
    log = tmp_path / "ptxas.txt"
    log.write_text(LOG)
    out = tmp_path / "report.json"
    assert ptxas_report.main([str(log), "--match", "foo", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [k["mangled"] for k in report["kernels"]] == ["_Z3fooILi2EEvPf"]
    assert report["kernels"][0]["kernel"] in ("void foo<2>(float*)", "_Z3fooILi2EEvPf")  # c++filt where there is one
    assert ptxas_report.main([str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt" in capsys.readouterr().err
