"""``hiraishin-llama``: what it says of a wheel is what that wheel has.

stack.json lists the backends the patch stack makes exact, the same for every wheel of the stack;
build_info.json says what one wheel was built with (CUDA architectures only in a CUDA wheel).
"""

from __future__ import annotations

import json

import pytest

from hiraishin_llama import info, runtime

STACK = {"exact_backends": ["cuda", "cpu"], "patched_commit": "0" * 40}
WHEELS = {
    "cpu": ({**STACK, "recipe": "cpu", "cuda_architectures": ""}, ["cpu"], ["cpu"]),
    "cu13-sm90": ({**STACK, "recipe": "cu13-sm90", "cuda_architectures": "90-real;90-virtual"}, ["cpu", "cuda"],
                  ["cuda", "cpu"]),
}


@pytest.fixture
def wheel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    build, backends, exact = WHEELS[request.param]
    monkeypatch.setattr(runtime, "build_info", lambda: build)
    monkeypatch.setattr(runtime, "gpus", lambda: [])
    monkeypatch.setattr(runtime, "environment_warnings", lambda: [])
    return backends, exact


@pytest.mark.parametrize("wheel", list(WHEELS), indirect=True)
def test_json_lists_only_the_exact_backends_this_wheel_has(wheel: tuple[list[str], list[str]],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    backends, exact = wheel
    info.main(["--json"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["backends"] == backends
    assert printed["exact_backends"] == exact
    # What the stack covers stays visible, under its own name.
    assert printed["stack_exact_backends"] == ["cuda", "cpu"]


@pytest.mark.parametrize("wheel", ["cpu"], indirect=True)
def test_the_text_says_the_backends_too(wheel: tuple[list[str], list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    info.main(["--version"])
    assert "backends: cpu (bit-exact verify batches: cpu)\n" in capsys.readouterr().out


def test_a_build_without_stack_information_claims_nothing(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runtime, "build_info", lambda: {})
    monkeypatch.setattr(runtime, "gpus", lambda: [])
    info.main(["--json"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["backends"] == ["cpu"] and printed["exact_backends"] == []


def test_coverage_is_a_subcommand(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_text("not a model\n")
    assert info.main(["coverage", str(not_gguf)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hiraishin-llama coverage: error:") and str(not_gguf) in err


@pytest.mark.parametrize("wheel", ["cpu"], indirect=True)
def test_the_rpc_worker_is_named_where_the_wheel_has_it(wheel: tuple[list[str], list[str]], tmp_path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from hiraishin_llama import _launch

    monkeypatch.setattr(_launch, "BIN_DIR", tmp_path)
    info.main(["--version"])
    assert "rpc:" not in capsys.readouterr().out
    info.main(["--json"])
    assert json.loads(capsys.readouterr().out)["rpc_server"] is False
    (tmp_path / _launch.RPC_SERVER).write_text("#!/bin/sh\n")
    info.main(["--version"])
    assert ("rpc:      rpc-server (a worker for --rpc HOST:PORT; a batch-invariant client refuses a worker whose "
            "mode is off)\n") in capsys.readouterr().out
    info.main(["--json"])
    assert json.loads(capsys.readouterr().out)["rpc_server"] is True
