"""hiraishin-replay's --cpu-moe, --n-cpu-moe and --override-tensor (wheels/src/replay/replay_overrides.h)
place tensors as llama.cpp's common arguments do. The parsing and the buffer type lookup are compiled
here with their C++ test; the whole tool, where one is found (conftest.py), is run on the tiny model for
what needs llama.cpp: the buffer type names of the build, and the report of what was placed.
Skips, saying so, without a C++ compiler or a tool that has the flags.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPLAY_SRC, compile_replay_test

REPO = Path(__file__).resolve().parents[2]
# Upstream's common/common.h, in the work tree the patches apply to (absent in a bare checkout).
UPSTREAM_COMMON_H = REPO / "work" / "llama.cpp" / "common" / "common.h"


def test_the_placement_options_read_as_upstreams(tmp_path: Path) -> None:
    binary = tmp_path / "replay_overrides_test"
    compile_replay_test(REPLAY_SRC / "replay_overrides_test.cpp", binary)
    result = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert last.endswith(" passed, 0 failed") and int(last.split()[0]) >= 30, result.stdout


def test_the_expert_pattern_is_upstreams() -> None:
    # --cpu-moe must put on the CPU what llama-server's --cpu-moe puts there, so the pattern is upstream's.
    if not UPSTREAM_COMMON_H.is_file():
        pytest.skip(f"no llama.cpp source at {UPSTREAM_COMMON_H.parent.parent} to compare with")
    upstream = re.search(r'LLM_FFN_EXPS_REGEX\s*=\s*"([^"]*)"', UPSTREAM_COMMON_H.read_text())
    block = re.search(r'string_format\("(blk[^"]*)%s"', UPSTREAM_COMMON_H.read_text())
    assert upstream and block, f"{UPSTREAM_COMMON_H} no longer defines LLM_FFN_EXPS_REGEX as before; compare by hand"
    ours = (REPLAY_SRC / "replay_overrides.h").read_text()
    assert f'kExpertTensorRegex = "{upstream[1]}"' in ours
    # llm_ffn_exps_block_regex is "blk\\.%d" + the expert pattern
    assert block[1] == r"blk\\.%d"
    assert 'return "blk\\\\." + std::to_string(layer) + kExpertTensorRegex;' in ours


def test_the_tool_uses_the_tested_placement() -> None:
    source = (REPLAY_SRC / "hiraishin_replay.cpp").read_text()
    assert '#include "replay_overrides.h"' in source
    for call in ("hiraishin::all_experts_on_cpu(flag)", "hiraishin::first_layers_experts_on_cpu(flag, n_layers)",
                 "hiraishin::parse_override_list(flag, value())",
                 "hiraishin::resolve_buffer_types(overrides, device_buffer_types())",
                 "params.tensor_buft_overrides = overrides.empty() ? nullptr : placement.data();"):
        assert call in source, call


@pytest.fixture(scope="session")
def placing_replay(replay_tool: Path) -> Path:
    """The found hiraishin-replay, when it is one that has the placement options (a wheel built before
    them has not)."""
    help_text = subprocess.run([str(replay_tool), "--help"], capture_output=True, text=True, timeout=60).stdout
    if "--cpu-moe" not in help_text:
        pytest.skip(f"{replay_tool} predates --cpu-moe; build a wheel from this tree or point "
                    "HIRAISHIN_LLAMA_BIN_DIR at a build's bin/")
    return replay_tool


@pytest.mark.parametrize("args, message", [
    (["--cpu-moe=yes"], "--cpu-moe takes no value, got 'yes'"),
    (["--n-cpu-moe", "-1"], "--n-cpu-moe must be between 0 and 1000, got -1"),
    (["-ncmoe", "two"], "-ncmoe expects an integer, got 'two'"),
    (["-ot", "exps"], "-ot expects PATTERN=BUFFER_TYPE[,PATTERN=BUFFER_TYPE...], e.g. exps=CPU; 'exps' in 'exps' has no '='"),
    (["--override-tensor", "blk.(=CPU"], "--override-tensor: 'blk.(' in 'blk.(=CPU' is not a regular expression"),
    (["-ot", "exps=NoSuchDevice"], "-ot: unknown buffer type 'NoSuchDevice' in 'exps=NoSuchDevice'; this build's "
                                   "buffer types: CPU"),
])
@pytest.mark.parametrize("mode", ["replay", "spec", "bench"])
def test_bad_placements_are_one_line_and_exit_2(mode: str, args: list[str], message: str, placing_replay: Path,
                                                tiny_model: Path) -> None:
    result = subprocess.run([str(placing_replay), mode, "--model", str(tiny_model), "--n-gen", "20", *args],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hiraishin-replay: error: {message}"), result.stderr


def test_the_report_says_what_was_placed(placing_replay: Path, tiny_model: Path, tmp_path: Path) -> None:
    report = tmp_path / "replay.json"
    result = subprocess.run([str(placing_replay), "replay", "--model", str(tiny_model), "--n-gen", "8", "--batches", "2",
                             "-ot", r"blk\.0\.ffn_(up|down)\.=CPU", "--n-cpu-moe", "1", "--json", str(report)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    placed = json.loads(report.read_text())
    assert [(o["pattern"], o["buffer_type"], o["flag"]) for o in placed["tensor_overrides"]] == [
        (r"blk\.0\.ffn_(up|down)\.", "CPU", "-ot"),
        (r"blk\.0\.ffn_(up|down|gate|gate_up)_(ch|)exps", "CPU", "--n-cpu-moe")]
    assert placed["tensors_overridden"] == 2  # blk.0.ffn_up.weight and blk.0.ffn_down.weight
    assert (placed["model_arch"], placed["n_expert"], placed["n_expert_used"]) == ("qwen3", 0, 0)
    assert "placed   2 tensors by -ot, --n-cpu-moe (2 patterns)" in result.stdout


def test_experts_on_the_cpu_of_a_dense_model_is_said(placing_replay: Path, tiny_model: Path, tmp_path: Path) -> None:
    # Not an error, as in llama.cpp; but a case "with the experts on the CPU" that moved nothing must not pass
    # silently for one (hiraishin-llama-smoke turns it into an error).
    report = tmp_path / "replay.json"
    result = subprocess.run([str(placing_replay), "spec", "--model", str(tiny_model), "--n-gen", "8", "--cpu-moe",
                             "--json", str(report)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning: --cpu-moe matched no tensor" in result.stderr and "not a mixture-of-experts model" in result.stderr
    assert json.loads(report.read_text())["tensors_overridden"] == 0
