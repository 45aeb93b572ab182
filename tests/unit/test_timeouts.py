"""Every command runs under a time limit: a stalled fetch or a hung build is stopped, with a message
naming the limit and the setting that changes it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from hiraishin_build import proc, timeouts
from hiraishin_build.errors import CommandTimedOut, ConfigError

from ..conftest import Upstream, make_project

# The shell's child sleeps too and holds the output pipe: the whole process group must go.
STALL = ["sh", "-c", "echo started; sleep 8 & sleep 8"]


def test_a_stalled_command_is_stopped_with_its_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIRAISHIN_COMMAND_TIMEOUT", "1")
    started = time.monotonic()
    with pytest.raises(CommandTimedOut) as info:
        proc.run(STALL, what="a stalled step")
    assert time.monotonic() - started < 5
    error = info.value
    assert error.exit_code == 14
    assert "a stalled step did not finish within 1 s" in str(error)
    assert "started" in error.output_tail
    assert "HIRAISHIN_COMMAND_TIMEOUT" in (error.hint or "")


def test_a_stalled_build_is_stopped_and_its_log_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIRAISHIN_BUILD_TIMEOUT", "1")
    started = time.monotonic()
    with pytest.raises(CommandTimedOut, match="building did not finish within 1 s") as info:
        proc.run_logged(STALL, log_path=tmp_path / "build.log", what="building", limit=timeouts.BUILD)
    assert time.monotonic() - started < 5
    assert "HIRAISHIN_BUILD_TIMEOUT" in (info.value.hint or "")
    assert (tmp_path / "build.log").read_text() == "started\n"


def test_a_quick_command_is_not_affected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIRAISHIN_COMMAND_TIMEOUT", "5")
    assert proc.run(["sh", "-c", "echo fine"]).stdout == "fine\n"


@pytest.mark.parametrize("value", ["soon", "-3", "nan"])
def test_a_bad_setting_is_a_configuration_error(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIRAISHIN_NETWORK_TIMEOUT", value)
    with pytest.raises(ConfigError, match="HIRAISHIN_NETWORK_TIMEOUT"):
        timeouts.NETWORK.seconds()


def test_defaults_are_generous_for_builds_and_shorter_for_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    for limit in (timeouts.NETWORK, timeouts.BUILD, timeouts.COMMAND):
        monkeypatch.delenv(limit.variable, raising=False)
    assert timeouts.BUILD.seconds() >= 3 * 3600
    assert 600 <= timeouts.NETWORK.seconds() < timeouts.BUILD.seconds()
    monkeypatch.setenv("HIRAISHIN_NETWORK_TIMEOUT", "0")
    assert timeouts.NETWORK.seconds() is None  # 0: no limit


def test_a_stalled_upstream_source_is_given_up_in_time(tmp_path: Path, upstream: Upstream, cache: object,
                                                      isolated_git_config: Path) -> None:
    # A remote that accepts the connection and never answers: git's ext:: transport running sleep.
    # The fetch first asks the source what it has (under HIRAISHIN_CONNECT_TIMEOUT), which is where it stalls.
    with isolated_git_config.open("a") as config:
        config.write('[protocol "ext"]\n\tallow = always\n')
    project = make_project(tmp_path / "project", upstream)
    started = time.monotonic()
    fetched = subprocess.run([sys.executable, "-m", "hiraishin_build.cli", "upstream", "fetch",
                              "--from", "ext::sh -c sleep% 20"], cwd=project.root, capture_output=True, text=True,
                             env={**__import__("os").environ, "HIRAISHIN_CONNECT_TIMEOUT": "2"})
    assert time.monotonic() - started < 15
    assert fetched.returncode == 4, fetched.stderr
    assert "cannot read the upstream source ext::sh -c sleep% 20: no answer within 2 s" in fetched.stderr
    assert "HIRAISHIN_CONNECT_TIMEOUT" in fetched.stderr and "Traceback" not in fetched.stderr
