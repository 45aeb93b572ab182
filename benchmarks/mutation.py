"""Mutation testing of the tool's core modules, each against its own unit tests.

    python3 benchmarks/mutation.py [MODULE ...] [--jobs 2] [--python PY]

Needs mutmut 2.5 and coverage (``pip install mutmut==2.5.1 coverage``; mutmut 3 runs tests from a
copy under ``mutants/`` through trampolines, which the CLI tests that start
``python -m hiraishin_build.cli`` in a subprocess would not see).

Each module is mutated in its own scratch copy of the working tree (tracked
and untracked, ignored files left out), never in place: the copy is put first
on PYTHONPATH, so the tests, and the tool processes they start, import the
mutant. ``--jobs`` modules run at once (one mutmut each, under ``nice``).

Writes ``benchmarks/results/mutation-<module>.json`` per module (counts,
score, every surviving or timed-out mutant with its diff and verdict) and
``benchmarks/results/mutation-summary.json``. A survivor's verdict comes from
the "equivalent" section of ``benchmarks/mutation-verdicts.json`` (module ->
list of {"line", "reason"}), matched on the mutated line: equivalent mutants
are left out of the score's denominator, and said so; any other survivor
counts against it. The file's "killed" section records, for survivors of an
earlier run, which test now kills them (``benchmarks/mutation_killers.py``).

Each mutant first runs only the tests that executed its line (coverage
contexts), fastest first, stopping at the first failure; a mutant those leave
alive is run against the module's whole test list before it counts as
survived. ``--sample F --seed N`` tests a fixed pseudo-random fraction F of a
module's mutants (chosen by a hash of the seed, the mutated line's text and the
mutation's index on it, so the choice does not move when other lines change)
and records that the score is a sample's.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
VERDICTS = ROOT / "benchmarks" / "mutation-verdicts.json"
GOAL = 0.85

# Each module's own unit tests: a mutant must be caught by the tests written for its module.
TESTS: dict[str, tuple[str, ...]] = {
    "pin": ("tests/unit/test_pin.py",),
    "series": ("tests/unit/test_series.py",),
    "stack": ("tests/unit/test_stack.py",),
    "cache": ("tests/unit/test_cache.py",),
    "rebase": ("tests/unit/test_rebase.py",),
    "report": ("tests/unit/test_report.py",),
    "sdist": ("tests/unit/test_sdist.py",),
    "repair": ("tests/unit/test_repair.py",),
    "index": ("tests/unit/test_index.py",),
    "recipe": ("tests/unit/test_recipe.py",),
    "matrix": ("tests/unit/test_matrix.py",),
}
# The order to run them in: rebase and cache last (they change most often).
ORDER = ("pin", "series", "report", "recipe", "matrix", "index", "sdist", "repair", "stack", "cache", "rebase")


def scratch_copy(dest: Path) -> None:
    """The working tree as it is: tracked and untracked files, without ignored ones."""
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for relative in filter(None, listed):
        source = ROOT / relative
        if not source.is_file() or relative.startswith("patches/"):
            continue
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    # The tests read the real patches/ and recipes/ of the project in places.
    shutil.copytree(ROOT / "patches", dest / "patches")
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)


def _tests_for(module: str, root: Path) -> list[str]:
    return [t for t in TESTS[module] if (root / t).is_file()]


# mutmut 2 imports mutmut_config from the directory it runs in; before each mutant this one narrows the
# test command to the tests that ran the mutated line (recorded by coverage), and --rerun-all reruns the
# module's whole test list for a mutant those survive, so a survivor has survived every test of the list.
_MUTMUT_CONFIG = """import hashlib, json, shlex
from pathlib import Path

_BY_LINE = {int(k): v for k, v in json.loads(Path(__file__).with_name("line-tests.json").read_text()).items()}
_SAMPLE = json.loads(Path(__file__).with_name("sample.json").read_text())


