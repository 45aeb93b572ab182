"""The patch stack on disk: ``patches/series`` and one format-patch file each.

Each line of ``series`` names a patch file and, after ``#``, records the size of its diff as the
tool exported it (``name.patch  # 2 files, +126 -67``). A patch cut short at a file or hunk boundary
still parses and applies, so this record is what tells a damaged file from a whole one.
"""

from __future__ import annotations

import email.policy
import re
from dataclasses import dataclass, field
from email.parser import BytesHeaderParser
from pathlib import Path

import pygit2

from .errors import ConfigError, PatchError
from .log import get_logger

SERIES_FILE = "series"
PATCH_SUFFIX = ".patch"

# What every patch message must tell a reader who meets it during a rebase.
REQUIRED_SECTIONS = ("Why:", "What:", "Verified:", "Upstream:")

# Where git mailinfo ends a message and starts the patch: the "---" line, or the first diff.
_PATCH_START = re.compile(rb"^(?:---\n|diff --git )", re.MULTILINE)

# What may follow "diff --git" before a file's first hunk (git's extended headers), a hunk's header, and the
# lines of a binary patch ("literal N"/"delta N", then base85 lines: a length letter and groups of 5).
_EXTENDED_HEADERS = (b"old mode ", b"new mode ", b"deleted file mode ", b"new file mode ", b"copy from ",
                     b"copy to ", b"rename from ", b"rename to ", b"similarity index ", b"dissimilarity index ",
                     b"index ", b"--- ", b"+++ ", b"Binary files ")
