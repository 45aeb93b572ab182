"""Batch-invariant mode: one rule for its two switch names, in every program the wheel starts.

The rule (the patched library reads the names the same way): each value is
stripped and lowercased; empty means unset; 0/off/false/no mean off; 1/on/true/
yes mean on; anything else means on, with a warning. Off by either name wins,
then on by either name, else the default (the library's: off; the console
scripts': on). The console scripts then export both names with the answer, so
every backend of the program sees the same mode.
"""

from __future__ import annotations

import itertools

import pytest

from hiraishin_llama import _launch, runtime, switch

CUDA, ANY = "GGML_CUDA_BATCH_INVARIANT", "GGML_BATCH_INVARIANT"
UNSET = None
# Each value the table tries, with what it means on its own.
MEANING = {
    UNSET: "unset",
    "": "unset",
    " 0": "off",
    "0": "off",
    "1": "on",
    "off": "off",
    "yes": "on",
    "bogus": "on",
}
COMBINATIONS = list(itertools.product(MEANING, MEANING))


def expected(cuda: str | None, any_: str | None, default: bool) -> bool:
    meanings = {MEANING[cuda], MEANING[any_]}
    if "off" in meanings:
        return False
    if "on" in meanings:
        return True
    return default


def environment(cuda: str | None, any_: str | None) -> dict[str, str]:
    env = {"PATH": "/bin"}
    if cuda is not None:
        env[CUDA] = cuda
    if any_ is not None:
        env[ANY] = any_
    return env


@pytest.mark.parametrize("default", [False, True], ids=["library-default-off", "launcher-default-on"])
@pytest.mark.parametrize("cuda, any_", COMBINATIONS, ids=[f"{c!r}-{a!r}" for c, a in COMBINATIONS])
def test_every_combination_resolves_by_the_one_rule(cuda: str | None, any_: str | None, default: bool) -> None:
    resolved = switch.resolve(environment(cuda, any_), default=default)
    assert resolved.on is expected(cuda, any_, default)
    bogus = [name for name, value in ((CUDA, cuda), (ANY, any_)) if value == "bogus"]
    assert [w for w in resolved.warnings] == [f"{name}='bogus' is not one of 1/on/true/yes or 0/off/false/no; "
                                              f"taking it as on" for name in bogus]


@pytest.mark.parametrize("cuda, any_", COMBINATIONS, ids=[f"{c!r}-{a!r}" for c, a in COMBINATIONS])
def test_the_console_scripts_export_both_names_with_the_answer(
        cuda: str | None, any_: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runtime, "nvidia_library_dirs", lambda: [])
    env = _launch.program_environment(environment(cuda, any_), program="llama-server")
    value = "1" if expected(cuda, any_, default=True) else "0"
    assert (env[CUDA], env[ANY]) == (value, value)
    err = capsys.readouterr().err
    if "bogus" in (cuda, any_):
        assert err.startswith("llama-server: warning: ") and "='bogus'" in err
    else:
        assert err == ""  # in particular nothing when both are unset


def test_the_cuda_name_alone_turns_the_mode_on_for_the_cpu_backend_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fault this exists for: GGML_CUDA_BATCH_INVARIANT=1 alone used to leave
    # GGML_BATCH_INVARIANT unset, and the CPU backend (which reads only that name) ran stock.
    monkeypatch.setattr(runtime, "nvidia_library_dirs", lambda: [])
    env = _launch.program_environment({"PATH": "/bin", CUDA: "1"})
    assert env[ANY] == "1"
    env = _launch.program_environment({"PATH": "/bin", ANY: "", CUDA: " 0"})
    assert (env[CUDA], env[ANY]) == ("0", "0")


@pytest.mark.parametrize("on", [True, False])
def test_the_smoke_test_and_bench_set_both_names_whatever_the_user_set(on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "nvidia_library_dirs", lambda: [])
    monkeypatch.setenv(CUDA, "bogus")
    monkeypatch.setenv(ANY, "0")
    env = _launch.switch_environment(on)
    assert (env[CUDA], env[ANY]) == (("1", "1") if on else ("0", "0"))


