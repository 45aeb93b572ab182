"""``hiraishin-llama-smoke``: prove on this machine that batched verify passes
reproduce one-token decoding bit for bit.

For each model and KV cache type it runs ``hiraishin-replay`` twice: with
batch-invariant mode on, expecting identical logits at every position, and
with it off (the negative control), expecting differences on CUDA - a control
that shows no difference there means the test proves nothing. Backends the
build does not claim to be exact are reported, not judged.

The default run also has mixture-of-experts models (--no-moe leaves them
out), each with a control: on CUDA qwen3moe Q4_K_M (Qwen3-30B-A3B shapes,
2 layers) with KV f16 and q8_0 and with its experts on the CPU
(hiraishin-replay --cpu-moe, as llama-server --cpu-moe runs a model larger
than the GPU), and gpt-oss MXFP4_MOE (gpt-oss-20b shapes, 2 layers); on the
CPU backend qwen3moe Q4_K_M, 1 layer. They generate 200 tokens, which after
the 64-token prompt still cross KV cell 256. A build claims MoE models exact
on a backend only where its build info lists the backend under
exact_moe_backends; elsewhere the MoE cases are reported, not judged. The
experts=CPU cases need a claim of their own (exact_moe_experts_on_cpu_backends).
A --model that is a mixture-of-experts model is tested the same way.

The default run also has hybrid models with recurrent layers (--no-hybrid
leaves them out), a control each, KV f16, 200 generated tokens: on CUDA
qwen35 Q4_K_M (Qwen3.5/3.6 27B shapes: gated delta nets, full attention in
the fourth layer; 4 layers) and nemotron-h Q4_K_M (Nemotron-H-8B shapes:
Mamba-2, MLP and attention layers in its real pattern; 8 layers); on the CPU
tiny-qwen35 and tiny-nemotron-h Q4_K_M. A build claims hybrid models exact
on a backend only where its build info lists the backend under
exact_hybrid_backends; elsewhere they are reported, not judged. A --model with recurrent layers is tested the same way.

On CUDA the default run also has a model of each of the weight types users
pick most beside Q4_K_M and Q6_K (--no-types leaves them out): Q8_0, Q5_K_M,
IQ4_XS and BF16, the dense preset at its layer count, KV f16, switch on and
its control each (F16 is not: on CUDA its fused FFN is not covered, see
hiraishin-llama-coverage). The CPU backend, which is batch-invariant for
every weight type of ggml's table in the op tests, keeps its default run.

The default run ends with a slots case of the first dense model and its
control (--no-slots leaves them out): hiraishin-replay slots decodes 8
requests greedily, each alone, then replays them as llama-server -np 4
serves them, 4 sequences side by side whose prompt chunks and verify
batches of every size join into shared batches, each slot taking its second
request when the first ends, and compares every position's logits with the
request decoded alone. On CUDA each slot has a KV stream of its own and a
2200-token prompt; on the CPU they share the unified KV cache. A build
claims several slots exact only where its build info lists the backend
under exact_slots_backends; elsewhere they are reported, not judged.

Exit status: 0 passed; 1 the guarantee failed (a real difference, or no
difference where the control needs one); 2 a usage error (bad arguments or
model file: nothing was judged); 3 a case could not be run (the replay tool
failed, e.g. out of memory), so nothing is known about it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import __version__, coverage, runtime, synthetic
from ._args import (ArgumentParser, at_least, directory_problem, name_list, parse_batches, report_path_problem,
                    write_report)
from ._launch import BIN_DIR_ENV, switch_environment, tool_dir
from .modelinfo import model_kind

# Every verify batch size the guarantee covers: several kernel choices depend on the exact width
# (rows per block at 7 and at 10-16 columns, one instantiation per width), so a sample would miss some.
DEFAULT_BATCHES = "2-16"
# The KV cache types hiraishin-replay accepts (its --cache-type-k/-v).
KV_CACHE_TYPES = ("f16", "q8_0", "q4_0", "turbo2", "turbo3", "turbo4")
EXIT_FAILED, EXIT_USAGE, EXIT_NOT_RUN = 1, 2, 3
# Tokens generated in the split-model case: its CPU layers and output matrix run at CPU speed, and 200
# tokens after the 64-token prompt still cross KV cell 256, where verify batches are cut.
SPLIT_N_GEN = 200
DEFAULT_N_PROMPT = 64
DEFAULT_N_GEN = {"cuda": 600, "cpu": 200}
# Where the stock kernels first differed in the default CPU run (benchmarks/results/
# smoke-cpu-wheel-rev9-b10354.json, --n-gen 200 after the 64-token prompt): at b = 2 and 3 only from KV
# position 256 on, where the single-token flash attention starts splitting the KV range across threads;
# at b >= 4 from the first generated position. On CUDA every b differed from the first position.
CPU_CONTROL_FIRST_DIFFERENCE = 256
# Positions past that one a control should reach: the default run's b = 2 control differed at 8 of them.
CONTROL_MARGIN = 8
CPU_CONTROL_EARLY_BATCH = 4
# Tokens generated in the mixture-of-experts cases: a verify batch of b tokens routes to up to 8b experts
# per layer, and with the experts on the CPU they run at CPU speed; 200 tokens after the 64-token prompt
# still cross KV cell 256, where verify batches are cut, so the cut is tested as in the dense cases.
MOE_N_GEN = 200
# Tokens generated in the hybrid cases: as many as the MoE cases, for the same reason (200 after the 64-token
# prompt cross KV cell 256); a recurrent layer's state carries every earlier token, so a difference there
# stays in every later position.
HYBRID_N_GEN = 200


@dataclass(frozen=True)
class MoeModel:
    """A synthetic mixture-of-experts model of the default run, and the cases it gets."""

    preset: str
    quant: str
    kv_types: tuple[str, ...]
    n_layer: int
    """Few layers: each holds every expert (qwen3moe: 128 of 2048 x 768), so layers cost file size and
    model-making time, while what is tested - the routed products per batch width - is in every layer."""
    experts_on_cpu_case: bool = False
    """On CUDA, one more case with the expert tensors on the CPU (hiraishin-replay --cpu-moe)."""


MOE_MODELS: dict[str, tuple[MoeModel, ...]] = {
    "cuda": (
        MoeModel("qwen3moe", "Q4_K_M", ("f16", "q8_0"), n_layer=2, experts_on_cpu_case=True),
        MoeModel("gpt-oss", "MXFP4_MOE", ("f16",), n_layer=2),
    ),
    # The real Qwen3-30B-A3B shapes, not tiny-qwen3moe: the CPU's MoE kernels choose their paths by
    # matrix shape. One layer, as for the dense model on the CPU: its two cases took 20 s on 2 cores,
    # and making the model once 1.5 minutes (1.5 GB at F16, kept in the cache with the 0.5 GB Q4_K_M);
    # a second layer would double both and reach no other kernel.
    "cpu": (MoeModel("qwen3moe", "Q4_K_M", ("f16",), n_layer=1),),
}


# The weight types of the default run beside the main models' (see the module's help): one model each, KV f16,
# switch on and its control. Chosen from what users run (the K-quant mixes, the IQ4 family, a float type), each
# reaching other kernels than Q4_K_M and Q6_K: Q8_0 and Q5_K their tensor-core kernels, IQ4_XS the mat-vec kernel
# at every width, BF16 the float vector kernel.
@dataclass(frozen=True)
class HybridModel:
    """A synthetic hybrid model (recurrent layers between attention layers) of the default run."""

    preset: str
    quant: str
    n_layer: int
    """Enough layers for every kind the preset has: qwen35's fourth is its first full-attention layer;
    nemotron-h's pattern reaches attention at its eighth (M-M-M-M*), nemotron-h-moe's at its sixth (MEMEM*)."""
    kv_types: tuple[str, ...] = ("f16",)
    """A hybrid with experts also gets, on CUDA, a case with its experts on the CPU (--cpu-moe) and its control."""


HYBRID_MODELS: dict[str, tuple[HybridModel, ...]] = {
    # The two models this fork's users run (Qwen3.6-35B-A3B, Nemotron-3-Nano-30B-A3B) at their real shapes,
    # with a quantized KV cache beside f16: qwen35moe's 4 layers hold 256 experts each (1.8 GB at Q4_K_M), and
    # its MTP block is written too, though the replay does not run it.
    "cuda": (HybridModel("qwen35", "Q4_K_M", n_layer=4), HybridModel("nemotron-h", "Q4_K_M", n_layer=8),
             HybridModel("qwen35moe", "Q4_K_M", n_layer=4, kv_types=("f16", "q8_0")),
             HybridModel("nemotron-h-moe", "Q4_K_M", n_layer=6, kv_types=("f16", "q8_0"))),
    # Row lengths of 256 and the real head sizes (GDN heads of 128, Mamba-2 state 128): the CPU's recurrent
    # kernels loop over heads and states, so the tiny presets reach the same code at a small cost.
    "cpu": (HybridModel("tiny-qwen35", "Q4_K_M", n_layer=4), HybridModel("tiny-nemotron-h", "Q4_K_M", n_layer=5),
            HybridModel("tiny-qwen35moe", "Q4_K_M", n_layer=4),
            HybridModel("tiny-nemotron-h-moe", "Q4_K_M", n_layer=5)),
}


TYPE_QUANTS: dict[str, tuple[str, ...]] = {"cuda": ("Q8_0", "Q5_K_M", "IQ4_XS", "BF16"), "cpu": ()}


@dataclass(frozen=True)
class SlotsRun:
    """The default run's slots case (hiraishin-replay slots): requests side by side as a server's slots."""

    slots: int
    kv_unified: bool
    n_prompt: int
    n_gen: int
    """140 tokens take every verify batch size of 1..16 at least once in each request."""
    ctx: int
    """KV cells per slot."""


SLOTS_RUNS: dict[str, SlotsRun] = {
    # A KV stream per slot, the layout CUDA's kernels cover, and a prompt past 2048 cells: 16 of the vector
    # kernel's 128-cell tiles, where a flash-attention split that followed the stream count would change.
    "cuda": SlotsRun(slots=4, kv_unified=False, n_prompt=2200, n_gen=140, ctx=2560),
    # The unified cache the server defaults to; the CPU's flash attention covers any layout of a slot's cells.
    "cpu": SlotsRun(slots=4, kv_unified=True, n_prompt=40, n_gen=140, ctx=512),
}


class UsageError(Exception):
    """The input cannot be tested (found while running: the replay tool refused it)."""


@dataclass(frozen=True)
class Case:
    quant: str
    """The quantization of a synthetic model, or the file name of a --model."""
    kv: str
    batch_invariant: bool
    expect: str
    """identical, differ, or none (report only)."""
    gpu_layers: int | None = None
    """Layers on the GPU when the model is split between the GPU and the CPU; None: all on the GPU."""
    n_gen: int | None = None
    """Generated tokens, if fewer than the run's --n-gen."""
    preset: str | None = None
    """The synthetic mixture-of-experts model's preset, named in the case; None for the dense preset
    (its cases keep their names) and for a --model."""
    moe: bool = False
    """A mixture-of-experts model: judged only where the build claims MoE models exact."""
    experts_on_cpu: bool = False
    """The expert tensors on the CPU, the rest on the GPU (hiraishin-replay --cpu-moe)."""
    hybrid: bool = False
    """A model with recurrent layers: judged only where the build claims hybrid models exact."""
    slots: int | None = None
    """hiraishin-replay slots with this many sequences side by side; None: the one-sequence replay."""
    kv_unified: bool = True
    """Of a slots case: one KV cache for every slot (the server's default) or a stream per slot."""
    n_prompt: int | None = None
    """Prompt tokens, if not the run's --n-prompt (a slots case sets its own)."""
    ctx: int | None = None
    """Context cells (per slot in a slots case), if not the run's --ctx."""

    @property
    def model(self) -> str:
        """Which model the case runs: its key in the run's models."""
        return f"{self.preset} {self.quant}" if self.preset else self.quant

    @property
    def name(self) -> str:
        split = f" ngl={self.gpu_layers}" if self.gpu_layers is not None else ""
        experts = " experts=CPU" if self.experts_on_cpu else ""
        slots = f" slots={self.slots} kvu={'on' if self.kv_unified else 'off'}" if self.slots else ""
        return f"{self.model} kv={self.kv}{split}{experts}{slots} switch {'on' if self.batch_invariant else 'off'}"


