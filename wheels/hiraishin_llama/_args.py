"""Command-line parsing shared by hiraishin-llama-smoke and hiraishin-llama-bench, the checks of the
paths given on it that both make before any work (a run of minutes must not fail at its end), and what
a model file given on it is (its architecture, its experts), which decides how it is tested."""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path


class ArgumentParser(argparse.ArgumentParser):
    """A usage error is one line, saying what is wrong and how to fix it; exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# The largest verify batch the guarantee covers: an open range such as 2- ends here.
MAX_VERIFY_BATCH = 16
# One item of a batch list: a size, a range, or an open range ('2-').
_BATCH_ITEM = re.compile(r"(\d+)(?:\s*(-)\s*(\d*))?")


def parse_batches(text: str) -> tuple[int, ...]:
    """'1-16', '2-' (2 to 16) or '1,2,4,8' (or a mix) -> sorted batch sizes, each 1..16."""
    sizes: set[int] = set()
    for item in text.split(","):
        match = _BATCH_ITEM.fullmatch(item.strip())
        if match is None:
            raise argparse.ArgumentTypeError(
                f"batch sizes must look like 2-16, 2- (2 to {MAX_VERIFY_BATCH}) or 2,4,8, got {text!r}")
        first, dash, last = match.groups()
        low = int(first)
        # An open range runs to the largest verify batch, so '2-' reads as 2-16 rather than as 2.
        high = int(last) if last else (MAX_VERIFY_BATCH if dash else low)
        if high < low:
            raise argparse.ArgumentTypeError(f"the range {item.strip()!r} in {text!r} runs backwards; write {high}-{low}")
        # Checked per item, before the range is expanded: 2-99999999999 must not fill memory first.
        if low < 1 or high > MAX_VERIFY_BATCH:
            raise argparse.ArgumentTypeError(f"batch sizes must be between 1 and {MAX_VERIFY_BATCH}, got {text!r}")
        sizes.update(range(low, high + 1))
    return tuple(sorted(sizes))


def name_list(valid: Iterable[str], what: str, normalize: Callable[[str], str] = str.strip) -> Callable[[str], tuple[str, ...]]:
    """An argparse type: a comma-separated list, each item one of ``valid`` (after ``normalize``)."""
    choices = tuple(valid)

    def parse(text: str) -> tuple[str, ...]:
        items = tuple(normalize(item) for item in text.split(","))
        for item in items:
            if item not in choices:
                raise argparse.ArgumentTypeError(f"unknown {what} {item!r} in {text!r}; valid: {', '.join(choices)}")
        return items

    return parse


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _nearest_existing(path: Path) -> Path:
    """``path`` or the closest of its parents that exists (where a new file or directory would be made)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _reason(error: OSError) -> str:
    return (error.strerror or str(error)).lower()


def report_path_problem(path: Path) -> str | None:
    """Why the report cannot be written at ``path``, or None. Writes nothing that stays: a report
    already there is opened for appending and left as it was, a new one is tried as a probe file and
    removed, and missing directories are not made (the report's own write makes them)."""
    if path.is_dir():
        return f"is a directory; give the report a file name, e.g. {path / 'report.json'}"
    base = _nearest_existing(path.parent)
    try:
        if path.exists():
            with path.open("ab"):
                pass
            return None
        if not base.is_dir():
            return f"{base} is a file, so no directory can be made there; give a path in a writable directory"
        descriptor, probe = tempfile.mkstemp(dir=base, prefix=".hiraishin-write-check-")
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        where = "" if path.exists() else f": {base} takes no new files"
        return f"cannot be written{where} ({_reason(error)}); give a path in a writable directory"
    return None


def directory_problem(path: Path, *, must_write: bool) -> str | None:
    """Why ``path`` cannot serve as a directory to keep files in, or None; makes it when missing.
    ``must_write``: files will be written there, so it must take one (checked with a probe file)."""
    if path.exists() and not path.is_dir():
        return "is a file, not a directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot be made: {_nearest_existing(path)} takes no new directories ({_reason(error)})"
    if must_write:
        try:
            descriptor, probe = tempfile.mkstemp(dir=path, prefix=".hiraishin-write-check-")
            os.close(descriptor)
            os.unlink(probe)
        except OSError as error:
            return f"cannot be written to ({_reason(error)})"
    return None


def write_report(path: Path, report: dict) -> None:
    """Write the JSON report whole or not at all: a failed write leaves the previous report as it was.
    A path that is no regular file (/dev/stdout, a pipe) is written in place, never replaced."""
    text = json.dumps(report, indent=2) + "\n"
    target = path.resolve() if path.is_symlink() else path
    if target.exists() and not target.is_file():
        target.write_text(text)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    try:
        partial.write_text(text)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
