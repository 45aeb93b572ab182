"""Did plain one-token decoding move? Compare the plain-decoding fingerprints of smoke reports.

    python3 benchmarks/compare_plain.py REFERENCE.json OTHER.json [...] [--json OUT]

Each file is a hiraishin-llama-smoke report (or a record.py result holding one
under "raw"). Every case's replay report carries plain.tokens_fnv1a64 and
plain.logits_fnv1a64: the bytes of the tokens and logits of decoding one token
at a time. Cases are matched by model quantization and KV type; the switch
does not enter the key, because plain decoding must not depend on it either.
Exit status 0 when every fingerprint of every file equals the reference's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def smoke_reports(data: dict) -> list[dict]:
    if "cases" in data:
        return [data]
    return [r for value in data.get("raw", {}).values() if isinstance(value, dict) for r in smoke_reports(value)]


def fingerprints(path: Path) -> dict[tuple[str, str], set[tuple[str, str]]]:
    found: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for report in smoke_reports(json.loads(path.read_text())):
        for case in report["cases"]:
            plain = (case.get("report") or {}).get("plain") or {}
            if "logits_fnv1a64" not in plain:
                continue
            key = (case["quant"], case["kv"])
            found.setdefault(key, set()).add((plain["tokens_fnv1a64"], plain["logits_fnv1a64"]))
    if not found:
        raise SystemExit(f"{path}: no plain-decoding fingerprints (made before hiraishin-replay wrote them?)")
    return found


def compare(reference: Path, others: list[Path]) -> dict:
    ref = fingerprints(reference)
    rows = []
    for key, prints in sorted(ref.items()):
        row = {"quant": key[0], "kv": key[1], reference.name: sorted(prints)}
        same = len(prints) == 1
        for other in others:
            theirs = fingerprints(other).get(key)
            row[other.name] = sorted(theirs) if theirs else None
            same = same and theirs == prints
        row["identical"] = same
        rows.append(row)
    return {"reference": reference.name, "others": [o.name for o in others], "cases": rows,
            "all_identical": all(r["identical"] for r in rows)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reference", type=Path)
    parser.add_argument("others", type=Path, nargs="+")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = compare(args.reference, args.others)
    for row in result["cases"]:
        print(f"{row['quant']:<8} kv={row['kv']:<7} {'identical' if row['identical'] else 'DIFFERENT'}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["all_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
