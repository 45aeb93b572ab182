"""`hiraishin smoke --from-index`: a wheel installed as a user installs it, on small wheels made here."""

from __future__ import annotations

import json
import os
import time
import zipfile
from pathlib import Path

import pytest

from hiraishin_build.errors import ConfigError, HiraishinError, SmokeFailed
from hiraishin_build.smoke import smoke_wheel, user_requirement

from ..helpers import PLAIN, make_wheel

# A stand-in for the package: `hiraishin-llama --version` and a smoke test whose
# verdict comes from the wheel (so a failing smoke test can be built too).
PACKAGE = '''import json, sys

def version():
    print("hiraishin-llama {version}")

def smoke():
    if "--batches" in sys.argv:  # as the real one refuses what is not a list of batch sizes: exit 2
        value = sys.argv[sys.argv.index("--batches") + 1]
        if not value.replace(",", "").isdigit():
            print("running nothing yet", flush=True)
            print(f"hiraishin-llama-smoke: error: argument --batches: batch sizes must look like 1-16 or 1,2,4, "
                  f"got {{value!r}} (see hiraishin-llama-smoke --help)", file=sys.stderr)
            sys.exit(2)
    print("running Q8_0 kv=f16 switch on (1/1) ...", flush=True)
    path = sys.argv[sys.argv.index("--json") + 1]
    with open(path, "w") as handle:
        json.dump({{"passed": {passed}, "args": sys.argv[1:]}}, handle)
    sys.exit(0 if {passed} else 1)
'''
ENTRY_POINTS = "[console_scripts]\nhiraishin-llama = hiraishin_llama:version\nhiraishin-llama-smoke = hiraishin_llama:smoke\n"


def stand_in(directory: Path, label: str, *, passed: bool = True, extras: tuple[str, ...] = ("cu12", "cu13")) -> Path:
    version = f"9079.4+{label}" if label else "9079.4"
    files = {
        "hiraishin_llama/__init__.py": (PACKAGE.format(version=version, passed=passed).encode(), PLAIN),
        f"hiraishin_llama-{version}.dist-info/entry_points.txt": (ENTRY_POINTS.encode(), PLAIN),
    }
    # The extras pull in nothing here, so the install needs no network.
    metadata = "".join(f"Provides-Extra: {extra}\n" for extra in extras)
    return make_wheel(directory, files, version=version, tag="py3-none-any", metadata=metadata)


def test_the_requirement_names_the_variant_extra_when_the_wheel_has_it(tmp_path: Path) -> None:
    assert user_requirement(stand_in(tmp_path / "a", "cu13.sm90")) == "hiraishin-llama[cu13]==9079.4+cu13.sm90"
    assert user_requirement(stand_in(tmp_path / "b", "cpu")) == "hiraishin-llama==9079.4+cpu"
    assert user_requirement(stand_in(tmp_path / "c", "cu13.sm90", extras=())) == "hiraishin-llama==9079.4+cu13.sm90"


@pytest.fixture()
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty --find-links directory: nothing may come from anywhere but the wheel's own index."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    empty = tmp_path / "no-dependencies"
    empty.mkdir()
    return empty


def test_installed_from_its_own_index_with_its_extra(tmp_path: Path, offline: Path) -> None:
    wheel = stand_in(tmp_path / "dist", "cu13.sm90")
    stand_in(tmp_path / "dist", "cu12.sm90")  # a neighbour that must not be indexed or installed
    result = smoke_wheel(wheel, tmp_path / "smoke", from_index=True, find_links=offline, smoke_args=("--quants", "Q8_0"))
    assert result.passed and result.report["args"][-2:] == ["--quants", "Q8_0"]
    listed = sorted(p.name for p in (tmp_path / "smoke" / "site").rglob("*.whl"))
    assert listed == [wheel.name]
    installed = next((tmp_path / "smoke" / "venv" / "lib").glob("python3*/site-packages/hiraishin_llama-*.dist-info"))
    assert installed.name == "hiraishin_llama-9079.4+cu13.sm90.dist-info"


