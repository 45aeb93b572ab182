"""Static package indexes, one per wheel variant (PEP 503 simple API).

``pip install hiraishin-llama[cu12] --index-url <site>/cu12-sm89/simple``:
each variant gets its own index, so pip can only ever pick that variant's
wheel (the local label alone would not stop pip from preferring another).
Each file link carries its sha256 (pip verifies it), Requires-Python, and the
wheel's METADATA beside it (PEP 658/714), so resolving needs no wheel download.

Besides the indexes, the draft wheel-variant metadata (PEP 817/825,
``{name}-{version}-variants.json``) is written at the site's root: the
``nvidia`` namespace properties of every variant, for installers that learn
to select by GPU.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import urllib.parse
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from email.parser import BytesHeaderParser
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from .errors import IndexBuildError
from .fsutil import atomic_write_bytes
from .log import get_logger

PROJECT = "hiraishin-llama"


@dataclass(frozen=True)
class IndexedWheel:
    variant: str
    """The index directory: ``cpu``, ``cu12-sm89``."""

    filename: str
    sha256: str
    requires_python: str | None
    metadata: bytes
    build_info: dict = field(default_factory=dict)


@dataclass(frozen=True)
class IndexResult:
    site: Path
    variants: dict[str, tuple[IndexedWheel, ...]]
    """Every wheel each variant's index lists (those added now and those already there)."""

    added: tuple[IndexedWheel, ...]
    skipped: tuple[str, ...]
    """Wheels found but not indexed, with why."""

    variants_json: Path | None = None
    """The variant metadata of the newest release on the site (None when it has no GPU variant)."""

    variants_files: tuple[Path, ...] = ()
    """The variant metadata of every release on the site, oldest first."""


def variant_of(filename: str) -> str | None:
    """``hiraishin_llama-9079.2+cu12.sm89-...whl`` -> ``cu12-sm89``; None without a local label."""
    _, version, _, _ = parse_wheel_filename(filename)
    return version.local.replace(".", "-") if version.local else None


