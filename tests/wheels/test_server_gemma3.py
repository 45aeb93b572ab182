"""The CPU wheel's llama-server on Gemma 3 270M, a real model with sliding-window attention layers (a window of 512
tokens), end to end at -np 1: with a draft, greedy /completion gives the tokens it gives without one.

benchmarks/server_exact.py's runs: Gemma 3 270M (Q4_K_M) drafts for itself (``-md M --spec-type draft-simple``)
with its draft's KV cache holding Q4_0 keys (``-ctkd q4_0``), so the draft disagrees with the target now and then
and some drafts are rejected: the server keeps part of a verify batch and rolls its cache back inside it (a
self-draft with the target's own cache types accepts nearly every draft). Four prompts, each 14 numbered notes and
the start of an answer to a question (about 460 tokens: the model is the pretrained one, not instruction-tuned, so no
chat turns), and 160 generated tokens each, so every request crosses the window while it generates and drafts: past
position 512 the sliding-window layers' queries of a verify batch each see a different range of cells. Each of the
four servers (plain and draft, switch on and off) runs once per module; the switch-off runs are the control.

On the raw CPU build (not a wheel; 2 shared cores), benchmarks/results/server-draft-cpu-gemma3-270m-raw-build.json:
switch on, 4 of 4 identical, 531 drafted and 455 accepted; switch off, 1 of 4 identical (first differing tokens 96,
12 and 5), 525 drafted and 458 accepted.

SmolLM2 is not repeated here: test_server_exact.py serves it with a self-draft, switch on and off.

Needs the repaired CPU wheel and the Gemma 3 GGUF (conftest.py); skips, saying which is missing, otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import load_benchmark
from tests.wheels.synthetic_checks import SwitchStates, assert_server_state

server_exact = load_benchmark("server_exact")

N_PREDICT = 160
NOTES = 14
PROMPTS = server_exact.prompts_of("base", NOTES)[:4]
# The draft's KV cache keeps Q4_0 keys: the same weights, drafts that the target rejects now and then.
DRAFT_ARGS = ("-ctkd", "q4_0")
WINDOW = 512




@pytest.fixture(scope="module")
def states(server_venv: Path, gemma3_270m: Path, tmp_path_factory: pytest.TempPathFactory) -> SwitchStates:
    return SwitchStates(server_venv, gemma3_270m, tmp_path_factory.mktemp("server-gemma3-logs"), prompts=PROMPTS,
                        n_predict=N_PREDICT, draft_extra=DRAFT_ARGS)


def assert_answers_cross_the_window(run) -> None:
    """Every answer holds the n_predict tokens it reports, and its prompt and tokens reach past the window."""
    problems = [(i, a.count_problem(N_PREDICT)) for i, a in enumerate(run.answers) if a.count_problem(N_PREDICT)]
    assert not problems, f"{run.label}: {problems}"
    short = [(i, a.prompt_n, len(a.tokens)) for i, a in enumerate(run.answers)
             if len(a.tokens) != N_PREDICT or a.prompt_n + len(a.tokens) <= WINDOW]
    assert not short, f"{run.label}: (prompt, prompt tokens, generated) not past {WINDOW} tokens: {short}"


def test_with_the_switch_on_the_drafting_server_gives_the_plain_greedy_tokens(states: SwitchStates) -> None:
    state = states(True)
    assert_server_state(state, len(PROMPTS), identical=True)
    for run in (state["draft"], state["plain"]):
        assert_answers_cross_the_window(run)
    # a model that answered every prompt with one stream (as this one did in chat turns) would show little
    streams = {tuple(a.tokens) for a in state["plain"].answers}
    assert len(streams) == len(PROMPTS), f"{len(streams)} distinct streams for {len(PROMPTS)} prompts"


def test_with_the_switch_off_the_drafting_server_departs_from_plain_greedy(states: SwitchStates, record_property) -> None:
    """The control: the same servers with stock kernels. On the 2-core machine this was written on (raw CPU
    build, benchmarks/results/server-draft-cpu-gemma3-270m-raw-build.json) it differed; a control that
    differs nowhere would show nothing."""
    state = states(False)
    record_property("off_identical", f"{state['identical']}/{state['compared']}")
    record_property("off_first_diff_tokens", [row["first_diff_token"] for row in state["per_prompt"]])
    assert_server_state(state, len(PROMPTS), identical=False)
    for run in (state["draft"], state["plain"]):
        assert_answers_cross_the_window(run)
