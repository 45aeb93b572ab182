"""One error hierarchy for the tool.

Library code raises these; only the CLI turns them into a message and an exit
code, so every failure a user can meet has a fixed, documented exit status.
"""

from __future__ import annotations


class HiraishinError(Exception):
    """Base class: a failure the user can act on. ``hint`` says how."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class ConfigError(HiraishinError):
    """A configuration file (pin, recipe, series) is missing or malformed."""

    exit_code = 2


class CommandError(HiraishinError):
    """An external command (git, cmake, ...) failed; carries the tail of its output."""

    exit_code = 3

    def __init__(
        self,
        message: str,
        *,
        command: list[str],
        returncode: int,
        output_tail: str,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.command = command
        self.returncode = returncode
        self.output_tail = output_tail

    def __str__(self) -> str:
        text = f"{self.message}\n  command: {' '.join(self.command)}\n  exit status: {self.returncode}"
        if self.output_tail:
            indented = "\n".join("    " + line for line in self.output_tail.splitlines())
            text += f"\n  output (last lines):\n{indented}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class CommandTimedOut(CommandError):
    """An external command ran past its time limit and was stopped (see timeouts.py)."""

    exit_code = 14


class UpstreamError(HiraishinError):
    """The upstream cache is missing, incomplete, or disagrees with the pin."""

    exit_code = 4


class PinMismatchError(UpstreamError):
    """The pinned ref now names a different commit than the one recorded."""


class SourcesDisagree(UpstreamError):
    """Two upstream sources give one tag (or branch) name different commits."""


class SourceUnreachable(UpstreamError):
    """An upstream source could not be read (no such repository, no network, no answer in time)."""


class WorkTreeError(HiraishinError):
    """The work directory cannot be used as asked (dirty, foreign, unexported work)."""

    exit_code = 5


class PatchError(HiraishinError):
    """A patch of the stack is missing, corrupt, or does not apply."""

    exit_code = 6


class CheckFailed(HiraishinError):
    """A verification (patches check) found a difference."""

    exit_code = 7


class RebaseError(HiraishinError):
    """A rebase cannot start or go on as asked (one is in progress, none is)."""

    exit_code = 10


class RebaseStopped(RebaseError):
    """A rebase stopped (or, in a dry run, would stop) at a conflict."""


class Locked(HiraishinError):
    """Another hiraishin process holds the lock this one needs (its exit code is its subclass's)."""


class RebaseLocked(RebaseError, Locked):
    """Another rebase of the same project is running."""


class WorkTreeLocked(WorkTreeError, Locked):
    """Another hiraishin command is writing the same project's work tree or patches/."""


class CacheLocked(UpstreamError, Locked):
    """Another fetch into the same upstream cache is running."""


class GitTooOld(HiraishinError):
    """The git on PATH lacks what the tool uses (sparse checkout, partial clone)."""

    exit_code = 3


class WheelBuildError(HiraishinError):
    """A wheel could not be built, or cannot be built here as asked."""

    exit_code = 8


class RepairError(HiraishinError):
    """auditwheel failed, or the repaired wheel breaks a rule of how CUDA wheels are linked."""

    exit_code = 8


class GlibcFloorExceeded(RepairError):
    """A wheel's library needs a newer glibc or libstdc++ symbol version than its recipe's manylinux tag allows."""


class SmokeFailed(HiraishinError):
    """A wheel's smoke test failed or wrote no report."""

    exit_code = 9


class ToolchainMissing(HiraishinError):
    """This machine lacks what a recipe needs to build."""

    exit_code = 11


class SizeBudgetExceeded(HiraishinError):
    """A wheel is larger than its recipe's size-budget-mb."""

    exit_code = 12


class IndexBuildError(HiraishinError):
    """The wheels given cannot make a consistent index (e.g. a published name with other bytes)."""

    exit_code = 13


class PathError(HiraishinError):
    """A path given (an option, an environment variable) cannot be used: not writable, not a directory, absent."""

    exit_code = 15


class VersionNotNewer(ConfigError):
    """An sdist's version would not sort above a release whose upstream commit the pin descends from."""


class MatrixError(ConfigError):
    """The CI matrix cannot be derived from recipes/ and ci/matrix.toml (a missing or malformed CI setting)."""


class WorkflowsOutOfSync(CheckFailed):
    """.github/workflows/ differs from what ci/workflows/ generates."""


class WorkflowLintFailed(CheckFailed):
    """actionlint found problems in a workflow, or could not run."""
