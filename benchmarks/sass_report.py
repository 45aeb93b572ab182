#!/usr/bin/env python3
"""Count the instructions in the main loop of CUDA kernels, by opcode and by kind.

Reads the SASS that ``cuobjdump -sass`` prints for an object file, a cubin or a
shared library, picks the kernels whose mangled names match a regular
expression, takes each kernel's largest backward branch as its main loop and
counts what one iteration executes (statically: every instruction between the
branch target and the branch), next to each kernel's registers and stack
frame (where ptxas puts spilled registers) from ``cuobjdump -res-usage``.
For mmvq that answers where the instructions of a wide launch go: per
(row, column) pair, how much is the column's own work and how much repeats
work that depends on the weights only.

    python3 benchmarks/sass_report.py mmvq.cu.o --kernel 'mul_mat_vec_qIL9ggml_type12E' \\
        --cuobjdump PATH --out sass.json

cuobjdump comes with the CUDA toolkit; where the toolkit has none, the one in
Triton's wheel (triton/backends/nvidia/bin/cuobjdump) reads sm_90 code too.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

RESOURCES = re.compile(r"Function (\S+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
BRANCH_TARGET = re.compile(r"0x([0-9a-f]+)")

KINDS = {
    "dp4a": ("IDP",),
    "load": ("LDG", "LDS", "LDC", "LD", "ULDC"),
    "float": ("FFMA", "FMUL", "FADD", "FMNMX", "FSEL"),
    "convert": ("I2F", "I2FP", "F2F", "F2I", "HADD2", "HMUL2", "HFMA2", "F2FP"),
    "shuffle": ("SHFL",),
    "store": ("STG", "STS", "ST"),
}


def kind_of(opcode: str) -> str:
    base = opcode.split(".")[0]
    for kind, prefixes in KINDS.items():
        if base in prefixes:
            return kind
    return "integer/other"


def split_functions(sass: str) -> dict[str, list[tuple[int, str, str]]]:
    functions: dict[str, list[tuple[int, str, str]]] = {}
    current = None
    for line in sass.splitlines():
        if "Function : " in line:
            current = line.split("Function : ", 1)[1].strip()
            functions[current] = []
        elif current is not None:
            match = INSTRUCTION.match(line)
            if match:
                functions[current].append((int(match[1], 16), match[2], match[3]))
    return functions


def main_loop(instructions: list[tuple[int, str, str]]) -> tuple[int, int] | None:
    """Address range of the largest loop: a branch to an earlier address.

    Code after a kernel's last EXIT is only reached by jumps (ptxas puts the divergent path of
    __syncwarp there, ending in a jump back into the loop), so a branch there is not a loop's."""
    exits = [address for address, opcode, _ in instructions if opcode == "EXIT"]
    end = max(exits) if exits else float("inf")
    loops = []
    for address, opcode, operands in instructions:
        if opcode.startswith("BRA") and address < end:
            target = BRANCH_TARGET.search(operands)
            if target and int(target[1], 16) < address:
                loops.append((address - int(target[1], 16), int(target[1], 16), address))
    return max(loops)[1:] if loops else None


def analyze(instructions: list[tuple[int, str, str]], operands: tuple[str, ...] = ()) -> dict:
    """The main loop's instructions by kind and opcode, and how many of them name each of `operands`."""
    loop = main_loop(instructions)
    report = {"static_instructions": len(instructions), "loop": None}
    if loop is None:
        return report
    body = [(opcode, args) for address, opcode, args in instructions if loop[0] <= address <= loop[1]]
    report["loop"] = {
        "instructions": len(body),
        "by_kind": dict(sorted(collections.Counter(kind_of(op) for op, _ in body).items())),
        "by_opcode": dict(collections.Counter(op for op, _ in body).most_common()),
    }
    if operands:
        report["loop"]["with_operand"] = {text: sum(1 for _, args in body if text in args) for text in operands}
    return report


def cuobjdump_output(binary: Path, cuobjdump: str, option: str) -> str:
    result = subprocess.run([cuobjdump, option, str(binary)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{cuobjdump} {option} {binary} failed (exit {result.returncode}): "
                           f"{result.stderr.strip()[-500:]}")
    return result.stdout


def resource_usage(text: str) -> dict[str, dict[str, int]]:
    """Registers, stack frame (spills land there), static shared and local memory per kernel, from -res-usage."""
    return {m[1]: {"registers": int(m[2]), "stack_bytes": int(m[3]), "shared_bytes": int(m[4]),
                   "local_bytes": int(m[5])} for m in RESOURCES.finditer(text)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary", type=Path, help="object file, cubin or shared library with sm_xx code")
    parser.add_argument("--kernel", required=True, help="regular expression on the mangled kernel names")
    parser.add_argument("--cuobjdump", default=os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump"),
                        help="cuobjdump to use (default: $CUOBJDUMP, else PATH)")
    parser.add_argument("--operand", action="append", default=[],
                        help="also count the loop's instructions whose operands contain this text, e.g. an "
                             "immediate such as 0x3f3f (repeatable)")
    parser.add_argument("--out", type=Path, help="write the counts as JSON here")
    args = parser.parse_args(argv)
    if not args.cuobjdump:
        parser.error("no cuobjdump: pass --cuobjdump or set CUOBJDUMP (Triton's wheel carries one)")
    if not args.binary.is_file():
        parser.error(f"{args.binary}: no such file")
    try:
        functions = split_functions(cuobjdump_output(args.binary, args.cuobjdump, "-sass"))
        resources = resource_usage(cuobjdump_output(args.binary, args.cuobjdump, "-res-usage"))
    except RuntimeError as error:
        print(f"sass_report: error: {error}", file=sys.stderr)
        return 2
    pattern = re.compile(args.kernel)
    reports = {name: {**analyze(body, tuple(args.operand)), "resources": resources.get(name)}
               for name, body in sorted(functions.items()) if pattern.search(name)}
    if not reports:
        print(f"sass_report: error: no kernel in {args.binary} matches {args.kernel!r} "
              f"({len(functions)} kernels read)", file=sys.stderr)
        return 2
    for name, report in reports.items():
        loop = report["loop"]
        summary = "no loop" if loop is None else f"loop {loop['instructions']:5d}: " + ", ".join(
            f"{kind} {count}" for kind, count in loop["by_kind"].items())
        registers = (report["resources"] or {}).get("registers", "?")
        print(f"{name[:72]:<72} regs {registers:>3}  {summary}")
    if args.out:
        args.out.write_text(json.dumps(reports, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
