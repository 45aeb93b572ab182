"""benchmarks/server_prefix.py against the stand-in llama-server of test_server_exact.py: every request of both
passes carries the banned tokens, the server gets the extra arguments (``-ngl 99`` on a GPU), and a reusing
request whose tokens differ from its empty-cache run is counted and located."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

from tests.benchmarks.test_server_exact import venv  # noqa: F401 (fixture)
from tests.helpers import load_benchmark

server_prefix = load_benchmark("server_prefix")


def test_banned_tokens_and_server_arguments_reach_both_passes(monkeypatch: pytest.MonkeyPatch, venv: Path,  # noqa: F811
                                                               tmp_path: Path) -> None:
    monkeypatch.setenv("STAND_IN_FAULT", "")
    asked, started = [], []
    real_complete, real_server = server_prefix.complete, server_prefix.llama_server

    def spy_complete(base, prompt, n_predict, timeout_s, banned=(), cache_prompt=False):
        asked.append((banned, cache_prompt))
        return real_complete(base, prompt, n_predict, timeout_s, banned, cache_prompt=cache_prompt)

    def spy_server(venv_dir, args, log, env):
        started.append(list(args))
        return real_server(venv_dir, args, log, env=env)

    monkeypatch.setattr(server_prefix, "complete", spy_complete)
    monkeypatch.setattr(server_prefix, "llama_server", spy_server)
    state = server_prefix.switch_state(venv, tmp_path / "model.gguf", tmp_path, switch_on=True, prompts=("a", "bb"),
                                       n_predict=6, draft=True, extra=("-ngl", "99"), banned=(3, 4))
    assert asked == [((3, 4), True), ((3, 4), True), ((3, 4), False), ((3, 4), False)]
    assert len(started) == 1
    args = started[0]
    assert args[args.index("-ngl") + 1] == "99" and "-md" in args
    assert state["identical"] == state["compared"] == 2


def test_a_reusing_request_that_differs_is_counted_and_located(monkeypatch: pytest.MonkeyPatch, venv: Path,  # noqa: F811
                                                               tmp_path: Path) -> None:
    monkeypatch.setenv("STAND_IN_FAULT", "")
    real = server_prefix.complete

    def reused_prefix_changes_the_text(base, prompt, n_predict, timeout_s, banned=(), cache_prompt=False):
        answer = real(base, prompt, n_predict, timeout_s, banned, cache_prompt=cache_prompt)
        if cache_prompt and prompt == "bb":
            answer["tokens"][3] += 1
        return answer

    monkeypatch.setattr(server_prefix, "complete", reused_prefix_changes_the_text)
    state = server_prefix.switch_state(venv, tmp_path / "model.gguf", tmp_path, switch_on=True, prompts=("a", "bb"),
                                       n_predict=6, draft=False)
    assert state["identical"] == 1
    assert [row["first_diff_token"] for row in state["per_prompt"]] == [None, 3]


def test_a_bad_token_range_is_refused_before_any_server_starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    def no_server(*args, **kwargs):
        raise AssertionError("a server was started")
        yield  # pragma: no cover

    monkeypatch.setattr(server_prefix, "llama_server", contextlib.contextmanager(no_server))
    monkeypatch.setattr(sys, "argv", ["server_prefix.py", "--venv", str(tmp_path), "--model", "m.gguf",
                                      "--ban-tokens", "258-3", "--log-dir", str(tmp_path / "logs")])
    with pytest.raises(SystemExit) as exit_info:
        server_prefix.main()
    assert exit_info.value.code == 2
    assert "--ban-tokens 258-3: give a range of token ids FIRST-LAST" in capsys.readouterr().err
