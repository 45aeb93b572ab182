"""Static package indexes, one per wheel variant (PEP 503 simple API).

``pip install 'hiraishin-llama[cu12]' --index-url https://OWNER.github.io/REPO/cu12-sm89/simple
--extra-index-url https://pypi.org/simple``: each variant gets its own index, so pip can only ever pick that
variant's wheel (the local label alone would not stop pip from preferring another); its dependencies (numpy,
gguf, NVIDIA's runtime wheels) come from the extra index. The command is written in one place,
``pip_install_command``: the site's front page and the docs' generated install commands (docgen.py) both take it.
Each file link carries its sha256 (pip verifies it), Requires-Python, and the
wheel's METADATA beside it (PEP 658/714), so resolving needs no wheel download.

Besides the indexes, the draft wheel-variant metadata (PEP 817/825,
``{name}-{version}-variants.json``) is written at the site's root: the
``nvidia`` namespace properties of every variant, for installers that learn
to select by GPU.

Every wheel (given, and already published) is read and checked before
anything is written: its METADATA, every member's CRC, and its RECORD (a
member changed after the build is refused, naming it: wheelcheck.py). The
new site is then written beside the old one and swapped in whole, so a
failure leaves the published site as it was.

Where the wheels are hosted elsewhere (``--assets-url``: the assets of the
release's GitHub Release, up to 2 GiB a file, every release kept, where a
GitHub Pages site holds 1 GB and each deploy replaces it), the pages link to
them there and the files to upload (the wheels and their ``.metadata``) are
written to ``--assets-out``. The site then holds the pages alone, plus
``index.json``: every wheel it lists, with its link, hash and METADATA, from
which the next release's site is built, so the earlier releases stay listed.

The pages are written here rather than by a generator package: compared
with simple503 (moves the wheels by default, absolute links, no PEP 714
attribute, ten dependencies) and dumb-pypi (a JSON package list in, one index
for every package, browsing pages and JSON APIs besides), the two templates
below are smaller, and test_index.py checks them with a real ``pip install``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import json
import os
import re
import shlex
import shutil
import urllib.parse
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pkginfo
from packaging.tags import Tag
from packaging.utils import BuildTag, InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from .errors import IndexBuildError, PathError
from .fsutil import atomic_write_bytes, staged_directory, writable_directory
from .log import get_logger
from .wheelcheck import WheelInvalid, verify_wheel

PROJECT = "hiraishin-llama"
# Every wheel the site lists, for the next release's run to start from (it does not have their files).
MANIFEST = "index.json"
MANIFEST_FORMAT = 1
# GitHub's limit on one release asset.
RELEASE_ASSET_LIMIT_BYTES = 2 * 1024 ** 3
# Where a wheel's dependencies (numpy, gguf, the NVIDIA runtime wheels) come from.
PYPI = "https://pypi.org/simple"
# What a wheel's file name looks like (PEP 427), for the message that refuses another name.
WHEEL_NAME_FORM = ("NAME-VERSION-PYTHON-ABI-PLATFORM.whl, as `hiraishin wheel` names them: "
                   "hiraishin_llama-10400.13+cpu-py3-none-manylinux_2_35_x86_64.whl")


@dataclass(frozen=True)
class IndexedWheel:
    variant: str
    """The index directory: ``cpu``, ``cu12-sm89``."""

    filename: str
    sha256: str
    requires_python: str | None
    metadata: bytes
    """The wheel's METADATA as it is in the wheel (served beside it, PEP 658)."""

    build_info: dict = field(default_factory=dict)
    extras: tuple[str, ...] = ()
    href: str | None = None
    """Where the wheel is downloaded from when it is not beside the page (a release asset's URL)."""

    @property
    def version(self) -> Version:
        return parse_wheel_filename(self.filename)[1]

    def requirement(self) -> str:
        """What a user asks pip for: ``hiraishin-llama[cu13]==9079.4+cu13.sm90``.

        The extra is the first part of the variant label (``cu13`` of ``cu13.sm90``)
        when the wheel provides it: it pulls in the NVIDIA runtime wheels. The local
        label pins this index's wheel: PyPI cannot hold a version with one.
        """
        wanted = self.version.local.split(".")[0] if self.version.local else None
        extra = f"[{wanted}]" if wanted in self.extras else ""
        return f"{PROJECT}{extra}=={self.version}"


