"""benchmarks/device/spec_vs_greedy.py against a stand-in llama-speculative-simple.

The stand-in prints what the real program prints (the prompt, then the text, and
the statistics on stderr); SPEC_FAULT makes the speculative run (drafting on)
diverge, or the reference keep drafting, so each verdict is shown to fire."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "device" / "spec_vs_greedy.py"

STAND_IN = r'''#!{python}
import os, sys
args = sys.argv[1:]
prompt = args[args.index("-p") + 1]
drafting = int(args[args.index("--draft-min") + 1]) <= int(args[args.index("--draft-max") + 1])
fault = os.environ.get("SPEC_FAULT", "")
text = " lorem ipsum dolor" * 20 + " \udcff raw byte"
if drafting and fault == "diverge":
    text = text[:100] + "X" + text[101:]
sys.stdout.buffer.write(("<s> " + prompt + text + "\n\n").encode("utf-8", "surrogateescape"))
drafted = 40 if (drafting or fault == "reference-drafts") else 0
sys.stderr.write(f"n_draft   = 16\nn_predict = 50\nn_drafted = {drafted}\nn_accept  = {drafted}\n")
'''


@pytest.fixture
def stand_in(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "llama-speculative-simple"
    program.write_text(STAND_IN.replace("{python}", sys.executable))
    program.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def run(env: dict[str, str], tmp_path: Path, *extra: str, fault: str = "") -> tuple[int, dict | None, str]:
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--model", "t.gguf", "--draft", "t.gguf", "--draft", "d.gguf",
                           "--prompts", "2", "--n-predict", "50", "--json", str(report), *extra],
                          env={**env, "SPEC_FAULT": fault}, capture_output=True, text=True)
    return done.returncode, (json.loads(report.read_text()) if report.exists() else None), done.stdout + done.stderr


def test_identical_text_passes(stand_in: dict[str, str], tmp_path: Path) -> None:
    code, report, output = run(stand_in, tmp_path)
    assert code == 0, output
    assert report["all_identical"] and len(report["runs"]) == 4
    assert all(r["compared_chars"] > 300 for r in report["runs"])
    assert report["runs"][0]["stats"]["n_drafted"] == "40"


def test_a_divergence_is_found_at_its_character(stand_in: dict[str, str], tmp_path: Path) -> None:
    code, report, _ = run(stand_in, tmp_path, fault="diverge")
    assert code == 1
    assert {r["first_differing_char"] for r in report["runs"]} == {100}
    code, _, _ = run(stand_in, tmp_path, "--expect", "differ", fault="diverge")
    assert code == 0


def test_expecting_a_difference_fails_when_there_is_none(stand_in: dict[str, str], tmp_path: Path) -> None:
    code, _, output = run(stand_in, tmp_path, "--expect", "differ")
    assert code == 1 and "FAIL: 4/4 identical (expected differ)" in output


def test_a_reference_that_still_drafts_is_refused(stand_in: dict[str, str], tmp_path: Path) -> None:
    code, report, output = run(stand_in, tmp_path, fault="reference-drafts")
    assert code != 0 and report is None
    assert "drafting was not disabled for the reference" in output


SIMPLE_STAND_IN = r'''#!{python}
import os, sys
args = sys.argv[1:]
prompt = args[-1]
text = " lorem ipsum dolor" * 20 + " \udcff raw byte"
if os.environ.get("SIMPLE_FAULT") == "whole-prompt":
    text = text[:7] + "Y" + text[8:]
sys.stdout.buffer.write((prompt + text + "\n").encode("utf-8", "surrogateescape"))
sys.stderr.write("cwd " + os.getcwd() + "\n")
'''


def test_llama_simple_is_compared_with_the_reference_without_entering_the_verdict(
        stand_in: dict[str, str], tmp_path: Path) -> None:
    simple = tmp_path / "llama-simple"
    simple.write_text(SIMPLE_STAND_IN.replace("{python}", sys.executable))
    simple.chmod(0o755)
    code, report, output = run(stand_in, tmp_path, "--simple", str(simple), "--backend-dir", str(tmp_path))
    assert code == 0, output
    assert [r["identical"] for r in report["simple"]] == [True, True]
    code, report, output = run({**stand_in, "SIMPLE_FAULT": "whole-prompt"}, tmp_path,
                               "--simple", str(simple), "--backend-dir", str(tmp_path))
    assert code == 0 and report["all_identical"]
    assert {r["first_differing_char"] for r in report["simple"]} == {7}
    assert "llama-simple prompt 0: differs at char 7 from the no-draft reference" in output
