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
    """Compare the cases every file has; a case some file lacks is listed as not compared.

    A stock build is usually smoked on fewer cases than the stack, so a case it
    lacks says nothing about whether plain decoding moved.
    """
    ref = fingerprints(reference)
    theirs_by_file = {other: fingerprints(other) for other in others}
    rows = []
    for key, prints in sorted(ref.items()):
        row = {"quant": key[0], "kv": key[1], reference.name: sorted(prints)}
        missing = [other.name for other, theirs in theirs_by_file.items() if key not in theirs]
        for other, theirs in theirs_by_file.items():
            row[other.name] = sorted(theirs[key]) if key in theirs else None
        if missing:
            row["identical"] = None
            row["missing_in"] = missing
        else:
            row["identical"] = len(prints) == 1 and all(theirs[key] == prints for theirs in theirs_by_file.values())
        rows.append(row)
    compared = [r for r in rows if r["identical"] is not None]
    if not compared:
        raise SystemExit(f"no case is in every file: {reference.name} and {', '.join(o.name for o in others)} share none")
    return {"reference": reference.name, "others": [o.name for o in others], "cases": rows,
            "compared": len(compared), "all_identical": all(r["identical"] for r in compared)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reference", type=Path)
    parser.add_argument("others", type=Path, nargs="+")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = compare(args.reference, args.others)
    for row in result["cases"]:
        verdict = {True: "identical", False: "DIFFERENT", None: f"not compared (missing in {', '.join(row.get('missing_in', []))})"}
        print(f"{row['quant']:<8} kv={row['kv']:<7} {verdict[row['identical']]}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["all_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
