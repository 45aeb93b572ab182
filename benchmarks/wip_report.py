#!/usr/bin/env python3
"""Turn what benchmarks/device/wip_kernel_session.sh left in $OUT into one JSON report.

    python3 benchmarks/wip_report.py OUT_DIR --out report.json

OUT_DIR holds summary.txt and logs.tar.gz (the session packs every other log into
it, since a device call returns at most 8 files) or the unpacked logs. The report
has, per log: the batch-invariance op tests (tbo-bi-1, tbo-bi-0, tbo-bi-fault;
benchmarks/op_test_report.py), the perf cases' times in us (perf-1 switch on,
perf-0 switch off, perf-variant-NAME the variants, switch on) with whether the run
reached its end (a run cut off by its time limit times only the first cases), and
the Nsight Compute launches (ncu-bi-mma-N.csv; benchmarks/ncu_report.py). Record
it with benchmarks/record.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PERF_CASE = re.compile(r"MUL_MAT\((type_a=[^,]+,type_b=[^,]+,m=\d+,n=\d+,k=\d+)")
PERF_TIME = re.compile(r"([0-9.]+) us/run")


class ReportError(ValueError):
    pass


def _sibling(name: str):
    """The other report scripts of benchmarks/, which are files rather than a package."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse_perf(text: str) -> dict:
    """test-backend-ops perf output: a case's name, and its time on that line or a later one (the CUDA backend's
    logging can come between them). A time belongs to the last case named before it."""
    times: dict[str, float] = {}
    case = None
    for line in ANSI.sub("", text).splitlines():
        named = PERF_CASE.search(line)
        if named:
            case = named[1]
        timed = PERF_TIME.search(line)
        if timed and case is not None and case not in times:
            times[case] = float(timed[1])
    return {"complete": "backends passed" in text, "us": times}


def read_logs(out_dir: Path) -> dict[str, str]:
    """Every log of the session by file name: the archive's members and the files beside it."""
    logs: dict[str, str] = {}
    archive = out_dir / "logs.tar.gz"
    if archive.exists():
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    logs[Path(member.name).name] = tar.extractfile(member).read().decode(errors="replace")
    for path in sorted(out_dir.iterdir()):
        if path.is_file() and path.name != "logs.tar.gz":
            logs[path.name] = path.read_text(errors="replace")
    if "summary.txt" not in logs:
        raise ReportError(f"{out_dir}: no summary.txt; is this the output directory of wip_kernel_session.sh?")
    return logs


def report(out_dir: Path) -> dict:
    op_test_report = _sibling("op_test_report")
    ncu_report = _sibling("ncu_report")
    logs = read_logs(out_dir)
    result: dict = {"gpu": logs.get("gpu.txt", "").strip(), "op_tests": {}, "perf": {}, "ncu": {}}
    for name, text in sorted(logs.items()):
        stem = name.rsplit(".", 1)[0]
        if name.startswith("tbo-bi-") and name.endswith(".txt"):
            parsed = op_test_report.parse(text)
            result["op_tests"][stem] = {key: parsed[key] for key in ("tests_passed", "tests_total", "complete")
                                        if key in parsed}
            result["op_tests"][stem]["failed"] = [case["vars"] for case in parsed.get("cases", [])
                                                  if case["verdict"] == "FAIL"]
        elif name.startswith("perf-") and name.endswith(".txt"):
            result["perf"][stem] = parse_perf(text)
        elif name.startswith("ncu-") and name.endswith(".csv"):
            rows = ncu_report.parse_rows(text, f"{out_dir}: {name}")
            result["ncu"][stem] = ncu_report.summarize_rows(rows, ncu_report.DETAIL_METRICS, stalls=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="what wip_kernel_session.sh left in $OUT")
    parser.add_argument("--out", type=Path, required=True, help="write the report here")
    args = parser.parse_args(argv)
    try:
        data = report(args.out_dir)
    except (OSError, tarfile.TarError, ValueError) as error:  # ReportError here and in ncu_report
        print(f"wip_report: error: {error}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    for stem, perf in data["perf"].items():
        print(f"{stem}: {len(perf['us'])} cases{'' if perf['complete'] else ' (cut off before the end)'}")
    for stem, tests in data["op_tests"].items():
        print(f"{stem}: {tests.get('tests_passed')}/{tests.get('tests_total')} passed, {len(tests['failed'])} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