@dataclass(frozen=True)
class IndexResult:
    site: Path
    variants: dict[str, tuple[IndexedWheel, ...]]
    """Every wheel each variant's index lists (those added now and those already there)."""

    added: tuple[IndexedWheel, ...]
    skipped: tuple[str, ...]
    """Wheels found but not indexed, with why."""

    variants_json: Path | None = None
    """The newest release's variants file."""

    variants_files: tuple[Path, ...] = ()
    """One variants file per release the site holds, oldest first."""

    site_url: str | None = None
    """Where the site is served (given now or remembered in its index.json); None: not said."""


def variant_of(filename: str) -> str | None:
    """``hiraishin_llama-9079.2+cu12.sm89-...whl`` -> ``cu12-sm89``; None without a local label."""
    _, version, _, _ = parse_name(Path(filename))
    return version.local.replace(".", "-") if version.local else None


def parse_name(path: Path) -> tuple[NormalizedName, Version, BuildTag, frozenset[Tag]]:
    """The parts of a wheel's file name (name, version, build, tags); a name that is not a wheel's is refused."""
    try:
        return parse_wheel_filename(path.name)
    except InvalidWheelFilename as error:
        raise IndexBuildError(f"{path}: not a wheel's file name ({error})",
                              hint=f"a wheel is named {WHEEL_NAME_FORM}; rename it, or remove it from the "
                                   "directory; nothing was written") from None


def read_wheel(path: Path, variant: str) -> IndexedWheel:
    """Read and check a wheel: its name, its METADATA (pkginfo), that both name the same release, that every
    member reads back as it was written, and that its RECORD vouches for every member (hash and size) and lists
    nothing else (wheelcheck.py: a member changed after the build is refused, naming it)."""
    name, version, _, _ = parse_name(path)
    invalid: WheelInvalid | None = None
    try:
        metadata = pkginfo.Wheel(str(path))
        raw = metadata.read()
        with zipfile.ZipFile(path) as archive:
            try:
                verify_wheel(path, archive)
            except WheelInvalid as error:
                invalid = error
            info_names = [n for n in archive.namelist() if n.endswith("/build_info.json") and n.count("/") == 1]
            build_info = json.loads(archive.read(info_names[0])) if info_names and invalid is None else {}
    except (zipfile.BadZipFile, ValueError, OSError, KeyError, zlib.error, EOFError) as error:
        raise IndexBuildError(f"{path}: not a wheel ({error})",
                              hint="rebuild it, or remove it from the directory; nothing was written") from None
    if invalid is not None:
        # Chained: `hiraishin smoke` says the same with the hint alone.
        raise IndexBuildError(invalid.message,
                              hint=f"{invalid.hint}, or remove it from the directory; nothing was written") from invalid
    if canonicalize_name(metadata.name or "") != name or Version(metadata.version or "0") != version:
        raise IndexBuildError(f"{path}: its METADATA says {metadata.name} {metadata.version}, its name says "
                              f"{name} {version}", hint="rebuild it; nothing was written")
    return IndexedWheel(variant, path.name, hashlib.sha256(path.read_bytes()).hexdigest(), metadata.requires_python,
                        raw, build_info, tuple(metadata.provides_extras or ()))


def pip_install_command(requirement: str, index_url: str, deps_index: str = PYPI) -> str:
    """The pip command that installs ``requirement`` on a pip with no configuration of its own: the variant's
    index for the package, ``deps_index`` for its dependencies (without it pip finds no numpy there)."""
    return shlex.join(["pip", "install", requirement, "--index-url", index_url, "--extra-index-url", deps_index])


