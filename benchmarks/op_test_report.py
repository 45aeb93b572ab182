"""Turn the console output of test-backend-ops or test-batch-invariance into JSON.

    python3 benchmarks/op_test_report.py LOG.txt [LOG.txt ...] --out-dir DIR

For each log writes DIR/<log name>.json: every case with its verdict (and the
message test-backend-ops printed before a FAIL), the counts, and whether the
run reached its summary line (a run cut off by a time limit has no summary).
tests_passed/tests_total come from test-backend-ops' own summary and are the
numbers to quote: a case line garbled by interleaved logging is not counted
in "counts".
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;]*m")
CASE = re.compile(r"^(?P<message>.*?)\s*(?P<op>[A-Z][A-Z0-9_]+)\((?P<vars>.*)\): (?P<verdict>OK|FAIL|not supported.*)$")
TBI_CASE = re.compile(r"^\s+(?P<config>(MUL_MAT|FLASH_ATTN_EXT) .*?)\s+n=\s*(?P<n>\d+): (?P<verdict>identical|.* differ, max \|diff\| = (?P<max>\S+))$")


def parse(text: str) -> dict:
    text = ANSI.sub("", text)
    cases, tbi_cases = [], []
    for line in text.splitlines():
        m = CASE.match(line.strip())
        if m:
            case = {"op": m["op"], "vars": m["vars"], "verdict": m["verdict"]}
            if m["verdict"] == "FAIL" and m["message"]:
                case["message"] = m["message"]
            cases.append(case)
            continue
        m = TBI_CASE.match(line)
        if m:
            tbi_cases.append({"config": m["config"], "n": int(m["n"]),
                              "verdict": "identical" if m["verdict"] == "identical" else "differ",
                              **({"max_abs_diff": float(m["max"])} if m["max"] else {})})
    summary = [line.strip() for line in text.splitlines()
               if re.search(r"tests passed|backends passed|^Summary:|^OK:|^FAIL|^\S+: \d+ cases,|^real\s", line.strip())]
    report: dict = {"summary_lines": summary, "complete": bool(summary)}
    # The per-case lines can be interleaved with the backends' own logging, so the
    # authoritative counts are those of test-backend-ops' "N/M tests passed" line.
    passed = re.search(r"(\d+)/(\d+) tests passed", "\n".join(summary))
    if passed:
        report["tests_passed"], report["tests_total"] = int(passed[1]), int(passed[2])
    if cases:
        report["counts"] = dict(Counter(c["verdict"] for c in cases))
        report["cases"] = cases
    if tbi_cases:
        report["counts"] = dict(Counter(c["verdict"] for c in tbi_cases))
        report["cases"] = tbi_cases
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", type=Path, nargs="+")
    parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for log in args.logs:
        report = {"log": log.name, **parse(log.read_text(errors="replace"))}
        out = args.out_dir / (log.stem + ".json")
        out.write_text(json.dumps(report, indent=1) + "\n")
        print(f"{out}: {report.get('counts')} complete={report['complete']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
