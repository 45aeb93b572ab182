#!/usr/bin/env python3
"""Turn what benchmarks/device/kernel_session.sh left in $OUT into one JSON report.

    python3 benchmarks/kernel_session_report.py OUT_DIR --out report.json

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
import json
import re
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ncu_report  # noqa: E402
import op_test_report  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PERF_CASE = re.compile(r"MUL_MAT\((type_a=[^,]+,type_b=[^,]+,m=\d+,n=\d+,k=\d+)")
PERF_TIME = re.compile(r"([0-9.]+) us/run")


class ReportError(ValueError):
    pass


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
        raise ReportError(f"{out_dir}: no summary.txt; is this the output directory of kernel_session.sh?")
    return logs


def report(out_dir: Path) -> dict:
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
    parser.add_argument("out_dir", type=Path, help="what kernel_session.sh left in $OUT")
    parser.add_argument("--out", type=Path, required=True, help="write the report here")
    args = parser.parse_args(argv)
    try:
        data = report(args.out_dir)
    except (OSError, tarfile.TarError, ValueError) as error:  # ReportError here and in ncu_report
        print(f"kernel_session_report: error: {error}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(render(data))
    return 0


def render(data: dict) -> str:
    """What a reader of the device call's output looks at: counts, failed cases, times, and per profiled launch its
    time, registers, occupancy, issue rate and long-scoreboard wait."""
    lines = []
    for stem, tests in data["op_tests"].items():
        lines.append(f"{stem}: {tests.get('tests_passed')}/{tests.get('tests_total')} passed, "
                     f"{len(tests['failed'])} failed")
        lines += [f"  FAIL {case}" for case in tests["failed"][:60]]
    for stem, perf in data["perf"].items():
        lines.append(f"{stem}: {len(perf['us'])} cases{'' if perf['complete'] else ' (cut off before the end)'}")
        lines += [f"  {case} {us:.2f} us" for case, us in perf["us"].items()]
    for stem, launches in data["ncu"].items():
        lines.append(f"{stem}:")
        lines += [f"  {launch['kernel'][:48]:<48} {launch.get('duration_us', float('nan')):8.1f} us "
                  f"regs {launch.get('registers_per_thread', 0):.0f} occ {launch.get('achieved_occupancy_pct', 0):.1f}% "
                  f"issue/sched {launch.get('issued_warps_per_scheduler', 0):.2f} "
                  f"long-scoreboard {launch.get('stall_long_scoreboard_cycles_per_instruction', 0):.2f} "
                  f"of {launch.get('warp_cycles_per_issued_instruction', 0):.2f} cycles/instr"
                  for launch in launches]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
