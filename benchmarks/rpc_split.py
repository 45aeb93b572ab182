"""A model split across rpc-server workers on this machine, replayed at every b: exact with the switch on, the
control with it off (on the client and the workers alike).

    python3 benchmarks/rpc_split.py --venv VENV --model M.gguf --ngl N [--worker DEVICES ...]
        [--n-gen 100] [--json report.json]
    python3 benchmarks/rpc_split.py --bench --venv VENV --model M.gguf --ngl N [--worker DEVICES ...] [--json ...]

VENV holds an installed hiraishin-llama wheel; its rpc-server workers listen on 127.0.0.1, one per
--worker (its rpc-server --device list, e.g. CUDA0 or CPU; "all" for every device it has; default: one
worker with all), and its hiraishin-replay runs with --rpc and --ngl N, so llama.cpp splits the offloaded
layers across the workers' devices and the local ones. On a GPU machine, --worker CUDA0 --worker CPU is a
CUDA worker and a CPU worker beside the local GPU.
The report holds each run's replay report (devices, per-b differences, timings) and the workers' logs' heads.

With --bench: verify-pass times instead (hiraishin-replay bench, b = 1..16), the model local (--ngl N, no
worker) against the same split across the workers, exact (switch on) and stock (off); the summary gives the
split's median pass time over the local one per b and mode.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from hiraishin_build.smoke import rpc_worker  # noqa: E402

SWITCH = {"on": {"GGML_BATCH_INVARIANT": "1"}, "off": {"GGML_BATCH_INVARIANT": "0"}}


def start_workers(stack: contextlib.ExitStack, venv: Path, workers: list[str], env: dict[str, str], log_dir: Path,
                  log_name: str) -> list[tuple[str, Path]]:
    """One rpc-server per --worker, stopped when ``stack`` closes: their endpoints and logs."""
    endpoints = []
    for i, devices in enumerate(workers):
        log = log_dir / log_name.format(i)
        endpoint, _ = stack.enter_context(rpc_worker(
            venv, log, env=env, args=() if devices == "all" else ("--device", devices)))
        endpoints.append((endpoint, log))
    return endpoints


def run(venv: Path, model: Path, ngl: int, workers: list[str], n_gen: int, switch: str, log_dir: Path) -> dict:
    env = SWITCH[switch]
    with contextlib.ExitStack() as stack:
        endpoints = start_workers(stack, venv, workers, env, log_dir, f"worker{{}}-{switch}.log")
        report = log_dir / f"replay-{switch}.json"
        command = [str(venv / "bin" / "hiraishin-replay"), "replay", "--model", str(model),
                   "--rpc", ",".join(e for e, _ in endpoints), "--ngl", str(ngl), "--n-gen", str(n_gen),
                   "--expect", "identical" if switch == "on" else "differ", "--json", str(report)]
        completed = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env}, timeout=1800)
        heads = {e: log.read_text(errors="replace").splitlines()[:12] for e, log in endpoints}
    return {"switch": switch, "command": " ".join(command), "exit_code": completed.returncode,
            "stderr_tail": completed.stderr.splitlines()[-5:], "workers": heads,
            "report": json.loads(report.read_text()) if report.is_file() else None}


def bench(venv: Path, model: Path, ngl: int, workers: list[str], switch: str, split: bool, log_dir: Path,
          reps: int) -> dict:
    env = SWITCH[switch]
    where = "split" if split else "local"
    with contextlib.ExitStack() as stack:
        endpoints = [e for e, _ in start_workers(stack, venv, workers if split else [], env, log_dir,
                                                 f"bench-worker{{}}-{switch}.log")]
        report = log_dir / f"bench-{where}-{switch}.json"
        command = [str(venv / "bin" / "hiraishin-replay"), "bench", "--model", str(model), "--ngl", str(ngl),
                   *(["--rpc", ",".join(endpoints)] if endpoints else []), "--ctx", "2048", "--n-prompt", "512",
                   "--n-gen", "32", "--batches", "1-16", "--reps", str(reps), "--warmup", "5",
                   "--bandwidth-mib", "0", "--json", str(report)]
        completed = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env}, timeout=1800)
    result = json.loads(report.read_text()) if report.is_file() else None
    return {"switch": switch, "where": where, "command": " ".join(command), "exit_code": completed.returncode,
            "stderr_tail": completed.stderr.splitlines()[-5:],
            "median_ms": {p["b"]: p["median_ms"] for p in (result or {}).get("verify_passes", [])},
            "report": result}


def bench_summary(runs: list[dict]) -> dict:
    """Per mode: the split's median pass time over the local one's, per b."""
    by = {(r["switch"], r["where"]): r["median_ms"] for r in runs}
    summary = {}
    for switch, mode in (("on", "exact"), ("off", "stock")):
        local, split = by.get((switch, "local"), {}), by.get((switch, "split"), {})
        summary[mode] = {b: round(split[b] / local[b], 3) for b in local if b in split and local[b]}
    exact_local, stock_local = by.get(("on", "local"), {}), by.get(("off", "local"), {})
    exact_split, stock_split = by.get(("on", "split"), {}), by.get(("off", "split"), {})
    summary["exact_over_stock_local"] = {b: round(exact_local[b] / stock_local[b], 3)
                                         for b in exact_local if b in stock_local and stock_local[b]}
    summary["exact_over_stock_split"] = {b: round(exact_split[b] / stock_split[b], 3)
                                         for b in exact_split if b in stock_split and stock_split[b]}
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--ngl", type=int, required=True, help="layers offloaded (to the workers and local GPUs)")
    parser.add_argument("--worker", action="append", default=None, metavar="DEVICES",
                        help="one worker with this rpc-server --device list, or all (repeat for more workers)")
    parser.add_argument("--n-gen", type=int, default=100)
    parser.add_argument("--bench", action="store_true",
                        help="verify-pass times local against split, exact and stock, instead of the replay")
    parser.add_argument("--reps", type=int, default=20, help="with --bench: timed passes per b")
    parser.add_argument("--log-dir", type=Path, default=Path("rpc-split-logs"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.log_dir.mkdir(parents=True, exist_ok=True)
    workers = args.worker or ["all"]
    if args.bench:
        runs = [bench(args.venv, args.model, args.ngl, workers, switch, split, args.log_dir, args.reps)
                for switch in ("on", "off") for split in (False, True)]
        for r in runs:
            print(f"{r['where']} switch {r['switch']}: exit {r['exit_code']}, median ms per b: {r['median_ms']}",
                  flush=True)
    else:
        runs = [run(args.venv, args.model, args.ngl, workers, args.n_gen, switch, args.log_dir)
                for switch in ("on", "off")]
        for r in runs:
            differ = {x["b"]: x["positions_differ"] for x in (r["report"] or {}).get("results", [])}
            print(f"switch {r['switch']}: exit {r['exit_code']}, positions differing per b: {differ}", flush=True)
    version = subprocess.run([str(args.venv / "bin" / "hiraishin-llama"), "--version"], capture_output=True,
                             text=True).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    report = {"tool": "benchmarks/rpc_split.py", "commit": commit,
              "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": f"{platform.machine()}, {os.cpu_count()} cores", "wheel": version,
              "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "model": args.model.name,
              "ngl": args.ngl, "workers": workers, "runs": runs,
              **({"summary": bench_summary(runs)} if args.bench else {}),
              "passed": all(r["exit_code"] == 0 for r in runs)}
    text = json.dumps(report, indent=2) + "\n"
    if args.json:
        args.json.write_text(text)
    else:
        print(text)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