MODE_LINES = [
    ({}, "hiraishin-llama: batch-invariant mode on (the default; GGML_BATCH_INVARIANT=0 turns it off)"),
    ({ANY: "1"}, "hiraishin-llama: batch-invariant mode on (GGML_BATCH_INVARIANT=1 set)"),
    ({ANY: "0"}, "hiraishin-llama: batch-invariant mode off (GGML_BATCH_INVARIANT=0 set)"),
    ({CUDA: " off "}, "hiraishin-llama: batch-invariant mode off (GGML_CUDA_BATCH_INVARIANT=off set)"),
    # Off by either name wins: the line names the setting that decided it, not the one overruled.
    ({CUDA: "1", ANY: "0"}, "hiraishin-llama: batch-invariant mode off (GGML_BATCH_INVARIANT=0 set)"),
    ({CUDA: "1", ANY: "yes"},
     "hiraishin-llama: batch-invariant mode on (GGML_CUDA_BATCH_INVARIANT=1, GGML_BATCH_INVARIANT=yes set)"),
]


@pytest.fixture
def launched(tmp_path, monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Each program's stand-in in a bin/ of its own; execve records what would have been run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("llama-server", "llama-cli", "llama-speculative-simple", "llama-bench", "llama-quantize",
                 "hiraishin-replay", _launch.RPC_SERVER):
        (bin_dir / name).write_text("#!/bin/sh\n")
    monkeypatch.setattr(_launch, "BIN_DIR", bin_dir)
    monkeypatch.setattr(runtime, "nvidia_library_dirs", lambda: [])
    monkeypatch.setattr(runtime, "environment_warnings", lambda: [])
    for name in switch.NAMES:
        monkeypatch.delenv(name, raising=False)
    calls: list[tuple] = []
    monkeypatch.setattr(_launch.os, "execve", lambda path, argv, env: calls.append((path, argv, env)))
    return calls


@pytest.mark.parametrize("settings, line", MODE_LINES, ids=[repr(s) for s, _ in MODE_LINES])
@pytest.mark.parametrize("program", ["llama_server", "llama_cli", "llama_speculative_simple", "llama_bench",
                                     "rpc_server"])
def test_the_launched_programs_say_on_stderr_which_mode_they_run_in(
        program: str, settings: dict[str, str], line: str, launched: list[tuple],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(_launch.sys, "argv", [program, "--port", "8080"])
    getattr(_launch, program)()
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [line]
    assert captured.out == ""  # stdout stays the program's own
    (_, argv, env), = launched
    assert argv[1:] == ["--port", "8080"]
    # The line says what the program gets.
    assert env[ANY] == ("1" if " on " in line else "0")


@pytest.mark.parametrize("program", ["llama_quantize", "hiraishin_replay"])
def test_programs_the_mode_does_not_change_say_nothing(program: str, launched: list[tuple],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # llama-quantize computes no logits; hiraishin-replay records the switch in its own report.
    getattr(_launch, program)()
    assert capsys.readouterr().err == "" and len(launched) == 1


def test_the_mode_line_leaves_the_programs_stdout_alone(tmp_path) -> None:
    """End to end, a real exec: the launcher's line goes to stderr before the program starts, and the
    program's stdout is exactly its own."""
    import subprocess
    import sys
    from pathlib import Path

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    server = bin_dir / "llama-server"
    server.write_text('#!/bin/sh\necho "served $GGML_BATCH_INVARIANT"\necho "server log" >&2\n')
    server.chmod(0o755)
    wheels_dir = Path(_launch.__file__).resolve().parents[1]
    script = ("import sys; from pathlib import Path; from hiraishin_llama import _launch; "
              f"_launch.BIN_DIR = Path({str(bin_dir)!r}); sys.argv = ['llama-server']; _launch.llama_server()")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(wheels_dir), "GGML_BATCH_INVARIANT": "0"}
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "served 0\n"
    assert ran.stderr.splitlines() == ["hiraishin-llama: batch-invariant mode off (GGML_BATCH_INVARIANT=0 set)",
                                       "server log"]
