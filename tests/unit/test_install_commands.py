"""Every install command the docs print installs as printed.

Each `pip install ... hiraishin-llama ... --index-url ...` of README.md and docs/*.md is run word for word,
with two substitutions only: the site (`https://OWNER.github.io/REPO`) becomes a site that `hiraishin index`
wrote, and PyPI (`https://pypi.org/simple`) an index of the wheel's dependencies, both served over HTTP on
127.0.0.1. The hiraishin-llama wheels are small stand-ins, one per recipe, with the real wheels' tag, extras
and dependencies (wheels/pyproject.toml); the dependencies are stubs of the lowest versions allowed. pip runs
with --isolated (no configuration of this machine can supply what a command lacks) and --dry-run --report (it
resolves and downloads everything, installs nothing), so the module runs anywhere in seconds. The README's
first command is also installed for real.

The fault each command is checked for: the form the docs printed before, without `--extra-index-url`, which
finds no numpy on the variant's index alone. Each command with that option taken out must fail so.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.tags import Tag, sys_tags
from packaging.utils import canonicalize_name
from packaging.version import Version

from hiraishin_build import docgen, tomlfile
from hiraishin_build.index import PYPI
from hiraishin_build.recipe import load_recipes

from ..helpers import PLAIN, fresh_venv, hiraishin, make_wheel, record_hash, served

REPO = Path(__file__).resolve().parents[2]
# docs/log.md is the dated record of what was run then (file:// indexes of a device session), not instructions.
PAGES = [REPO / "README.md", *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "log.md")]
# The tag of a released wheel: every variant is built on Ubuntu 22.04 (ci/matrix.toml), glibc 2.35.
TAG = "py3-none-manylinux_2_35_x86_64"
VERSION = "10400.33"
_COMMAND = re.compile(r"pip install [^`\n]*")


def printed_commands(pages: list[Path] = PAGES, base: Path = REPO) -> dict[str, list[str]]:
    """Each install command of hiraishin-llama from an index that the pages print (in code blocks or inline,
    a trailing ``# comment`` left off), with where it is printed (``README.md:42``)."""
    found: dict[str, list[str]] = {}
    for page in pages:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            for match in _COMMAND.finditer(line):
                try:
                    command = shlex.join(shlex.split(match.group(0), comments=True))
                except ValueError:  # no shell runs it either (an open quote): kept as printed, to fail below
                    command = match.group(0).strip()
                if "hiraishin-llama" in command and "--index-url" in command:
                    found.setdefault(command, []).append(f"{page.relative_to(base).as_posix()}:{number}")
    return found


COMMANDS = printed_commands()


def variant_of(words: list[str]) -> str:
    """The variant whose index a command names: ``.../cu13-sm90/simple`` -> ``cu13-sm90``."""
    url = words[words.index("--index-url") + 1]
    return url.rstrip("/").split("/")[-2]


def words_of(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError as error:
        pytest.fail(f"{COMMANDS.get(command, '?')}: `{command}` is no shell command ({error})")


def _ids() -> list[str]:
    """``cu13-sm90@README.md:42``: the variant and where the command is first printed."""
    return [f"{m[1] if (m := re.search(r'/([^/ ]+)/simple', c)) else '?'}@{where[0]}" for c, where in COMMANDS.items()]


def old_form(words: list[str]) -> list[str]:
    """The command as the docs printed it before: no --extra-index-url, so nothing but the variant's index."""
    if "--extra-index-url" not in words:
        return words
    at = words.index("--extra-index-url")
    return words[:at] + words[at + 2:]


# -- what the docs print ----------------------------------------------------------------------------------


def test_the_docs_print_every_variants_command_in_the_front_pages_form() -> None:
    """The pages print the command of every recipe (docs/wheels.md), and each printed command is the one
    index.py's pip_install_command writes for its variant, unpinned: no hand-written variation."""
    recipes = {recipe.name: recipe for recipe in load_recipes(REPO / "recipes")}
    assert COMMANDS, "the docs print no install command"
    shown = set()
    for command, where in COMMANDS.items():
        variant = variant_of(words_of(command))
        assert variant in recipes, f"{where}: {command} names {variant}, which no recipe builds"
        assert command == docgen.variant_install_command(recipes[variant]), where
        shown.add(variant)
    assert shown == set(recipes)
    assert any(where.startswith("README.md:") for places in COMMANDS.values() for where in places)


def test_the_extractor_finds_a_command_of_the_old_form(tmp_path: Path) -> None:
    """A page printing the old command (as README.md did) is found, so the tests below would run it."""
    page = tmp_path / "page.md"
    page.write_text("```sh\npip install 'hiraishin-llama[cu13]' --index-url "
                    "https://OWNER.github.io/REPO/cu13-sm90/simple   # see wheels.md\n```\n"
                    "Or inline: `pip install hiraishin-llama --index-url https://OWNER.github.io/REPO/cpu/simple`.\n"
                    "Not a command from an index: `pip install 'hiraishin-llama[cu13]'`.\n")
    assert printed_commands([page], tmp_path) == {
        "pip install 'hiraishin-llama[cu13]' --index-url https://OWNER.github.io/REPO/cu13-sm90/simple": ["page.md:2"],
        "pip install hiraishin-llama --index-url https://OWNER.github.io/REPO/cpu/simple": ["page.md:4"]}


# -- a released site and PyPI, on 127.0.0.1 ---------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    site: str
    deps: str
    venv: Path
    scratch: Path
    dependencies: tuple[Requirement, ...]


def wheel_requirements() -> tuple[Requirement, ...]:
    """What the real wheel depends on, with each extra's marker, from wheels/pyproject.toml."""
    project = tomlfile.load(REPO / "wheels" / "pyproject.toml")["project"]
    requirements = [Requirement(text) for text in project.get("dependencies", [])]
    for extra, texts in project.get("optional-dependencies", {}).items():
        requirements += [Requirement(f'{text}; extra == "{extra}"') for text in texts]
    return tuple(requirements)


def lowest_allowed(requirement: Requirement) -> str:
    """The lowest version a requirement names that it also allows (``>=12.4,<13`` -> 12.4)."""
    named = sorted((Version(spec.version) for spec in requirement.specifier), key=lambda v: v)
    allowed = [str(v) for v in named if requirement.specifier.contains(v, prereleases=True)]
    return allowed[0] if allowed else "1.0"


def stub_wheel(project_dir: Path, name: str, version: str) -> str:
    """A wheel of ``name`` holding its metadata alone; its file name."""
    stem = f"{canonicalize_name(name).replace('-', '_')}-{version}"
    filename = f"{stem}-py3-none-any.whl"
    info = f"{stem}.dist-info"
    entries = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
               f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    project_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(project_dir / filename, "w") as archive:
        rows = []
        for member, data in entries.items():
            archive.writestr(member, data)
            rows.append(f"{member},{record_hash(data)},{len(data)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*rows, f"{info}/RECORD,,"]) + "\n")
    return filename


def dependency_index(root: Path, requirements: tuple[Requirement, ...]) -> Path:
    """A PEP 503 index (``root/simple``) holding a stub of every dependency: PyPI as the wheel needs it."""
    names = []
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        project_dir = root / "simple" / name
        filename = stub_wheel(project_dir, requirement.name, lowest_allowed(requirement))
        (project_dir / "index.html").write_text(f'<a href="{filename}">{filename}</a>\n')
        names.append(name)
    (root / "simple" / "index.html").write_text("".join(f'<a href="{n}/">{n}</a>\n' for n in names))
    return root / "simple"


def released_wheels(dist: Path, requirements: tuple[Requirement, ...]) -> None:
    """One small hiraishin-llama wheel per recipe, as `hiraishin wheel` names and labels them."""
    extras = sorted({str(r.marker).split('"')[1] for r in requirements if r.marker is not None})
    metadata = "".join(f"Provides-Extra: {extra}\n" for extra in extras)
    metadata += "".join(f"Requires-Dist: {requirement}\n" for requirement in requirements)
    for recipe in load_recipes(REPO / "recipes"):
        make_wheel(dist / recipe.name, {"hiraishin_llama/marker.txt": (recipe.name.encode(), PLAIN)},
                   version=f"{VERSION}+{recipe.variant}", tag=TAG, metadata=metadata)


@pytest.fixture(scope="module")
def served_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if Tag(*TAG.split("-")) not in set(sys_tags()):
        pytest.skip(f"this machine cannot install a {TAG} wheel (x86-64 Linux with glibc 2.35 or newer can)")
    root = tmp_path_factory.mktemp("install-commands")
    requirements = wheel_requirements()
    released_wheels(root / "dist", requirements)
    deps = dependency_index(root / "pypi", requirements)
    indexed = hiraishin("index", str(root / "dist"), "--out", str(root / "site"), cwd=root)
    assert indexed.returncode == 0, indexed.stdout + indexed.stderr
    venv = fresh_venv(root / "venv")
    with served(root / "site") as site, served(deps.parent) as pypi:
        yield Served(site, f"{pypi}/simple", venv, root, requirements)


def local(words: list[str], where: Served) -> list[str]:
    """The command with the site and PyPI replaced by the servers on 127.0.0.1, and nothing else changed."""
    assert any(docgen.SITE_URL_PLACEHOLDER in word for word in words), f"{words} names no site to serve"
    replaced = [where.deps if word == PYPI else word.replace(docgen.SITE_URL_PLACEHOLDER, where.site)
                for word in words]
    assert not any("OWNER" in word or "pypi.org" in word for word in replaced), replaced
    return replaced


def run_pip(where: Served, words: list[str], *, dry_run: bool = True) -> tuple[subprocess.CompletedProcess[str],
                                                                              dict[str, str]]:
    """``words`` (``pip install ...``) in the fresh venv, isolated from any pip configuration: the result and,
    for a dry run, what pip would install (name -> version)."""
    assert words[:2] == ["pip", "install"], words
    report = where.scratch / "report.json"
    report.unlink(missing_ok=True)
    quiet = ["--isolated", "--disable-pip-version-check", "--no-cache-dir"]
    if dry_run:
        quiet += ["--dry-run", "--ignore-installed", "--report", str(report)]
    completed = subprocess.run([str(where.venv / "bin" / "python"), "-m", *words, *quiet],
                               check=False, capture_output=True, text=True, timeout=300)
    installs = {}
    if dry_run and completed.returncode == 0:
        installs = {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
                    for item in json.loads(report.read_text())["install"]}
    return completed, installs


def expected_installs(where: Served, variant: str, command: list[str]) -> dict[str, str]:
    """What the command must bring: the variant's wheel and every dependency of the extras it asks for."""
    requested = re.search(r"hiraishin-llama(?:\[([^\]]*)\])?", " ".join(command))
    extras = set(filter(None, (requested[1] or "").split(",")))
    wanted = {"hiraishin-llama": f"{VERSION}+{variant.replace('-', '.')}"}
    for requirement in where.dependencies:
        if requirement.marker is None or any(requirement.marker.evaluate({"extra": e}) for e in extras):
            wanted[canonicalize_name(requirement.name)] = lowest_allowed(requirement)
    return wanted


# -- each printed command, as printed ---------------------------------------------------------------------


@pytest.mark.parametrize("command", list(COMMANDS), ids=_ids())
def test_each_printed_command_resolves_the_wheel_and_its_dependencies(command: str, served_site: Served) -> None:
    words = words_of(command)
    completed, installs = run_pip(served_site, local(words, served_site))
    assert completed.returncode == 0, f"{COMMANDS[command]}: {command}\n{completed.stdout}{completed.stderr}"
    assert installs == expected_installs(served_site, variant_of(words), words), COMMANDS[command]


@pytest.mark.parametrize("command", list(COMMANDS), ids=_ids())
def test_the_old_form_of_each_command_finds_no_dependencies(command: str, served_site: Served) -> None:
    """The fault the test above exists to catch: without --extra-index-url (the README's command before), pip
    looks for numpy on the variant's index alone and stops."""
    completed, _ = run_pip(served_site, local(old_form(words_of(command)), served_site))
    assert completed.returncode != 0, completed.stdout
    names = "|".join(re.escape(r.name) for r in served_site.dependencies)
    assert re.search(rf"No matching distribution found for ({names})", completed.stderr), completed.stderr


def test_the_readmes_first_command_installs(served_site: Served) -> None:
    command = next(c for c, where in COMMANDS.items() if any(w.startswith("README.md:") for w in where))
    words = words_of(command)
    completed, _ = run_pip(served_site, local(words, served_site), dry_run=False)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    listed = subprocess.run([str(served_site.venv / "bin" / "python"), "-m", "pip", "list", "--format=json",
                             "--disable-pip-version-check"], capture_output=True, text=True, check=True).stdout
    installed = {canonicalize_name(item["name"]): item["version"] for item in json.loads(listed)}
    for name, version in expected_installs(served_site, variant_of(words), words).items():
        assert installed.get(name) == version, (name, installed)
    marker = next((served_site.venv / "lib").glob("python3*/site-packages/hiraishin_llama/marker.txt"))
    assert marker.read_text() == variant_of(words)

