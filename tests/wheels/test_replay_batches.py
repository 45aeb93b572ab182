"""hiraishin-replay's --batches (wheels/src/replay/replay_batches.h) takes the forms hiraishin-llama-smoke
takes: sizes, ranges and open ranges, mixed ("2,4,8-12", "2-4", "2-"). Compiled here with its C++ test;
the whole tool needs a built llama.cpp, its list parsing does not. Skips, saying so, without a C++ compiler.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path


from tests.helpers import REPLAY_SRC, compile_replay_test

from hiraishin_llama._args import parse_batches


# The smoke's list goes to the replay as it is written (joined sizes), but users type either tool's
# --batches by hand, so the two must read every form alike.
FORMS = ["2", "2,4,8", "2-4", "2-16", "2-", "15-", "2,4,8-12", "2-4,16", " 2 - 4 , 8 ", "1-16",
         "", "x", "2,x", "2,,3", "-4", "2--4", "8-2", "0", "0-3", "3-17", "17", "2-99999999999999999999"]

DRIVER = r"""
#include "replay_batches.h"
#include <cstdio>
int main(int argc, char ** argv) {
    for (int i = 1; i < argc; ++i) {
        try {
            const auto sizes = hiraishin::parse_batch_list(argv[i], 16, 16);
            for (size_t j = 0; j < sizes.size(); ++j) std::printf("%s%d", j ? "," : "", sizes[j]);
            std::printf("\n");
        } catch (const hiraishin::BatchListError & e) {
            std::printf("refused: %s\n", e.what());
        }
    }
}
"""


def test_the_parser_takes_lists_ranges_and_open_ranges(tmp_path: Path) -> None:
    binary = tmp_path / "replay_batches_test"
    compile_replay_test(REPLAY_SRC / "replay_batches_test.cpp", binary)
    result = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert last.endswith(" passed, 0 failed") and int(last.split()[0]) >= 25, result.stdout


def test_the_replay_reads_every_form_as_the_smoke_does(tmp_path: Path) -> None:
    source = tmp_path / "driver.cpp"
    source.write_text(DRIVER)
    compile_replay_test(source, tmp_path / "driver")
    # The replay allows sizes above 16 for measurements; with 16 as its limit both tools must agree.
    answers = subprocess.run([str(tmp_path / "driver"), *FORMS], capture_output=True, text=True,
                             timeout=60).stdout.splitlines()
    assert len(answers) == len(FORMS)
    for form, answer in zip(FORMS, answers):
        try:
            expected = ",".join(str(b) for b in parse_batches(form))
        except argparse.ArgumentTypeError as error:
            assert answer.startswith("refused: "), f"{form!r}: the replay took {answer}, the smoke refused it"
            # The same words, so that a user meets one message whichever tool refused it.
            assert answer.removeprefix("refused: ") == str(error), form
            continue
        assert answer == expected, f"{form!r}: the replay read {answer}, the smoke {expected}"


def test_the_tool_uses_the_tested_parser() -> None:
    source = (REPLAY_SRC / "hiraishin_replay.cpp").read_text()
    assert '#include "replay_batches.h"' in source
    assert "hiraishin::parse_batch_list(text, kMaxVerifyBatch, 1 << 20)" in source
    assert 'parse_integer("--batches"' not in source  # no second reading of the list beside the tested one