@dataclass
class CaseResult:
    case: Case
    exit_code: int
    passed: bool
    error: str | None = None
    report: dict | None = field(default=None, repr=False)
    seconds: float | None = None
    """Wall time of the case's replay."""


def backend_in_use() -> str:
    return "cuda" if runtime.built_architectures() and runtime.gpus() else "cpu"


def exact_backends() -> set[str]:
    """The backends this wheel holds to "identical": the stack's exact backends that it was built with."""
    return set(runtime.exact_backends())


def exact_moe_backends() -> set[str]:
    """The backends this wheel holds to "identical" for mixture-of-experts models: those of exact_backends()
    that its build info (stack.json) also lists under exact_moe_backends (revision 16 on: CUDA and the CPU);
    on any other backend the MoE cases are reported, not judged."""
    return exact_backends() & set(runtime.build_info().get("exact_moe_backends", []))


def exact_hybrid_backends() -> set[str]:
    """The backends this wheel holds to "identical" for models with recurrent layers (gated delta nets,
    Mamba-2): those of exact_backends() that its build info also lists under exact_hybrid_backends; on any other
    backend the hybrid cases are reported, not judged."""
    return exact_backends() & set(runtime.build_info().get("exact_hybrid_backends", []))


def exact_slots_backends() -> set[str]:
    """The backends this wheel holds to "identical" for several sequences side by side (a server's slots): those
    of exact_backends() that its build info also lists under exact_slots_backends; elsewhere the slots cases are
    reported, not judged."""
    return exact_backends() & set(runtime.build_info().get("exact_slots_backends", []))


