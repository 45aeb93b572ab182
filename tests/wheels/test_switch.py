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
