"""benchmarks/server_exact.py against a stand-in llama-server.

The stand-in answers /health, /slots and /completion as the real server does, with the tokens of
a fixed greedy stream; STAND_IN_FAULT makes it die on a request (as a heap corruption does),
return fewer tokens than it reports, or differ from a position on with a draft model, so each
check of the harness is shown to fire."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import load_benchmark

server_exact = load_benchmark("server_exact")

STAND_IN = r'''#!{python}
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
draft = "-md" in args
fault = os.environ.get("STAND_IN_FAULT", "")
off = os.environ.get("GGML_BATCH_INVARIANT") == "0"
served = 0

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self.send({"status": "ok"})
        elif self.path == "/slots":
            self.send([{"id": 0, "speculative": draft and fault != "no-spec"}])

    def do_POST(self):
        global served
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        served += 1
        if draft and fault == "die" and served == 4:
            print("free(): invalid next size (fast)", flush=True)
            os._exit(134)
        n = body["n_predict"]
        tokens = [(7 * i + len(body["prompt"])) % 100 for i in range(n)]
        if draft and fault == "diverge" and off:
            tokens[5:] = [t + 1 for t in tokens[5:]]
        reported = n
        if draft and fault == "short":
            tokens = tokens[:n - 6]
        drafted = 3 * n // 4 if draft else 0
        self.send({"content": "".join(chr(97 + t % 26) for t in tokens), "tokens": tokens,
                   "tokens_predicted": reported, "stop_type": "limit",
                   "timings": {"predicted_n": reported, **({"draft_n": drafted, "draft_n_accepted": drafted} if draft else {})}})

print("listening", flush=True)
HTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    program = bin_dir / "llama-server"
    program.write_text(STAND_IN.replace("{python}", sys.executable))
    program.chmod(0o755)
    return tmp_path / "venv"


def state(venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str, *, switch_on: bool,
          plain_after_failure: bool = True) -> dict:
    monkeypatch.setenv("STAND_IN_FAULT", fault)
    return server_exact.switch_state(venv, tmp_path / "model.gguf", tmp_path, switch_on=switch_on, n_predict=20,
                                     plain_after_failure=plain_after_failure)


def test_equal_streams_compare_identical_and_every_count_holds(venv: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    result = state(venv, tmp_path, monkeypatch, "", switch_on=True)
    assert (result["identical"], result["compared"]) == (8, 8)
    assert result["draft"].speculative and not result["plain"].speculative
    assert all(a.count_problem(20) is None and a.draft_n == 15 for a in result["draft"].answers)
    assert result["draft"].args[-4:] == ["-md", str(tmp_path / "model.gguf"), "--spec-type", "draft-simple"]
    assert result["draft"].env == {"GGML_BATCH_INVARIANT": "", "GGML_CUDA_BATCH_INVARIANT": ""}


def test_a_stream_that_differs_is_located(venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = state(venv, tmp_path, monkeypatch, "diverge", switch_on=False)
    assert result["identical"] == 0
    assert {row["first_diff_token"] for row in result["per_prompt"]} == {5}
    assert {row["first_diff_char"] for row in result["per_prompt"]} == {5}


def test_a_server_that_dies_is_reported_with_its_last_words(venv: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    result = state(venv, tmp_path, monkeypatch, "die", switch_on=False, plain_after_failure=False)
    draft = result["draft"]
    assert draft.served == 3 and draft.failure.startswith("request 4 of 8 got no answer")
    assert draft.fatal_log == ["free(): invalid next size (fast)"]
    assert result["plain"].failure == "not run: the draft server failed" and result["compared"] == 0


def test_fewer_tokens_than_reported_is_a_count_problem(venv: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    result = state(venv, tmp_path, monkeypatch, "short", switch_on=True)
    problems = {a.count_problem(20) for a in result["draft"].answers}
    assert problems == {"14 tokens returned, predicted_n 20, tokens_predicted 20"}
    # a prefix of the plain stream: located at its end
    assert {row["first_diff_token"] for row in result["per_prompt"]} == {14}


def test_a_server_that_does_not_speculate_says_so(venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert state(venv, tmp_path, monkeypatch, "no-spec", switch_on=True)["draft"].speculative is False


def test_first_difference() -> None:
    assert server_exact.first_difference([1, 2, 3], [1, 2, 3]) is None
    assert server_exact.first_difference([1, 2, 3], [1, 9, 3]) == 1
    assert server_exact.first_difference([1, 2], [1, 2, 3]) == 2
    assert server_exact.first_difference([], []) is None


def test_draft_arguments_go_to_the_drafting_server_alone(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    draft = server_exact.server_args(model, draft=True, draft_extra=("-ctkd", "q4_0"))
    plain = server_exact.server_args(model, draft=False, draft_extra=("-ctkd", "q4_0"))
    assert draft[-6:] == ["-md", str(model), "--spec-type", "draft-simple", "-ctkd", "q4_0"]
    assert "-ctkd" not in plain


def test_prompts_for_a_base_model_with_notes() -> None:
    assert server_exact.prompts_of() == server_exact.PROMPTS
    long = server_exact.prompts_of("base", 14)
    assert len(long) == len(server_exact.QUESTIONS)
    assert all(p.startswith("Here are my notes.\nNote 1: ") and p.endswith(f'the question "{q}"\n\n')
               for p, q in zip(long, server_exact.QUESTIONS))
    assert all(p.count("\nNote ") == 14 and "<|im_start|>" not in p for p in long)
    chat = server_exact.prompts_of("smollm2", 2)
    assert all(p.startswith("<|im_start|>system\n") and "Note 2: " in p for p in chat)
