"""Bad input to the wheel's programs: hiraishin-llama-smoke, hiraishin-llama-bench and hiraishin-llama.

Each runs as a user runs it, in a process of its own, from the source tree (wheels/ on PYTHONPATH), with
stand-ins for the compiled tools that record whether they were started. A refusal must exit 2 with no
traceback and one line ``<program>: error: ...`` naming what is wrong and where, and saying how to fix
it; the harness's one ``error:`` line rule is read that way here, since these programs put their name
first. A refusal comes before any work: no tool started, no model made, and the report a previous run
left is as it was.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from .harness import BadInput, Guarded, Ran, run, unchanged

REPO = Path(__file__).resolve().parents[2]
WHEELS_DIR = REPO / "wheels"
SMOKE = (sys.executable, "-m", "hiraishin_llama.smoke")
BENCH = (sys.executable, "-m", "hiraishin_llama.bench")
INFO = (sys.executable, "-m", "hiraishin_llama.info")

# A stand-in hiraishin-replay: records that it ran; a file that is not GGUF and a model llama.cpp cannot
# load (STAND_IN_CANNOT_LOAD) are refused as the real tool refuses them (exit 2, its message, then
# llama.cpp's error lines); with the switch off, logits differ only from KV position STAND_IN_DIFFER_FROM on,
# as the CPU's stock kernels at b = 2 and 3 differ only from position 256.
STAND_IN_REPLAY = f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
value = lambda flag: args[args.index(flag) + 1]
open(os.environ["STAND_IN_RAN"], "a").write("hiraishin-replay\\n")
model = value("--model")
if open(model, "rb").read(4) != b"GGUF":
    print("hiraishin-replay: error: --model: '" + model + "' is not a GGUF file", file=sys.stderr)
    sys.exit(2)
if os.environ.get("STAND_IN_CANNOT_LOAD"):
    print("hiraishin-replay: error: --model: llama.cpp could not load '" + model + "'"
          "\\n  llama.cpp: gguf_init_from_file_impl: failed to read key-value pairs"
          "\\n  llama.cpp: llama_model_load: error loading model: llama_model_loader: failed to load model from "
          + model + "\\n  llama.cpp: llama_model_load_from_file_impl: failed to load model", file=sys.stderr)
    sys.exit(2)
on = os.environ.get("GGML_BATCH_INVARIANT") == "1"
last_position = int(value("--n-prompt")) + int(value("--n-gen")) - 1
differ = 0 if on or last_position < int(os.environ.get("STAND_IN_DIFFER_FROM", "0")) else 7
batches = [int(b) for b in value("--batches").split(",")]
expect = value("--expect")
passed = expect == "none" or (expect == "identical") == (differ == 0)
results = [{{"b": b, "positions_differ": 0 if b == 1 else differ}} for b in [1, *batches]]
open(value("--json"), "w").write(json.dumps({{"results": results, "passed": passed}}))
sys.exit(0 if passed else 1)
"""
STAND_IN_TOOL = """#!/bin/sh
echo "$(basename "$0")" >> "$STAND_IN_RAN"
echo "main: invalid output file"
exit 1
"""
PREVIOUS_REPORT = '{"passed": true, "note": "a previous run"}\n'


