"""Wrap raw device output into a results file with the facts that make it comparable.

    python3 benchmarks/record.py NAME RAW.json --command "..." [--sdist F] [--extra K=V ...]

Writes benchmarks/results/NAME.json: the raw report under "raw", plus the
repository commit, the sdist's sha256, the command that produced it, and the
date it was recorded.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name")
    parser.add_argument("raw", type=Path, nargs="+", help="raw JSON file(s) from the run")
    parser.add_argument("--command", required=True, help="the command that produced it, as run")
    parser.add_argument("--device", required=True, help="the machine, in words")
    parser.add_argument("--sdist", type=Path, help="the sdist the wheel was built from")
    parser.add_argument("--extra", action="append", default=[], help="KEY=VALUE facts to add")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    record = {
        "name": args.name,
        "commit": commit,
        "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": args.device,
        "command": args.command,
    }
    if args.sdist:
        record["sdist"] = {"name": args.sdist.name, "sha256": hashlib.sha256(args.sdist.read_bytes()).hexdigest()}
    for item in args.extra:
        key, _, value = item.partition("=")
        record[key] = value
    record["raw"] = {path.name: json.loads(path.read_text()) for path in args.raw}
    out = ROOT / "benchmarks" / "results" / f"{args.name}.json"
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(out)


if __name__ == "__main__":
    main()
