"""``hiraishin-llama-bench``: what exactness costs, per verify batch size.

For each model it times, with batch-invariant mode on (exact) and off
(stock), one verify pass of b tokens for every b (``hiraishin-replay bench``:
llama_decode of b tokens after a prompt, all b logits, synchronized, median of
--reps passes after --warmup), plain one-token decoding, and end-to-end greedy
speculative decoding with the model drafting for itself and with a small
draft model (``hiraishin-replay spec``). It prints exact/stock per b next to
the physical floor: the bytes a pass must read (every weight but the token
embeddings, which are only gathered) over the device's measured copy
bandwidth. From the pass times it derives what exactness costs end to end:
the expected speedup of speculative decoding over plain decoding, exact and
stock, for draft acceptance rates 0.5-0.9 and draft costs of 2-10% of a
one-token pass, each at its best draft length (``speedup.py``).

The models are synthetic (``python -m hiraishin_llama.synthetic``), written
directly in their quantized types by default, so that a full-size model takes
seconds and no F16 model; timings depend on types and shapes, not on weights.
The default is dense (qwen3-8b, all 36 layers); --preset qwen3moe (48 layers,
Qwen3-30B-A3B shapes) or --preset gpt-oss (24 layers, gpt-oss-20b shapes,
MXFP4_MOE) measures a mixture-of-experts model, whose floor counts the experts
a token uses, not all of them. The report says which preset and architecture
were measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import re

import gguf

from . import __version__, runtime, speedup, synthetic
from ._args import ArgumentParser, directory_problem, parse_batches, report_path_problem, write_report
from ._launch import switch_environment, tool_dir
from .modelinfo import ModelKind, model_kind

REPLAY = "hiraishin-replay"
MODES = {"exact": True, "stock": False}
# The only tensor a pass does not read whole: its rows are gathered per token.
GATHERED_TENSORS = ("token_embd.weight",)
# The expert tensors of a mixture-of-experts layer (llama.cpp's LLM_FFN_EXPS_REGEX, which --cpu-moe
# places), weights and biases: a token reads only the experts its router chose.
EXPERT_TENSOR = re.compile(r"\.ffn_(up|down|gate|gate_up)_(ch|)exps")
# Layers of the model a preset is shaped after, where the preset's own default is a few layers for the
# smoke test (qwen3-8b: 4); the mixture-of-experts presets default to all of theirs (48, 24).
FULL_SIZE_LAYERS = {"qwen3-8b": 36}
# Quantizations measured when --quants is left out: a model's native one where it has one (gpt-oss ships
# its experts in MXFP4), else the two the project makes exact.
DEFAULT_QUANTS = {"gpt-oss": ("MXFP4_MOE",), "tiny-gpt-oss": ("MXFP4_MOE",)}


class BenchError(RuntimeError):
    """A measurement could not be made; the message says which and why."""


@dataclass(frozen=True)
class BenchConfig:
    preset: str = "qwen3-8b"
    n_layer: int = 36
    draft_layers: int = 1
    quants: tuple[str, ...] = ("Q4_K_M", "Q6_K")
    batches: tuple[int, ...] = tuple(range(1, 17))
    # Passes start at this KV position; 512 keeps every b up to 16 in one 256-cell attention window.
    depth: int = 512
    reps: int = 20
    warmup: int = 5
    plain_tokens: int = 256
    spec_tokens: int = 256
    spec_prompts: int = 3
    bandwidth_mib: int = 1024
    seed: int = 1
    ctx: int = 2048
    direct: bool = True
    spec: bool = True


@dataclass(frozen=True)
class VerifyRow:
    b: int
    exact_ms: float
    stock_ms: float
    floor_ms: float | None

    @property
    def ratio(self) -> float:
        return self.exact_ms / self.stock_ms


def pass_bytes(model: Path, kind: ModelKind | None = None) -> int:
    """Bytes of weights one forward pass must read: all tensors but the gathered embeddings, and of a
    mixture-of-experts model's expert tensors only the share of the experts one token uses: a pass of b
    tokens reads at least those (more when its tokens choose different experts), so the floor stays a
    floor at every b."""
    reader = gguf.GGUFReader(model)
    read = [t for t in reader.tensors if t.name not in GATHERED_TENSORS]
    kind = kind or model_kind(model)
    if kind is None or not kind.is_moe:
        return sum(int(t.n_bytes) for t in read)
    experts = sum(int(t.n_bytes) for t in read if EXPERT_TENSOR.search(t.name))
    dense = sum(int(t.n_bytes) for t in read if not EXPERT_TENSOR.search(t.name))
    return dense + experts * kind.n_expert_used // kind.n_expert


def model_path(work_dir: Path, config: BenchConfig, quant: str, n_layer: int) -> Path:
    kind = "direct" if config.direct else "quantized"
    return work_dir / f"{config.preset}-{n_layer}l-seed{config.seed}-{quant}-{kind}.gguf"


def prepare_model(work_dir: Path, config: BenchConfig, quant: str, n_layer: int) -> Path:
    """The synthetic model, made once and kept: the same arguments give the same bytes."""
    target = model_path(work_dir, config, quant, n_layer)
    if target.is_file():
        return target
    quantizer = tool_dir() / synthetic.QUANTIZER_NAME
    print(f"making {target.name} ...", flush=True)
    make = synthetic.make_direct_model if config.direct else synthetic.make_quantized_model
    return make(config.preset, config.seed, n_layer, quant, target, quantizer)


def run_replay(arguments: list[str], batch_invariant: bool, report: Path) -> dict:
    """Run hiraishin-replay with the switch set and return its JSON report."""
    command = [str(tool_dir() / REPLAY), *arguments, "--json", str(report)]
    print(f"  {'exact' if batch_invariant else 'stock'}: {' '.join(arguments[:1] + arguments[3:])}", flush=True)
    completed = subprocess.run(command, env=switch_environment(batch_invariant), capture_output=True, text=True)
    if completed.returncode not in (0, 1) or not report.is_file():
        tail = "\n".join((completed.stderr or completed.stdout).strip().splitlines()[-8:])
        raise BenchError(f"{REPLAY} {arguments[0]} with batch-invariant mode "
                         f"{'on' if batch_invariant else 'off'} failed (exit {completed.returncode}):\n{tail}")
    return json.loads(report.read_text())


def verify_rows(exact: dict, stock: dict, bytes_per_pass: int, bandwidth_gb_per_s: float | None) -> list[VerifyRow]:
    stock_by_b = {p["b"]: p for p in stock["verify_passes"]}
    floor_ms = bytes_per_pass / (bandwidth_gb_per_s * 1e9) * 1e3 if bandwidth_gb_per_s else None
    return [VerifyRow(p["b"], p["median_ms"], stock_by_b[p["b"]]["median_ms"], floor_ms)
            for p in exact["verify_passes"] if p["b"] in stock_by_b]


def spec_summary(report: dict) -> dict:
    results = report["results"]
    return {
        "plain_tokens_per_s": statistics.mean(r["plain_tokens_per_s"] for r in results),
        "spec_tokens_per_s": statistics.mean(r["spec_tokens_per_s"] for r in results),
        "acceptance_rate": statistics.mean(r["acceptance_rate"] for r in results if r["acceptance_rate"] is not None)
        if any(r["acceptance_rate"] is not None for r in results) else None,
        "identical_to_plain": sum(1 for r in results if r["identical"]),
        "prompts": len(results),
    }


def expected_speedup(rows: list[VerifyRow]) -> dict:
    """The speedup table (speedup.py), or why there is none for these batch sizes."""
    try:
        return speedup.table_json(speedup.speedup_table([asdict(row) for row in rows]))
    except ValueError as error:
        return {"not_computed": str(error)}


def bench_model(config: BenchConfig, quant: str, work_dir: Path, scratch: Path) -> dict:
    target = prepare_model(work_dir, config, quant, config.n_layer)
    draft = prepare_model(work_dir, config, quant, config.draft_layers) if config.spec else None
    kind = model_kind(target)
    if kind is None:
        raise BenchError(f"the metadata of {target} cannot be read; remove the file so that it is made again")
    bytes_per_pass = pass_bytes(target, kind)
    batches = ",".join(str(b) for b in config.batches)
    common = ["--model", str(target), "--ctx", str(config.ctx), "--seed", str(config.seed)]

    print(f"{quant}: verify passes", flush=True)
    passes = {}
    for mode, switch in MODES.items():
        bandwidth = str(config.bandwidth_mib if mode == "exact" else 0)
        passes[mode] = run_replay(
            ["bench", *common, "--n-prompt", str(config.depth), "--n-gen", str(config.plain_tokens),
             "--batches", batches, "--reps", str(config.reps), "--warmup", str(config.warmup),
             "--bandwidth-mib", bandwidth],
            switch, scratch / f"{quant}-bench-{mode}.json")
    copy = passes["exact"]["copy_bandwidth"]
    bandwidth_gb_per_s = copy["gb_per_s"] if copy else None
    rows = verify_rows(passes["exact"], passes["stock"], bytes_per_pass, bandwidth_gb_per_s)

    spec = {}
    if config.spec:
        print(f"{quant}: speculative decoding", flush=True)
        for draft_name, draft_args in (("self", []), (f"{config.draft_layers}-layer", ["--draft-model", str(draft)])):
            for mode, switch in MODES.items():
                report = run_replay(
                    ["spec", *common, *draft_args, "--n-prompt", "64", "--n-gen", str(config.spec_tokens),
                     "--prompts", str(config.spec_prompts)],
                    switch, scratch / f"{quant}-spec-{draft_name}-{mode}.json")
                spec.setdefault(draft_name, {})[mode] = {**spec_summary(report), "report": report}

    return {
        "model": {"path": str(target), "file_bytes": target.stat().st_size, "pass_bytes": bytes_per_pass,
                  "desc": passes["exact"]["model_desc"], "n_layer": passes["exact"]["n_layer"],
                  "preset": config.preset, "architecture": kind.architecture,
                  "n_expert": kind.n_expert, "n_expert_used": kind.n_expert_used,
                  "draft": str(draft) if draft else None},
        "copy_bandwidth_gb_per_s": bandwidth_gb_per_s,
        "verify": [{**asdict(row), "ratio": row.ratio} for row in rows],
        "expected_speedup": expected_speedup(rows),
        "plain_tokens_per_s": {mode: passes[mode]["plain"]["tokens_per_s"] for mode in MODES},
        "spec": spec,
        "reports": passes,
    }


def render(quant: str, result: dict, max_ratio: float | None) -> str:
    model = result["model"]
    experts = (f", {model['n_expert']} experts ({model['n_expert_used']} used per token)"
               if model.get("n_expert") else "")
    lines = [f"{quant} ({model['desc']}, {model['n_layer']} layers{experts}, "
             f"{model['pass_bytes'] / 1e9:.2f} GB read per pass{' at least' if experts else ''})"]
    bandwidth = result["copy_bandwidth_gb_per_s"]
    header = f"{'b':>3} {'exact ms':>10} {'stock ms':>10} {'exact/stock':>12} {'floor ms':>9} {'exact/floor':>12}"
    lines += [header, "-" * len(header)]
    for row in result["verify"]:
        floor = row["floor_ms"]
        floor_text = "-" if floor is None else f"{floor:.3f}"
        over_floor = "-" if floor is None else f"{row['exact_ms'] / floor:.2f}"
        mark = "  over" if max_ratio is not None and row["b"] > 1 and row["ratio"] > max_ratio else ""
        lines.append(f"{row['b']:>3} {row['exact_ms']:>10.3f} {row['stock_ms']:>10.3f} {row['ratio']:>12.3f} "
                     f"{floor_text:>9} {over_floor:>12}{mark}")
    if bandwidth:
        lines.append(f"floor: {result['model']['pass_bytes'] / 1e9:.2f} GB / {bandwidth:.0f} GB/s (device copy)")
    table = result["expected_speedup"]
    if "rows" in table:
        lines.append(speedup.render([speedup.SpeedupRow.from_json(row) for row in table["rows"]]))
    else:
        lines.append(f"expected speculative speedup: not computed ({table['not_computed']})")
    plain = result["plain_tokens_per_s"]
    lines.append(f"plain decoding: exact {plain['exact']:.1f} tok/s, stock {plain['stock']:.1f} tok/s")
    for draft, modes in result["spec"].items():
        parts = []
        for mode, summary in modes.items():
            acceptance = summary["acceptance_rate"]
            parts.append(f"{mode} {summary['spec_tokens_per_s']:.1f} tok/s "
                         f"({'-' if acceptance is None else f'{100 * acceptance:.0f}%'} accepted, "
                         f"{summary['identical_to_plain']}/{summary['prompts']} identical to plain)")
        lines.append(f"speculative, {draft} draft: " + "; ".join(parts))
    return "\n".join(lines)


def over_limit(results: dict[str, dict], max_ratio: float) -> list[str]:
    return [f"{quant} b={row['b']}: {row['ratio']:.3f}" for quant, result in results.items()
            for row in result["verify"] if row["b"] > 1 and row["ratio"] > max_ratio]


def main(argv: list[str] | None = None) -> int:
    defaults = BenchConfig()
    parser = ArgumentParser(prog="hiraishin-llama-bench", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default=defaults.preset,
                        help=f"synthetic model shape (default: {defaults.preset}; mixture-of-experts: qwen3moe, "
                             "gpt-oss)")
    parser.add_argument("--n-layer", type=int, default=None,
                        help="layers (default: all of the model the preset is shaped after: 36 for qwen3-8b, "
                             "48 for qwen3moe, 24 for gpt-oss)")
    parser.add_argument("--draft-layers", type=int, default=defaults.draft_layers,
                        help="layers of the small draft model (default: 1)")
    parser.add_argument("--quants", default=None,
                        help="models (default: Q4_K_M,Q6_K; MXFP4_MOE for gpt-oss, whose experts ship in MXFP4)")
    parser.add_argument("--batches", type=parse_batches, default=defaults.batches, help="verify batch sizes, each 1..16: a list (1,2,4,8), a range (1-16), an open range (2-: 2 to 16) or a mix (default: 1-16)")
    parser.add_argument("--depth", type=int, default=defaults.depth, help="KV position of the timed passes (default: 512)")
    parser.add_argument("--reps", type=int, default=defaults.reps, help="timed passes per batch size (default: 20)")
    parser.add_argument("--warmup", type=int, default=defaults.warmup, help="untimed passes first (default: 5)")
    parser.add_argument("--plain-tokens", type=int, default=defaults.plain_tokens,
                        help="tokens of timed plain decoding (default: 256)")
    parser.add_argument("--spec-tokens", type=int, default=defaults.spec_tokens,
                        help="tokens per speculative run (default: 256)")
    parser.add_argument("--spec-prompts", type=int, default=defaults.spec_prompts, help="prompts per speculative setting (default: 3)")
    parser.add_argument("--no-spec", action="store_true", help="skip the speculative-decoding runs")
    parser.add_argument("--bandwidth-mib", type=int, default=defaults.bandwidth_mib,
                        help="size of the bandwidth copy in MiB (default: 1024; 0 skips the floor)")
    parser.add_argument("--quantize", action="store_true",
                        help="make the models by quantizing an F16 model instead of writing them directly (slow)")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--max-ratio", type=float, default=None,
                        help="exit 1 if exact/stock exceeds this at any b >= 2 (e.g. 1.10)")
    parser.add_argument("--work-dir", type=Path, default=None, help="where models are kept (default: a cache directory)")
    parser.add_argument("--json", type=Path, default=Path("hiraishin-bench.json"), help="the report (default: ./hiraishin-bench.json)")
    args = parser.parse_args(argv)

    try:
        preset = synthetic.get_preset(args.preset)
        quants = tuple(synthetic.normalize_quant_type(q) for q in args.quants.split(",")) if args.quants is not None \
            else DEFAULT_QUANTS.get(args.preset, defaults.quants)
    except ValueError as error:
        parser.error(str(error))
    if args.n_layer is None:
        args.n_layer = FULL_SIZE_LAYERS.get(args.preset, preset.n_layer)
    for name in ("n_layer", "draft_layers", "reps", "plain_tokens", "spec_tokens", "spec_prompts"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    config = BenchConfig(preset=args.preset, n_layer=args.n_layer, draft_layers=args.draft_layers, quants=quants,
                         batches=args.batches, depth=args.depth, reps=args.reps, warmup=args.warmup,
                         plain_tokens=args.plain_tokens, spec_tokens=args.spec_tokens, spec_prompts=args.spec_prompts,
                         bandwidth_mib=args.bandwidth_mib, seed=args.seed,
                         ctx=max(2048, args.depth + max(args.batches) + args.plain_tokens + 1),
                         direct=not args.quantize, spec=not args.no_spec)

    # Checked before the models are made and timed: a run of an hour must not fail at its last write.
    problem = report_path_problem(args.json)
    if problem:
        parser.error(f"--json {args.json}: {problem}")
    work_dir = args.work_dir or runtime.cache_dir() / "models"
    # Made here; whether it takes new files is found when a model is missing (its error is caught below).
    problem = directory_problem(work_dir, must_write=False)
    if problem:
        where = "--work-dir" if args.work_dir is not None else "the model cache (choose another with --work-dir)"
        parser.error(f"{where} {work_dir}: {problem}")

    runtime.warn_about_environment("hiraishin-llama-bench")
    started = datetime.datetime.now(datetime.timezone.utc)
    results = {}
    try:
        with tempfile.TemporaryDirectory(prefix="hiraishin-bench-") as scratch:
            for quant in quants:
                results[quant] = bench_model(config, quant, work_dir, Path(scratch))
                print("\n" + render(quant, results[quant], args.max_ratio) + "\n", flush=True)
    except (BenchError, OSError, ValueError, synthetic.QuantizationError) as error:
        print(f"hiraishin-llama-bench: error: {error}", file=sys.stderr)
        return 2

    build = runtime.build_info()
    report = {
        "tool": "hiraishin-llama-bench",
        "version": __version__,
        "date": started.isoformat(timespec="seconds"),
        "commit": build.get("patched_commit"),
        "upstream": build.get("upstream"),
        "build": build,
        "gpus": [asdict(g) for g in runtime.gpus()],
        "driver": runtime.driver_versions(),
        "config": asdict(config),
        # What was measured: the preset, and the architecture and experts its models have (from their GGUF).
        "preset": config.preset,
        "architecture": next((r["model"]["architecture"] for r in results.values()), None),
        "moe": any(r["model"]["n_expert"] > 0 for r in results.values()),
        "results": results,
    }
    failures = over_limit(results, args.max_ratio) if args.max_ratio is not None else []
    report["max_ratio"] = args.max_ratio
    report["over_max_ratio"] = failures
    try:
        write_report(args.json, report)
    except OSError as error:
        print(f"hiraishin-llama-bench: error: --json {args.json}: cannot be written "
              f"({(error.strerror or str(error)).lower()}); free space or give a writable path and run again",
              file=sys.stderr)
        return 2
    print(f"report in {args.json}")
    if failures:
        print(f"exact/stock above {args.max_ratio}: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