_HUNK_HEADER = re.compile(rb"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_BINARY_SIZE = re.compile(rb"(?:literal|delta) \d+")
_BASE85_LINE = re.compile(rb"[A-Za-z][0-9A-Za-z!#$%&()*+\-;<=>?@^_`{|}~]+")
# The signature format-patch writes after "-- " unless told not to: the git version.
_GIT_VERSION = re.compile(rb"\d+\.\d+[0-9A-Za-z.\-]*(?: \(.*\))?")


@dataclass(frozen=True)
class DiffSize:
    files: int
    insertions: int
    deletions: int

    def __str__(self) -> str:
        return f"{self.files} file{'s' if self.files != 1 else ''}, +{self.insertions} -{self.deletions}"

    @classmethod
    def parse(cls, text: str) -> DiffSize | None:
        found = _DIFF_SIZE.fullmatch(text.strip())
        return cls(*(int(found.group(i)) for i in (1, 2, 3))) if found else None


_DIFF_SIZE = re.compile(r"(\d+) files?, \+(\d+) -(\d+)")


@dataclass(frozen=True)
class Patch:
    name: str
    path: Path
    subject: str
    body: str
    files: tuple[str, ...]
    size: DiffSize | None = None

    def missing_sections(self) -> list[str]:
        return [s for s in REQUIRED_SECTIONS if not re.search(rf"^{re.escape(s)}", self.body, re.MULTILINE)]


def restore_hint(path: Path) -> str:
    """What to do about a damaged patch file: the committed one is the one to have."""
    return (f"restore it from git: git checkout -- {path.parent.name}/{path.name} (patch files are written by the "
            "tool from the work branch; a damaged one cannot be re-exported back)")


def _first_line_after_diff(diff: bytes) -> int | None:
    """The index among ``diff``'s lines of the first that is no part of it: text after a hunk's last line (as its
    header counts them), after a file's headers or after the signature, which git am and so `patches export` drop
    without a word. None where every line belongs, and where a hunk is itself malformed or cut short (libgit2
    says what is wrong with those). Blank lines outside hunks are harmless and skipped."""
    state, old, new, signed = "header", 0, 0, False
    for index, line in enumerate(diff.split(b"\n")):
        if state == "hunk":
            if line.startswith(b"\\"):  # "\ No newline at end of file"
                continue
            if old > 0 or new > 0:
                kind = line[:1]
                if kind in (b" ", b""):  # an empty line is a context line an editor trimmed
                    old, new = old - 1, new - 1
                elif kind == b"-":
                    old -= 1
                elif kind == b"+":
                    new -= 1
                else:
                    return None
                if old < 0 or new < 0:
                    return None
                continue
            state = "between"
        if not line.strip():
            continue
        if state == "signature":
            if signed or not _GIT_VERSION.fullmatch(line):
                return index
            signed = True
            continue
        if line.startswith(b"diff --git "):
            state = "header"
            continue
        hunk = _HUNK_HEADER.match(line)
        if hunk and state in ("header", "between"):
            old, new = (int(count) if count is not None else 1 for count in hunk.groups())
            state = "hunk"
            continue
        if line in (b"-- ", b"--"):
            state = "signature"
            continue
        if state == "header" and line.startswith(_EXTENDED_HEADERS):
            continue
        if state == "header" and line == b"GIT binary patch":
            state = "binary"
            continue
        if state == "binary" and (_BINARY_SIZE.fullmatch(line) or (
                _BASE85_LINE.fullmatch(line) and (len(line) - 1) % 5 == 0)):
            continue
        return index
    return None


def parse_patch(path: Path) -> Patch:
    """Read the subject, message body and touched files of a format-patch file.

    The mail header is read by the email package (folded and encoded subjects);
    the diff by libgit2 (pygit2), which also refuses a diff that was cut short.
    """
    shown = f"{path.parent.name}/{path.name}"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PatchError(f"{path}: cannot be read: {exc.strerror}") from None
    if b"\r\n" in data.partition(b"\ndiff --git ")[0]:
        raise PatchError(
            f"{shown}: the patch has CRLF line endings (an editor or git's core.autocrlf converted it)",
            hint=f"{restore_hint(path)}; keep git from converting patches: `patches/*.patch -text` in .gitattributes",
        )
    header, sep, rest = data.partition(b"\n\n")
    if not sep or not header.startswith(b"From "):
        raise PatchError(f"{shown}: not a git format-patch file (no mail header)", hint=restore_hint(path))
    fields = BytesHeaderParser(policy=email.policy.default).parsebytes(header.partition(b"\n")[2] + b"\n\n")
    subject = str(fields.get("subject", "")).strip()
    if not subject:
        raise PatchError(f"{shown}: the patch has no Subject", hint=restore_hint(path))
    start = _PATCH_START.search(rest)
    diff_at = rest.find(b"diff --git ", start.start() if start else 0)
    if start is None or diff_at < 0:
        raise PatchError(f"{shown}: the patch contains no diff (cut short?)", hint=restore_hint(path))
    # libgit2, like git am, stops reading where the diff ends: a note after it would vanish on the next export.
    after = _first_line_after_diff(rest[diff_at:])
    if after is not None:
        line_number = data[: len(header) + len(sep) + diff_at].count(b"\n") + 1 + after
        text = rest[diff_at:].split(b"\n")[after].decode("utf-8", errors="replace").strip()
        raise PatchError(
            f"{shown}: text after the diff at line {line_number} "
            f"({text[:60] + '...' if len(text) > 60 else text!r}): git am skips it, so the next "
            "`hiraishin patches export` would drop it",
            hint="move the note into the patch's message above the diff (before its '---' line), which git am "
                 "keeps, or delete it; if it is meant as part of the change, the hunk's @@ header must count it "
                 "(make the change in the work tree and `hiraishin patches export`)",
        )
    try:
        diff = pygit2.Diff.parse_diff(rest[diff_at:])
    except (pygit2.GitError, KeyError) as error:
        # libgit2 counts lines from the start of the diff; say where that is in the file.
        first_line = data[: len(header) + len(sep) + diff_at].count(b"\n") + 1
        raise PatchError(f"{shown}: the patch file is corrupt or cut short ({error}; its diff starts at line {first_line})",
                         hint=restore_hint(path)) from None
    files = tuple(patch.delta.new_file.path for patch in diff)
    if not files:
        raise PatchError(f"{shown}: the patch contains no diff", hint=restore_hint(path))
    body = rest[: start.start()].decode("utf-8", errors="surrogateescape").strip()
    stats = diff.stats
    return Patch(path.name, path, subject, body, files, DiffSize(stats.files_changed, stats.insertions, stats.deletions))


@dataclass(frozen=True)
class Series:
    directory: Path
    names: tuple[str, ...]
    recorded: dict[str, DiffSize] = field(default_factory=dict, compare=False)
    """The diff size each line records, by patch name (lines written before sizes were recorded have none)."""

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
        """Every patch, parsed, each checked against the size its series line records."""
        parsed = [parse_patch(path) for path in self.patch_paths()]
        for patch in parsed:
            recorded = self.recorded.get(patch.name)
            if recorded is not None and patch.size != recorded:
                raise PatchError(
                    f"{self.directory.name}/{patch.name}: {SERIES_FILE} records {recorded}, but the file holds "
                    f"{patch.size}: it was cut short or edited by hand",
                    hint=f"{restore_hint(patch.path)}; if the edit is meant, remove the '# {recorded}' record "
                         f"from its line in {self.directory.name}/{SERIES_FILE} (the next export writes it anew)",
                )
        return parsed


_BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark

# Said once per process and file: several commands read the series more than once.
_WARNED: set[tuple[Path, str]] = set()


def _warn_once(series_file: Path, kind: str, message: str) -> None:
    if (series_file, kind) not in _WARNED:
        _WARNED.add((series_file, kind))
        get_logger().warning("%s", message)


def _series_text(series_file: Path) -> str:
    """The series as text: a leading UTF-8 byte order mark and CRLF line endings, which editors and git's
    core.autocrlf write, are read past (the tool writes neither), with a warning that says how to remove them."""
    data = series_file.read_bytes()
    shown = f"{series_file.parent.name}/{series_file.name}"
    if data.startswith(_BOM):
        _warn_once(series_file, "bom", f"{shown} starts with a UTF-8 byte order mark (BOM), read past it; remove it: "
                                       f"sed -i '1s/^\\xEF\\xBB\\xBF//' {shown} (`hiraishin patches export` writes "
                                       "the file without one, so `patches check` fails while it is there)")
    if b"\r\n" in data:
        _warn_once(series_file, "crlf", f"{shown} has CRLF line endings, read as LF; convert it to LF: "
                                        f"sed -i 's/\\r$//' {shown} (`hiraishin patches export` writes LF, so "
                                        "`patches check` fails while it has CRLF); to keep git from converting it: "
                                        f"`{shown} -text` in .gitattributes")
    return data.decode("utf-8-sig")


def read_series(directory: Path, *, allow_empty: bool = False) -> Series:
    series_file = directory / SERIES_FILE
    if not series_file.is_file():
        raise ConfigError(
            f"{series_file}: file not found",
            hint="the stack needs an order file listing one patch file name per line",
        )
    names: list[str] = []
    recorded: dict[str, DiffSize] = {}
    for number, raw in enumerate(_series_text(series_file).splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{series_file}:{number}"
        line, marked, record = (part.strip() for part in line.partition("#"))
        if marked:
            size = DiffSize.parse(record)
            if size is None:
                raise ConfigError(f"{where}: '# {record}' is not a diff size record",
                                  hint="write it as '# N files, +INSERTED -DELETED', or remove it")
            recorded[line] = size
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
    return Series(directory, tuple(names), recorded)


def render_series(entries: list[tuple[str, DiffSize | None]]) -> str:
    """``series`` for (name, diff size) in order; a size of None writes the bare name. LF line endings and no
    byte order mark: written as UTF-8 bytes, never through a text mode that would add either."""
    return "".join(f"{name}  # {size}\n" if size is not None else f"{name}\n" for name, size in entries)


def patch_file_name(subject: str, taken: set[str]) -> str:
    """A stable file name from the subject, without a number prefix (so two
    branches that each append a patch do not collide on names)."""
    slug = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")[:60].rstrip("-") or "patch"
    name, counter = f"{slug}{PATCH_SUFFIX}", 2
    while name in taken:
        name, counter = f"{slug}-{counter}{PATCH_SUFFIX}", counter + 1
    return name
