"""The patch stack on disk: ``patches/series`` and one format-patch file each."""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.header import decode_header, make_header
from pathlib import Path

from .errors import ConfigError, PatchError

SERIES_FILE = "series"
PATCH_SUFFIX = ".patch"

# What every patch message must tell a reader who meets it during a rebase.
REQUIRED_SECTIONS = ("Why:", "What:", "Verified:", "Upstream:")

_DIFF_GIT = re.compile(r'^diff --git (?:"?a/(?P<a>.+?)"?) (?:"?b/(?P<b>.+?)"?)$')


@dataclass(frozen=True)
class Patch:
    name: str
    path: Path
    subject: str
    body: str
    files: tuple[str, ...]

    def missing_sections(self) -> list[str]:
        return [s for s in REQUIRED_SECTIONS if not re.search(rf"^{re.escape(s)}", self.body, re.MULTILINE)]


def parse_patch(path: Path) -> Patch:
    """Read the subject, message body and touched files of a format-patch file."""
    try:
        text = path.read_bytes().decode("utf-8", errors="surrogateescape")
    except OSError as exc:
        raise PatchError(f"{path}: cannot be read: {exc.strerror}") from None
    header, sep, rest = text.partition("\n\n")
    if not sep or not header.startswith("From "):
        raise PatchError(
            f"{path}: not a git format-patch file (no mail header)",
            hint="create patches with `hiraishin patches export`, not by hand",
        )
    fields: dict[str, str] = {}
    current = None
    for line in header.splitlines()[1:]:
        if line[:1] in (" ", "\t") and current:
            # A folded header line (RFC 5322): the line break goes, the blank stays.
            fields[current] += line
        elif ":" in line:
            name, _, value = line.partition(":")
            current = name.lower()
            fields[current] = value.strip()
    subject = str(make_header(decode_header(fields.get("subject", "")))).strip()
    if not subject:
        raise PatchError(f"{path}: the patch has no Subject")
    body_lines: list[str] = []
    files: list[str] = []
    in_diff = False
    for line in rest.splitlines():
        match = _DIFF_GIT.match(line)
        if match:
            in_diff = True
            files.append(match.group("b"))
        elif not in_diff:
            if line == "---":
                in_diff = True
            else:
                body_lines.append(line)
    if not files:
        raise PatchError(f"{path}: the patch contains no diff", hint="a patch file must change at least one file")
    return Patch(path.name, path, subject, "\n".join(body_lines).strip(), tuple(files))


@dataclass(frozen=True)
class Series:
    directory: Path
    names: tuple[str, ...]

    @property
    def series_file(self) -> Path:
        return self.directory / SERIES_FILE

    def patch_paths(self) -> list[Path]:
        return [self.directory / name for name in self.names]

    def unlisted(self) -> list[str]:
        """Patch files present in the directory that ``series`` does not name."""
        listed = set(self.names)
        return sorted(p.name for p in self.directory.glob(f"*{PATCH_SUFFIX}") if p.name not in listed)

    def patches(self) -> list[Patch]:
        return [parse_patch(path) for path in self.patch_paths()]


def read_series(directory: Path, *, allow_empty: bool = False) -> Series:
    series_file = directory / SERIES_FILE
    if not series_file.is_file():
        raise ConfigError(
            f"{series_file}: file not found",
            hint="the stack needs an order file listing one patch file name per line",
        )
    names: list[str] = []
    for number, raw in enumerate(series_file.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{series_file}:{number}"
        if "/" in line or not line.endswith(PATCH_SUFFIX):
            raise ConfigError(f"{where}: '{line}' is not a patch file name", hint=f"list bare names ending in {PATCH_SUFFIX}")
        if line in names:
            raise ConfigError(f"{where}: '{line}' is listed twice")
        if not (directory / line).is_file():
            raise PatchError(
                f"{where}: patch file '{line}' is missing from {directory}",
                hint="restore the file (git checkout -- patches/) or remove its line from series",
            )
        names.append(line)
    if not names and not allow_empty:
        raise ConfigError(
            f"{series_file}: the series is empty",
            hint="list the patch files in order, one per line, or regenerate with `hiraishin patches export`",
        )
    return Series(directory, tuple(names))


def render_series(names: list[str]) -> str:
    return "".join(f"{name}\n" for name in names)


def patch_file_name(subject: str, taken: set[str]) -> str:
    """A stable file name from the subject, without a number prefix (so two
    branches that each append a patch do not collide on names)."""
    slug = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")[:60].rstrip("-") or "patch"
    name, counter = f"{slug}{PATCH_SUFFIX}", 2
    while name in taken:
        name, counter = f"{slug}-{counter}{PATCH_SUFFIX}", counter + 1
    return name