def in_sample(line_text, index):
    if _SAMPLE is None:
        return True
    key = f"{_SAMPLE['seed']}\\0{line_text.strip()}\\0{index}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") < _SAMPLE["fraction"] * 2 ** 64


def pre_mutation(context):
    if not in_sample(context.mutation_id.line, context.mutation_id.index):
        context.skip = True  # left out of the sample: mutmut records it as skipped
        return
    line = context.mutation_id.line_number + 1  # mutmut counts from 0, coverage from 1
    nodes = _BY_LINE.get(line)
    if nodes:
        command = context.config.test_command
        head = command[: command.index(" -p no:cacheprovider ") + len(" -p no:cacheprovider ")]
        context.config.test_command = head + " ".join(shlex.quote(n) for n in nodes)
"""


def _test_seconds(junit: Path) -> dict[str, float]:
    """Seconds per test function ("tests.unit.test_x.test_y", parametrizations added up) from pytest's junit XML."""
    import xml.etree.ElementTree as ElementTree

    seconds: dict[str, float] = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name', '').split('[')[0]}"
        seconds[name] = seconds.get(name, 0.0) + float(case.get("time") or 0.0)
    return seconds


def _select_tests_by_coverage(module: str, work: Path, python: str, tests: list[str], env: dict[str, str],
                              sample: dict | None) -> None:
    """Record which test functions run each line of the module (in this process; lines that only the
    tool's subprocesses run get the whole list), fastest first, and install the mutmut_config.py that
    uses it."""
    rc = work / ".coveragerc-mutation"
    rc.write_text(f"[run]\ndynamic_context = test_function\ninclude = hiraishin_build/{module}.py\n")
    subprocess.run(["nice", python, "-m", "coverage", "run", f"--rcfile={rc}", "--data-file=.coverage-mutation",
                    "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=junit-mutation.xml", *tests],
                   cwd=work, env=env, capture_output=True)
    seconds = _test_seconds(work / "junit-mutation.xml") if (work / "junit-mutation.xml").is_file() else {}
    subprocess.run([python, "-m", "coverage", "json", f"--rcfile={rc}", "--data-file=.coverage-mutation",
                    "--show-contexts", "-o", "coverage-mutation.json"], cwd=work, env=env, capture_output=True,
                   check=True)
    data = json.loads((work / "coverage-mutation.json").read_text())
    contexts = next(iter(data["files"].values()))["contexts"]
    by_line: dict[int, list[str]] = {}
    for line, names in contexts.items():
        nodes = []
        for name in sorted(filter(None, names), key=lambda n: (seconds.get(n, float("inf")), n)):
            dotted, _, function = name.rpartition(".")
            # "tests.unit.test_x.test_y" -> "tests/unit/test_x.py::test_y"; a method's class stays in the id.
            parts = dotted.split(".")
            while parts and not (work / ("/".join(parts) + ".py")).is_file():
                function = parts.pop() + "::" + function
            if parts:
                nodes.append(f"{'/'.join(parts)}.py::{function}")
        if nodes:
            by_line[int(line)] = list(dict.fromkeys(nodes))  # fastest first: -x stops at the first that fails
    (work / "line-tests.json").write_text(json.dumps(by_line))
    (work / "sample.json").write_text(json.dumps(sample))
    (work / "mutmut_config.py").write_text(_MUTMUT_CONFIG)


def _read_cache(work: Path) -> list[tuple[int, int, str, str]]:
    """(id, line number, line text, status) of every mutant in mutmut's cache."""
    db = sqlite3.connect(work / ".mutmut-cache")
    try:
        return db.execute(
            "SELECT Mutant.id, Line.line_number, Line.line, Mutant.status FROM Mutant JOIN Line ON Mutant.line = Line.id "
            "ORDER BY Mutant.id").fetchall()
    finally:
        db.close()


def _inert_lines(source: str) -> dict[int, str]:
    """Lines where no mutation can change behaviour, with why: string statements (the docstrings of
    fields and the like, which mutmut mutates) and annotations, never evaluated under
    ``from __future__ import annotations``."""
    import ast

    tree = ast.parse(source)
    inert: dict[int, str] = {}
    postponed = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
                    and any(alias.name == "annotations" for alias in node.names) for node in tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                inert[line] = "a string statement (documentation): it has no effect at run time"
    if postponed:
        for node in ast.walk(tree):
            if isinstance(node, ast.AnnAssign) and node.value is None and node.lineno == node.end_lineno:
                inert.setdefault(node.lineno, "an annotation only: never evaluated (from __future__ import annotations)")
    return inert


def _annotation_only(diff: str) -> bool:
    """The mutant changes only the annotation of an ``x: T = v`` line (postponed annotations): both lines
    parse, alone, as annotated assignments with the same target and the same value."""
    import ast

    removed = [line[1:] for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    if len(removed) != 1 or len(added) != 1:
        return False
    try:
        before, after = (ast.parse(text.strip()).body for text in (removed[0], added[0]))
    except SyntaxError:  # a line of a longer statement
        return False
    if len(before) != 1 or len(after) != 1 or not all(isinstance(n[0], ast.AnnAssign) for n in (before, after)):
        return False
    b, a = before[0], after[0]
    return (ast.dump(b.target) == ast.dump(a.target) and b.value is not None and a.value is not None
            and ast.dump(b.value) == ast.dump(a.value))


def _verdict(module: str, diff: str, verdicts: dict, inert: dict[int, str], line: int,
             postponed: bool) -> dict | None:
    added = [text[1:].strip() for text in diff.splitlines() if text.startswith("+") and not text.startswith("+++")]
    for entry in verdicts.get("equivalent", {}).get(module, []):
        if entry["line"].strip() in added:
            return {"verdict": "equivalent", "reason": entry["reason"]}
    if line in inert:
        return {"verdict": "equivalent", "reason": inert[line]}
    if postponed and _annotation_only(diff):
        return {"verdict": "equivalent",
                "reason": "an annotation only: never evaluated (from __future__ import annotations)"}
    return None


def run_module(module: str, python: str, verdicts: dict, keep: bool, reuse: Path | None,
               record_only: bool = False, sample: dict | None = None) -> dict:
    if record_only:
        # Read what an earlier (or interrupted) run left in DIR/<module>; run nothing.
        assert reuse is not None, "--record-only needs --reuse DIR"
        work = reuse / module
        tests = _tests_for(module, work)
        runner = f"{python} -m pytest -x -q -p no:cacheprovider {' '.join(tests)}"
        env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
        recorded = json.loads((work / "sample.json").read_text()) if (work / "sample.json").is_file() else None
        _retry_timeouts(module, work, python, env, tests)
        return _record(module, work, python, env, tests, runner, verdicts, 0.0, keep=True, sample=recorded)
    if reuse is not None:
        # Incremental: the same scratch directory as last time, its files refreshed. mutmut keeps killed
        # mutants killed and re-runs the others (and any on changed lines) against the current tests.
        work = reuse / module
        cache = work / ".mutmut-cache"
        saved = cache.read_bytes() if cache.is_file() else None
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        scratch_copy(work)
        if saved is not None:
            cache.write_bytes(saved)
        keep = True
    else:
        work = Path(tempfile.mkdtemp(prefix=f"hiraishin-mutation-{module}-"))
        scratch_copy(work)
    tests = _tests_for(module, work)
    # mutmut 2 takes only exit status 1 as "killed"; pytest exits 2 when a mutant breaks the import of the
    # module (collection error), 4 or 5 when no test ran: the wrapper turns every failure into 1.
    (work / "run-tests.sh").write_text('"$@" || exit 1\n')
    runner = f"sh run-tests.sh {python} -m pytest -x -q -p no:cacheprovider {' '.join(tests)}"
    env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
    started = time.monotonic()
    _select_tests_by_coverage(module, work, python, tests, env, sample)
    command = ["nice", python, "-m", "mutmut", "run", "--paths-to-mutate", f"hiraishin_build/{module}.py",
               "--tests-dir", "tests", "--runner", runner, "--no-progress", "--simple-output", "--rerun-all",
               "--test-time-multiplier", "3", "--test-time-base", "15"]
    returncode = _run_mutmut(command, module, work, env)
    if not (work / ".mutmut-cache").is_file():
        raise SystemExit(f"{module}: mutmut failed (exit {returncode}):\n"
                         f"{(work / 'mutmut.log').read_text(errors='replace')[-6000:]}")
    _retry_timeouts(module, work, python, env, tests)
    elapsed = time.monotonic() - started
    return _record(module, work, python, env, tests, runner, verdicts, elapsed, keep=keep, sample=sample)


STALL_SECONDS = 900


def _progress_mark(work: Path) -> str | None:
    """Changes whenever mutmut records a mutant's result (its status, or the test hash it was tested against)."""
    try:
        db = sqlite3.connect(work / ".mutmut-cache")
        try:
            rows = db.execute("SELECT id, status, tested_against_hash FROM Mutant ORDER BY id").fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def _run_mutmut(command: list[str], module: str, work: Path, env: dict[str, str]) -> int:
    """mutmut 2's main process waits for its worker process for ever: when the worker dies, the run
    hangs. (Seen here: `mutmut show` run in the scratch copy during a run re-reads the module while a
    mutant is applied, deletes the rows of the lines that differ, and the worker's next look-up of one
    fails; do not run it there until the run is over.) With no mutant finished for STALL_SECONDS, the
    run is stopped, the module file mutmut may have left mutated is put back from its .bak copy, and
    mutmut starts again on the same cache, where it picks up the mutants still untested and registers
    again those whose rows were lost (three restarts at most). Its output goes to mutmut.log in the
    scratch copy."""
    source = work / "hiraishin_build" / f"{module}.py"
    backup = source.with_name(source.name + ".bak")
    with (work / "mutmut.log").open("a") as log:
        for attempt in range(4):
            process = subprocess.Popen(command, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
            last, since = _progress_mark(work), time.monotonic()
            while process.poll() is None:
                time.sleep(20)
                now = _progress_mark(work)
                if now != last:
                    last, since = now, time.monotonic()
                elif time.monotonic() - since > STALL_SECONDS:
                    os.killpg(process.pid, signal.SIGTERM)
                    try:
                        process.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        os.killpg(process.pid, signal.SIGKILL)
                        process.wait()
                    break
            else:
                return process.returncode
            if backup.exists():
                os.replace(backup, source)
            log.write(f"\n== no mutant finished in {STALL_SECONDS} s: mutmut stopped; start {attempt + 2} ==\n")
            log.flush()
    raise SystemExit(f"{module}: mutmut stalled four times; see {work / 'mutmut.log'}")


def _wilson(successes: int, trials: int, z: float = 1.96) -> list[float] | None:
    if trials == 0:
        return None
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * ((p * (1 - p) / trials + z * z / (4 * trials * trials)) ** 0.5) / (1 + z * z / trials)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


RETRY_SECONDS = 600


def _retry_timeouts(module: str, work: Path, python: str, env: dict[str, str], tests: list[str]) -> None:
    """mutmut stops a mutant's tests at ten times the unmutated run's time, which a busy shared machine can
    pass for no fault of the mutant's. Each timed-out mutant is tried once more, alone, with the same tests
    and RETRY_SECONDS to run: tests that then fail kill it (its status becomes ok_killed and the retry is
    listed in retried-timeouts.json); tests that pass make it a survivor; running out of time again leaves
    it a timeout."""
    db = sqlite3.connect(work / ".mutmut-cache")
    try:
        timed_out = db.execute("SELECT Mutant.id, Line.line_number FROM Mutant JOIN Line ON Mutant.line = Line.id "
                               "WHERE Mutant.status = 'bad_timeout' ORDER BY Mutant.id").fetchall()
    finally:
        db.close()
    if not timed_out:
        return
    by_line = {int(k): v for k, v in json.loads((work / "line-tests.json").read_text()).items()}
    source = work / "hiraishin_build" / f"{module}.py"
    retried = []
    for mutant_id, line_number in timed_out:
        saved = source.read_bytes()
        subprocess.run([python, "-m", "mutmut", "apply", str(mutant_id)], cwd=work, env=env, check=True,
                       capture_output=True)
        started = time.monotonic()
        try:
            run = subprocess.run(["nice", python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                  *(by_line.get(line_number + 1) or tests)], cwd=work, env=env, capture_output=True,
                                 timeout=RETRY_SECONDS)
            status = "ok_killed" if run.returncode != 0 else "bad_survived"
        except subprocess.TimeoutExpired:
            status = "bad_timeout"
        finally:
            source.write_bytes(saved)
        retried.append({"id": mutant_id, "status": status, "seconds": round(time.monotonic() - started, 1)})
        db = sqlite3.connect(work / ".mutmut-cache")
        try:
            db.execute("UPDATE Mutant SET status = ? WHERE id = ?", (status, mutant_id))
            db.commit()
        finally:
            db.close()
    (work / "retried-timeouts.json").write_text(json.dumps(retried))


def _record(module: str, work: Path, python: str, env: dict[str, str], tests: list[str], runner: str,
            verdicts: dict, elapsed: float, *, keep: bool, sample: dict | None) -> dict:
    source = (work / "hiraishin_build" / f"{module}.py").read_text()  # what was mutated
    inert = _inert_lines(source)
    postponed = "from __future__ import annotations" in source
    rows = _read_cache(work)
    counts: dict[str, int] = {}
    for _, _, _, status in rows:
        counts[status] = counts.get(status, 0) + 1
    remaining = []
    for mutant_id, line_number, line, status in rows:
        if status in ("ok_killed", "ok_suspicious", "untested", "skipped"):
            continue
        diff = subprocess.run([python, "-m", "mutmut", "show", str(mutant_id)], cwd=work, env=env,
                              capture_output=True, text=True).stdout
        verdict = _verdict(module, diff, verdicts, inert, line_number + 1, postponed)
        remaining.append({
            "id": mutant_id, "line": line_number, "source": line.strip(), "status": status,
            "diff": diff.strip(), "verdict": verdict["verdict"] if verdict else "not yet judged",
            "reason": verdict["reason"] if verdict else "",
        })
    untested = counts.get("untested", 0) + counts.get("skipped", 0)
    total = len(rows) - untested  # what this run tested
    killed = counts.get("ok_killed", 0) + counts.get("ok_suspicious", 0)
    equivalent = sum(1 for r in remaining if r["verdict"] == "equivalent")
    record = {
        "module": f"hiraishin_build/{module}.py",
        "tests": tests,
        "mutants_generated": len(rows),
        "complete": untested == 0,
        # None: every mutant was to be tested; else the fraction of them drawn, and how.
        "sample": None if sample is None else {
            **sample, "rule": "a mutant is tested when the first 8 bytes of sha256(f'{seed}\\0{mutated line, stripped}"
                              "\\0{mutation index on the line}') read as a big-endian integer are below fraction * 2**64; "
                              "the others are skipped and counted in 'untested'"},
        "mutants": total,
        "killed": killed,
        "survived": counts.get("bad_survived", 0),
        "timeout": counts.get("bad_timeout", 0),
        "untested": untested,
        "equivalent": equivalent,
        # Killed over all mutants that are not equivalent (timeouts count as not killed).
        "score": round(killed / (total - equivalent), 4) if total - equivalent else 1.0,
        "raw_score": round(killed / total, 4) if total else 1.0,
        # For a sample, where the score of all the module's mutants lies (95%, Wilson).
        "score_interval_95": _wilson(killed, total - equivalent) if sample is not None else None,
        "seconds": round(elapsed, 1),
        "retried_timeouts": (json.loads((work / "retried-timeouts.json").read_text())
                             if (work / "retried-timeouts.json").is_file() else []),
        "runner": runner,
        "remaining": remaining,
    }
    if keep:
        record["scratch"] = str(work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", default=list(ORDER), choices=ORDER)
    parser.add_argument("--jobs", type=int, default=2, help="modules mutated at once (at most 2 on a 2-core machine)")
    parser.add_argument("--python", default=sys.executable, help="the Python with the tool's test extras and mutmut")
    parser.add_argument("--keep", action="store_true", help="keep each scratch copy (to rerun `mutmut show` there)")
    parser.add_argument("--record-only", action="store_true",
                        help="with --reuse: write the results from what is in DIR, running nothing but the "
                             "retry of timed-out mutants")
    parser.add_argument("--sample", type=float, metavar="FRACTION",
                        help="test only this fraction of each module's mutants, drawn by --seed (the JSON says so)")
    parser.add_argument("--seed", type=int, default=0, help="what draws the --sample (default 0)")
    parser.add_argument("--reuse", type=Path, metavar="DIR",
                        help="keep one scratch copy per module under DIR and rerun only what mutmut has not killed")
    args = parser.parse_args()
    verdicts = json.loads(VERDICTS.read_text()) if VERDICTS.is_file() else {}
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "hiraishin_build", "tests"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    mutmut_version = subprocess.run([args.python, "-c", "import importlib.metadata as m; print(m.version('mutmut'))"],
                                    capture_output=True, text=True).stdout.strip()
    facts = {
        "commit": commit + (" (with uncommitted changes)" if dirty else ""),
        "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.node()}: {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}",
        "mutmut": mutmut_version,
        "command": "python3 benchmarks/mutation.py " + " ".join(
            arg for arg in sys.argv[1:] if not arg.startswith("--python") and arg != args.python),
        "incremental": args.reuse is not None,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)

    def one(module: str) -> dict:
        sample = None if args.sample is None else {"fraction": args.sample, "seed": args.seed}
        record = {**facts, **run_module(module, args.python, verdicts, args.keep, args.reuse, args.record_only,
                                        sample)}
        (RESULTS / f"mutation-{module}.json").write_text(json.dumps(record, indent=2) + "\n")
        print(f"{module:8} {record['killed']:4}/{record['mutants']:<4} killed ({record['untested']} not yet tested), "
              f"{record['survived']} survived, "
              f"{record['timeout']} timeout, {record['equivalent']} equivalent: score {record['score']:.1%} "
              f"({record['seconds']:.0f} s)", flush=True)
        return record

    with ThreadPoolExecutor(max_workers=max(1, min(args.jobs, 2))) as pool:
        records = list(pool.map(one, args.modules))
    summary_path = RESULTS / "mutation-summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {"modules": {}}
    for record in records:
        summary["modules"][record["module"].split("/")[-1][:-3]] = {
            key: record[key] for key in ("commit", "recorded", "complete", "mutants_generated", "mutants", "killed",
                                         "survived", "timeout", "untested", "equivalent", "score", "raw_score",
                                         "seconds", "tests", "sample", "score_interval_95", "command")}
        summary.get("not_measured", {}).pop(record["module"].split("/")[-1][:-3], None)
    summary.update({key: facts[key] for key in ("machine", "mutmut")})
    summary["goal"] = GOAL
    summary["rerun"] = ("pip install mutmut==2.5.1 coverage && "
                        "python3 benchmarks/mutation.py [MODULE ...] [--jobs N] [--sample FRACTION --seed N]")
    summary["all_meet_goal"] = all(m["score"] >= GOAL for m in summary["modules"].values())
    summary_path.write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n")
    if not all(r["score"] >= GOAL for r in records):
        sys.exit(1)


if __name__ == "__main__":
    main()
