"""A wheel checked as pip and `wheel` check one: every member reads back whole, and its ``.dist-info/RECORD``
vouches for every member's bytes.

A zip's CRCs only say that the bytes are those the zip was written with: a member
changed and the wheel zipped again (a hand edit, a tool that patches a wheel and
forgets its RECORD) has right CRCs and a stale RECORD, and pip installs it all
the same. ``verify_wheel`` refuses it, naming the member and what differs.

The rules (the binary distribution format, https://packaging.python.org/en/latest/
specifications/binary-distribution-format/, and RECORD, .../recording-installed-packages/):
every member but RECORD itself and its signatures (RECORD.jws, RECORD.p7s) is
listed, once, with its hash (``ALGORITHM=`` and the urlsafe base64 of the digest,
no padding; sha256 or stronger) and its size in bytes; every line names a member
the wheel holds. Directory entries are no files and need no line.
"""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
import io
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

# What RECORD may hash with: sha256 or stronger, as `wheel` takes them (it refuses md5 and sha1).
ACCEPTED_HASHES = ("sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s")
# Members RECORD does not hash: itself, and the signatures of it.
UNHASHED = ("RECORD", "RECORD.jws", "RECORD.p7s")
# How many problems one message names before it counts the rest.
SHOWN = 5

DAMAGED_HINT = "rebuild the wheel or download it again"
RECORD_HINT = ("rebuild the wheel with `hiraishin wheel --recipe NAME` (never edit a built wheel by hand: its RECORD "
               "vouches for the bytes of every file in it)")


class WheelInvalid(Exception):
    """A wheel that is damaged or whose RECORD does not vouch for its contents. Not a HiraishinError: each
    command says it with its own error class (``hiraishin index``: IndexBuildError; ``hiraishin smoke``: a bad
    input)."""

    def __init__(self, message: str, *, hint: str, member: str | None, damaged: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.member = member
        """The first member named (None when the wheel has no RECORD to judge by)."""
        self.damaged = damaged
        """The zip itself is damaged (a member does not read back), not only its RECORD."""

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}"


@dataclass(frozen=True)
class _Line:
    algorithm: str | None
    digest: bytes | None
    given_hash: str
    size: int | None
    given_size: str


def _record_name(names: list[str]) -> str | list[str] | None:
    """The wheel's ``NAME-VERSION.dist-info/RECORD``; None without one; every one when there are several."""
    found = [n for n in names if n.count("/") == 1 and n.endswith(".dist-info/RECORD")]
    if len(found) > 1:
        return found
    return found[0] if found else None


def _parse_record(text: str) -> tuple[dict[str, _Line], list[tuple[str | None, str]]]:
    """RECORD's lines by member name, and the problems of its form (member, what)."""
    lines: dict[str, _Line] = {}
    problems: list[tuple[str | None, str]] = []
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or row == [""]:
            continue
        if len(row) != 3:
            problems.append((None, f"its RECORD line {number} is not PATH,HASH,SIZE: {','.join(row)!r}"))
            continue
        name, given_hash, given_size = row
        if name in lines:
            problems.append((name, f"its RECORD lists {name} twice"))
            continue
        algorithm, _, encoded = given_hash.partition("=")
        digest: bytes | None = None
        if encoded:
            try:
                digest = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            except (binascii.Error, ValueError):
                digest = None
        size = int(given_size) if given_size.isdigit() else None
        lines[name] = _Line(algorithm if encoded else None, digest, given_hash, size, given_size)
    return lines, problems


def _encoded(algorithm: str, digest: bytes) -> str:
    return f"{algorithm}=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _differences(line: _Line, hasher: hashlib._Hash | None, size: int) -> list[str]:
    """What differs between a member (its hash, its size) and its RECORD line; empty when nothing does."""
    differs = []
    if not line.given_hash:
        differs.append("RECORD gives it no hash")
    elif line.algorithm is None or line.digest is None:
        differs.append(f"RECORD's hash of it is not ALGORITHM=DIGEST (urlsafe base64): {line.given_hash!r}")
    elif line.algorithm not in ACCEPTED_HASHES:
        differs.append(f"RECORD hashes it with {line.algorithm}, not sha256 or stronger")
    elif hasher is not None and hasher.digest() != line.digest:
        differs.append(f"its hash is {_encoded(line.algorithm, hasher.digest())}, RECORD says {line.given_hash}")
    if not line.given_size:
        differs.append("RECORD gives it no size")
    elif line.size is None:
        differs.append(f"RECORD's size of it is not a number of bytes: {line.given_size!r}")
    elif line.size != size:
        differs.append(f"it is {size} bytes, RECORD says {line.size}")
    return differs