def exact_experts_on_cpu_backends() -> set[str]:
    """The GPU backends whose MoE models stay exact with their experts on the CPU (--cpu-moe): those of
    exact_moe_backends() that stack.json also lists under exact_moe_experts_on_cpu_backends. Revisions 15 and
    16 list none (on the H200 such a model differed at one position of 200 at every b: benchmarks/results/
    smoke-h200-rev15-b10018-1.2.0.json); revision 17 lists CUDA. Where it is not listed, those cases are
    reported, not judged."""
    return exact_moe_backends() & set(runtime.build_info().get("exact_moe_experts_on_cpu_backends", []))


def default_cases(backend: str, quants: list[str], kv_types: list[str], gpu_layers: int | None = None, *,
                  moe: bool = False, preset: str | None = None, n_gen: int | None = None,
                  experts_on_cpu_case: bool = True, hybrid: bool = False) -> list[Case]:
    """The cases of one set of models (``quants``, or one --model): each KV type with the switch on, one
    control per model. With ``gpu_layers``, on CUDA, one more with the model split between GPU and CPU;
    for a mixture-of-experts model (``moe``), on CUDA and unless ``experts_on_cpu_case`` is false, one more
    with its experts on the CPU, and its control. ``preset`` names a synthetic MoE or hybrid model in the
    cases, ``n_gen`` shortens them. A ``hybrid`` model (recurrent layers) is judged where the build claims
    hybrids exact, and where it also has experts, only where it claims MoE models exact too."""
    claimed = backend in (exact_moe_backends() if moe else exact_backends())
    if hybrid:
        claimed = claimed and backend in exact_hybrid_backends()
    on, off = ("identical", "differ") if claimed else ("none", "none")
    split_on, split_off = ("identical", "differ") if backend in exact_experts_on_cpu_backends() else ("none", "none")

    def case(quant: str, kv: str, switch: bool, *, gpu_layers: int | None = None, experts_on_cpu: bool = False,
             case_n_gen: int | None = n_gen) -> Case:
        expect = (split_on if switch else split_off) if experts_on_cpu else (on if switch else off)
        return Case(quant, kv, switch, expect, gpu_layers=gpu_layers, n_gen=case_n_gen,
                    preset=preset, moe=moe, experts_on_cpu=experts_on_cpu, hybrid=hybrid)

    cases = [case(q, kv, True) for q in quants for kv in kv_types]
    # Partial offload, as large models are run: the CPU runs the first layers, and the scheduler may move
    # ops between the backends by batch size, which the guarantee must survive.
    if backend == "cuda" and gpu_layers is not None:
        cases.append(case(quants[0], kv_types[0], True, gpu_layers=gpu_layers, case_n_gen=n_gen or SPLIT_N_GEN))
    # Experts on the CPU, as a MoE model larger than the GPU is served (llama-server --cpu-moe): the CPU
    # computes the routed products, and the scheduler may move them to the GPU for a large enough batch.
    experts_on_cpu = backend == "cuda" and moe and experts_on_cpu_case
    if experts_on_cpu:
        cases.append(case(quants[0], kv_types[0], True, experts_on_cpu=True, case_n_gen=n_gen or SPLIT_N_GEN))
    # One negative control per model: on a backend the build claims, the bug must show with the
    # switch off, or the identical results above prove nothing.
    cases += [case(q, kv_types[0], False) for q in quants]
    if experts_on_cpu:
        # Its own control: with the experts on the CPU other kernels compute them.
        cases.append(case(quants[0], kv_types[0], False, experts_on_cpu=True, case_n_gen=n_gen or SPLIT_N_GEN))
    return cases


def type_cases(backend: str, quants: list[str]) -> list[Case]:
    """The default run's weight-type cases, one model of each of ``quants``: KV f16, then the controls."""
    on, off = ("identical", "differ") if backend in exact_backends() else ("none", "none")
    return [Case(quant, "f16", True, on) for quant in quants] + [Case(quant, "f16", False, off) for quant in quants]


def slots_cases(backend: str, quant: str) -> list[Case]:
    """The slots case of one model (SLOTS_RUNS) and its control: the stock kernels and KV placement make a
    request's logits depend on the requests beside it."""
    run = SLOTS_RUNS[backend]
    on, off = ("identical", "differ") if backend in exact_slots_backends() else ("none", "none")
    return [Case(quant, "f16", switch, on if switch else off, n_gen=run.n_gen, slots=run.slots,
                 kv_unified=run.kv_unified, n_prompt=run.n_prompt, ctx=run.ctx) for switch in (True, False)]


