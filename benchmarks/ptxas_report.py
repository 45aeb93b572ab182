"""The registers, stack and spills of each kernel in an nvcc ``-Xptxas -v`` log, as JSON.

    python3 benchmarks/ptxas_report.py LOG [--match REGEX] [--out FILE]

ptxas prints, per kernel: "Compiling entry function 'MANGLED' for 'sm_90'", then its stack frame and spill
bytes, then "Used N registers". Each kernel becomes {"mangled", "kernel" (demangled by c++filt where it is on
PATH), "arch", "registers", "stack", "spill_stores", "spill_loads"}; --match keeps the kernels whose
demangled (or mangled) name matches. How a candidate kernel's registers compare with the stack's is the
question this answers without a GPU.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ENTRY = re.compile(r"Compiling entry function '(?P<mangled>[^']+)' for '(?P<arch>[^']+)'")
FRAME = re.compile(r"(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads")
USED = re.compile(r"Used (?P<registers>\d+) registers")


def parse(text: str) -> list[dict]:
    kernels: list[dict] = []
    for line in text.splitlines():
        if m := ENTRY.search(line):
            kernels.append({"mangled": m["mangled"], "arch": m["arch"]})
        elif kernels and (m := FRAME.search(line)):
            kernels[-1].update(stack=int(m["stack"]), spill_stores=int(m["stores"]), spill_loads=int(m["loads"]))
        elif kernels and (m := USED.search(line)):
            kernels[-1]["registers"] = int(m["registers"])
    incomplete = [k["mangled"] for k in kernels if "registers" not in k or "stack" not in k]
    if incomplete:
        raise ValueError(f"ptxas log without the registers or stack line of {len(incomplete)} kernel(s), first "
                         f"{incomplete[0]}: was it compiled with -Xptxas -v, and is the log whole?")
    return kernels


def demangle(kernels: list[dict]) -> None:
    names = [k["mangled"] for k in kernels]
    if shutil.which("c++filt") and names:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
        names = out.splitlines()
    for kernel, name in zip(kernels, names):
        kernel["kernel"] = name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path)
    parser.add_argument("--match", help="keep the kernels whose name matches this regex")
    parser.add_argument("--out", type=Path, help="write the JSON here (default: stdout)")
    args = parser.parse_args(argv)
    try:
        kernels = parse(args.log.read_text())
    except (OSError, ValueError) as error:
        print(f"error: {args.log}: {error}", file=sys.stderr)
        return 2
    demangle(kernels)
    if args.match:
        pattern = re.compile(args.match)
        kernels = [k for k in kernels if pattern.search(k["kernel"]) or pattern.search(k["mangled"])]
    text = json.dumps({"log": args.log.name, "kernels": kernels}, indent=1) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
