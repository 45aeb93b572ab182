"""`hiraishin smoke --from-index`: a wheel installed as a user installs it, on small wheels made here."""

from __future__ import annotations

import json
import os
import time
import zipfile
from pathlib import Path

import pytest

from hiraishin_build.errors import SmokeFailed
from hiraishin_build.smoke import smoke_wheel, user_requirement

from ..helpers import PLAIN, make_wheel

# A stand-in for the package: `hiraishin-llama --version` and a smoke test whose
# verdict comes from the wheel (so a failing smoke test can be built too).
PACKAGE = '''import json, sys

def version():
    print("hiraishin-llama {version}")

def smoke():
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
    with pytest.raises(SmokeFailed, match="has no variant label"):
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
    with pytest.raises(SmokeFailed, match="not a wheel"):
        smoke_wheel(fake, tmp_path / "smoke", find_links=offline)
    assert time.monotonic() - started < 2
    assert not (tmp_path / "smoke").exists()  # no venv was made