def moe_cases(backend: str) -> list[Case]:
    """The default run's mixture-of-experts cases (MOE_MODELS), after the dense ones."""
    return [case for model in MOE_MODELS[backend]
            for case in default_cases(backend, [model.quant], list(model.kv_types), moe=True, preset=model.preset,
                                      n_gen=MOE_N_GEN, experts_on_cpu_case=model.experts_on_cpu_case)]


def hybrid_cases(backend: str) -> list[Case]:
    """The default run's hybrid cases (HYBRID_MODELS), after the mixture-of-experts ones."""
    return [case for model in HYBRID_MODELS[backend]
            for case in default_cases(backend, [model.quant], list(model.kv_types), preset=model.preset,
                                      n_gen=HYBRID_N_GEN, hybrid=True, moe=preset_is_moe(model.preset))]


def preset_is_hybrid(preset: str) -> bool:
    """Whether a synthetic preset has recurrent layers (gated delta nets or Mamba-2)."""
    return synthetic.get_preset(preset).architecture in synthetic.HYBRID_ARCHITECTURES


def preset_is_moe(preset: str) -> bool:
    """Whether a synthetic preset is a mixture-of-experts model (it has experts)."""
    return getattr(synthetic.get_preset(preset), "n_expert", 0) > 0


@dataclass(frozen=True)
class SyntheticModels:
    """Synthetic models of one preset and layer count, one per quantization."""

    preset: str
    n_layer: int
    quants: tuple[str, ...]
    named: bool
    """The preset is named in the cases (mixture-of-experts presets); the dense preset's cases keep their names."""

    def label(self, quant: str) -> str:
        """The model's key in the run, as Case.model says it."""
        return f"{self.preset} {quant}" if self.named else quant


def model_file(work_dir: Path, preset: str, n_layer: int, seed: int, quant: str) -> Path:
    return work_dir / f"{preset}-{n_layer}l-seed{seed}-{quant}.gguf"


def prepare_models(work_dir: Path, preset: str, n_layer: int, quants: list[str], seed: int,
                   seconds: dict[str, float] | None = None) -> dict[str, Path]:
    """Synthetic models, made once per (preset, layers, seed) and reused: same seed, same bytes. The wall time of
    each file made goes to ``seconds`` under its name (what a run's new cases cost the first time)."""
    quantizer = tool_dir() / synthetic.QUANTIZER_NAME
    models = {}
    f16 = model_file(work_dir, preset, n_layer, seed, "F16")
    timings = {} if seconds is None else seconds
    for quant in quants:
        target = model_file(work_dir, preset, n_layer, seed, quant)
        if not target.is_file():
            if not f16.is_file():
                print(f"making synthetic model {f16.name} ...", flush=True)
                started = time.monotonic()
                synthetic.make_model(preset, seed, n_layer, f16)
                timings[f16.name] = round(time.monotonic() - started, 1)
                print(f"  made ({timings[f16.name]} s)", flush=True)
            print(f"quantizing to {quant} ...", flush=True)
            started = time.monotonic()
            partial = target.with_suffix(".partial")
            synthetic.quantize(f16, partial, quant, quantizer)
            partial.replace(target)
            timings[target.name] = round(time.monotonic() - started, 1)
            print(f"  quantized ({timings[target.name]} s)", flush=True)
        models[quant] = target
    return models


def case_n_gen(case: Case, args: argparse.Namespace) -> int:
    """The tokens a case generates: the run's --n-gen, or fewer where the case is shortened."""
    return min(args.n_gen, case.n_gen) if case.n_gen else args.n_gen


def run_case(case: Case, model: Path, args: argparse.Namespace, json_dir: Path, number: int = 1,
             total: int = 1) -> CaseResult:
    """Run case ``number`` of ``total``; a usage error of the replay tool (exit 2) raises UsageError."""
    report_path = json_dir / f"{case.name.replace(' ', '_').replace('=', '-')}.json"
    env = switch_environment(case.batch_invariant)
    command = [
        str(tool_dir() / "hiraishin-replay"), "slots" if case.slots else "replay", "--model", str(model),
        "--cache-type-k", case.kv, "--cache-type-v", case.kv,
        "--n-gen", str(case_n_gen(case, args)), "--n-prompt", str(case.n_prompt or args.n_prompt),
        "--batches", ",".join(str(b) for b in args.batches),
        "--ctx", str(case.ctx or args.ctx), "--expect", case.expect, "--json", str(report_path),
    ]
    if case.slots:
        command += ["--slots", str(case.slots), "--kv-unified", "on" if case.kv_unified else "off"]
    if case.gpu_layers is not None:
        command += ["--ngl", str(case.gpu_layers)]
    if case.experts_on_cpu:
        command += ["--cpu-moe"]
    if not args.window_guard:
        # Verify batches that cross multiples of 256 KV cells, as a caller that does not cut them makes
        # (its own verify loop, a prompt continuing a cached prefix): no model may need the cut to be exact.
        command += ["--no-256-guard"]
    # Which case, of how many: a CUDA run takes minutes, and `hiraishin smoke` shows the count from this line.
    print(f"running {case.name} ({number}/{total}) ...", flush=True)
    started = time.monotonic()
    completed = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = round(time.monotonic() - started, 1)
    print(f"  {case_outcome(case, completed.returncode)} ({seconds:.1f} s)", flush=True)
    if completed.returncode == EXIT_USAGE:
        message = replay_refusal(completed.stderr) or f"hiraishin-replay refused {case.name} (exit 2)"
        if case.experts_on_cpu and "unknown option '--cpu-moe'" in message:
            message += (f" ({tool_dir() / 'hiraishin-replay'} predates --cpu-moe: use the one of this wheel, or pass "
                        "--no-moe to leave the mixture-of-experts cases out)")
        raise UsageError(message)
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    if completed.returncode not in (0, 1) or report is None:
        tail = "\n".join((completed.stderr or completed.stdout).strip().splitlines()[-5:])
        return CaseResult(case, completed.returncode, False, error=tail or "no report written", report=report,
                          seconds=seconds)
    if case.experts_on_cpu and report.get("tensors_overridden") == 0:
        # The replay only warns, as llama.cpp does; but this case would have tested the model with every
        # tensor on the GPU under a name that says otherwise.
        return CaseResult(case, completed.returncode, False, report=report, seconds=seconds,
                          error=f"--cpu-moe put no tensor of {model.name} on the CPU (the model has "
                                f"{report.get('n_expert', 0)} experts per layer), so nothing with its experts on "
                                "the CPU was tested")
    return CaseResult(case, completed.returncode, completed.returncode == 0, report=report, seconds=seconds)


