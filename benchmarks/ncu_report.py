#!/usr/bin/env python3
"""Summarize Nsight Compute CSV output (``ncu --csv --page details``) per kernel launch.

perf_session.sh ncu writes one CSV per mode (exact, stock) and kernel family; the
program's own output is interleaved with ncu's rows, which all start with a quote.
This keeps the metrics that say what bounds a kernel (duration, registers and
occupancy, issue and memory throughput, latency hiding) and writes them as JSON,
one entry per launch, with a table on stdout.

    python3 benchmarks/ncu_report.py ncu-matmul-exact.csv ncu-matmul-stock.csv --out summary.json
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
from pathlib import Path

# (section, metric) -> key in the summary
METRICS = {
    ("GPU Speed Of Light Throughput", "Duration"): "duration_us",
    # --metrics gpu__time_duration.sum: the duration alone, one replay pass per launch (a whole run's timeline)
    ("Command line profiler metrics", "gpu__time_duration.sum"): "duration_us",
    ("GPU Speed Of Light Throughput", "Compute (SM) Throughput"): "sm_throughput_pct",
    ("GPU Speed Of Light Throughput", "Memory Throughput"): "memory_throughput_pct",
    ("GPU Speed Of Light Throughput", "DRAM Throughput"): "dram_throughput_pct",
    ("GPU Speed Of Light Throughput", "L1/TEX Cache Throughput"): "l1_throughput_pct",
    ("GPU Speed Of Light Throughput", "L2 Cache Throughput"): "l2_throughput_pct",
    ("Compute Workload Analysis", "Issue Slots Busy"): "issue_slots_busy_pct",
    ("Compute Workload Analysis", "Executed Ipc Active"): "executed_ipc_active",
    ("Scheduler Statistics", "No Eligible"): "no_eligible_warp_pct",
    ("Scheduler Statistics", "Eligible Warps Per Scheduler"): "eligible_warps_per_scheduler",
    ("Warp State Statistics", "Warp Cycles Per Issued Instruction"): "warp_cycles_per_issued_instruction",
    ("Launch Statistics", "Registers Per Thread"): "registers_per_thread",
    ("Launch Statistics", "Block Size"): "block_size",
    ("Launch Statistics", "Grid Size"): "grid_size",
    ("Launch Statistics", "Static Shared Memory Per Block"): "static_shared_bytes",
    ("Occupancy", "Theoretical Occupancy"): "theoretical_occupancy_pct",
    ("Occupancy", "Achieved Occupancy"): "achieved_occupancy_pct",
    ("Occupancy", "Block Limit Registers"): "block_limit_registers",
}
# What a kernel under development is read for besides (kernel_session_report.py): issue rate, work, cache hits, spills.
DETAIL_METRICS = {
    **METRICS,
    ("GPU Speed Of Light Throughput", "SM Frequency"): "sm_frequency_hz",
    ("Launch Statistics", "# SMs"): "sms",
    ("Scheduler Statistics", "Issued Warp Per Scheduler"): "issued_warps_per_scheduler",
    ("Scheduler Statistics", "Active Warps Per Scheduler"): "active_warps_per_scheduler",
    ("Instruction Statistics", "Executed Instructions"): "executed_instructions",
    ("Memory Workload Analysis", "L1/TEX Hit Rate"): "l1_hit_rate_pct",
    ("Memory Workload Analysis", "L2 Hit Rate"): "l2_hit_rate_pct",
    ("Memory Workload Analysis", "Local Memory Spilling Requests"): "local_spill_requests",
}


# --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio': the cycles a warp spends in each
# stall reason per instruction it issues (their sum is about "Warp Cycles Per Issued Instruction")
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio")


class ReportError(ValueError):
    pass


def read_rows(path: Path) -> list[dict[str, str]]:
    return parse_rows(path.read_text(errors="replace"), str(path))


def parse_rows(text: str, where: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines(keepends=True) if line.startswith('"')]
    if not lines or not lines[0].startswith('"ID"'):
        raise ReportError(f"{where}: no ncu CSV rows (expected a header starting with \"ID\"); "
                          "was ncu run with --csv --page details, and did it profile any kernel?")
    return list(csv.DictReader(io.StringIO("".join(lines))))


def number(text: str) -> float | str:
    cleaned = text.replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return text


def short_name(kernel: str) -> str:
    """'void mul_mat_vec_q<12, 16, 0, 0, 1>(const void *, ...)' -> 'mul_mat_vec_q<12, 16, 0, 0, 1>'."""
    return re.sub(r"^void\s+", "", kernel.split("(")[0]).strip()


def summarize(path: Path) -> list[dict]:
    return summarize_rows(read_rows(path))


def summarize_rows(rows: list[dict[str, str]], metrics: dict[tuple[str, str], str] = METRICS,
                   stalls: bool = False) -> list[dict]:
    """With stalls, also the stall reasons of --metrics (STALL) as stall_REASON_cycles_per_instruction."""
    launches: dict[str, dict] = {}
    for row in rows:
        launch = launches.setdefault(row["ID"], {"id": int(row["ID"]), "kernel": short_name(row["Kernel Name"]),
                                                 "block": row["Block Size"], "grid": row["Grid Size"]})
        key = metrics.get((row["Section Name"], row["Metric Name"]))
        stall = STALL.fullmatch(row["Metric Name"]) if stalls else None
        if stall:
            key = f"stall_{stall[1]}_cycles_per_instruction"
        if key:
            value = number(row["Metric Value"])
            if key == "duration_us" and isinstance(value, float):
                unit = row["Metric Unit"]
                # the section's units are ns/us/ms, a --metrics column's nsecond/usecond/msecond
                value = (value / 1000.0 if unit in ("ns", "nsecond") else
                         value * 1000.0 if unit in ("ms", "msecond") else value)
            launch[key] = value
    return sorted(launches.values(), key=lambda launch: launch["id"])


def render(name: str, launches: list[dict]) -> str:
    header = (f"{'kernel':<44} {'grid':>14} {'us':>8} {'regs':>5} {'occ%':>6} {'SM%':>6} {'issue%':>7} "
              f"{'DRAM%':>6} {'L1%':>6} {'noElig%':>8}")
    lines = [name, header]
    for launch in launches:
        lines.append(
            f"{launch['kernel'][:44]:<44} {launch['grid']:>14} {launch.get('duration_us', float('nan')):>8.1f} "
            f"{launch.get('registers_per_thread', 0):>5.0f} {launch.get('achieved_occupancy_pct', 0):>6.1f} "
            f"{launch.get('sm_throughput_pct', 0):>6.1f} {launch.get('issue_slots_busy_pct', 0):>7.1f} "
            f"{launch.get('dram_throughput_pct', 0):>6.1f} {launch.get('l1_throughput_pct', 0):>6.1f} "
            f"{launch.get('no_eligible_warp_pct', 0):>8.1f}")
    total = sum(launch.get("duration_us", 0.0) for launch in launches)
    lines.append(f"{'total':<44} {'':>14} {total:>8.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", nargs="+", type=Path, help="ncu --csv --page details output files")
    parser.add_argument("--out", type=Path, help="write the summary as JSON here")
    args = parser.parse_args(argv)
    summary = {}
    try:
        for path in args.csv:
            summary[path.name] = summarize(path)
            print(render(path.name, summary[path.name]) + "\n")
    except (OSError, ReportError) as error:
        print(f"ncu_report: error: {error}", file=sys.stderr)
        return 2
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