def install_command(wheels: Iterable[IndexedWheel], index_url: str, deps_index: str = PYPI) -> str:
    """The pip command that installs the newest of ``wheels`` from its index, pinned with its label."""
    newest = max(wheels, key=lambda wheel: wheel.version)
    return pip_install_command(newest.requirement(), index_url, deps_index)


def _page(title: str, links: Iterable[str]) -> bytes:
    body = "\n".join(f"    {link}<br/>" for link in links)
    return (f'<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.1">\n'
            f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n"
            f"{body}\n  </body>\n</html>\n").encode()


def _file_link(wheel: IndexedWheel, yanked: str | None = None) -> str:
    href = (wheel.href or urllib.parse.quote(wheel.filename)) + f"#sha256={wheel.sha256}"
    attributes = [f'href="{href}"']
    if yanked is not None:
        attributes.append(f'data-yanked="{html.escape(yanked)}"')
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


def _link_or_copy(source: str, target: str) -> None:
    """Files of the old site go into the new one as hard links where they can (wheels are large)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def manifest_entry(wheel: IndexedWheel) -> dict:
    return {"variant": wheel.variant, "filename": wheel.filename, "sha256": wheel.sha256, "href": wheel.href,
            "requires_python": wheel.requires_python, "metadata": wheel.metadata.decode("utf-8", "surrogateescape"),
            "build_info": wheel.build_info, "extras": list(wheel.extras)}


@dataclasses.dataclass(frozen=True)
class Manifest:
    """What an earlier run wrote to SITE/index.json."""

    wheels: list[IndexedWheel]  # the wheels it listed whose files the site does not hold (release assets)
    yanked: dict[str, str]  # file name -> reason
    site_url: str | None = None  # where the site is served, for the commands on its root page


def read_manifest(site: Path) -> Manifest:
    """SITE/index.json as an earlier run wrote it; an empty manifest without one."""
    path = site / MANIFEST
    if not path.is_file():
        return Manifest([], {})
    try:
        document = json.loads(path.read_text())
        if document.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format {document.get('format')!r}, this version reads {MANIFEST_FORMAT}")
        wheels = [IndexedWheel(e["variant"], e["filename"], e["sha256"], e.get("requires_python"),
                               e["metadata"].encode("utf-8", "surrogateescape"), dict(e.get("build_info") or {}),
                               tuple(e.get("extras") or ()), str(e["href"]))
                  for e in document["wheels"]]
        yanked = document.get("yanked", {})
        if not isinstance(yanked, dict) or not all(isinstance(v, str) for v in yanked.values()):
            raise ValueError("its 'yanked' is not a map of file names to reasons")
        url = document.get("site_url")
        if url is not None and not isinstance(url, str):
            raise ValueError("its 'site_url' is not a string")
        url = directory_url(url, "site_url", SITE_URL_EXAMPLE) if url is not None else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise IndexBuildError(f"{path}: not an index manifest this version can read ({error})",
                              hint="it is the published site's own index.json: fetch it again from the site, or "
                                   "remove it to start a site with no earlier release; nothing was written") from None
    except IndexBuildError as error:
        raise IndexBuildError(f"{path}: {error.message}", hint=error.hint) from None
    for wheel in wheels:
        parse_name(Path(wheel.filename))
    return Manifest(wheels, yanked, url)


def read_site(site: Path) -> tuple[dict[str, dict[str, IndexedWheel]], Manifest]:
    """Every wheel the site lists, per variant and file name (those in it, checked, and those its index.json
    lists), and its index.json; nothing for a site not written yet."""
    if not site.is_dir():
        return {}, Manifest([], {})
    project = canonicalize_name(PROJECT)
    published: dict[str, dict[str, IndexedWheel]] = {}
    for variant_dir in sorted(p for p in site.iterdir() if (p / "simple").is_dir()):
        published[variant_dir.name] = {
            p.name: read_wheel(p, variant_dir.name) for p in sorted((variant_dir / "simple" / project).glob("*.whl"))}
    manifest = read_manifest(site)
    for wheel in manifest.wheels:
        published.setdefault(wheel.variant, {}).setdefault(wheel.filename, wheel)
    return published, manifest


def _by_variant(published: dict[str, dict[str, IndexedWheel]]) -> dict[str, tuple[IndexedWheel, ...]]:
    return {variant: tuple(wheels[name] for name in sorted(wheels)) for variant, wheels in sorted(published.items())}


SITE_URL_EXAMPLE = "the URL the site is served at, e.g. https://OWNER.github.io/REPO"


def directory_url(url: str, option: str, example: str) -> str:
    """An http(s) URL of a directory, checked (no query or fragment), without its trailing slash; ``option`` and
    ``example`` (what to give instead) name it in the error."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("https", "http") or not parsed.netloc or parsed.query or parsed.fragment:
        raise IndexBuildError(f"{option} {url!r} is not an http(s) URL of a directory", hint=f"give {example}")
    return url.rstrip("/")