def read_wheel(path: Path, variant: str) -> IndexedWheel:
    data = path.read_bytes()
    if not zipfile.is_zipfile(path):
        raise IndexBuildError(f"{path}: not a zip archive; not a wheel")
    with zipfile.ZipFile(path) as archive:
        metadata_name = next((n for n in archive.namelist()
                              if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
        if metadata_name is None:
            raise IndexBuildError(f"{path}: no .dist-info/METADATA; not a wheel")
        metadata = archive.read(metadata_name)
        info_names = [n for n in archive.namelist() if n.endswith("/build_info.json") and n.count("/") == 1]
        build_info = json.loads(archive.read(info_names[0])) if info_names else {}
    headers = BytesHeaderParser().parsebytes(metadata)
    return IndexedWheel(variant, path.name, hashlib.sha256(data).hexdigest(), headers.get("Requires-Python"),
                        metadata, build_info)


def _page(title: str, links: Iterable[str]) -> bytes:
    body = "\n".join(f"    {link}<br/>" for link in links)
    return (f'<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.1">\n'
            f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n"
            f"{body}\n  </body>\n</html>\n").encode()


def _file_link(wheel: IndexedWheel) -> str:
    href = urllib.parse.quote(wheel.filename) + f"#sha256={wheel.sha256}"
    attributes = [f'href="{href}"']
    if wheel.requires_python:
        attributes.append(f'data-requires-python="{html.escape(wheel.requires_python)}"')
    metadata_hash = f"sha256={hashlib.sha256(wheel.metadata).hexdigest()}"
    attributes += [f'data-dist-info-metadata="{metadata_hash}"', f'data-core-metadata="{metadata_hash}"']
    return f"<a {' '.join(attributes)}>{html.escape(wheel.filename)}</a>"


def find_wheels(wheel_dir: Path) -> list[Path]:
    """hiraishin_llama wheels under ``wheel_dir`` (recursively), leaving out pip's unrepaired output."""
    return sorted(p for p in wheel_dir.rglob("hiraishin_llama-*.whl") if "unrepaired" not in p.parts)


def _variant_properties(wheels: Iterable[IndexedWheel]) -> dict[str, dict[str, list[str]]]:
    """The ``nvidia`` namespace of the draft variant metadata, from the wheels' build info."""
    cuda_versions: list[str] = []
    archs: list[str] = []
    for wheel in wheels:
        cuda = str(wheel.build_info.get("cuda", ""))
        match = re.match(r"(\d+)\.(\d+)", cuda)
        if match and f"{match.group(1)}.{match.group(2)}" not in cuda_versions:
            cuda_versions.append(f"{match.group(1)}.{match.group(2)}")
        for arch in str(wheel.build_info.get("cuda_architectures", "")).replace(",", ";").split(";"):
            if arch:
                value = arch.replace("-", "_") if "-" in arch else f"{arch}_real"
                if value not in archs:
                    archs.append(value)
    if not archs:
        return {}
    return {"nvidia": {"cuda_version_lower_bound": cuda_versions, "sm_arch": archs}} if cuda_versions else \
        {"nvidia": {"sm_arch": archs}}


def write_variants_json(site: Path, variants: dict[str, tuple[IndexedWheel, ...]]) -> tuple[Path, ...]:
    """``hiraishin_llama-<public version>-variants.json`` at the site root (PEP 825 draft layout), one per
    release the site holds (the draft's rule), each from that release's wheels only; oldest first."""
    by_version: dict[Version, dict[str, list[IndexedWheel]]] = {}
    for variant, wheels in variants.items():
        for wheel in wheels:
            public = Version(parse_wheel_filename(wheel.filename)[1].public)
            by_version.setdefault(public, {}).setdefault(variant, []).append(wheel)
    written = []
    for public, per_variant in sorted(by_version.items()):
        labels: dict[str, dict] = {}
        for variant, wheels in sorted(per_variant.items()):
            properties = _variant_properties(wheels)
            if properties:
                labels[variant.replace("-", "_")] = properties
        if not labels:
            continue  # nothing GPU-specific in this release
        document = {
            "default-priorities": {"namespace": ["nvidia"]},
            "variants": labels,
        }
        path = site / f"hiraishin_llama-{public}-variants.json"
        atomic_write_bytes(path, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode())
        written.append(path)
    return tuple(written)


def build_index(wheel_dir: Path, site: Path) -> IndexResult:
    """Add the wheels under ``wheel_dir`` to the per-variant indexes under ``site``.

    Wheels already in an index stay (the site can hold several releases); a
    wheel whose name is already there with other bytes is refused, since pip
    caches by name and users would get either.
    """
    if not wheel_dir.is_dir():
        raise IndexBuildError(f"{wheel_dir} is not a directory")
    added: list[IndexedWheel] = []
    skipped: list[str] = []
    seen: dict[str, str] = {}
    for path in find_wheels(wheel_dir):
        variant = variant_of(path.name)
        if variant is None:
            skipped.append(f"{path}: no variant label in its version (build it with `hiraishin wheel`)")
            continue
        wheel = read_wheel(path, variant)
        if seen.get(path.name, wheel.sha256) != wheel.sha256:
            raise IndexBuildError(f"two different wheels are named {path.name} under {wheel_dir}")
        if path.name in seen:
            continue
        seen[path.name] = wheel.sha256
        project_dir = site / variant / "simple" / canonicalize_name(PROJECT)
        target = project_dir / path.name
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() != wheel.sha256:
            raise IndexBuildError(f"{target} already exists with other contents",
                              hint="a published wheel is never replaced; raise the stack revision instead")
        project_dir.mkdir(parents=True, exist_ok=True)
        if not target.is_file():
            shutil.copy2(path, target)
        added.append(wheel)
    variants: dict[str, tuple[IndexedWheel, ...]] = {}
    for variant_dir in sorted(p for p in site.iterdir() if (p / "simple").is_dir()) if site.is_dir() else []:
        project_dir = variant_dir / "simple" / canonicalize_name(PROJECT)
        listed = tuple(read_wheel(p, variant_dir.name) for p in sorted(project_dir.glob("*.whl")))
        for wheel in listed:
            atomic_write_bytes(project_dir / f"{wheel.filename}.metadata", wheel.metadata)
        atomic_write_bytes(project_dir / "index.html",
                           _page(f"Links for {PROJECT}", [_file_link(w) for w in listed]))
        atomic_write_bytes(variant_dir / "simple" / "index.html",
                           _page("Simple index", [f'<a href="{canonicalize_name(PROJECT)}/">{PROJECT}</a>']))
        variants[variant_dir.name] = listed
    if variants:
        atomic_write_bytes(site / "index.html", _page(
            f"{PROJECT} indexes",
            [f'<a href="{name}/simple/">{name}</a>: pip install {PROJECT} --index-url &lt;this site&gt;/{name}/simple'
             for name in variants]))
    variants_files = write_variants_json(site, variants)
    newest = max((Version(parse_wheel_filename(w.filename)[1].public) for ws in variants.values() for w in ws),
                 default=None)
    variants_json = next((p for p in variants_files if p.name == f"hiraishin_llama-{newest}-variants.json"), None)
    for wheel in added:
        get_logger().info("indexed %s under %s/simple", wheel.filename, wheel.variant)
    return IndexResult(site, variants, tuple(added), tuple(skipped), variants_json, variants_files)
