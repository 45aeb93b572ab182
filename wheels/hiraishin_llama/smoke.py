"""``hiraishin-llama-smoke``: prove on this machine that batched verify passes
reproduce one-token decoding bit for bit.

For each model and KV cache type it runs ``hiraishin-replay`` twice: with
batch-invariant mode on, expecting identical logits at every position, and
with it off (the negative control), expecting differences on CUDA - a control
that shows no difference there means the test proves nothing. Backends the
build does not claim to be exact are reported, not judged.

Exit status: 0 passed; 1 the guarantee failed (a real difference, or no
difference where the control needs one); 2 a usage error (bad arguments or
model file: nothing was judged); 3 a case could not be run (the replay tool
failed, e.g. out of memory), so nothing is known about it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import __version__, runtime, synthetic
from ._args import ArgumentParser, at_least, name_list, parse_batches
from ._launch import switch_environment, tool_dir

# Every verify batch size the guarantee covers: several kernel choices depend on the exact width
# (rows per block at 7 and at 10-16 columns, one instantiation per width), so a sample would miss some.
DEFAULT_BATCHES = "2-16"
# The KV cache types hiraishin-replay accepts (its --cache-type-k/-v).
KV_CACHE_TYPES = ("f16", "q8_0", "q4_0", "turbo2", "turbo3", "turbo4")
EXIT_FAILED, EXIT_USAGE, EXIT_NOT_RUN = 1, 2, 3
# Tokens generated in the split-model case: its CPU layers and output matrix run at CPU speed, and 200
# tokens after the 64-token prompt still cross KV cell 256, where verify batches are cut.
SPLIT_N_GEN = 200


class UsageError(Exception):
    """The input cannot be tested (found while running: the replay tool refused it)."""


@dataclass(frozen=True)
class Case:
    quant: str
    kv: str
    batch_invariant: bool
    expect: str
    """identical, differ, or none (report only)."""
    gpu_layers: int | None = None
    """Layers on the GPU when the model is split between the GPU and the CPU; None: all on the GPU."""
    n_gen: int | None = None
    """Generated tokens, if fewer than the run's --n-gen."""

    @property
    def name(self) -> str:
        split = f" ngl={self.gpu_layers}" if self.gpu_layers is not None else ""
        return f"{self.quant} kv={self.kv}{split} switch {'on' if self.batch_invariant else 'off'}"


@dataclass
class CaseResult:
    case: Case
    exit_code: int
    passed: bool
    error: str | None = None
    report: dict | None = field(default=None, repr=False)


def backend_in_use() -> str:
    return "cuda" if runtime.built_architectures() and runtime.gpus() else "cpu"


def exact_backends() -> set[str]:
    return set(runtime.build_info().get("exact_backends", []))


def default_cases(backend: str, quants: list[str], kv_types: list[str], gpu_layers: int | None = None) -> list[Case]:
    """The cases to run; with ``gpu_layers``, on CUDA, one more with the model split between GPU and CPU."""
    claimed = backend in exact_backends()
    cases = [Case(q, kv, True, "identical" if claimed else "none") for q in quants for kv in kv_types]
    # Partial offload, as large models are run: the CPU runs the first layers, and the scheduler may move
    # ops between the backends by batch size, which the guarantee must survive.
    if backend == "cuda" and gpu_layers is not None:
        cases.append(Case(quants[0], kv_types[0], True, "identical" if claimed else "none", gpu_layers,
                          n_gen=SPLIT_N_GEN))
    # One negative control per model: on a backend the build claims, the bug must show with the
    # switch off, or the identical results above prove nothing.
    cases += [Case(q, kv_types[0], False, "differ" if claimed else "none") for q in quants]
    return cases


def prepare_models(work_dir: Path, preset: str, n_layer: int, quants: list[str], seed: int) -> dict[str, Path]:
    """Synthetic models, made once per (preset, layers, seed) and reused: same seed, same bytes."""
    quantizer = tool_dir() / synthetic.QUANTIZER_NAME
    models = {}
    f16 = work_dir / f"{preset}-{n_layer}l-seed{seed}-F16.gguf"
    for quant in quants:
        target = work_dir / f"{preset}-{n_layer}l-seed{seed}-{quant}.gguf"
        if not target.is_file():
            if not f16.is_file():
                print(f"making synthetic model {f16.name} ...", flush=True)
                synthetic.make_model(preset, seed, n_layer, f16)
            print(f"quantizing to {quant} ...", flush=True)
            partial = target.with_suffix(".partial")
            synthetic.quantize(f16, partial, quant, quantizer)
            partial.replace(target)
        models[quant] = target
    return models


