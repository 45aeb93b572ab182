"""The replay tool's comparison (wheels/src/replay/replay_compare.h), compiled here with its C++ test.

The whole tool needs a built llama.cpp; its comparison does not, so the promise the tool
rests on (any bit of any logit at any compared position counts) is tested on every run.
Skips, saying so, without a C++ compiler.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


from tests.helpers import REPLAY_SRC, compile_replay_test



def build_and_run(source_dir: Path, work: Path) -> subprocess.CompletedProcess[str]:
    binary = work / "replay_compare_test"
    compile_replay_test(source_dir / "replay_compare_test.cpp", binary)
    return subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)


def test_the_comparison_sees_every_bit_of_every_position(tmp_path: Path) -> None:
    result = build_and_run(REPLAY_SRC, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].endswith(" passed, 0 failed")
    assert int(result.stdout.splitlines()[-1].split()[0]) >= 20


def test_the_tool_uses_the_tested_comparison() -> None:
    source = (REPLAY_SRC / "hiraishin_replay.cpp").read_text()
    assert '#include "replay_compare.h"' in source
    assert "hiraishin::compare_position(replayed, expected, n_vocab)" in source
    assert "hiraishin::tally_positions(differs, flips, n_prompt)" in source
    assert "memcmp(replayed" not in source  # no second comparison beside the tested one