REPLAY_ERROR = "hiraishin-replay: error: "
LLAMA_LINE = "llama.cpp: "
# llama.cpp's own words that a load failed, said after the reason: they add nothing to it.
LOAD_FAILED = re.compile(r"failed to load model( from .*)?")
# What llama.cpp puts before a reason: the function that logged it, and the wrapper of a rethrown one.
LOG_PREFIX = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*|error loading model): ")


def replay_refusal(stderr: str) -> str | None:
    """The replay tool's usage error as one line: its message, then the reasons llama.cpp logged (as
    "  llama.cpp: ..." lines under it), which say why, e.g. that a truncated file's key-value pairs could
    not be read. Without them a model that fails to load would only say that it failed to load."""
    lines = stderr.strip().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(REPLAY_ERROR)), None)
    if start is None:
        return lines[-1].strip() if lines else None
    message = lines[start].removeprefix(REPLAY_ERROR).strip()
    reasons: list[str] = []
    for line in lines[start + 1:]:
        if not line.strip().startswith(LLAMA_LINE):
            break
        reason = line.strip().removeprefix(LLAMA_LINE).strip()
        while LOG_PREFIX.match(reason):
            reason = LOG_PREFIX.sub("", reason, count=1)
        if reason and not LOAD_FAILED.fullmatch(reason) and reason not in reasons:
            reasons.append(reason)
    if reasons:
        message += ": " + "; ".join(reasons)
    if "could not load" in message:
        message += " (check that the file is a whole GGUF model, not cut short by a download or a copy)"
    return message


def control_note(case: Case, result: CaseResult, args: argparse.Namespace, backend: str) -> str | None:
    """For a negative control that showed no difference in a short run: that this length proves nothing,
    and from what length the default runs showed the stock differences."""
    if case.expect != "differ" or result.passed or result.error:
        return None
    n_gen = case_n_gen(case, args)
    n_prompt = case.n_prompt or args.n_prompt
    last_position = n_prompt + n_gen - 1
    reach = CPU_CONTROL_FIRST_DIFFERENCE + CONTROL_MARGIN
    if backend == "cpu" and max(args.batches) < CPU_CONTROL_EARLY_BATCH and last_position < reach - 1:
        suggested = max(DEFAULT_N_GEN["cpu"], reach - n_prompt)
        return (f"{case.name}: the control proves nothing at this length: --n-gen {n_gen} after the "
                f"{n_prompt}-token prompt reaches KV position {last_position} only, and in the default CPU "
                f"run (--n-gen {DEFAULT_N_GEN['cpu']}) the stock kernels differed at b = 2 and 3 only from "
                f"position {CPU_CONTROL_FIRST_DIFFERENCE} on; raise --n-gen to {suggested} or more")
    # A shortened case (the mixture-of-experts ones) is judged at its own length.
    default = case.n_gen or DEFAULT_N_GEN.get(backend)
    if default is None or n_gen >= default:
        return None
    return (f"{case.name}: the control proves nothing at this length: --n-gen {n_gen} is below the default "
            f"{default}, at which the default run's stock kernels differed; raise --n-gen to {default} or more")


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
    # Wide enough for the longest name, e.g. "qwen3moe Q4_K_M kv=f16 experts=CPU switch off".
    width = max([36, *(len(result.case.name) for result in results)])
    header = f"{'case':<{width}} {'expect':<10}" + "".join(f"{'b=' + str(b):>7}" for b in batches) + "  result"
    lines = [header, "-" * len(header)]
    for result in results:
        row = f"{result.case.name:<{width}} {result.case.expect:<10}"
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
    if any(result.case.moe and not result.case.experts_on_cpu and result.case.expect == "none" for result in results):
        lines.append("mixture-of-experts cases are reported, not judged: this build does not claim MoE models exact "
                     "on this backend (its build info lists no exact_moe_backends for it)")
    if any(result.case.experts_on_cpu and result.case.expect == "none" for result in results):
        lines.append("experts=CPU cases are reported, not judged: this build does not claim MoE models exact with "
                     "their experts on the CPU (its build info lists no exact_moe_experts_on_cpu_backends for it)")
    if any(result.case.slots for result in results):
        lines.append("slots cases: positions of each size of verify batch, of every request, whose logits differ from "
                     "the request decoded alone")
    if any(result.case.slots and result.case.expect == "none" for result in results):
        lines.append("slots cases are reported, not judged: this build does not claim several sequences side by side "
                     "exact on this backend (its build info lists no exact_slots_backends for it)")
    # A hybrid with experts that is not judged says so by the mixture-of-experts line where MoE is not claimed.
    if any(result.case.hybrid and result.case.expect == "none" and not result.case.moe for result in results):
        lines.append("hybrid cases are reported, not judged: this build does not claim models with recurrent layers "
                     "exact on this backend (its build info lists no exact_hybrid_backends for it)")
    return "\n".join(lines)


def check_coverage(path: Path, backend: str) -> dict:
    """What hiraishin-llama-coverage says of a --model on the smoke test's backend, printed before its cases run
    (a model the mode does not cover is still tested: the cases then show where it differs); its report for the
    smoke test's JSON."""
    try:
        data = coverage.load_coverage()
        model = coverage.read_model(path, data)
    except (coverage.DataError, coverage.InputError) as error:
        print(f"coverage: not checked: {error}\n", flush=True)
        return {"checked": False, "error": str(error)}
    verdict = coverage.judge(model, backend, data)
    print(coverage.render(model, [verdict], data), flush=True)
    if not verdict.covered:
        print("the cases run all the same: they show where this model differs", flush=True)
    print(flush=True)
    return {"checked": True, **coverage.report(model, [verdict], data)}


