#!/usr/bin/env python3
"""Where one verify pass spends its time, exact against stock: the kernels of one pass, grouped.

perf_session.sh timeline runs hiraishin-replay bench under Nsight Compute (kernel durations only) with
--reps 3 --warmup 0 for one batch size, so the run ends with three timed passes of the same kernels.
This finds that pass (the shortest kernel sequence the run's end repeats three times over: launches
of the same kernels with the same grids), sums its launches' durations per kernel family, and puts
the exact and stock passes of each batch size side by side:

    python3 benchmarks/ncu_timeline.py timeline-qwen3moe-b4-exact.csv timeline-qwen3moe-b4-stock.csv ... \\
        --out summary.json

A file's name says its batch size and mode (...-b<N>-exact.csv, ...-b<N>-stock.csv). The durations are
ncu's kernel replays (each launch alone, caches flushed), so their sum is more than the pass's wall
time; what they show is which kernels grow with b, and by how much more in one mode than the other.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ncu_report import ReportError, read_rows, summarize_rows  # noqa: E402

NAME = re.compile(r"-b(?P<b>\d+)-(?P<mode>exact|stock)\.csv$")
REPEATS = 3
"""Timed passes at the end of the run: perf_session.sh timeline passes --reps 3."""


def family(kernel: str) -> str:
    """'mul_mat_vec_q<(ggml_type)12, 1, 0>' -> 'mul_mat_vec_q': the kernel without its template arguments."""
    return kernel.split("<")[0].strip()


def last_pass(launches: list[dict], repeats: int = REPEATS) -> list[dict]:
    """The launches of the last pass: the shortest tail that the run repeats `repeats` times at its end and
    that starts with the kernel every decode starts with (the run's first: the token embedding lookup), so
    that a few alike launches at the end of a pass are not taken for a whole one."""
    keys = [(launch["kernel"], launch["grid"]) for launch in launches]
    for period in range(1, len(keys) // repeats + 1):
        tail = keys[len(keys) - period:]
        if tail[0][0] != keys[0][0]:
            continue
        if all(keys[len(keys) - (k + 1) * period:len(keys) - k * period] == tail for k in range(1, repeats)):
            return launches[len(launches) - period:]
    raise ReportError(f"the last {repeats} passes are not alike in these {len(launches)} launches: was the run "
                      f"hiraishin-replay bench --reps {repeats} --warmup 0 with one batch size, all kernels profiled?")


def pass_summary(launches: list[dict]) -> dict:
    by_family: dict[str, dict] = defaultdict(lambda: {"launches": 0, "us": 0.0})
    for launch in launches:
        entry = by_family[family(launch["kernel"])]
        entry["launches"] += 1
        entry["us"] += float(launch.get("duration_us", 0.0))
    # each launch too, in order: a family's launches (an expert product's gate/up and down) can differ a lot
    in_order = [{"kernel": launch["kernel"].split("(")[0], "grid": launch["grid"], "block": launch.get("block"),
                 "us": float(launch.get("duration_us", 0.0))} for launch in launches]
    return {"launches": len(launches), "us": sum(entry["us"] for entry in by_family.values()),
            "families": dict(sorted(by_family.items(), key=lambda item: -item[1]["us"])), "in_order": in_order}


def read_pass(path: Path) -> dict:
    launches = summarize_rows(read_rows(path))
    if any("duration_us" not in launch for launch in launches):
        raise ReportError(f"{path}: a launch without its duration; run ncu with --metrics gpu__time_duration.sum "
                          "or --section SpeedOfLight")
    return pass_summary(last_pass(launches))


def compare(paths: list[Path]) -> dict[int, dict[str, dict]]:
    """{b: {"exact": pass summary, "stock": pass summary}} from files named ...-b<N>-<mode>.csv."""
    passes: dict[int, dict[str, dict]] = defaultdict(dict)
    for path in paths:
        match = NAME.search(path.name)
        if not match:
            raise ReportError(f"{path}: the name does not say its batch size and mode (...-b<N>-exact.csv or "
                              "...-b<N>-stock.csv)")
        passes[int(match["b"])][match["mode"]] = read_pass(path)
    return dict(sorted(passes.items()))


def render(passes: dict[int, dict[str, dict]]) -> str:
    lines = []
    for b, modes in passes.items():
        exact, stock = modes.get("exact"), modes.get("stock")
        lines.append(f"b = {b}: exact {exact['us']:.1f} us in {exact['launches']} launches" if exact else f"b = {b}:")
        if stock:
            lines[-1] += f", stock {stock['us']:.1f} us in {stock['launches']} launches"
        names = list(dict.fromkeys([*(exact or {}).get("families", {}), *(stock or {}).get("families", {})]))
        lines.append(f"  {'kernel':<40} {'exact us':>10} {'n':>4} {'stock us':>10} {'n':>4}")
        for name in names:
            e = (exact or {}).get("families", {}).get(name, {"us": 0.0, "launches": 0})
            s = (stock or {}).get("families", {}).get(name, {"us": 0.0, "launches": 0})
            lines.append(f"  {name[:40]:<40} {e['us']:>10.1f} {e['launches']:>4} {s['us']:>10.1f} {s['launches']:>4}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", nargs="+", type=Path, help="ncu --csv --page details output, one file per b and mode")
    parser.add_argument("--out", type=Path, help="write the comparison as JSON here")
    args = parser.parse_args(argv)
    try:
        passes = compare(args.csv)
    except (OSError, ReportError) as error:
        print(f"ncu_timeline.py: error: {error}", file=sys.stderr)
        return 2
    print(render(passes))
    if args.out:
        args.out.write_text(json.dumps({str(b): modes for b, modes in passes.items()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
