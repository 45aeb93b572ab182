"""Compare two recorded hiraishin-llama-bench results per quantization and batch size.

    python3 benchmarks/compare_bench.py OLD.json NEW.json [--out RESULT.json]

OLD and NEW are files under benchmarks/results/ written by record.py (their
"raw" holds one or more bench reports). Prints exact and stock pass times of
NEW against OLD for every b both measured, and flags a slower exact pass
(more than --threshold, default 5%).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def verify_times(record: dict) -> dict[str, dict[int, dict]]:
    """quantization -> b -> the verify entry, over every bench report in the record."""
    times: dict[str, dict[int, dict]] = {}
    for report in record["raw"].values():
        for quant, result in report.get("results", {}).items():
            times.setdefault(quant, {}).update({entry["b"]: entry for entry in result["verify"]})
    return times


def compare(old: dict, new: dict, threshold: float) -> dict:
    rows = []
    old_times, new_times = verify_times(old), verify_times(new)
    for quant in sorted(set(old_times) & set(new_times)):
        for b in sorted(set(old_times[quant]) & set(new_times[quant])):
            o, n = old_times[quant][b], new_times[quant][b]
            exact_change = n["exact_ms"] / o["exact_ms"] - 1
            rows.append({
                "quant": quant, "b": b,
                "exact_ms": {"old": o["exact_ms"], "new": n["exact_ms"], "change": round(exact_change, 4)},
                "stock_ms": {"old": o["stock_ms"], "new": n["stock_ms"], "change": round(n["stock_ms"] / o["stock_ms"] - 1, 4)},
                "ratio": {"old": round(o["ratio"], 4), "new": round(n["ratio"], 4)},
                "exact_regression": exact_change > threshold,
            })
    return {"old": old["name"], "new": new["name"], "threshold": threshold, "rows": rows,
            "exact_regressions": [f"{r['quant']} b={r['b']}" for r in rows if r["exact_regression"]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--threshold", type=float, default=0.05)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = compare(json.loads(args.old.read_text()), json.loads(args.new.read_text()), args.threshold)
    for row in result["rows"]:
        e, s = row["exact_ms"], row["stock_ms"]
        print(f"{row['quant']:7s} b={row['b']:2d}  exact {e['old']:7.3f} -> {e['new']:7.3f} ms ({100 * e['change']:+5.1f}%)"
              f"  stock {s['old']:7.3f} -> {s['new']:7.3f} ms ({100 * s['change']:+5.1f}%)"
              f"  exact/stock {row['ratio']['old']:.3f} -> {row['ratio']['new']:.3f}{'  SLOWER' if row['exact_regression'] else ''}")
    print(f"exact passes slower by more than {100 * args.threshold:.0f}%: {', '.join(result['exact_regressions']) or 'none'}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