def release_assets_url(url: str) -> str:
    """The base URL of a release's assets, checked."""
    return directory_url(url, "--assets-url",
                         "the release's download URL, e.g. https://github.com/OWNER/REPO/releases/download/TAG")


def write_pages(staging: Path, variants: dict[str, tuple[IndexedWheel, ...]], deps_index: str,
                yanked: dict[str, str], site_url: str | None = None) -> None:
    """Every page of the site, and its index.json, into ``staging``: per variant the project page (each file's
    link, hash, METADATA and, for a yanked one, its reason: PEP 592), the simple index, and the root page, whose
    install commands name ``site_url`` where it is known."""
    project = canonicalize_name(PROJECT)
    for variant, listed in variants.items():
        project_dir = staging / variant / "simple" / project
        project_dir.mkdir(parents=True, exist_ok=True)
        for wheel in listed:
            if wheel.href is None:  # an asset's METADATA is served beside it, where pip looks (PEP 658)
                atomic_write_bytes(project_dir / f"{wheel.filename}.metadata", wheel.metadata)
        atomic_write_bytes(project_dir / "index.html",
                           _page(f"Links for {PROJECT}", [_file_link(w, yanked.get(w.filename)) for w in listed]))
        atomic_write_bytes(staging / variant / "simple" / "index.html",
                           _page("Simple index", [f'<a href="{project}/">{PROJECT}</a>']))
    installable = {name: [w for w in listed if w.filename not in yanked] or list(listed)
                   for name, listed in variants.items()}
    atomic_write_bytes(staging / "index.html", _page(
        f"{PROJECT} indexes",
        [f'<a href="{name}/simple/">{name}</a>: '
         + html.escape(install_command(listed, f"{site_url or '<this site>'}/{name}/simple", deps_index))
         for name, listed in installable.items()]))
    hosted = [manifest_entry(w) for listed in variants.values() for w in listed if w.href is not None]
    if hosted or yanked or site_url or (staging / MANIFEST).is_file():
        document: dict[str, object] = {"format": MANIFEST_FORMAT, "project": PROJECT}
        if site_url:
            document["site_url"] = site_url
        document |= {"wheels": hosted, "yanked": dict(sorted(yanked.items()))}
        atomic_write_bytes(staging / MANIFEST, (json.dumps(document, indent=1) + "\n").encode())


