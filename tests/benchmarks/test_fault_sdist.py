"""benchmarks/fault_sdist.py: an sdist with planted faults, and nothing written when a diff does not fit."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from hiraishin_build.errors import CommandError
from hiraishin_build.sdist import write_tarball

from ..helpers import load_benchmark

REPO = Path(__file__).resolve().parents[2]
fault_sdist = load_benchmark("fault_sdist")

pytestmark = pytest.mark.skipif(shutil.which("patch") is None, reason="needs GNU patch")

TOP = "hiraishin_llama-10400.22"
KERNEL = "int width(int n) {\n    return n;\n}\n"
FAULT = """--- a/ggml/src/kernel.cu
+++ b/ggml/src/kernel.cu
@@ -1,3 +1,3 @@
 int width(int n) {
-    return n;
+    return n == 5 ? 4 : n;
 }
"""


def make_sdist(path: Path, files: dict[str, str]) -> Path:
    """An sdist as `hiraishin sdist` writes one: files under hiraishin_llama-10400.22/ (TOP), through write_tarball."""
    write_tarball(path, TOP, [(name, 0o100755 if name.endswith(".sh") else 0o100644, text.encode())
                              for name, text in files.items()])
    return path


@pytest.fixture
def sdist(tmp_path: Path) -> Path:
    return make_sdist(tmp_path / f"{TOP}.tar.gz", {
        "pyproject.toml": "[project]\nname = 'hiraishin-llama'\n",
        "llama.cpp/ggml/src/kernel.cu": KERNEL,
        "llama.cpp/scripts/build.sh": "#!/bin/sh\n",
        "llama.cpp/README.md": "llama.cpp\n",
    })


@pytest.fixture
def fault(tmp_path: Path) -> Path:
    path = tmp_path / "fault-width-b5.diff"
    path.write_text(FAULT)
    return path


def members(path: Path) -> dict[str, tuple[bytes, int]]:
    with tarfile.open(path) as tar:
        return {m.name: (tar.extractfile(m).read(), m.mode) for m in tar.getmembers() if m.isfile()}


def test_the_faulted_sdist_keeps_the_name_and_changes_only_the_patched_file(sdist, fault, tmp_path):
    out = fault_sdist.fault_sdist(sdist, [fault], tmp_path / "out")
    assert out.name == sdist.name
    before, after = members(sdist), members(out)
    assert list(after) == list(before)
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {f"{TOP}/llama.cpp/ggml/src/kernel.cu"}
    assert b"n == 5 ? 4 : n" in after[f"{TOP}/llama.cpp/ggml/src/kernel.cu"][0]
    assert after[f"{TOP}/llama.cpp/scripts/build.sh"][1] == 0o755
    record = json.loads((tmp_path / "out" / "faults.json").read_text())
    assert record["faults"][0]["diff"] == "fault-width-b5.diff"
    assert record["sdist"]["name"] == sdist.name


def test_the_same_sdist_and_faults_give_the_same_bytes_and_no_fault_the_sdist_itself(sdist, fault, tmp_path):
    first = fault_sdist.fault_sdist(sdist, [fault], tmp_path / "a").read_bytes()
    second = fault_sdist.fault_sdist(sdist, [fault], tmp_path / "b").read_bytes()
    assert first == second
    assert fault_sdist.fault_sdist(sdist, [], tmp_path / "none").read_bytes() == sdist.read_bytes()


def test_a_diff_that_does_not_fit_writes_nothing_and_keeps_an_earlier_output(sdist, fault, tmp_path):
    out_dir = tmp_path / "out"
    earlier = fault_sdist.fault_sdist(sdist, [fault], out_dir).read_bytes()
    # the same fault twice: the second does not apply once the first has
    with pytest.raises(CommandError, match="applying fault-width-b5.diff") as caught:
        fault_sdist.fault_sdist(sdist, [fault, fault], out_dir)
    assert "previously applied" in caught.value.output_tail
    assert (out_dir / sdist.name).read_bytes() == earlier
    assert sorted(p.name for p in out_dir.iterdir()) == ["faults.json", sdist.name]


def test_bad_input_is_named(sdist, fault, tmp_path, capsys):
    not_an_sdist = tmp_path / "other.tar.gz"
    with tarfile.open(not_an_sdist, "w:gz") as tar:
        for name in ("a/x", "b/y"):
            tar.addfile(tarfile.TarInfo(name), io.BytesIO(b""))
    with pytest.raises(fault_sdist.FaultSdistError, match="2 top-level entries"):
        fault_sdist.fault_sdist(not_an_sdist, [fault], tmp_path / "out")
    no_tree = make_sdist(tmp_path / "no-tree.tar.gz", {"pyproject.toml": ""})
    with pytest.raises(fault_sdist.FaultSdistError, match="no hiraishin_llama-10400.22/llama.cpp"):
        fault_sdist.fault_sdist(no_tree, [fault], tmp_path / "out")
    assert fault_sdist.main([str(sdist), str(tmp_path / "missing.diff"), "--out", str(tmp_path / "out")]) == 1
    assert "no diff at" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not (REPO / "dist" / f"{TOP}.tar.gz").is_file(), reason="needs dist/ from `hiraishin sdist`")
def test_the_revision_22_sdist_comes_back_byte_identical_and_its_recorded_faults_fit(tmp_path):
    sdist = REPO / "dist" / f"{TOP}.tar.gz"
    assert fault_sdist.fault_sdist(sdist, [], tmp_path / "none").read_bytes() == sdist.read_bytes()
    faults = REPO / "benchmarks" / "faults"
    out = fault_sdist.fault_sdist(sdist, [faults / "fault-iq4-xs-b5-stock-path.diff",
                                          faults / "fault-moe-warp-b7-reversed-butterfly.diff"], tmp_path / "faulted")
    before, after = members(sdist), members(out)
    assert {name for name in before if before[name] != after[name]} == {f"{TOP}/llama.cpp/ggml/src/ggml-cuda/mmvq.cu"}