def model_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a model to test, or None (the replay tool checks the same first)."""
    if path.is_dir():
        return "is a directory, not a model file; pass the .gguf file itself"
    if not path.is_file():
        return ("no such file; check the path, or leave --model out to test the synthetic models"
                if not path.exists() else "is not a regular file; pass a .gguf model file")
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as error:
        return f"cannot be read ({(error.strerror or str(error)).lower()}); check its permissions"
    if not magic:
        return "is empty; pass a .gguf model, or leave --model out to test the synthetic models"
    if magic != b"GGUF":
        return "not a GGUF file (its first 4 bytes are not 'GGUF'); pass a .gguf model, or leave --model out " \
               "to test the synthetic models"
    return None


# Options of the synthetic models only: with --model they would be ignored, so they are refused.
# (--work-dir is let through: a wrapper that always names its cache directory must still run --model.)
SYNTHETIC_ONLY = (("quants", "--quants"), ("preset", "--preset"), ("n_layer", "--n-layer"), ("seed", "--seed"),
                  ("moe", "--moe/--no-moe"), ("hybrid", "--hybrid/--no-hybrid"), ("types", "--types/--no-types"))


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="hiraishin-llama-smoke", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path,
                        help="a real GGUF model instead of the synthetic ones (then --quants, --preset, --n-layer, "
                             "--seed, --moe/--no-moe and --hybrid/--no-hybrid, which choose the synthetic models, are "
                             "refused); a "
                             "mixture-of-experts model gets the MoE cases: judged only where the build claims MoE "
                             "exact, and on CUDA one more with its experts on the CPU")
    parser.add_argument("--preset", default=None,
                        help="synthetic model shape of the --quants/--kv cases (default: qwen3-8b; a "
                             "mixture-of-experts preset, e.g. qwen3moe, makes them MoE cases and replaces the "
                             "default MoE cases)")
    parser.add_argument("--n-layer", type=at_least(1), default=None,
                        help="layers of the synthetic --quants models (default: 4 on CUDA, 1 on CPU; the default "
                             "mixture-of-experts models have their own, see --moe)")
    parser.add_argument("--quants", type=name_list(synthetic.QUANT_TYPES, "quantization type",
                                                   lambda q: q.strip().upper()),
                        default=None, help="quantizations of the synthetic models "
                                           "(default: Q4_K_M,Q6_K on CUDA, Q4_K_M on CPU)")
    parser.add_argument("--kv", type=name_list(KV_CACHE_TYPES, "KV cache type", lambda k: k.strip().lower()),
                        default=None, help="KV cache types (default: f16,q8_0,turbo4 on CUDA, f16 on CPU)")
    parser.add_argument("--n-gen", type=at_least(1), default=None,
                        help=f"generated tokens (default: {DEFAULT_N_GEN['cuda']} on CUDA, {DEFAULT_N_GEN['cpu']} on "
                             "CPU; a shorter run may not reach where the switch-off control differs)")
    parser.add_argument("--n-prompt", type=at_least(1), default=DEFAULT_N_PROMPT)
    parser.add_argument("--ctx", type=at_least(1), default=4096)
    parser.add_argument("--batches", type=parse_batches, default=DEFAULT_BATCHES,
                        help="verify batch sizes, each 1..16: a list (2,4,8), a range (2-16), an open range "
                             f"(2-: 2 to 16, the largest verify batch) or a mix (default: {DEFAULT_BATCHES})")
    parser.add_argument("--seed", type=at_least(0), default=None, help="seed of the synthetic models (default: 1)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the synthetic models are kept (default: a cache directory; unused with --model)")
    parser.add_argument("--json", type=Path, default=Path("hiraishin-smoke.json"),
                        help="the report (default: ./hiraishin-smoke.json); checked before the run")
    parser.add_argument("--partial-offload", type=at_least(0), default=None, metavar="LAYERS",
                        help="on CUDA, also run the first model with only LAYERS layers on the GPU and the rest on "
                             "the CPU (default: half the synthetic model's layers; none with --model; 0: skip); "
                             "refused on the CPU backend, which has no GPU to offload to")
    parser.add_argument("--moe", action=argparse.BooleanOptionalAction, default=None,
                        help="run the mixture-of-experts cases after the dense ones (default: on; --no-moe leaves "
                             "them out): on CUDA qwen3moe Q4_K_M with KV f16 and q8_0 and with its experts on the "
                             "CPU, and gpt-oss MXFP4_MOE, 2 layers each; on the CPU qwen3moe Q4_K_M, 1 layer; "
                             f"{MOE_N_GEN} generated tokens, a control each. Reported, not judged, unless the build "
                             "lists the backend under exact_moe_backends (in the stack.json it ships)")
    parser.add_argument("--hybrid", action=argparse.BooleanOptionalAction, default=None,
                        help="run the hybrid cases (recurrent layers between attention layers) after the "
                             "mixture-of-experts ones (default: on; --no-hybrid leaves them out): on CUDA qwen35 and "
                             "nemotron-h Q4_K_M at their real shapes, 4 and 8 layers, KV f16, and their versions with "
                             "experts, qwen35moe (Qwen3.6-35B-A3B) and nemotron-h-moe (Nemotron-3-Nano-30B-A3B), 4 and "
                             "6 layers, KV f16 and q8_0 and their experts on the CPU; on the CPU tiny-qwen35, "
                             "tiny-nemotron-h, tiny-qwen35moe and tiny-nemotron-h-moe Q4_K_M, KV f16; "
                             f"{HYBRID_N_GEN} generated tokens, a control each. Reported, not judged, unless the build "
                             "lists the backend under exact_hybrid_backends (and, for those with experts, "
                             "exact_moe_backends)")
    parser.add_argument("--types", action=argparse.BooleanOptionalAction, default=None,
                        help="on CUDA, run a model of each of the weight types " + ", ".join(TYPE_QUANTS["cuda"])
                             + " after the main ones, KV f16 and a control each (default: on where --quants is "
                             "left out; --no-types leaves them out); the CPU backend has none")
    parser.add_argument("--slots", action=argparse.BooleanOptionalAction, default=None,
                        help="run the slots case of the first dense model after the others (default: on; --no-slots "
                             f"leaves it out): hiraishin-replay slots, {SLOTS_RUNS['cpu'].slots} requests side by side "
                             "and a second round, as llama-server -np 4 serves them, their batches joined, against each "
                             f"request alone; on CUDA a KV stream per slot and {SLOTS_RUNS['cuda'].n_prompt}-token "
                             "prompts, on the CPU the unified KV cache; a control each. Reported, not judged, unless "
                             "the build lists the backend under exact_slots_backends")
    parser.add_argument("--window-guard", action=argparse.BooleanOptionalAction, default=False,
                        help="cut verify batches at multiples of 256 KV cells, as llama-server and "
                             "llama-speculative-simple do (default: off, so batches cross those windows and a "
                             "kernel whose result follows the ubatch's KV length shows)")
    parser.add_argument("--allow-cpu", action="store_true", help="with a CUDA wheel and no GPU, test the CPU backend instead of failing")
    return parser


def tools_problem(names: list[str]) -> str | None:
    """Which of the tools the run needs is missing, and how to get it; None when all are there."""
    missing = [name for name in names if not (tool_dir() / name).is_file()]
    if not missing:
        return None
    where = f"{tool_dir()} ({BIN_DIR_ENV}={os.environ[BIN_DIR_ENV]})" if os.environ.get(BIN_DIR_ENV) else str(tool_dir())
    fix = (f"point {BIN_DIR_ENV} at the bin/ directory of a build that has {'them' if len(missing) > 1 else 'it'}"
           if os.environ.get(BIN_DIR_ENV) else
           f"reinstall the wheel (pip install --force-reinstall hiraishin-llama), or point {BIN_DIR_ENV} at the "
           "bin/ directory of a build")
    return f"{' and '.join(missing)} not found in {where}; {fix}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.model is not None:
        ignored = [flag for name, flag in SYNTHETIC_ONLY if getattr(args, name) is not None]
        if ignored:
            them = "it" if len(ignored) == 1 else "them"
            parser.error(f"{' and '.join(ignored)} {'applies' if len(ignored) == 1 else 'apply'} to the synthetic "
                         f"models only, so with --model {'it has' if len(ignored) == 1 else 'they have'} no meaning; "
                         f"leave {them} out, or leave --model out to test the synthetic models")
        problem = model_problem(args.model)
        if problem:
            parser.error(f"--model {args.model}: {problem}")
    if args.preset is not None:
        try:
            synthetic.get_preset(args.preset)
        except ValueError as error:
            parser.error(f"--preset: {error}")
    # Checked first: a report that cannot be written would otherwise fail the run after all its minutes.
    problem = report_path_problem(args.json)
    if problem:
        parser.error(f"--json {args.json}: {problem}")

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
    if args.partial_offload and not on_gpu:
        why = "no CUDA GPU is visible" if runtime.built_architectures() else "this is a CPU wheel"
        parser.error(f"--partial-offload {args.partial_offload}: this run tests the CPU backend ({why}), so there "
                     "is no GPU to put layers on and nothing to split; leave --partial-offload out")
    args.n_gen = args.n_gen or DEFAULT_N_GEN[backend]
    quants = list(args.quants or (("Q4_K_M", "Q6_K") if on_gpu else ("Q4_K_M",)))
    kv_types = list(args.kv or (("f16", "q8_0", "turbo4") if on_gpu else ("f16",)))
    batches = list(args.batches)
    n_layer = args.n_layer or (4 if on_gpu else 1)
    if args.model is None and args.partial_offload and args.partial_offload >= n_layer:
        parser.error(f"--partial-offload {args.partial_offload}: the synthetic model has {n_layer} "
                     f"layer{'s' if n_layer > 1 else ''}, so all of them would be on the GPU and nothing split; "
                     + (f"give 1 to {n_layer - 1}, or raise --n-layer" if n_layer > 1 else "raise --n-layer"))

    work_dir = None if args.model is not None else (args.work_dir or runtime.cache_dir() / "models")
    # seconds per model file made by this run (none where the cache had them)
    model_seconds: dict[str, float] = {}
    preset = args.preset or "qwen3-8b"
    seed = 1 if args.seed is None else args.seed
    # A mixture-of-experts --preset makes the --quants/--kv cases MoE cases, which stand in for the default
    # MoE cases (those would be the same models at another layer count, under the same names).
    main_moe = args.model is None and preset_is_moe(preset)
    main_hybrid = args.model is None and preset_is_hybrid(preset)
    run_moe = args.model is None and args.moe is not False and not main_moe
    # A hybrid --preset stands in for the default hybrid cases, as a MoE one for the MoE cases.
    run_hybrid = args.model is None and args.hybrid is not False and not main_hybrid
    if args.types and args.quants:
        parser.error("--types adds the default weight types to the default models; with --quants, name the "
                     "types in --quants instead")
    # beside the default models only: --quants names every model of its run
    run_types = args.model is None and not main_moe and not main_hybrid and not args.quants and args.types is not False
    extra_types = list(TYPE_QUANTS[backend]) if run_types else []
    synthetic_sets = [] if args.model is not None else [
        SyntheticModels(preset, n_layer, (*quants, *extra_types), named=main_moe or main_hybrid),
        *(SyntheticModels(m.preset, m.n_layer, (m.quant,), named=True)
          for m in (*(MOE_MODELS[backend] if run_moe else ()), *(HYBRID_MODELS[backend] if run_hybrid else ()))),
    ]
    # Models to make need the quantizer and a work directory that takes files; models made before do not.
    must_write = work_dir is not None and not all(
        model_file(work_dir, models.preset, models.n_layer, seed, quant).is_file()
        for models in synthetic_sets for quant in models.quants)
    problem = tools_problem(["hiraishin-replay", *([synthetic.QUANTIZER_NAME] if must_write else [])])
    if problem:
        print(f"hiraishin-llama-smoke: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if work_dir is not None:
        problem = directory_problem(work_dir, must_write=must_write)
        if problem:
            where = "--work-dir" if args.work_dir is not None else "the model cache (choose another with --work-dir)"
            parser.error(f"{where} {work_dir}: {problem}")

    # Layers on the GPU in the split-model case: asked for, or half a synthetic model's; 0 skips it.
    gpu_layers = args.partial_offload
    if gpu_layers is None and args.model is None:
        gpu_layers = n_layer // 2
    if args.model is not None:
        models = {args.model.name: args.model}
        kind = model_kind(args.model)
        if kind is None:
            print(f"hiraishin-llama-smoke: warning: the metadata of {args.model} could not be read, so it is not "
                  "known to be dense: it is judged as a mixture-of-experts model", file=sys.stderr)
        cases = default_cases(backend, [args.model.name], kv_types, gpu_layers or None,
                              moe=kind is None or kind.is_moe, experts_on_cpu_case=kind is not None and kind.is_moe,
                              hybrid=kind is not None and kind.recurrent)
        # several slots are claimed for dense models only
        if args.slots is not False and kind is not None and not kind.is_moe and not kind.recurrent:
            cases += slots_cases(backend, args.model.name)
    else:
        cases = default_cases(backend, quants, kv_types, gpu_layers or None, moe=main_moe,
                              preset=preset if main_moe or main_hybrid else None, hybrid=main_hybrid)
        if extra_types:
            cases += type_cases(backend, extra_types)
        if run_moe:
            cases += moe_cases(backend)
        if run_hybrid:
            cases += hybrid_cases(backend)
        if args.slots is not False and not main_moe and not main_hybrid:
            cases += slots_cases(backend, quants[0])
        try:
            models = {}
            for chosen in synthetic_sets:
                made = prepare_models(work_dir, chosen.preset, chosen.n_layer, list(chosen.quants), seed,
                                      model_seconds)
                models.update({chosen.label(quant): path for quant, path in made.items()})
        except (OSError, ValueError, synthetic.QuantizationError) as error:
            # One error line; the quantizer's own last lines, if any, follow it indented, as its evidence.
            first, *output = str(error).splitlines()
            print(f"hiraishin-llama-smoke: error: the synthetic models could not be made in {work_dir}, so nothing "
                  f"was tested: {first}", file=sys.stderr)
            for line in output:
                if line.strip():
                    print(f"  {line}", file=sys.stderr)
            return EXIT_NOT_RUN

    model_coverage = check_coverage(args.model, backend) if args.model is not None else None
    started = datetime.datetime.now(datetime.timezone.utc)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="hiraishin-smoke-") as scratch:
            for number, case in enumerate(cases, start=1):
                results.append(run_case(case, models[case.model], args, Path(scratch), number, len(cases)))
    except UsageError as error:
        print(f"hiraishin-llama-smoke: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    passed = all(r.passed for r in results)
    not_run = [r for r in results if r.error]
    notes = [note for r in results if (note := control_note(r.case, r, args, backend))]
    print()
    print(render_table(results, batches))
    for note in notes:
        print(f"note: {note}")
    summary = {
        "tool": "hiraishin-llama-smoke",
        "version": __version__,
        "date": started.isoformat(timespec="seconds"),
        "backend": backend,
        "exact_backends": sorted(exact_backends()),
        "build": runtime.build_info(),
        "gpus": [asdict(g) for g in runtime.gpus()],
        "models": {name: str(path) for name, path in models.items()},
        # The weight-type cases of the default run beside the main models', and what they cost: their replays and
        # (on a first run) the making of their models.
        "types": {"quants": extra_types, "cases": 2 * len(extra_types),
                  "seconds": round(sum(r.seconds or 0 for r in results
                                       if r.case.quant in extra_types and not r.case.moe), 1),
                  "model_seconds": round(sum(t for name, t in model_seconds.items()
                                             if any(name.endswith(f"-{q}.gguf") for q in extra_types)), 1)},
        "model_seconds": model_seconds,
        # Whether mixture-of-experts cases ran, the synthetic ones among them, and where MoE is claimed exact.
        "moe": {"cases": sum(1 for r in results if r.case.moe),
                "synthetic": [asdict(m) for m in MOE_MODELS[backend]] if run_moe else [],
                "exact_moe_backends": sorted(exact_moe_backends())},
        # The same for models with recurrent layers.
        "hybrid": {"cases": sum(1 for r in results if r.case.hybrid),
                   "synthetic": [asdict(m) for m in HYBRID_MODELS[backend]] if run_hybrid else [],
                   "exact_hybrid_backends": sorted(exact_hybrid_backends())},
        # Whether the slots cases ran, how they were set, and where several slots are claimed exact.
        "slots": {"cases": sum(1 for r in results if r.case.slots),
                  "run": asdict(SLOTS_RUNS[backend]),
                  "exact_slots_backends": sorted(exact_slots_backends())},
        "n_gen": args.n_gen,
        "batches": batches,
        "cases": [
            {**asdict(r.case), "name": r.case.name, "exit_code": r.exit_code, "passed": r.passed,
             "error": r.error, "seconds": r.seconds, "report": r.report}
            for r in results
        ],
        "notes": notes,
        "coverage": model_coverage,
        "passed": passed,
    }
    verdict = "PASSED" if passed else ("FAILED" if any(not r.passed and not r.error for r in results) else "ERROR")
    try:
        write_report(args.json, summary)
    except OSError as error:
        # Checked before the run, so the file system changed under it (full, gone read-only): the verdict
        # still stands, and is said, but CI has no report to keep.
        print(f"\n{verdict}, but the report could not be written", flush=True)
        print(f"hiraishin-llama-smoke: error: --json {args.json}: cannot be written "
              f"({(error.strerror or str(error)).lower()}); free space or give a writable path and run again",
              file=sys.stderr)
        # A failed guarantee keeps its status: a lost report must not hide it.
        return EXIT_FAILED if verdict == "FAILED" else EXIT_USAGE
    if passed:
        print(f"\nPASSED: report in {args.json}")
        return 0
    if verdict == "FAILED":
        print(f"\nFAILED: report in {args.json}")
        return EXIT_FAILED
    print(f"\nERROR: {len(not_run)} case(s) could not be run, so nothing is known about them; report in {args.json}")
    return EXIT_NOT_RUN


if __name__ == "__main__":
    sys.exit(main())
