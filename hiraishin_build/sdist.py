"""The source distribution every wheel is built from.

It holds the pinned upstream with the stack applied (only the paths a build
needs) and the wheel project from ``wheels/``. Same inputs, same bytes: entries
are sorted, owners and times fixed, and the gzip header carries no name or time.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from . import git, tomlfile
from .cache import UpstreamCache
from .errors import ConfigError
from .fsutil import scratch_directory
from .log import get_logger
from .pin import UpstreamPin
from .project import Project
from .releases import RELEASES_FILE, load_releases, require_newer
from .stack import apply_stack

SOURCE_SUBDIR = "llama.cpp"
# 1980-01-01: the earliest time a zip (and so a wheel built from this) can hold.
FIXED_MTIME = 315532800


@dataclass(frozen=True)
class SdistResult:
    path: Path
    version: str
    sha256: str
    files: int


def upstream_build_number(store: git.ObjectStore, pin: UpstreamPin) -> int:
    """llama.cpp's build number of the pinned commit: the number of commits in
    its history, as llama.cpp's own CMake counts it (``git rev-list --count``).

    A tag's name is no guide: a fork names its releases as it likes
    (``b10018-1.2.0`` is 10400 commits deep), and a version read from the name
    could sort below the release it follows."""
    if not store.commit_exists(pin.commit):
        raise ConfigError(
            f"{pin.source or 'the pin'}: the pinned commit {pin.short} ({pin.ref}) is not in the upstream cache",
            hint="hiraishin upstream fetch (or --from a mirror) fills the cache; the wheel version counts the commit's history",
        )
    return store.commit_count(pin.commit)


def stack_revision(project: Project) -> int:
    path = project.wheels_dir / "pyproject.toml"
    data = tomlfile.load(path)
    value = data.get("tool", {}).get("hiraishin", {}).get("stack-revision")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:  # TOML true is no revision
        raise ConfigError(
            f"{path}: [tool.hiraishin] stack-revision must be a non-negative integer",
            hint="it is the second part of the wheel version; raise it when the stack changes on the same upstream build",
        )
    return value


def wheel_version(project: Project, pin: UpstreamPin, store: git.ObjectStore) -> str:
    return f"{upstream_build_number(store, pin)}.{stack_revision(project)}"


def _wheel_project_files(project: Project) -> list[tuple[str, int, bytes]]:
    """The tracked files of wheels/, as they are on disk (so a work in progress builds)."""
    listed = git.git(project.root, "ls-files", "-z", "--", "wheels").stdout.split("\0")
    files = []
    for relative in filter(None, listed):
        path = project.root / relative
        if not path.is_file():
            continue  # deleted but not yet committed
        mode = 0o100755 if path.stat().st_mode & 0o111 else 0o100644
        files.append((relative.removeprefix("wheels/"), mode, path.read_bytes()))
    if not any(name == "pyproject.toml" for name, _, _ in files):
        raise ConfigError(f"{project.wheels_dir}: no tracked pyproject.toml", hint="the wheel project must be committed")
    return files


def _pkg_info(version: str) -> bytes:
    return f"Metadata-Version: 2.1\nName: hiraishin-llama\nVersion: {version}\n".encode()


def _stack_info(project: Project, pin: UpstreamPin, patched_commit: str, version: str, build_number: int,
                omit: frozenset[str] = frozenset()) -> bytes:
    from .series import read_series

    series = read_series(project.patches_dir)
    tool = tomlfile.load(project.wheels_dir / "pyproject.toml").get("tool", {}).get("hiraishin", {})
    info = {
        "version": version,
        "exact_backends": sorted(tool.get("exact-backends", [])),
        "exact_moe_backends": sorted(tool.get("exact-moe-backends", [])),
        "exact_moe_experts_on_cpu_backends": sorted(tool.get("exact-moe-experts-on-cpu-backends", [])),
        "exact_hybrid_backends": sorted(tool.get("exact-hybrid-backends", [])),
        "exact_slots_backends": sorted(tool.get("exact-slots-backends", [])),
        "upstream": {"url": pin.url, "ref": pin.ref, "commit": pin.commit, "build_number": build_number},
        "patched_commit": patched_commit,
        "patches": [
            {
                "name": patch.name,
                "subject": patch.subject,
                "sha256": hashlib.sha256(patch.path.read_bytes()).hexdigest(),
            }
            for patch in series.patches()
            if patch.name not in omit
        ],
    }
    if omit:
        # A build that shows what a patch fixes; never one to publish.
        info["omitted_patches"] = sorted(omit)
    return (json.dumps(info, indent=2, sort_keys=True) + "\n").encode()


def _tar_entry(name: str, mode: int, data: bytes) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.mtime = FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if mode == 0o120000:
        info.type = tarfile.SYMTYPE
        info.linkname = data.decode()
        return info, None
    info.mode = 0o755 if mode & 0o111 else 0o644
    info.size = len(data)
    return info, data


def write_tarball(path: Path, root_name: str, files: Iterable[tuple[str, int, bytes]]) -> int:
    entries = sorted(files, key=lambda item: item[0])
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as compressed:
        with tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, mode, data in entries:
                info, payload = _tar_entry(f"{root_name}/{name}", mode, data)
                tar.addfile(info, io.BytesIO(payload) if payload is not None else None)
    from .fsutil import atomic_write_bytes

    atomic_write_bytes(path, raw.getvalue())
    return len(entries)


def build_sdist(project: Project, cache: UpstreamCache, out_dir: Path, *, omit: frozenset[str] = frozenset()) -> SdistResult:
    """Write the sdist; ``omit`` leaves patches out (see apply_stack)."""
    pin = project.pin()
    upstream = cache.store()
    build_number = upstream_build_number(upstream, pin)
    version = f"{build_number}.{stack_revision(project)}"
    releases_file = project.root / RELEASES_FILE
    require_newer(version, pin, load_releases(releases_file), upstream, releases_file=releases_file)
    wheel_files = _wheel_project_files(project)
    with scratch_directory("hiraishin-sdist-") as scratch:
        workdir = Path(scratch) / "llama.cpp"
        applied = apply_stack(project, cache, workdir, pin=pin, omit=omit, scratch=True)
        store = git.ObjectStore(workdir / ".git")
        source_files = [
            (f"{SOURCE_SUBDIR}/{path}", mode, data)
            for path, mode, data in store.files(applied.head, keep=lambda path: not pin.checkout.excluded(path))
        ]
    generated = [
        ("PKG-INFO", 0o100644, _pkg_info(version)),
        ("hiraishin_llama/_version.py", 0o100644, f'__version__ = "{version}"\n'.encode()),
        ("hiraishin_llama/stack.json", 0o100644, _stack_info(project, pin, applied.head, version, build_number, omit)),
    ]
    root_name = f"hiraishin_llama-{version}"
    path = out_dir / f"{root_name}.tar.gz"
    count = write_tarball(path, root_name, [*wheel_files, *generated, *source_files])
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    get_logger().info("wrote %s (%d files, %.1f MB)", path, count, path.stat().st_size / 1e6)
    return SdistResult(path, version, digest, count)