def _read(archive: zipfile.ZipFile, entry: zipfile.ZipInfo, hasher: hashlib._Hash | None) -> tuple[int, str | None]:
    """Read a member whole (which checks its CRC), hashing it: its size, or why it does not read back."""
    size = 0
    try:
        with archive.open(entry) as member:
            while chunk := member.read(1 << 20):
                size += len(chunk)
                if hasher is not None:
                    hasher.update(chunk)
    except zipfile.BadZipFile:
        return size, "its bytes do not match the CRC the zip records for them"
    except (zlib.error, EOFError):
        return size, "its compressed data is damaged and does not decompress"
    except NotImplementedError as error:
        return size, f"it cannot be read ({error})"
    return size, None


def verify_wheel(path: Path, archive: zipfile.ZipFile | None = None) -> None:
    """Check the wheel at ``path`` (read from ``archive`` when it is open already) as pip and `wheel` do: every
    member reads back as the zip records it, and RECORD lists every member with its right hash and size, and
    nothing else. Raises WheelInvalid naming the wheel, the member(s) and what differs."""
    if archive is None:
        try:
            with zipfile.ZipFile(path) as opened:
                return verify_wheel(path, opened)
        except (zipfile.BadZipFile, OSError) as error:
            raise WheelInvalid(f"{path}: not a wheel ({error})", hint=DAMAGED_HINT, member=None,
                               damaged=True) from None
    entries = [e for e in archive.infolist() if not e.is_dir()]
    record = _record_name([e.filename for e in entries])
    problems: list[tuple[str | None, str]] = []
    lines: dict[str, _Line] = {}
    if isinstance(record, list):
        problems.append((None, f"it has several .dist-info/RECORD ({', '.join(record)})"))
        record = None
    elif record is None:
        problems.append((None, "it has no .dist-info/RECORD"))
    else:
        try:
            lines, problems = _parse_record(archive.read(record).decode("utf-8"))
        except UnicodeDecodeError as error:
            problems.append((record, f"its RECORD is not UTF-8 ({error})"))
        except (zipfile.BadZipFile, zlib.error, EOFError):
            pass  # said below, as every damaged member is
    unhashed = {f"{record.rsplit('/', 1)[0]}/{name}" for name in UNHASHED} if isinstance(record, str) else set()
    for entry in entries:
        name = entry.filename
        line = lines.get(name)
        algorithm = line.algorithm if line is not None and name not in unhashed else None
        hasher = hashlib.new(algorithm) if algorithm is not None and algorithm in ACCEPTED_HASHES else None
        size, broken = _read(archive, entry, hasher)
        if broken is not None:
            # The zip itself is damaged: that is what to say, whatever RECORD says.
            raise WheelInvalid(f"{path}: its member {name} is corrupt: {broken}", hint=DAMAGED_HINT, member=name,
                               damaged=True)
        if name in unhashed or not isinstance(record, str):
            continue
        if line is None:
            problems.append((name, f"its member {name} is not listed in its RECORD"))
            continue
        differs = _differences(line, hasher, size)
        if differs:
            problems.append((name, f"its member {name} does not match its RECORD: {', and '.join(differs)}"))
    # scikit-build-core writes its directory entries into the zip and into RECORD (no hash, no size): a line
    # naming a directory the zip holds is as pip takes it
    held = {e.filename for e in archive.infolist()}
    problems += [(name, f"its RECORD lists {name}, which the wheel does not hold") for name in lines if name not in held]
    if problems:
        said = "; ".join(text for _, text in problems[:SHOWN])
        if len(problems) > SHOWN:
            said += f"; and {len(problems) - SHOWN} more"
        raise WheelInvalid(f"{path}: {said}", hint=RECORD_HINT, member=next((m for m, _ in problems if m), None))