def run_case(case: Case, model: Path, args: argparse.Namespace, json_dir: Path, number: int = 1,
             total: int = 1) -> CaseResult:
    """Run case ``number`` of ``total``; a usage error of the replay tool (exit 2) raises UsageError."""
    report_path = json_dir / f"{case.name.replace(' ', '_').replace('=', '-')}.json"
    env = switch_environment(case.batch_invariant)
    command = [
        str(tool_dir() / "hiraishin-replay"), "replay", "--model", str(model),
        "--cache-type-k", case.kv, "--cache-type-v", case.kv,
        "--n-gen", str(min(args.n_gen, case.n_gen) if case.n_gen else args.n_gen), "--n-prompt", str(args.n_prompt),
        "--batches", ",".join(str(b) for b in args.batches),
        "--ctx", str(args.ctx), "--expect", case.expect, "--json", str(report_path),
    ]
    if case.gpu_layers is not None:
        command += ["--ngl", str(case.gpu_layers)]
    # Which case, of how many: a CUDA run takes minutes, and `hiraishin smoke` shows the count from this line.
    print(f"running {case.name} ({number}/{total}) ...", flush=True)
    started = time.monotonic()
    completed = subprocess.run(command, env=env, capture_output=True, text=True)
    print(f"  {case_outcome(case, completed.returncode)} ({time.monotonic() - started:.1f} s)", flush=True)
    if completed.returncode == EXIT_USAGE:
        lines = completed.stderr.strip().splitlines() or [f"hiraishin-replay refused {case.name} (exit 2)"]
        raise UsageError(lines[-1].removeprefix("hiraishin-replay: error: "))
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    if completed.returncode not in (0, 1) or report is None:
        tail = "\n".join((completed.stderr or completed.stdout).strip().splitlines()[-5:])
        return CaseResult(case, completed.returncode, False, error=tail or "no report written", report=report)
    return CaseResult(case, completed.returncode, completed.returncode == 0, report=report)


def case_outcome(case: Case, exit_code: int) -> str:
    """What a case's exit status means, for the line printed as it ends."""
    if exit_code == 0:
        return {"identical": "identical", "differ": "differs, as the control must"}.get(case.expect, "reported")
    if exit_code == EXIT_FAILED:
        return "FAILED: " + ("differs from one-token decoding" if case.expect == "identical"
                             else "the control shows no difference")
    if exit_code == EXIT_USAGE:
        return "refused"
    return f"could not be run (exit status {exit_code})"


def render_table(results: list[CaseResult], batches: list[int]) -> str:
    header = f"{'case':<36} {'expect':<10}" + "".join(f"{'b=' + str(b):>7}" for b in batches) + "  result"
    lines = [header, "-" * len(header)]
    for result in results:
        row = f"{result.case.name:<36} {result.case.expect:<10}"
        by_b = {r["b"]: r for r in (result.report or {}).get("results", [])}
        for b in batches:
            row += f"{by_b[b]['positions_differ']:>7}" if b in by_b else f"{'-':>7}"
        verdict = "ok" if result.passed else ("ERROR" if result.error else "FAILED")
        if result.case.expect == "none" and result.passed:
            verdict = "reported"
        lines.append(row + f"  {verdict}")
        if result.error:
            lines.append("    " + result.error.replace("\n", "\n    "))
    lines.append("numbers: positions whose logits differ from one-token decoding (of --n-gen compared)")
    return "\n".join(lines)


