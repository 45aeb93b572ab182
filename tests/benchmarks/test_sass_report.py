"""benchmarks/sass_report.py: instructions of a kernel's main loop, from cuobjdump -sass text."""

from __future__ import annotations

import json
from pathlib import Path

from ..helpers import load_benchmark

REPO = Path(__file__).resolve().parents[2]
sass_report = load_benchmark("sass_report")

SASS = """
\t\tFunction : _Z6kernelILi16EEvPKv
\t.headerflags\t@"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                         /* 0x00000a00ff017b82 */
        /*0010*/                   S2R R0, SR_TID.X ;                             /* 0x0000000000007919 */
        /*0020*/                   LDG.E.CONSTANT R2, desc[UR4][R4.64] ;          /* 0x0000000404027981 */
        /*0030*/                   LOP3.LUT R3, R2, 0x3f3f, RZ, 0xc0, !PT ;       /* 0x00003f3f02037812 */
        /*0040*/                   IDP.4A.S8.S8 R5, R3, R6, RZ ;                  /* 0x0000000603057226 */
        /*0050*/                   I2FP.F32.S32 R7, R5 ;                          /* 0x0000000500077245 */
        /*0060*/                   FFMA.FTZ R8, R7, R9, R8 ;                      /* 0x0000000907087223 */
        /*0070*/              @!P0 BRA 0x20 ;                                     /* 0xfffffffc00a88947 */
        /*0080*/                   SHFL.BFLY PT, R10, R8, 0x10, 0x1f ;            /* 0x0e201f00080a7f89 */
        /*0090*/                   STG.E desc[UR4][R12.64], R10 ;                 /* 0x0000000a0c007986 */
        /*00a0*/                   EXIT ;                                         /* 0x000000000000794d */
\t\tFunction : _Z6otherv
        /*0000*/                   EXIT ;                                         /* 0x000000000000794d */
"""


RES_USAGE = """\
Resource usage:
 Common:
  GLOBAL:0
 Function _Z6kernelILi16EEvPKv:
  REG:128 STACK:0 SHARED:25600 LOCAL:0 CONSTANT[0]:672 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function _Z6otherv:
  REG:40 STACK:64 SHARED:0 LOCAL:176 CONSTANT[0]:528 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def test_the_main_loop_is_the_backward_branch_and_is_counted_by_kind() -> None:
    functions = sass_report.split_functions(SASS)
    assert set(functions) == {"_Z6kernelILi16EEvPKv", "_Z6otherv"}
    report = sass_report.analyze(functions["_Z6kernelILi16EEvPKv"])
    assert report["static_instructions"] == 11
    # From the branch target (0x20) to the branch (0x70): load, mask, dp4a, convert, ffma, branch.
    assert report["loop"]["instructions"] == 6
    assert report["loop"]["by_kind"] == {"convert": 1, "dp4a": 1, "float": 1, "integer/other": 2, "load": 1}
    assert report["loop"]["by_opcode"]["LOP3.LUT"] == 1
    assert "with_operand" not in report["loop"]
    masked = sass_report.analyze(functions["_Z6kernelILi16EEvPKv"], ("0x3f3f", "0x10"))
    # 0x10 is the shuffle's offset, after the loop: only what the loop executes counts.
    assert masked["loop"]["with_operand"] == {"0x3f3f": 1, "0x10": 0}


def test_a_jump_back_from_out_of_line_code_is_not_the_loop() -> None:
    # ptxas places the divergent path of __syncwarp after the last EXIT and jumps back into the loop from there:
    # a longer backward branch than the loop's own, which must not be taken for the loop.
    out_of_line = SASS.replace(
        "\t\tFunction : _Z6otherv",
        "        /*00b0*/                   WARPSYNC.COLLECTIVE R4, 0xe0 ;                 /* 0x0 */\n"
        "        /*00c0*/                   BRA 0x10 ;                                     /* 0x0 */\n"
        "\t\tFunction : _Z6otherv")
    report = sass_report.analyze(sass_report.split_functions(out_of_line)["_Z6kernelILi16EEvPKv"])
    assert report["static_instructions"] == 13
    assert report["loop"]["instructions"] == 6


def test_a_kernel_without_a_loop_has_none() -> None:
    functions = sass_report.split_functions(SASS)
    assert sass_report.analyze(functions["_Z6otherv"])["loop"] is None


def test_no_matching_kernel_is_an_error(tmp_path: Path, capsys) -> None:
    binary = tmp_path / "k.o"
    binary.write_bytes(b"\x7fELF")
    fake = tmp_path / "cuobjdump"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = -res-usage ]; then cat <<'RES'\n" + RES_USAGE + "RES\nexit 0; fi\n"
                    "cat <<'SASS'\n" + SASS + "SASS\n")
    fake.chmod(0o755)
    assert sass_report.main([str(binary), "--kernel", "mul_mat", "--cuobjdump", str(fake)]) == 2
    assert "no kernel in" in capsys.readouterr().err
    assert sass_report.main([str(binary), "--kernel", "kernel", "--cuobjdump", str(fake),
                             "--out", str(tmp_path / "o.json")]) == 0
    report = json.loads((tmp_path / "o.json").read_text())["_Z6kernelILi16EEvPKv"]
    assert report["resources"] == {"registers": 128, "stack_bytes": 0, "shared_bytes": 25600, "local_bytes": 0}


def test_resource_usage_reads_registers_and_the_stack_frame() -> None:
    usage = sass_report.resource_usage(RES_USAGE)
    assert usage["_Z6otherv"] == {"registers": 40, "stack_bytes": 64, "shared_bytes": 0, "local_bytes": 176}