class Workspace:
    """A scratch directory holding the stand-ins, a model that starts like GGUF, a previous report, and
    the environment the programs run in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin_dir = root / "bin"
        self.bin_dir.mkdir()
        for name, script in (("hiraishin-replay", STAND_IN_REPLAY), ("llama-quantize", STAND_IN_TOOL)):
            (self.bin_dir / name).write_text(script)
            (self.bin_dir / name).chmod(0o755)
        self.ran = root / "ran.txt"
        self.cache = root / "cache"
        self.model = root / "model.gguf"
        self.model.write_bytes(b"GGUF" + bytes(60))
        self.report = root / "report.json"
        self.report.write_text(PREVIOUS_REPORT)
        self.env = {
            "PYTHONPATH": str(WHEELS_DIR),
            "HIRAISHIN_LLAMA_BIN_DIR": str(self.bin_dir),
            "XDG_CACHE_HOME": str(self.cache),
            "STAND_IN_RAN": str(self.ran),
        }
        for name in ("GGML_BATCH_INVARIANT", "GGML_CUDA_BATCH_INVARIANT"):
            self.env[name] = ""

    def tools_started(self) -> list[str]:
        return self.ran.read_text().split() if self.ran.is_file() else []

    def substitute(self, args: Sequence[str]) -> tuple[str, ...]:
        """Arguments with {model}, {root} and {report} filled in."""
        return tuple(a.format(model=self.model, root=self.root, report=self.report) for a in args)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)


def assert_program_fails_cleanly(ran: Ran, program: str, *, exit_code: int, mentions: Sequence[str]) -> str:
    """The harness's rules for a program that prints ``<program>: error: <message>``; returns the message.
    Lines indented under it (a failing tool's own output) are its evidence, not further errors."""
    assert ran.returncode == exit_code, f"expected exit {exit_code}\n{ran}"
    for stream in (ran.stdout, ran.stderr):
        assert "Traceback (most recent call last)" not in stream, f"a traceback\n{ran}"
    prefix = f"{program}: error: "
    lines = [line for line in ran.stderr.splitlines()
             if line.strip() and not line.startswith(" ") and f"{program}: warning: " not in line]
    assert len(lines) == 1 and lines[0].startswith(prefix), f"expected one '{prefix}' line on stderr\n{ran}"
    for needle in mentions:
        assert needle in lines[0], f"the message does not name {needle!r}\n{ran}"
    return lines[0].removeprefix(prefix)


# Each case's mentions hold what is wrong, where, and the words of its fix.
SMOKE_CASES = [
    BadInput("batches-zero", ("--batches", "0"), 2, ("--batches", "between 1 and 16", "'0'")),
    BadInput("batches-seventeen", ("--batches", "17"), 2, ("--batches", "between 1 and 16", "'17'")),
    BadInput("batches-beyond-16-in-a-range", ("--batches", "2-99999999999999"), 2,
             ("--batches", "between 1 and 16")),
    BadInput("batches-backwards", ("--batches", "8-2"), 2, ("--batches", "'8-2'", "runs backwards; write 2-8")),
    BadInput("batches-empty-item", ("--batches", "2,,4"), 2,
             ("--batches", "must look like 2-16, 2- (2 to 16) or 2,4,8", "'2,,4'")),
    BadInput("unknown-quant", ("--quants", "Q4_X"), 2, ("--quants", "'Q4_X'", "valid: Q4_K_M, Q6_K, Q8_0")),
    BadInput("unknown-kv", ("--kv", "f32"), 2, ("--kv", "'f32'", "valid: f16, q8_0")),
    BadInput("n-gen-zero", ("--n-gen", "0"), 2, ("--n-gen", "must be at least 1, got 0")),
    BadInput("n-gen-not-a-number", ("--n-gen", "many"), 2, ("--n-gen", "expected an integer, got 'many'")),
    BadInput("negative-seed", ("--seed", "-1"), 2, ("--seed", "must be at least 0, got -1")),
    BadInput("unknown-preset", ("--preset", "qwen9"), 2, ("--preset", "'qwen9'", "valid presets")),
    BadInput("model-not-gguf", ("--model", "{root}/notes.txt"), 2,
             ("--model {root}/notes.txt", "not a GGUF file", "pass a .gguf model")),
    BadInput("model-is-a-directory", ("--model", "{root}"), 2,
             ("--model {root}", "is a directory, not a model file", "pass the .gguf file itself")),
    BadInput("model-missing", ("--model", "{root}/absent.gguf"), 2, ("--model {root}/absent.gguf", "no such file")),
    BadInput("model-empty", ("--model", "{root}/empty.gguf"), 2, ("--model {root}/empty.gguf", "is empty")),
    BadInput("quants-with-model", ("--model", "{model}", "--quants", "Q6_K"), 2,
             ("--quants applies to the synthetic models only", "with --model it has no meaning", "leave it out")),
    BadInput("preset-and-layers-with-model", ("--model", "{model}", "--preset", "tiny", "--n-layer", "2"), 2,
             ("--preset and --n-layer apply to the synthetic models only", "leave them out")),
    BadInput("partial-offload-on-a-cpu-wheel", ("--model", "{model}", "--partial-offload", "2"), 2,
             ("--partial-offload 2", "tests the CPU backend (this is a CPU wheel)", "no GPU to put layers on",
              "leave --partial-offload out")),
    BadInput("report-in-proc", ("--model", "{model}", "--json", "/proc/x/r.json"), 2,
             ("--json /proc/x/r.json: cannot be written", "/proc takes no new files",
              "give a path in a writable directory")),
    BadInput("report-is-a-directory", ("--model", "{model}", "--json", "{root}"), 2,
             ("--json {root}: is a directory", "give the report a file name")),
    BadInput("report-under-a-file", ("--model", "{model}", "--json", "{report}/smoke.json"), 2,
             ("--json {report}/smoke.json", "{report} is a file, so no directory can be made there")),
    BadInput("work-dir-in-proc", ("--work-dir", "/proc/x"), 2,
             ("--work-dir /proc/x: cannot be made", "/proc takes no new directories")),
    BadInput("work-dir-is-a-file", ("--work-dir", "{report}"), 2, ("--work-dir {report}: is a file, not a directory",)),
]


@pytest.mark.parametrize("case", SMOKE_CASES, ids=[c.id for c in SMOKE_CASES])
def test_the_smoke_test_refuses_bad_input_before_any_work(case: BadInput, workspace: Workspace) -> None:
    (workspace.root / "notes.txt").write_text("not a model\n")
    (workspace.root / "empty.gguf").write_bytes(b"")
    args = workspace.substitute(case.args)
    with unchanged(Guarded(workspace.root, extra=(workspace.report,))):
        ran = run(*args, "--json", str(workspace.report), cwd=workspace.root, env=workspace.env, program=SMOKE) \
            if "--json" not in args else run(*args, cwd=workspace.root, env=workspace.env, program=SMOKE)
    assert_program_fails_cleanly(ran, "hiraishin-llama-smoke", exit_code=case.exit_code,
                                 mentions=workspace.substitute(case.mentions))
    assert workspace.tools_started() == [] and not workspace.cache.exists()


def test_an_unwritable_model_cache_names_it_and_the_option_that_moves_it(workspace: Workspace) -> None:
    ran = run("--json", str(workspace.report), cwd=workspace.root, env={**workspace.env, "XDG_CACHE_HOME": "/proc/x"},
              program=SMOKE)
    assert_program_fails_cleanly(ran, "hiraishin-llama-smoke", exit_code=2, mentions=(
        "the model cache (choose another with --work-dir) /proc/x/hiraishin-llama/models: cannot be made",))
    assert workspace.tools_started() == [] and workspace.report.read_text() == PREVIOUS_REPORT


def test_tools_missing_from_the_bin_dir_are_named_with_the_variable_that_points_there(workspace: Workspace,
                                                                                     tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    ran = run("--json", str(workspace.report), cwd=workspace.root,
              env={**workspace.env, "HIRAISHIN_LLAMA_BIN_DIR": str(empty)}, program=SMOKE)
    assert_program_fails_cleanly(ran, "hiraishin-llama-smoke", exit_code=2, mentions=(
        f"hiraishin-replay and llama-quantize not found in {empty} (HIRAISHIN_LLAMA_BIN_DIR={empty})",
        "point HIRAISHIN_LLAMA_BIN_DIR at the bin/ directory of a build"))
    assert workspace.report.read_text() == PREVIOUS_REPORT and not workspace.cache.exists()


def test_a_truncated_model_is_refused_with_llama_cpps_reason(workspace: Workspace) -> None:
    # The replay tool says why llama.cpp could not load it; the smoke once passed on only its last
    # line, "failed to load model".
    with unchanged(Guarded(workspace.root, extra=(workspace.report,))):
        ran = run("--model", str(workspace.model), "--json", str(workspace.report), cwd=workspace.root,
                  env={**workspace.env, "STAND_IN_CANNOT_LOAD": "1"}, program=SMOKE)
    message = assert_program_fails_cleanly(ran, "hiraishin-llama-smoke", exit_code=2, mentions=(
        f"--model: llama.cpp could not load '{workspace.model}'", "failed to read key-value pairs",
        "check that the file is a whole GGUF model"))
    assert "failed to load model" not in message  # llama.cpp's wrap-up adds nothing to the reason
    assert "FAILED" not in ran.stdout


def test_a_quantizer_that_fails_is_a_run_that_could_not_be_made_not_a_traceback(workspace: Workspace) -> None:
    # The stand-in llama-quantize exits 1: nothing was tested (exit 3), and the message says which step failed.
    ran = run("--preset", "tiny", "--json", str(workspace.report), cwd=workspace.root, env=workspace.env,
              program=SMOKE)
    message = assert_program_fails_cleanly(ran, "hiraishin-llama-smoke", exit_code=3, mentions=(
        "the synthetic models could not be made in", "so nothing was tested", "llama-quantize"))
    assert "failed with exit status 1" in message
    assert "\n  main: invalid output file" in ran.stderr  # the quantizer's own words, under the error
    assert workspace.tools_started() == ["llama-quantize"] and workspace.report.read_text() == PREVIOUS_REPORT


def installed_cpu_wheel(root: Path) -> Path:
    """The package as a CPU wheel installs it: the source with the stack's and the build's information
    beside it (the source tree has neither, and so claims no backend and judges nothing)."""
    package = root / "site" / "hiraishin_llama"
    shutil.copytree(WHEELS_DIR / "hiraishin_llama", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "stack.json").write_text(json.dumps({"exact_backends": ["cuda", "cpu"],
                                                    "exact_moe_backends": ["cuda", "cpu"]}))
    (package / "build_info.json").write_text(json.dumps({"recipe": "cpu", "cuda_architectures": ""}))
    return package.parent


def test_a_control_too_short_to_differ_says_so_and_from_what_length_it_differed(workspace: Workspace) -> None:
    # --n-gen 16 --batches 2 on the CPU: the stock kernels differ at b = 2 only from KV position 256.
    site = installed_cpu_wheel(workspace.root)
    ran = run("--model", str(workspace.model), "--n-gen", "16", "--batches", "2", "--json", str(workspace.report),
              cwd=workspace.root, env={**workspace.env, "PYTHONPATH": str(site), "STAND_IN_DIFFER_FROM": "256"},
              program=SMOKE)
    assert ran.returncode == 1, ran
    assert "Traceback" not in ran.stdout + ran.stderr
    notes = [line for line in ran.stdout.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1, ran
    for needle in ("the control proves nothing at this length", "--n-gen 16", "from position 256 on",
                   "raise --n-gen to 200 or more"):
        assert needle in notes[0], ran
    assert json.loads(workspace.report.read_text())["notes"] == [notes[0].removeprefix("note: ")]


BENCH_CASES = [
    BadInput("report-in-proc", ("--json", "/proc/x/r.json"), 2,
             ("--json /proc/x/r.json: cannot be written", "give a path in a writable directory")),
    BadInput("work-dir-in-proc", ("--work-dir", "/proc/x"), 2, ("--work-dir /proc/x: cannot be made",)),
    BadInput("batches-seventeen", ("--batches", "17"), 2, ("--batches", "between 1 and 16")),
    BadInput("unknown-quant", ("--quants", "Q4_X"), 2, ("unsupported quantization type 'Q4_X'", "valid types")),
]


@pytest.mark.parametrize("case", BENCH_CASES, ids=[c.id for c in BENCH_CASES])
def test_the_bench_refuses_bad_input_before_any_work(case: BadInput, workspace: Workspace) -> None:
    args = workspace.substitute(case.args)
    with unchanged(Guarded(workspace.root, extra=(workspace.report,))):
        ran = run(*args, *(() if "--json" in args else ("--json", str(workspace.report))), cwd=workspace.root,
                  env=workspace.env, program=BENCH)
    assert_program_fails_cleanly(ran, "hiraishin-llama-bench", exit_code=case.exit_code,
                                 mentions=workspace.substitute(case.mentions))
    assert workspace.tools_started() == [] and not workspace.cache.exists()


def test_hiraishin_llama_refuses_an_unknown_option_in_one_line(workspace: Workspace) -> None:
    ran = run("--versoin", cwd=workspace.root, env=workspace.env, program=INFO)
    assert_program_fails_cleanly(ran, "hiraishin-llama", exit_code=2,
                                 mentions=("unrecognized arguments: --versoin", "see hiraishin-llama --help"))
    assert ran.stdout == ""

