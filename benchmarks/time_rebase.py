"""Time `hiraishin rebase` on the real upstream and keep its reports.

    python3 benchmarks/time_rebase.py [--first TAG] [--dry-run-tags TAG...] [--runs 3]

Uses the upstream cache as it is (the user cache, or HIRAISHIN_CACHE_DIR): the
scan fetches the file contents of every scanned tag into it once, after which
every run is warm. Measures, on this machine:

- `rebase --scan` over the base's own release tags from --first to the pin;
- `rebase --onto TAG --dry-run` of the real stack onto each --dry-run-tags;
- the same for two seven-patch stacks, as a scan, a dry run and a real
  rebase of an existing work tree (the goal: a seven-patch rebase onto one
  tag in under 20 s with the cache warm). "stand-in-7" is the real stack
  padded to seven with one-line patches at the places the planned patches
  touch; "stand-in-7-hard" ends with three patches on lines upstream changed
  between the tags, so the older tags need a three-way merge, hit a conflict
  (the real rebase stops there, and is aborted) and find a patch already
  applied.

Reports go to benchmarks/results/rebase/, the numbers to
benchmarks/results/rebase-timing.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
GOAL_S = 20.0

STACK_SIZE = 7
# One line each, inserted above a line a planned patch changes: enough for
# git to have to find the place again on another tag. The real stack is
# padded with these, in this order (the places no real patch covers yet
# first), up to STACK_SIZE patches.
STAND_IN = (
    ("src/llama-kv-cache.cpp", "llama_kv_cache::get_n_kv(", "kv-cache: the 256 guard", "above"),
    ("tools/server/server-context.cpp", "int get_n_draft_max() const", "server: clamp the draft", "above"),
    ("ggml/src/ggml-cuda/fattn-vec.cuh", "constexpr int V_rows_per_thread", "fattn-vec: turbo4 V loop", "above"),
    ("ggml/src/ggml-cpu/ggml-cpu.c", "thread_ret_t ggml_graph_compute_thread(void", "cpu: batch-invariant order of adds", "above"),
    ("ggml/src/ggml-cuda/mmvq.cu", "int calc_nwarps(", "mmvq: batch-invariant calc_nwarps", "above"),
    ("ggml/src/ggml-cuda/fattn.cu", "ggml_cuda_get_best_fattn_kernel(const int device", "fattn: vec kernel up to 16 queries", "above"),
)
# On lines that upstream changed between b8983 and b9064, so that on the
# older tags one needs a three-way merge (a line two away from an upstream
# change), one conflicts (the changed line itself) and one is already there
# (it reverts an upstream change): every path of the rebase, timed.
HARD = (
    ("tools/server/server-context.cpp", "mctx = mtmd_init_from_file(mmproj_path.c_str(), model, mparams);",
     "server: three-way stand-in", "append"),
    ("tools/server/server-context.cpp", "/* build_info             */ std::string(llama_build_info()),",
     "server: already-upstream stand-in", "revert"),
    ("tools/server/server-context.cpp", "        if (params_base.cache_idle_slots) {", "server: conflicting stand-in", "append"),
)
MESSAGE = "{subject}\n\nWhy: a stand-in for a planned patch, for timing.\n\nWhat: one comment line.\n\nVerified: not applicable.\n\nUpstream: not applicable.\n"
IDENTITY = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
            "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def hiraishin(project: Path, *args: str, check: bool = True) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "hiraishin_build.cli", "--project", str(project), *args],
                            cwd=ROOT, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    # 10: the rebase stopped (or would) at a conflict, which is a result here.
    if check and result.returncode not in (0, 10):
        raise SystemExit(f"hiraishin {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return elapsed, result


def release_tags(cache_git: Path, first: str, pin_ref: str) -> list[str]:
    names = subprocess.run(["git", "-C", str(cache_git), "tag", "--list"], capture_output=True, text=True,
                           check=True).stdout.split()
    prefix = re.sub(r"b\d+-[0-9a-f]+$", "", pin_ref)

    def build(name: str) -> int:
        return int(re.search(r"-b(\d+)-", name).group(1))  # type: ignore[union-attr]

    low, high = build(first), build(pin_ref)
    return sorted((n for n in names if n.startswith(prefix) and re.search(r"-b\d+-", n) and low <= build(n) <= high),
                  key=build)


def make_stand_in(project: Path, patches: tuple[tuple[str, str, str, str], ...]) -> list[str]:
    """A copy of the project whose stack is the real patch plus stand-ins."""
    shutil.copytree(ROOT / "recipes", project / "recipes")
    shutil.copytree(ROOT / "patches", project / "patches")
    workdir = project / "work" / "llama.cpp"
    hiraishin(project, "patches", "apply", "--workdir", str(workdir))
    env = {**os.environ, **IDENTITY}
    for path, anchor, subject, how in patches:
        target = workdir / path
        lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if anchor in line)
        if how == "above":
            lines.insert(at, f"// hiraishin: {subject} (benchmark stand-in)\n")
        elif how == "append":
            lines[at] = lines[at].rstrip("\n") + f" // hiraishin: {subject}\n"
        else:
            lines[at] = lines[at].replace("std::string(llama_build_info())", "build_info")
        target.write_text("".join(lines), encoding="utf-8")
        subprocess.run(["git", "-C", str(workdir), "commit", "-q", "-am", MESSAGE.format(subject=subject)],
                       env=env, check=True)
    hiraishin(project, "patches", "export", "--workdir", str(workdir))
    return [line.split("#")[0].strip() for line in (project / "patches" / "series").read_text().splitlines() if line.strip()]


def statuses(report_json: Path) -> list[str]:
    data = json.loads(report_json.read_text())
    return [patch["status"] for patch in data["patches"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--first", default="feature-turboquant-kv-cache-b8821-45f8a06",
                        help="the oldest release tag to scan")
    parser.add_argument("--dry-run-tags", nargs="+", default=[
        "feature-turboquant-kv-cache-b9075-4f33166",
        "feature-turboquant-kv-cache-b8983-9e3fb40",
        "feature-turboquant-kv-cache-b8821-45f8a06",
    ])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "rebase-timing.json")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from hiraishin_build.cache import UpstreamCache
    from hiraishin_build.project import Project

    # Other work on this machine slows every number here; the load says how much.
    load_before = os.getloadavg()
    pin = Project(ROOT).pin()
    cache = UpstreamCache()
    reports = RESULTS / "rebase"
    reports.mkdir(parents=True, exist_ok=True)
    tags = release_tags(cache.git_dir, args.first, pin.ref)

    scan_s = []
    for run in range(args.runs):
        elapsed, _ = hiraishin(ROOT, "rebase", "--scan", *tags, "--report", str(reports / "scan-real-stack"))
        scan_s.append(elapsed)

    real: dict[str, dict[str, object]] = {}
    for tag in args.dry_run_tags:
        base = reports / f"dry-run-real-stack-onto-{tag}"
        times = [hiraishin(ROOT, "rebase", "--onto", tag, "--dry-run", "--report", str(base))[0] for _ in range(args.runs)]
        real[tag] = {"dry_run_s": [round(t, 3) for t in times], "statuses": statuses(base.with_suffix(".json"))}

    stand_in: dict[str, dict[str, object]] = {}
    stand_in_scan: dict[str, float] = {}
    stand_in_series: dict[str, list[str]] = {}
    real_count = len([line for line in (ROOT / "patches" / "series").read_text().splitlines() if line.strip()])
    pad = max(STACK_SIZE - real_count, 0)
    variants = (
        (f"stand-in-{STACK_SIZE}", STAND_IN[:pad]),
        (f"stand-in-{STACK_SIZE}-hard", STAND_IN[:max(pad - len(HARD), 0)] + HARD),
    )
    for label, patches in variants:
        with tempfile.TemporaryDirectory(prefix="hiraishin-bench-rebase-") as scratch:
            project = Path(scratch) / "project"
            stand_in_series[label] = make_stand_in(project, patches)
            saved = Path(scratch) / "saved"
            shutil.copytree(project / "patches", saved / "patches")
            shutil.copy2(project / "recipes" / "upstream.toml", saved / "upstream.toml")
            workdir = project / "work" / "llama.cpp"
            stand_in_scan[label] = round(
                hiraishin(project, "rebase", "--scan", *tags, "--report", str(reports / f"scan-{label}"))[0], 3)
            for tag in args.dry_run_tags:
                base = reports / f"dry-run-{label}-onto-{tag}"
                dry = [hiraishin(project, "rebase", "--onto", tag, "--dry-run", "--report", str(base))[0]
                       for _ in range(args.runs)]
                rebase_s: list[float] = []
                abort_s: list[float] = []
                outcome = ""
                for _ in range(args.runs):
                    elapsed, result = hiraishin(project, "rebase", "--onto", tag, "--workdir", str(workdir),
                                                "--report", str(Path(scratch) / "real-rebase"))
                    rebase_s.append(elapsed)
                    outcome = json.loads((Path(scratch) / "real-rebase.json").read_text())["state"]
                    if result.returncode == 10:
                        abort_s.append(hiraishin(project, "rebase", "--abort", "--workdir", str(workdir))[0])
                    # Back to the stand-in stack on the pin for the next run.
                    shutil.rmtree(project / "patches")
                    shutil.copytree(saved / "patches", project / "patches")
                    shutil.copy2(saved / "upstream.toml", project / "recipes" / "upstream.toml")
                    hiraishin(project, "patches", "apply", "--force", "--workdir", str(workdir))
                stand_in[f"{label} onto {tag}"] = {
                    "dry_run_s": [round(t, 3) for t in dry],
                    "rebase_s": [round(t, 3) for t in rebase_s],
                    "rebase_median_s": round(statistics.median(rebase_s), 3),
                    "rebase_state": outcome,
                    "abort_s": [round(t, 3) for t in abort_s],
                    "statuses": statuses(base.with_suffix(".json")),
                }

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "hiraishin_build"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    worst = max(max(entry["rebase_s"]) for entry in stand_in.values())  # type: ignore[type-var]
    result = {
        "benchmark": "rebase-timing",
        "command": "python3 benchmarks/time_rebase.py " + " ".join(sys.argv[1:]),
        "commit": commit + (" (with uncommitted changes to hiraishin_build/)" if dirty else ""),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": {"cpus": os.cpu_count(), "machine": platform.machine(), "system": platform.platform(),
                   "python": platform.python_version(), "git": git_version,
                   "load_average_1_5_15_before": [round(x, 2) for x in load_before],
                   "load_average_1_5_15_after": [round(x, 2) for x in os.getloadavg()]},
        "pin": {"ref": pin.ref, "commit": pin.commit},
        "cache": "warm (the scan's first run fetched what was missing)",
        "scanned_tags": tags,
        "real_stack": {
            "patches": len([line for line in (ROOT / "patches" / "series").read_text().splitlines() if line.strip()]),
            "scan_s": [round(s, 3) for s in scan_s],
            "dry_runs": real,
        },
        "stand_in_stacks": {
            "series": stand_in_series,
            "scan_s": stand_in_scan,
            "runs": stand_in,
        },
        "goal": {"seven_patch_rebase_s": GOAL_S, "worst_measured_s": worst, "met": worst < GOAL_S,
                 "note": "worst of the real rebases of the seven-patch stacks; a run that stops at a conflict "
                         "is timed up to the stop"},
        "reports": str(reports.relative_to(ROOT)),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
