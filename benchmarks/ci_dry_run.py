"""Run the CI jobs' steps on this machine, as far as they can run here, and record them.

    python3 benchmarks/ci_dry_run.py --device "this machine: ..." [--quick]

Clones the committed HEAD into a scratch directory (nothing built before is
reused: a fresh build/ and dist/), installs the tool there with
ci/setup-tool.sh, then runs each job's steps with the same commands the
workflows run: lint, the tests, the matrix, the patch check, the sdist, the
cpu recipe end to end (wheel from the sdist, smoke test from its own index,
the published index), the build step of two CUDA recipes (which must stop at
`hiraishin doctor` with exit 11 on a machine without their toolkit), and the
upstream watch in dry-run mode. Steps that need what this machine lacks are
listed with the reason instead of being run.

Writes benchmarks/results/ci-local-dry-run.json (every step: command, exit
code, expected exit code, seconds, output tail), ci-matrix.json
(`hiraishin matrix --format json`) and ci-actionlint.json (`hiraishin
workflows check --json`). --quick leaves out the cpu wheel build and its
smoke test (for trying the recorder itself; its results say so).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TAIL_LINES = 30


@dataclass
class Step:
    job: str
    step: str
    command: str
    expected_exit: int = 0
    env: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    seconds: float | None = None
    output_tail: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def as_expected(self) -> bool:
        return self.exit_code == self.expected_exit


@dataclass
class NotRun:
    job: str
    step: str
    command: str
    why: str


def run_step(step: Step, cwd: Path, env: dict[str, str], log_dir: Path) -> Step:
    started = time.monotonic()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{step.job}-{step.step}").strip("-")[:60]
    log_path = log_dir / f"{len(list(log_dir.iterdir())):02d}-{slug}.log"
    print(f"==> [{step.job}] {step.step}: {step.command}", flush=True)
    with log_path.open("w") as log:
        completed = subprocess.run(["bash", "-c", step.command], cwd=cwd, env={**env, **step.env},
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    step.exit_code = completed.returncode
    step.seconds = round(time.monotonic() - started, 1)
    step.output_tail = log_path.read_text(errors="replace").rstrip().splitlines()[-TAIL_LINES:]
    verdict = "as expected" if step.as_expected else f"EXPECTED {step.expected_exit}"
    print(f"    exit {step.exit_code} ({verdict}) after {step.seconds} s", flush=True)
    return step


def git_commit() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def record_static(clone: Path, env: dict[str, str], tool: list[str], commit: str,
                  started: datetime.datetime, device: str, scratch: Path) -> dict[str, str]:
    """Write ci-matrix.json and ci-actionlint.json from the clone; return the common facts."""
    matrix_json = subprocess.run([*tool, "matrix", "--format", "json"], cwd=clone, env=env,
                                 capture_output=True, text=True, check=True).stdout
    github_json = subprocess.run([*tool, "matrix", "--format", "github"], cwd=clone, env=env,
                                 capture_output=True, text=True, check=True).stdout.strip()
    lint_path = scratch / "actionlint.json"
    lint_run = subprocess.run([*tool, "workflows", "check", "--json", str(lint_path)], cwd=clone, env=env,
                              capture_output=True, text=True)

    base = {
        "commit": commit,
        "recorded": started.isoformat(timespec="seconds"),
        "device": device,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    matrix = json.loads(matrix_json)
    (RESULTS / "ci-matrix.json").write_text(json.dumps({
        "name": "ci-matrix", **base,
        "command": "hiraishin matrix --format json",
        "jobs": len(matrix["jobs"]),
        "recipes": len(matrix["recipes"]),
        "github_format": {"command": "hiraishin matrix --format github", "bytes": len(github_json),
                          "include_entries": len(json.loads(github_json)["include"])},
        "matrix": matrix,
    }, indent=2) + "\n")
    lint = json.loads(lint_path.read_text()) if lint_path.is_file() else {}
    (RESULTS / "ci-actionlint.json").write_text(json.dumps({
        "name": "ci-actionlint", **base,
        "command": "hiraishin workflows check --json FILE",
        "exit_code": lint_run.returncode,
        "output": (lint_run.stdout + lint_run.stderr).strip().splitlines()[-TAIL_LINES:],
        **lint,
    }, indent=2) + "\n")
    return base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", required=True, help="the machine, in words")
    parser.add_argument("--quick", action="store_true", help="leave out the cpu wheel build and its smoke test")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--static-only", action="store_true",
                        help="only ci-matrix.json and ci-actionlint.json (no job steps run)")
    args = parser.parse_args()

    commit = git_commit()
    scratch = Path(tempfile.mkdtemp(prefix="hiraishin-ci-dry-"))
    clone, venv, dist, logs = scratch / "repo", scratch / "venv", scratch / "dist", scratch / "logs"
    logs.mkdir()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", commit], check=True)
    if args.static_only:
        started = datetime.datetime.now(datetime.timezone.utc)
        record_static(clone, dict(os.environ), [sys.executable, "-m", "hiraishin_build.cli"], commit, started,
                      args.device, scratch)
        print(f"wrote {RESULTS / 'ci-matrix.json'} and ci-actionlint.json")
        shutil.rmtree(scratch, ignore_errors=True)
        return
    env = {key: value for key, value in os.environ.items() if not key.startswith("GITHUB_")}
    env.update({"HIRAISHIN_CI_VENV": str(venv), "PATH": f"{venv / 'bin'}:{env['PATH']}"})
    sdist_dir, published, site = dist / "sdist", dist / "published", dist / "site"
    cpu_wheels = sdist_dir / "wheels" / "cpu"
    older_tags = "feature-turboquant-kv-cache-b8983-9e3fb40 feature-turboquant-kv-cache-b9075-4f33166"

    steps = [
        Step("(every job)", "install the tool", "ci/setup-tool.sh --test"),
        Step("checks/lint", "lint", "ci/lint.sh"),
        Step("checks/unit-tests", "tests", "ci/unit-tests.sh -q -p no:cacheprovider"),
        Step("wheels/matrix", "matrix", "ci/matrix.sh"),
        Step("checks/patches-check", "upstream cache", "ci/fetch-upstream.sh"),
        Step("checks/patches-check", "patches check", "ci/patches-check.sh"),
        Step("wheels/sdist", "sdist", f"ci/sdist.sh {sdist_dir}"),
    ]
    if not args.quick:
        steps += [
            Step("wheels/wheel (cpu)", "build the cpu wheel from the sdist", f"ci/build-wheel.sh cpu {sdist_dir}"),
            Step("wheels/smoke (cpu)", "smoke test from the wheel's own index", f"ci/smoke.sh {cpu_wheels}",
                 env={"HIRAISHIN_SMOKE_DIR": str(dist / "smoke-cpu")}),
            Step("publish", "hand over the smoke-tested wheel (download-artifact smoked-* in CI)",
                 f"mkdir -p {published} && cp {cpu_wheels}/*.whl {published}/"),
            Step("publish", "per-variant indexes for Pages", f"ci/publish-index.sh {published} {site}"),
        ]
    steps += [
        Step("wheels/wheel (cu13-sm90)", "build the cu13-sm90 wheel from the sdist",
             f"ci/build-wheel.sh cu13-sm90 {sdist_dir}", expected_exit=11,
             note="CUDA 13.0 nvcc here, without the cuBLAS development files: doctor refuses before unpacking"),
        Step("wheels/wheel (cu12-sm90)", "build the cu12-sm90 wheel from the sdist",
             f"ci/build-wheel.sh cu12-sm90 {sdist_dir}", expected_exit=11,
             note="no CUDA 12 nvcc here: doctor refuses before unpacking"),
        Step("upstream-watch", "watch (cache as it is, no newer tag)", "ci/upstream-watch.sh --dry-run --no-fetch",
             env={"HIRAISHIN_WATCH_OUT": str(scratch / "watch-newest")}),
        Step("upstream-watch", "watch on two cached tags older than the pin (one conflicts)",
             f"ci/upstream-watch.sh --dry-run --no-fetch {older_tags}",
             env={"HIRAISHIN_WATCH_OUT": str(scratch / "watch-older")}),
    ]
    not_run = [
        NotRun("wheels/wheel (every CUDA recipe)", "install system packages",
               "ci/setup-tool.sh --system",
               "apt-get installs python3, git, build-essential and ccache into the build container; this machine "
               "already has them, and the step would change it"),
        NotRun("wheels/wheel (every CUDA recipe)", "the build itself and everything after it",
               "ci/build-wheel.sh <cu12|cu13-recipe> dist/sdist",
               "needs the recipe's CUDA toolkit with cuBLAS (the CI's nvidia/cuda devel container); "
               "the recorded cu13-sm90 and cu12-sm90 steps show doctor refusing up front"),
        NotRun("wheels/smoke (every CUDA recipe)", "smoke test", "ci/smoke.sh dist/wheels/<recipe>",
               "needs the wheel and a GPU of the recipe's architecture (a self-hosted runner)"),
        NotRun("publish", "deploy", "actions/upload-pages-artifact, actions/deploy-pages",
               "GitHub Pages; the site they deploy is the one recorded by publish-index.sh"),
        NotRun("upstream-watch", "fetch upstream", "hiraishin upstream fetch",
               "GitHub is not reachable from this machine; the watch ran on the seeded cache (--no-fetch)"),
        NotRun("upstream-watch", "open or update the issue", "gh issue create / edit / close",
               "no gh and no token here: --dry-run prints the report and the action it would take"),
    ]
    if args.quick:
        not_run.append(NotRun("wheels/wheel, smoke, publish (cpu)", "cpu end to end", "ci/build-wheel.sh cpu ...",
                              "left out with --quick"))

    started = datetime.datetime.now(datetime.timezone.utc)
    for step in steps:
        run_step(step, clone, env, logs)

    base = record_static(clone, env, ["hiraishin"], commit, started, args.device, scratch)
    wheel = sorted(cpu_wheels.glob("*.whl"))
    smoke_report = dist / "smoke-cpu" / "smoke.json"
    (RESULTS / "ci-local-dry-run.json").write_text(json.dumps({
        "name": "ci-local-dry-run", **base,
        "command": "python3 benchmarks/ci_dry_run.py" + (" --quick" if args.quick else ""),
        "where": "a fresh clone of the commit in a scratch directory; the tool installed there by ci/setup-tool.sh",
        "all_as_expected": all(step.as_expected for step in steps),
        "total_seconds": round(sum(step.seconds or 0 for step in steps), 1),
        "cpu_wheel": {"file": wheel[0].name, "bytes": wheel[0].stat().st_size} if wheel else None,
        "cpu_smoke_passed": json.loads(smoke_report.read_text()).get("passed") if smoke_report.is_file() else None,
        "steps": [{**asdict(step), "as_expected": step.as_expected} for step in steps],
        "not_run_here": [asdict(item) for item in not_run],
    }, indent=2) + "\n")
    print(f"wrote {RESULTS / 'ci-local-dry-run.json'}, ci-matrix.json, ci-actionlint.json")
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        print(f"kept {scratch}")


if __name__ == "__main__":
    main()