def model_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a model to test, or None (the replay tool checks the same first)."""
    if not path.is_file():
        return "no such file"
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        return "not a GGUF file (its first 4 bytes are not 'GGUF'); pass a .gguf model, or leave --model out " \
               "to test the synthetic models"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="hiraishin-llama-smoke", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a real GGUF model instead of the synthetic ones")
    parser.add_argument("--preset", default=None, help="synthetic model shape (default: qwen3-8b)")
    parser.add_argument("--n-layer", type=at_least(1), default=None,
                        help="layers of the synthetic model (default: 4 on CUDA, 1 on CPU)")
    parser.add_argument("--quants", type=name_list(synthetic.QUANT_TYPES, "quantization type",
                                                   lambda q: q.strip().upper()),
                        default=None, help="quantizations (default: Q4_K_M,Q6_K on CUDA, Q4_K_M on CPU)")
    parser.add_argument("--kv", type=name_list(KV_CACHE_TYPES, "KV cache type", lambda k: k.strip().lower()),
                        default=None, help="KV cache types (default: f16,q8_0,turbo4 on CUDA, f16 on CPU)")
    parser.add_argument("--n-gen", type=at_least(1), default=None,
                        help="generated tokens (default: 600 on CUDA, 200 on CPU)")
    parser.add_argument("--n-prompt", type=at_least(1), default=64)
    parser.add_argument("--ctx", type=at_least(1), default=4096)
    parser.add_argument("--batches", type=parse_batches, default=DEFAULT_BATCHES,
                        help=f"verify batch sizes, e.g. 2-16 or 2,4,8, each 1..16 (default: {DEFAULT_BATCHES})")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work-dir", type=Path, default=None, help="where models are kept (default: a cache directory)")
    parser.add_argument("--json", type=Path, default=Path("hiraishin-smoke.json"), help="the report (default: ./hiraishin-smoke.json)")
    parser.add_argument("--partial-offload", type=at_least(0), default=None, metavar="LAYERS",
                        help="on CUDA, also run the first model with only LAYERS layers on the GPU and the rest on "
                             "the CPU (default: half the synthetic model's layers; none with --model; 0: skip)")
    parser.add_argument("--allow-cpu", action="store_true", help="with a CUDA wheel and no GPU, test the CPU backend instead of failing")
    args = parser.parse_args(argv)
    if args.model is not None:
        problem = model_problem(args.model)
        if problem:
            parser.error(f"--model {args.model}: {problem}")
    if args.preset is not None:
        try:
            synthetic.get_preset(args.preset)
        except ValueError as error:
            parser.error(f"--preset: {error}")

    runtime.warn_about_environment("hiraishin-llama-smoke")
    backend = backend_in_use()
    if runtime.built_architectures() and backend != "cuda" and not args.allow_cpu:
        # A CUDA wheel's claim is about its CUDA kernels: passing on the CPU
        # backend instead would prove nothing about them.
        print("hiraishin-llama-smoke: error: this wheel is built for CUDA "
              f"(sm {', '.join(runtime.built_architectures())}) but no CUDA GPU is visible, so its batch-invariant "
              "kernels cannot be tested here; run it on the GPU machine, or pass --allow-cpu to test the CPU backend",
              file=sys.stderr)
        return EXIT_USAGE
    on_gpu = backend == "cuda"
    args.n_gen = args.n_gen or (600 if on_gpu else 200)
    quants = list(args.quants or (("Q4_K_M", "Q6_K") if on_gpu else ("Q4_K_M",)))
    kv_types = list(args.kv or (("f16", "q8_0", "turbo4") if on_gpu else ("f16",)))
    batches = list(args.batches)

    if args.model is not None:
        models = {args.model.name: args.model}
        quants = [args.model.name]
    else:
        work_dir = args.work_dir or runtime.cache_dir() / "models"
        work_dir.mkdir(parents=True, exist_ok=True)
        preset = args.preset or "qwen3-8b"
        n_layer = args.n_layer or (4 if on_gpu else 1)
        models = prepare_models(work_dir, preset, n_layer, quants, args.seed)
    # Layers on the GPU in the split-model case: asked for, or half a synthetic model's; 0 skips it.
    gpu_layers = args.partial_offload
    if gpu_layers is None and args.model is None:
        gpu_layers = n_layer // 2

    started = datetime.datetime.now(datetime.timezone.utc)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="hiraishin-smoke-") as scratch:
            cases = default_cases(backend, quants, kv_types, gpu_layers or None)
            for number, case in enumerate(cases, start=1):
                results.append(run_case(case, models[case.quant], args, Path(scratch), number, len(cases)))
    except UsageError as error:
        print(f"hiraishin-llama-smoke: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    passed = all(r.passed for r in results)
    not_run = [r for r in results if r.error]
    print()
    print(render_table(results, batches))
    summary = {
        "tool": "hiraishin-llama-smoke",
        "version": __version__,
        "date": started.isoformat(timespec="seconds"),
        "backend": backend,
        "exact_backends": sorted(exact_backends()),
        "build": runtime.build_info(),
        "gpus": [asdict(g) for g in runtime.gpus()],
        "models": {name: str(path) for name, path in models.items()},
        "n_gen": args.n_gen,
        "batches": batches,
        "cases": [
            {**asdict(r.case), "name": r.case.name, "exit_code": r.exit_code, "passed": r.passed,
             "error": r.error, "report": r.report}
            for r in results
        ],
        "passed": passed,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(summary, indent=2) + "\n")
    if passed:
        print(f"\nPASSED: report in {args.json}")
        return 0
    if any(not r.passed and not r.error for r in results):
        print(f"\nFAILED: report in {args.json}")
        return EXIT_FAILED
    print(f"\nERROR: {len(not_run)} case(s) could not be run, so nothing is known about them; report in {args.json}")
    return EXIT_NOT_RUN


if __name__ == "__main__":
    sys.exit(main())