def test_the_smoke_test_shows_its_cases_as_they_run_and_keeps_its_log(tmp_path: Path, offline: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    wheel = stand_in(tmp_path / "dist", "cpu")
    result = smoke_wheel(wheel, tmp_path / "smoke", find_links=offline)
    captured = capsys.readouterr()
    assert result.passed
    assert "running Q8_0 kv=f16 switch on (1/1) ..." in captured.out.splitlines()
    assert "the smoke test: done after" in captured.err and "(case 1 of 1)" in captured.err
    assert "running Q8_0 kv=f16 switch on (1/1) ..." in (tmp_path / "smoke" / "smoke.log").read_text()


def test_a_failing_smoke_test_is_reported_as_failed(tmp_path: Path, offline: Path) -> None:
    wheel = stand_in(tmp_path / "dist", "cpu", passed=False)
    result = smoke_wheel(wheel, tmp_path / "smoke", from_index=True, find_links=offline)
    assert not result.passed and json.loads(result.report_path.read_text())["passed"] is False


def test_a_wheel_without_a_variant_label_has_no_index(tmp_path: Path, offline: Path) -> None:
    wheel = stand_in(tmp_path / "dist", "")
    with pytest.raises(ConfigError, match="has no variant label"):
        smoke_wheel(wheel, tmp_path / "smoke", from_index=True, find_links=offline)


@pytest.mark.parametrize("content", ["a zip without a wheel's metadata", "not a zip at all"])
def test_a_file_that_is_not_a_wheel_is_refused_before_the_venv(content: str, tmp_path: Path, offline: Path) -> None:
    fake = tmp_path / "hiraishin_llama-9079.4+cpu-py3-none-any.whl"
    if content.startswith("a zip"):
        with zipfile.ZipFile(fake, "w") as archive:
            archive.writestr("README", "hello\n")
    else:
        fake.write_bytes(b"hello\n")
    started = time.monotonic()
    with pytest.raises(ConfigError, match="not a wheel"):  # bad input (exit 2), not a failed smoke test
        smoke_wheel(fake, tmp_path / "smoke", find_links=offline)
    assert time.monotonic() - started < 2
    assert not (tmp_path / "smoke").exists()  # no venv was made


# -- what is refused, and when ------------------------------------------------------

def test_a_usage_error_of_the_smoke_program_is_its_refusal_not_a_failed_test(tmp_path: Path, offline: Path) -> None:
    wheel = stand_in(tmp_path / "dist", "cpu")
    stale = tmp_path / "smoke" / "smoke.json"
    stale.parent.mkdir()
    stale.write_text('{"passed": true}\n')  # an earlier run's report must not stand for this one
    result = smoke_wheel(wheel, tmp_path / "smoke", find_links=offline, smoke_args=("--batches", "abc"))
    assert not result.passed
    assert result.refused == ("argument --batches: batch sizes must look like 1-16 or 1,2,4, got 'abc' "
                              "(see hiraishin-llama-smoke --help)")
    assert not stale.exists()


def test_the_refusal_is_the_programs_last_error_line(tmp_path: Path) -> None:
    from hiraishin_build.smoke import refusal_message

    log = tmp_path / "smoke.log"
    log.write_text("hiraishin-llama-smoke: warning: x\nhiraishin-llama-smoke: error: first\n"
                   "hiraishin-llama-smoke: error: --model m.gguf: no such file\n\n")
    assert refusal_message(log) == "--model m.gguf: no such file"
    log.write_text("usage: something else\nit refused\n")
    assert refusal_message(log) == "it refused"
    log.write_text("")
    assert refusal_message(log) == "it exited with status 2 and printed nothing"


def bundled_pip_wheel() -> Path:
    """A real wheel of another project: the pip that ensurepip installs."""
    import ensurepip

    found = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    if not found:
        pytest.skip("this Python has no bundled pip wheel")
    return found[0]


def refused_before_the_venv(wheel: Path, tmp_path: Path, offline: Path, *,
                            expected: type[HiraishinError] = ConfigError, **options: object) -> HiraishinError:
    """The error ``smoke_wheel`` refuses with, before any work: by default a bad input (ConfigError, exit 2),
    never a failed smoke test, since nothing was tested."""
    started = time.monotonic()
    with pytest.raises(expected) as info:
        smoke_wheel(wheel, tmp_path / "smoke", find_links=offline, **options)  # type: ignore[arg-type]
    assert time.monotonic() - started < 5
    assert not (tmp_path / "smoke").exists()  # no venv was made, nothing installed
    return info.value


def test_a_wheel_of_another_project_is_refused_before_the_venv(tmp_path: Path, offline: Path) -> None:
    pip = bundled_pip_wheel()
    error = refused_before_the_venv(pip, tmp_path, offline)
    assert error.message == f"{pip} is a wheel of pip, not a hiraishin-llama wheel"
    assert "hiraishin wheel" in (error.hint or "")


def test_a_file_whose_name_is_no_wheel_name_is_refused_naming_it_and_the_form(tmp_path: Path, offline: Path) -> None:
    foo = tmp_path / "foo.whl"
    foo.write_bytes(b"")
    error = refused_before_the_venv(foo, tmp_path, offline)
    assert error.message.startswith(f"{foo}: not a wheel's file name (")
    assert (error.hint or "").startswith("a wheel is named NAME-VERSION-PYTHON-ABI-PLATFORM.whl")


def test_a_wheel_with_a_corrupt_member_is_refused_before_the_venv(tmp_path: Path, offline: Path) -> None:
    wheel = stand_in(tmp_path / "dist", "cpu")
    data = bytearray(wheel.read_bytes())
    at = data.index(b"def smoke")
    data[at:at + 9] = bytes(9)  # stored, so the CRC no longer matches
    wheel.write_bytes(bytes(data))
    error = refused_before_the_venv(wheel, tmp_path, offline)
    assert error.message == (f"{wheel}: its member hiraishin_llama/__init__.py is corrupt: its bytes do not match "
                             "the CRC the zip records for them")


@pytest.mark.parametrize(("content", "problem"), [
    (b"root:x:0:0:root:/root:/bin/bash\n", "is not a GGUF model (a .gguf file begins with the 4 bytes 'GGUF')"),
    (b"", "is not a GGUF model (a .gguf file begins with the 4 bytes 'GGUF')"),
    (None, "no such file"),
])
def test_a_model_to_serve_that_is_no_gguf_file_is_refused_before_the_venv(content: bytes | None, problem: str,
                                                                          tmp_path: Path, offline: Path) -> None:
    model = tmp_path / "model.gguf"
    if content is not None:
        model.write_bytes(content)
    error = refused_before_the_venv(stand_in(tmp_path / "dist", "cpu"), tmp_path, offline, expected=ConfigError,
                                    serve_model=model)
    assert error.message == f"--serve-model {model}: {problem}"


def test_a_malformed_time_limit_is_refused_before_the_venv(tmp_path: Path, offline: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from hiraishin_build.errors import ConfigError

    monkeypatch.setenv("HIRAISHIN_BUILD_TIMEOUT", "soon")  # read only when the smoke test itself starts
    with pytest.raises(ConfigError, match="HIRAISHIN_BUILD_TIMEOUT='soon'"):
        smoke_wheel(stand_in(tmp_path / "dist", "cpu"), tmp_path / "smoke", find_links=offline)
    assert not (tmp_path / "smoke").exists()


def test_an_output_directory_that_cannot_be_written_is_refused_before_the_venv(tmp_path: Path, offline: Path) -> None:
    from hiraishin_build.errors import PathError

    with pytest.raises(PathError) as info:
        smoke_wheel(stand_in(tmp_path / "dist", "cpu"), Path("/proc/smoke"), find_links=offline)
    assert info.value.message.startswith("the smoke test's output directory /proc/smoke cannot be written")
    assert info.value.hint == "give --out a directory you can write to"


def test_a_server_that_never_gets_ready_is_stopped_with_what_it_started(tmp_path: Path) -> None:
    from hiraishin_build.smoke import llama_server

    from ..helpers import stand_in as stand_in_program

    venv = tmp_path / "venv"
    pids = tmp_path / "pids"
    # It never answers, and leaves a child of its own running, as a server with workers would.
    stand_in_program(venv / "bin", "llama-server", f'sleep 300 &\necho "$$ $!" > {pids}\nwait')
    with pytest.raises(SmokeFailed, match="did not become ready in 1 s"):
        with llama_server(venv, [], tmp_path / "server.log", timeout_s=1):
            pass
    server, child = map(int, pids.read_text().split())
    for pid in (server, child):
        state = Path(f"/proc/{pid}/stat")
        assert not state.exists() or state.read_text().rsplit(")", 1)[1].split()[0] == "Z", f"{pid} still runs"
