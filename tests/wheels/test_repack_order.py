"""The CPU wheel's repacked kernels, checked where batch-invariant mode relies on them.

Batch-invariant mode keeps stock's split of a batch over the repacked weights (groups of 4 rows through
gemm, the rest through gemv) for the types whose gemv gives each output the bytes gemm gives it; for
Q4_K and Q2_K that gemv is a version of the stock one in gemm's order. repack_order_check.cpp compares
the two kernels directly in every CPU variant library of the wheel this machine can run, at 4 rows and
at gemm's 16-row path, with the stock gemv as the control that shows the check can fail.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.wheels.conftest import ToolSource

CHECK_SOURCE = Path(__file__).with_name("repack_order_check.cpp")
LINE = re.compile(r"^(?P<type>\S+) bi=(?P<bi>\d+) stock=(?P<stock>\d+) of (?P<outputs>\d+)$")
NOT_APPLICABLE = 3  # this CPU cannot run the variant, or the variant repacks nothing (no AVX2)
# the types whose stock gemv adds in another order than their gemm (the control must see it)
STOCK_DIFFERS = {"q4_K_8x8_q8_K", "q2_K_8x8_q8_K"}


@pytest.fixture(scope="module")
def check_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler (g++ or c++) on PATH to build repack_order_check.cpp")
    binary = tmp_path_factory.mktemp("repack-order") / "repack_order_check"
    subprocess.run([compiler, "-std=c++17", "-O1", "-o", str(binary), str(CHECK_SOURCE), "-ldl"],
                   check=True, capture_output=True, text=True)
    return binary


def cpu_variant_libraries(tool_source: ToolSource) -> list[Path]:
    if tool_source.bin_dir is None:
        pytest.skip(f"no CPU wheel to check: {tool_source.described}")
    places = [tool_source.bin_dir, tool_source.bin_dir.parent / "lib"]
    found = sorted({lib for place in places for lib in place.glob("libggml-cpu-*.so")})
    if not found:
        pytest.skip(f"no libggml-cpu-*.so variant libraries in {', '.join(map(str, places))} "
                    f"({tool_source.described}): a build without GGML_BACKEND_DL and GGML_CPU_ALL_VARIANTS")
    return found


def run_check(binary: Path, library: Path, rows: int) -> tuple[int, dict[str, tuple[int, int, int]]]:
    done = subprocess.run([str(binary), str(library), str(rows)], capture_output=True, text=True, timeout=120)
    counts = {}
    for line in done.stdout.splitlines():
        match = LINE.match(line)
        if match:
            counts[match["type"]] = (int(match["bi"]), int(match["stock"]), int(match["outputs"]))
    assert done.returncode in (0, 1, NOT_APPLICABLE), \
        f"{library.name}: repack_order_check exited {done.returncode}: {done.stderr.strip()}"
    return done.returncode, counts


@pytest.mark.parametrize("rows", [4, 16])
def test_batch_invariant_gemv_adds_as_gemm_does(tool_source: ToolSource, check_binary: Path, rows: int) -> None:
    checked, control_saw = [], set()
    for library in cpu_variant_libraries(tool_source):
        returncode, counts = run_check(check_binary, library, rows)
        if returncode == NOT_APPLICABLE:
            continue
        checked.append(library.name)
        differing = {name: bi for name, (bi, _, _) in counts.items() if bi}
        assert not differing, (f"{library.name}, {rows} rows: the gemv batch-invariant mode takes differs from "
                               f"gemm in {differing} outputs, so a token's product depends on its batch")
        assert returncode == 0
        control_saw |= {name for name, (_, stock, _) in counts.items() if stock}
    if not checked:
        pytest.skip("this CPU runs none of the wheel's variant libraries that repack weights (x86 with AVX2)")
    assert STOCK_DIFFERS <= control_saw, (
        f"the stock gemv of {sorted(STOCK_DIFFERS - control_saw)} matched gemm in every variant "
        f"({', '.join(checked)}): the control no longer shows that the check can fail")
