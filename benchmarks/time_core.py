"""Time the core commands on this machine and write the raw numbers as JSON.

    python3 benchmarks/time_core.py --from /path/to/mirror [--runs 5] [--out benchmarks/results/core-timing.json]

Fills a fresh cache in a temporary directory from the given source (so the
fetch is measured cold), then times `hiraishin patches check` with that cache
warm, and `hiraishin patches apply` + `export` into a temporary work tree.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(args: list[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "hiraishin_build.cli", *args], cwd=ROOT, env=env, check=True,
                   capture_output=True, text=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", required=True, help="local mirror of the upstream")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "core-timing.json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hiraishin-bench-") as scratch:
        env = {**os.environ, "HIRAISHIN_CACHE_DIR": str(Path(scratch) / "cache")}
        fetch_s = timed(["upstream", "fetch", "--from", args.source], env)
        cache_bytes = sum(p.stat().st_size for p in (Path(scratch) / "cache").rglob("*") if p.is_file())
        check_s = [timed(["patches", "check"], env) for _ in range(args.runs)]
        workdir = Path(scratch) / "work"
        apply_s = timed(["patches", "apply", "--workdir", str(workdir)], env)
        export_s = timed(["patches", "export", "--workdir", str(workdir)], env)
        shutil.rmtree(workdir)

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    result = {
        "benchmark": "core-timing",
        "command": f"python3 benchmarks/time_core.py --from {args.source} --runs {args.runs}",
        "commit": commit,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": {"cpus": os.cpu_count(), "machine": platform.machine(), "system": platform.platform(),
                   "python": platform.python_version(), "git": git_version},
        "patches": len([line for line in (ROOT / "patches" / "series").read_text().splitlines() if line.strip()]),
        "upstream_fetch_cold_s": round(fetch_s, 3),
        "cache_bytes": cache_bytes,
        "patches_check_s": [round(s, 3) for s in check_s],
        "patches_check_median_s": round(statistics.median(check_s), 3),
        "patches_apply_s": round(apply_s, 3),
        "patches_export_s": round(export_s, 3),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
