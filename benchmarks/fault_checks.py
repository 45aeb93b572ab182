"""Plant known faults and show which tests catch them, before and after the tests were written.

    python3 benchmarks/fault_checks.py [--before REV] [--out benchmarks/results/tool-fault-checks.json]

Each fault is a committed diff (benchmarks/faults/tool/*.diff for the Python tool,
benchmarks/faults/replay/*.diff for the replay tool's comparison). For each one,
in a scratch copy of the working tree (never in place):

- before: the tests as they were at REV, with the fault (a hole when they pass);
- after: the tests as they are now, with the fault (they must fail);
- clean: the tests as they are now, without the fault (they must pass).

The summary line of each pytest run is recorded, with the tests that failed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation import scratch_copy  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ROOT / "benchmarks" / "faults"

NOTES = {
    "tool/sdist-unfixed-times.diff": "before depends on the clock: the old test compared two builds, which look "
                                     "identical when both fall in the same second (3 of 3 runs passed on a fast "
                                     "machine); the new test reads the member times and the gzip header itself",
}

# fault diff -> (what it does, the tests that exist for it)
CHECKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "tool/sdist-stack-revision-1.diff": (
        "sdist.stack_revision() returns 1 instead of the stack-revision in wheels/pyproject.toml (6)",
        ("tests/unit/test_sdist.py",)),
    "tool/sdist-unfixed-times.diff": (
        "sdist members carry the current time and the gzip header its own (mtime=None)",
        ("tests/unit/test_sdist.py",)),
    "tool/repair-no-checks.diff": (
        "repair_wheel without its ELF checks and size budget",
        ("tests/unit/test_repair.py", "tests/unit/test_index.py", "tests/unit/test_smoke.py",
         "tests/unit/test_recipe.py")),
    "tool/doctor-finds-no-libraries.diff": (
        "doctor's library detection finds nothing",
        ("tests/unit/test_doctor.py", "tests/unit/test_recipe.py")),
    "replay/compare-one-float-fewer.diff": (
        "hiraishin-replay compares n_vocab - 1 floats of each position",
        ("tests/wheels/test_replay_compare.py", "tests/wheels/test_tools.py")),
    "replay/ignore-last-position.diff": (
        "hiraishin-replay's tally leaves out the last compared position",
        ("tests/wheels/test_replay_compare.py", "tests/wheels/test_tools.py")),
    "replay/compare-with-tolerance.diff": (
        "hiraishin-replay compares logits with a tolerance of 1e-6 instead of bit for bit",
        ("tests/wheels/test_replay_compare.py", "tests/wheels/test_tools.py")),
}


def pytest_run(work: Path, python: str, tests: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
    present = [t for t in tests if (work / t).is_file()]
    if not present:
        return {"tests": tests, "summary": "no such tests", "failed": [], "exit": None}
    completed = subprocess.run(["nice", python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *present],
                               cwd=work, env=env, capture_output=True, text=True)
    lines = completed.stdout.strip().splitlines()
    summary = next((line.strip("= ") for line in reversed(lines) if re.search(r"\d+ (passed|failed|skipped)", line)),
                   lines[-1] if lines else "")
    failed = sorted({line.split()[1] for line in lines if line.startswith("FAILED ")})
    return {"tests": present, "exit": completed.returncode, "summary": re.sub(r" in [\d.]+s.*$", "", summary),
            "failed": failed}


def with_tests_from(work: Path, rev: str) -> None:
    shutil.rmtree(work / "tests")
    archive = subprocess.run(["git", "archive", rev, "tests"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(work)], input=archive, check=True)


def apply(work: Path, diff: Path) -> None:
    subprocess.run(["git", "apply", str(diff)], cwd=work, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="e02b3d1", help="the revision whose tests had the holes")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "tool-fault-checks.json")
    parser.add_argument("faults", nargs="*", default=list(CHECKS))
    args = parser.parse_args()
    records = []
    for name in args.faults:
        what, tests = CHECKS[name]
        diff = FAULTS / name
        record = {"fault": name, "what": what, "diff": f"benchmarks/faults/{name}"}
        if name in NOTES:
            record["note"] = NOTES[name]
        for stage in ("before", "after", "clean"):
            with tempfile.TemporaryDirectory(prefix="hiraishin-fault-") as scratch:
                work = Path(scratch)
                scratch_copy(work)
                if stage == "before":
                    with_tests_from(work, args.before)
                if stage != "clean":
                    try:
                        apply(work, diff)
                    except subprocess.CalledProcessError:
                        record[stage] = {"summary": "the fault does not apply to this tree", "failed": []}
                        continue
                record[stage] = pytest_run(work, args.python, list(tests))
        record["caught"] = bool(record["after"].get("failed")) and record["clean"].get("exit") == 0
        record["hole_before"] = record["before"].get("exit") == 0
        print(f"{name}: before {record['before']['summary']}; after {record['after']['summary']}; "
              f"clean {record['clean']['summary']}", flush=True)
        records.append(record)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if args.out.is_file():  # a run of some faults keeps the records of the others
        kept = [r for r in json.loads(args.out.read_text())["faults"] if r["fault"] not in args.faults]
        records = sorted(kept + records, key=lambda r: list(CHECKS).index(r["fault"]))
    document = {
        "name": "tool-fault-checks",
        "commit": commit,
        "tests_before_from": args.before,
        "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.node()}: {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}",
        "command": "python3 benchmarks/fault_checks.py " + " ".join(sys.argv[1:]),
        "faults": records,
        "all_caught": all(r["caught"] for r in records),
    }
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(args.out)
    sys.exit(0 if document["all_caught"] else 1)


if __name__ == "__main__":
    main()
