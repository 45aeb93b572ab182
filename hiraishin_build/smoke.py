"""Install a wheel into a fresh virtual environment and run its smoke test there."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from . import proc
from .errors import HiraishinError


class SmokeFailed(HiraishinError):
    exit_code = 9


@dataclass(frozen=True)
class SmokeResult:
    report_path: Path
    passed: bool
    report: dict


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def smoke_wheel(
    wheel: Path,
    out_dir: Path,
    *,
    system_site_packages: bool = False,
    find_links: Path | None = None,
    smoke_args: tuple[str, ...] = (),
) -> SmokeResult:
    if not wheel.is_file() or wheel.suffix != ".whl":
        raise SmokeFailed(f"{wheel} is not a wheel file", hint="build one with `hiraishin wheel --recipe NAME`")
    out_dir.mkdir(parents=True, exist_ok=True)
    venv = out_dir / "venv"
    proc.run(
        [sys.executable, "-m", "venv", "--clear", *(["--system-site-packages"] if system_site_packages else []), str(venv)],
        what="creating the smoke-test virtual environment",
    )
    install = [str(venv_python(venv)), "-m", "pip", "install", "--quiet", str(wheel)]
    if find_links is not None:
        install[5:5] = ["--no-index", "--find-links", str(find_links)]
    proc.run_logged(install, log_path=out_dir / "install.log", what=f"installing {wheel.name}",
                    hint="with no package index, pass --find-links DIR holding the wheel's dependencies")
    report_path = out_dir / "smoke.json"
    smoke = [str(venv / "bin" / "hiraishin-llama-smoke"), "--json", str(report_path), *smoke_args]
    completed = proc.run(smoke, check=False, what="the smoke test")
    (out_dir / "smoke.log").write_text(completed.output + "\n")
    print(completed.stdout)
    if not report_path.is_file():
        raise SmokeFailed(
            f"the smoke test wrote no report (exit status {completed.returncode})",
            hint=f"see {out_dir / 'smoke.log'}\n" + proc.tail(completed.output, 10),
        )
    report = json.loads(report_path.read_text())
    return SmokeResult(report_path, completed.returncode == 0 and report.get("passed", False), report)
