"""Which tests kill the mutants an earlier mutation run left alive.

    python3 benchmarks/mutation_killers.py MODULE --before REV --scratch DIR [--python PY]

REV is the commit whose ``benchmarks/results/mutation-MODULE.json`` lists the
earlier survivors; DIR is the scratch copy a later ``benchmarks/mutation.py
MODULE --keep`` (or ``--reuse``) run left (its mutmut cache and line-tests.json).
Each earlier survivor is found among the later run's mutants by its diff (the
line removed and the line added); each one found is applied in DIR and the
tests that ran its line (all of the module's tests for a line no test ran in
process) are run without stopping at the first failure: the ones that fail
kill it. A survivor whose line is gone from the module is said to be so.

Writes the answers into the "killed" section of benchmarks/mutation-verdicts.json
(module -> list of {"mutant", "status", "tests"}), where "mutant" is the earlier
diff's removed and added line.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERDICTS = ROOT / "benchmarks" / "mutation-verdicts.json"


def changed_lines(diff: str) -> tuple[str, str]:
    removed = [t[1:].strip() for t in diff.splitlines() if t.startswith("-") and not t.startswith("---")]
    added = [t[1:].strip() for t in diff.splitlines() if t.startswith("+") and not t.startswith("+++")]
    return " / ".join(filter(None, removed)), " / ".join(filter(None, added))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("module")
    parser.add_argument("--before", required=True, metavar="REV")
    parser.add_argument("--scratch", required=True, type=Path, metavar="DIR")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    work: Path = args.scratch
    earlier = json.loads(subprocess.run(["git", "show", f"{args.before}:benchmarks/results/mutation-{args.module}.json"],
                                        cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    later = json.loads((ROOT / "benchmarks" / "results" / f"mutation-{args.module}.json").read_text())
    env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
    db = sqlite3.connect(work / ".mutmut-cache")
    rows = db.execute("SELECT Mutant.id, Line.line_number, Mutant.status FROM Mutant JOIN Line ON Mutant.line = Line.id"
                      " ORDER BY Mutant.id").fetchall()
    db.close()
    by_diff: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
    for mutant_id, line_number, status in rows:
        diff = subprocess.run([args.python, "-m", "mutmut", "show", str(mutant_id)], cwd=work, env=env,
                              capture_output=True, text=True).stdout
        by_diff.setdefault(changed_lines(diff), []).append((mutant_id, line_number, status))
    by_line = {int(k): v for k, v in json.loads((work / "line-tests.json").read_text()).items()}
    source = work / "hiraishin_build" / f"{args.module}.py"
    answers = []
    for survivor in earlier["remaining"]:
        key = changed_lines(survivor["diff"])
        found = by_diff.get(key, [])
        if not found:
            answers.append({"mutant": key, "status": "gone", "tests": [],
                            "note": "no such mutant now: the mutated code was changed or removed",
                            "earlier_verdict": survivor.get("verdict", "")})
            continue
        mutant_id, line_number, status = found.pop(0)
        tests = by_line.get(line_number + 1) or later["tests"]
        failing: list[str] = []
        if status in ("ok_killed", "ok_suspicious"):
            saved = source.read_bytes()
            try:
                subprocess.run([args.python, "-m", "mutmut", "apply", str(mutant_id)], cwd=work, env=env, check=True,
                               capture_output=True)
                with tempfile.TemporaryDirectory() as scratch:
                    junit = Path(scratch) / "junit.xml"
                    subprocess.run(["nice", args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                    f"--junitxml={junit}", *tests], cwd=work, env=env, capture_output=True)
                    if junit.is_file():
                        for case in ElementTree.parse(junit).iter("testcase"):
                            if case.find("failure") is not None or case.find("error") is not None:
                                path = case.get("classname", "").replace(".", "/")
                                failing.append(f"{path}.py::{case.get('name')}")
            finally:
                source.write_bytes(saved)
        answers.append({"mutant": key, "status": status, "tests": sorted(set(failing)),
                        "earlier_verdict": survivor.get("verdict", "")})
        print(f"{status:13} {len(failing):3} test(s)  {key[1][:100]}", flush=True)
    verdicts = json.loads(VERDICTS.read_text()) if VERDICTS.is_file() else {}
    verdicts.setdefault("killed", {})[args.module] = {"before": earlier["commit"], "after": later["commit"],
                                                       "survivors": answers}
    VERDICTS.write_text(json.dumps(verdicts, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
