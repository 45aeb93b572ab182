"""The GitHub Actions workflows: sources in ``ci/workflows/``, installed copies
in ``.github/workflows/``, and their lint (actionlint).

The sources are the files to edit; ``hiraishin workflows sync`` writes each to
``.github/workflows/`` with a header saying where it comes from, and
``hiraishin workflows check`` fails when the two differ or when actionlint
finds a problem in an installed workflow.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import proc
from .errors import WorkflowLintFailed, WorkflowsOutOfSync
from .fsutil import atomic_write_bytes
from .project import Project

SOURCE_DIR = Path("ci") / "workflows"
INSTALLED_DIR = Path(".github") / "workflows"
ACTIONLINT = "actionlint"
ACTIONLINT_HINT = ("install the test extra (`python3 -m pip install -e '.[test]'`), which carries the actionlint "
                   "binary, or put an actionlint binary on PATH")


def header(name: str) -> str:
    return (f"# Generated from {SOURCE_DIR / name} by `hiraishin workflows sync`.\n"
            f"# Edit that file, then run the command; `hiraishin workflows check` fails while they differ.\n")


def sources(project: Project) -> list[Path]:
    return sorted((project.root / SOURCE_DIR).glob("*.yml"))


def installed(project: Project) -> list[Path]:
    directory = project.root / INSTALLED_DIR
    return sorted([*directory.glob("*.yml"), *directory.glob("*.yaml")])


def rendered(project: Project) -> dict[str, str]:
    """What .github/workflows/ should hold: file name -> text."""
    return {path.name: header(path.name) + path.read_text(encoding="utf-8") for path in sources(project)}


def _generated(path: Path) -> bool:
    return path.read_text(encoding="utf-8").startswith(f"# Generated from {SOURCE_DIR}/")


@dataclass(frozen=True)
class SyncResult:
    written: tuple[str, ...]
    unchanged: tuple[str, ...]
    removed: tuple[str, ...]
    """Generated files whose source is gone."""

    foreign: tuple[str, ...]
    """Files in .github/workflows/ that were not generated from ci/workflows/ (left alone)."""


def differences(project: Project) -> list[str]:
    """One line per installed workflow that is missing, stale, or not generated from a source."""
    expected = rendered(project)
    found: list[str] = []
    target = project.root / INSTALLED_DIR
    for name, text in expected.items():
        path = target / name
        if not path.is_file():
            found.append(f"{INSTALLED_DIR / name} is missing")
        elif path.read_text(encoding="utf-8") != text:
            found.append(f"{INSTALLED_DIR / name} differs from {SOURCE_DIR / name}")
    for path in installed(project):
        if path.name not in expected:
            origin = "its source is gone" if _generated(path) else f"it has no source in {SOURCE_DIR}/"
            found.append(f"{INSTALLED_DIR / path.name}: {origin}")
    return found


def check_sync(project: Project) -> None:
    if not sources(project):
        raise WorkflowsOutOfSync(f"no workflows in {project.root / SOURCE_DIR}")
    found = differences(project)
    if found:
        raise WorkflowsOutOfSync(
            "the installed workflows are not those of ci/workflows/:\n" + "\n".join(f"  {line}" for line in found),
            hint="edit ci/workflows/*.yml (not .github/workflows/), then run `hiraishin workflows sync`",
        )


def sync(project: Project) -> SyncResult:
    expected = rendered(project)
    if not expected:
        raise WorkflowsOutOfSync(f"no workflows in {project.root / SOURCE_DIR}", hint="nothing to install")
    target = project.root / INSTALLED_DIR
    target.mkdir(parents=True, exist_ok=True)
    written, unchanged, removed, foreign = [], [], [], []
    for name, text in expected.items():
        path = target / name
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            unchanged.append(name)
            continue
        atomic_write_bytes(path, text.encode("utf-8"))
        written.append(name)
    for path in installed(project):
        if path.name in expected:
            continue
        if _generated(path):
            path.unlink()
            removed.append(path.name)
        else:
            foreign.append(path.name)
    return SyncResult(tuple(written), tuple(unchanged), tuple(removed), tuple(foreign))


# -- lint ----------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    column: int
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message} [{self.kind}]"


@dataclass(frozen=True)
class LintResult:
    actionlint: str
    """The path of the actionlint that ran."""

    version: str
    files: tuple[str, ...]
    findings: tuple[Finding, ...]
    shellcheck: str | None
    """The shellcheck actionlint used for run: blocks, or None when none was on PATH."""

    @property
    def clean(self) -> bool:
        return not self.findings

    def as_dict(self) -> dict[str, object]:
        return {
            "actionlint": self.actionlint,
            "version": self.version,
            "shellcheck": self.shellcheck,
            "files": list(self.files),
            "clean": self.clean,
            "findings": [str(finding) for finding in self.findings],
        }


def actionlint_version(program: str) -> str:
    completed = proc.run([program, "-version"], what="actionlint -version", hint=ACTIONLINT_HINT)
    return completed.stdout.strip().splitlines()[0] if completed.stdout.strip() else "unknown"


def lint(files: Sequence[Path], *, cwd: Path) -> LintResult:
    """Run actionlint on ``files`` (and shellcheck on their run: blocks, when it is on PATH)."""
    program = shutil.which(ACTIONLINT)
    if program is None:
        raise WorkflowLintFailed("actionlint is not installed or not on PATH", hint=ACTIONLINT_HINT)
    if not files:
        raise WorkflowLintFailed("no workflow files to lint")
    version = actionlint_version(program)
    completed = proc.run([program, "-no-color", "-format", "{{json .}}", *[str(f) for f in files]],
                         cwd=cwd, check=False, what="actionlint")
    # 0: no problem; 1: problems found (listed as JSON); anything else: actionlint itself failed.
    if completed.returncode not in (0, 1):
        raise WorkflowLintFailed(f"actionlint failed (exit status {completed.returncode})",
                                 hint=proc.tail(completed.output, 10))
    try:
        raw = json.loads(completed.stdout or "[]")
    except json.JSONDecodeError:
        raise WorkflowLintFailed("actionlint printed no JSON report", hint=proc.tail(completed.output, 10)) from None
    findings = tuple(
        Finding(str(item.get("filepath", "")), int(item.get("line", 0)), int(item.get("column", 0)),
                str(item.get("kind", "")), str(item.get("message", "")))
        for item in raw or []
    )
    if completed.returncode == 1 and not findings:
        raise WorkflowLintFailed("actionlint reported a failure without findings", hint=proc.tail(completed.output, 10))
    return LintResult(program, version, tuple(str(f) for f in files), findings, shutil.which("shellcheck"))


def lint_installed(project: Project) -> LintResult:
    files = [path.relative_to(project.root) for path in installed(project)]
    return lint(files, cwd=project.root)


def require_clean(result: LintResult) -> None:
    if not result.clean:
        raise WorkflowLintFailed(
            f"actionlint found {len(result.findings)} problem(s):\n" + "\n".join(f"  {f}" for f in result.findings),
            hint="fix them in ci/workflows/*.yml, then `hiraishin workflows sync`",
        )