def yank_release(site: Path, version: str, reason: str, *, deps_index: str = PYPI) -> tuple[IndexedWheel, ...]:
    """Mark every wheel of release ``version`` (its public version: 10400.20, every variant) yanked in the site's
    pages (PEP 592): pip then installs it only when pinned to it exactly. The wheels stay where they are."""
    if not reason.strip():
        raise IndexBuildError("a yank needs its reason", hint="say why, e.g. --reason 'wrong tokens with KV q8_0 on "
                              "sm_86'; pip shows it to whoever installs the release by its pin")
    try:
        wanted = Version(version)
    except ValueError:
        raise IndexBuildError(f"{version!r} is not a version", hint="give a release's version, e.g. 10400.20") from None
    if not site.is_dir():
        raise IndexBuildError(f"{site} is not a site (no directory)", hint="give the site hiraishin index wrote")
    published, manifest = read_site(site)
    variants = _by_variant(published)
    hit = tuple(w for listed in variants.values() for w in listed if Version(w.version.public) == wanted)
    if not hit:
        versions = sorted({str(Version(w.version.public)) for listed in variants.values() for w in listed}, key=Version)
        raise IndexBuildError(f"the site {site} has no release {version}",
                              hint=f"its releases: {', '.join(versions) or 'none'}; nothing was changed")
    yanked = {**manifest.yanked, **{w.filename: reason for w in hit}}
    with staged_directory(site) as staging:
        shutil.copytree(site, staging, symlinks=True, copy_function=_link_or_copy, dirs_exist_ok=True)
        write_pages(staging, variants, deps_index, yanked, manifest.site_url)
        write_variants_json(staging, variants)  # a site fetched as its index.json alone gets them back
    for wheel in hit:
        get_logger().info("yanked %s under %s/simple: %s", wheel.filename, wheel.variant, reason)
    return hit


def check_site_path(site: Path, wheel_dir: Path) -> None:
    """Refuse a site that cannot be written, before any wheel is read: a file, a place without write access,
    or a directory inside ``wheel_dir``, whose published wheels the next run would read as new ones."""
    if site == wheel_dir or wheel_dir in site.parents:
        raise PathError(f"the site {site} is inside the wheel directory {wheel_dir}: the next run would read the "
                        "wheels it publishes as wheels to publish",
                        hint="give --out a directory outside WHEEL_DIR, e.g. beside it")
    if site.exists() and not site.is_dir():
        raise PathError(f"the site {site} is not a directory", hint="give --out a directory (made if absent)")
    # The new site is written beside the old one and swapped in: its parent directory is what must be writable.
    writable_directory(site.parent, what="the directory of the site", given_as="--out")


def build_index(wheel_dir: Path, site: Path, *, deps_index: str = PYPI, assets_url: str | None = None,
                assets_out: Path | None = None, site_url: str | None = None) -> IndexResult:
    """Add the wheels under ``wheel_dir`` to the per-variant indexes under ``site``.

    Wheels already in an index stay (the site can hold several releases); a
    wheel whose name is already there with other bytes is refused, since pip
    caches by name and users would get either. Every wheel is checked before
    anything is written, and the new site replaces the old one in one step.
    With ``assets_url`` the new wheels are linked there instead of copied into
    the site, and they and their METADATA go to ``assets_out`` for upload; the
    site's ``index.json`` keeps every asset-hosted wheel for the next run.
    ``site_url``, where the site will be served, goes into the root page's
    install commands and into ``index.json``, which later runs read it from.
    """
    if not wheel_dir.is_dir():
        raise IndexBuildError(f"{wheel_dir} is not a directory")
    if (assets_url is None) != (assets_out is None):
        raise IndexBuildError("--assets-url and --assets-out go together",
                              hint="give both (where the release's assets will be, and where to write them for "
                                   "upload), or neither to keep the wheels in the site")
    if assets_url is not None:
        assets_url = release_assets_url(assets_url)
        assert assets_out is not None
        if assets_out.exists() and not assets_out.is_dir():
            raise PathError(f"--assets-out {assets_out} is not a directory", hint="give a directory (made if absent)")
        if assets_out == site or site in assets_out.parents or assets_out == wheel_dir:
            raise PathError(f"--assets-out {assets_out} is inside the site or is the wheel directory",
                            hint="give a directory of its own, beside the site")
    check_site_path(site, wheel_dir)
    found = find_wheels(wheel_dir)
    if not found:
        raise IndexBuildError(f"{wheel_dir} holds no hiraishin-llama wheel (no hiraishin_llama-*.whl in it or below)",
                              hint="give the directory `hiraishin wheel` wrote the wheels to (dist/wheels, or "
                                   "the wheels/ beside an sdist); nothing was written")
    project = canonicalize_name(PROJECT)
    # 1. Read and check everything.
    published, manifest = read_site(site)
    # a site remembers where it is served (index.json), so a later run or a yank need not be told again
    site_url = directory_url(site_url, "--site-url", SITE_URL_EXAMPLE) if site_url is not None else manifest.site_url
    added: list[tuple[Path, IndexedWheel]] = []
    skipped: list[str] = []
    seen: dict[str, str] = {}
    for path in found:
        parse_name(path)  # names the file, with its directory, if it is no wheel's name
        variant = variant_of(path.name)
        if variant is None:
            skipped.append(f"{path}: no variant label in its version (build it with `hiraishin wheel`)")
            continue
        wheel = read_wheel(path, variant)
        if assets_url is not None:
            size = path.stat().st_size
            if size > RELEASE_ASSET_LIMIT_BYTES:
                raise IndexBuildError(f"{path} is {size} bytes, over the {RELEASE_ASSET_LIMIT_BYTES}-byte limit of "
                                      "one GitHub release asset", hint="bring the wheel under it (fewer "
                                      "architectures per recipe); nothing was written or uploaded")
            wheel = dataclasses.replace(wheel, href=f"{assets_url}/{urllib.parse.quote(path.name)}")
        if seen.get(path.name, wheel.sha256) != wheel.sha256:
            raise IndexBuildError(f"two different wheels are named {path.name} under {wheel_dir}")
        if path.name in seen:
            continue
        seen[path.name] = wheel.sha256
        there = published.get(variant, {}).get(path.name)
        if there is not None and there.sha256 != wheel.sha256:
            raise IndexBuildError(f"{site / variant / 'simple' / project / path.name} already exists with other contents",
                                  hint="a published wheel is never replaced; raise the stack revision instead")
        published.setdefault(variant, {})[path.name] = wheel
        added.append((path, wheel))
    variants = _by_variant(published)
    if not added:
        # A publish step must not pass having published nothing.
        raise IndexBuildError(f"{wheel_dir} holds no labelled hiraishin-llama wheel: "
                              + "; ".join(skipped),
                              hint="index the wheels `hiraishin wheel` wrote (their versions carry the variant, "
                                   "+cpu or +cu13.sm90), not pip's unrepaired ones; nothing was written")
    # 2. Write the new site beside the old one, then swap it in.
    with staged_directory(site) as staging:
        if site.is_dir():
            shutil.copytree(site, staging, symlinks=True, copy_function=_link_or_copy, dirs_exist_ok=True)
        for path, wheel in added:
            if wheel.href is not None:
                continue  # a release asset: written to assets_out below, once the site is complete
            target = staging / wheel.variant / "simple" / project / path.name
            if not target.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
        write_pages(staging, variants, deps_index, manifest.yanked, site_url)
        variants_files = tuple(site / path.name for path in write_variants_json(staging, variants))
        if assets_out is not None:
            # The files to upload as the release's assets; written before the site is swapped in, so a site never
            # links to a file that was not written.
            assets_out.mkdir(parents=True, exist_ok=True)
            for path, wheel in added:
                target = assets_out / path.name
                if not (target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == wheel.sha256):
                    shutil.copy2(path, target)
                atomic_write_bytes(assets_out / f"{path.name}.metadata", wheel.metadata)
    newest = max((Version(parse_wheel_filename(w.filename)[1].public) for ws in variants.values() for w in ws),
                 default=None)
    variants_json = next((p for p in variants_files if p.name == f"hiraishin_llama-{newest}-variants.json"), None)
    for _, wheel in added:
        get_logger().info("indexed %s under %s/simple", wheel.filename, wheel.variant)
    return IndexResult(site, variants, tuple(wheel for _, wheel in added), tuple(skipped), variants_json,
                       variants_files, site_url)
