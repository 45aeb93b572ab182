"""Bad input to the commands that make, test and publish wheels (sdist, wheel, build, smoke, index, doctor).

Every case exits with its documented code, prints one message that names what is wrong and how to
fix it, no traceback, and leaves patches/, recipes/ and the cache's refs and settings byte for byte
as they were (see harness.py). Arguments and expected mentions may name the places of a scene:
{wheel} (a stand-in hiraishin-llama wheel that installs and runs), {unlabelled} (one without a
variant label), {corrupt_dir} and {corrupt} (a wheel with a damaged member, alone in its directory),
{member} (that member), {empty} (a directory without wheels), {bogus_dir} (one holding
hiraishin_llama-bogus.whl), {unlabelled_dir}, {good_dir} (a directory of good wheels), {foo}
(foo.whl), {pip} (a real wheel of another project), {a_file}, {absent}, {site}, {scratch}.
"""

from __future__ import annotations

import ensurepip
import os
import random
import shutil
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..conftest import StackProject
from ..helpers import PLAIN, make_wheel, stand_in
from .harness import BadInput, Guarded, assert_fails_cleanly, run, unchanged

REPO = Path(__file__).resolve().parents[2]
MEMBER = "hiraishin_llama/lib/libggml-cpu.so"

# The smoke program of the stand-in wheel: it refuses --batches that is no list of sizes as the real one does
# (exit 2, one `error:` line), and otherwise passes.
SMOKE_PROGRAM = '''import json, sys

def version():
    print("hiraishin-llama 9079.4+cpu")

def smoke():
    if "--batches" in sys.argv and not sys.argv[sys.argv.index("--batches") + 1].replace(",", "").isdigit():
        print("hiraishin-llama-smoke: error: argument --batches: batch sizes must look like 1-16 or 1,2,4, got "
              f"{sys.argv[sys.argv.index('--batches') + 1]!r} (see hiraishin-llama-smoke --help)", file=sys.stderr)
        sys.exit(2)
    with open(sys.argv[sys.argv.index("--json") + 1], "w") as handle:
        json.dump({"passed": True}, handle)
'''
ENTRY_POINTS = "[console_scripts]\nhiraishin-llama = hiraishin_llama:version\nhiraishin-llama-smoke = hiraishin_llama:smoke\n"


@dataclass(frozen=True)
class Scene:
    project: Path
    cache: Path
    places: dict[str, str]
    env: dict[str, str]

    def fill(self, text: str) -> str:
        return text.format(**self.places)

    def run(self, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        return run(*(self.fill(arg) for arg in args), cwd=self.project, env={**self.env, **(env or {})})

    def fails_cleanly(self, case: BadInput, *, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        with unchanged(Guarded(self.project, self.cache)):
            ran = self.run(*case.args, env=env)
        assert_fails_cleanly(ran, exit_code=case.exit_code, mentions=[self.fill(m) for m in case.mentions],
                             hint=case.hint)
        return ran


def damaged_wheel(directory: Path) -> Path:
    """A labelled wheel, deflated as auditwheel writes one, with 4 KiB of one member zeroed afterwards."""
    written = make_wheel(directory / "as-built", {MEMBER: (random.Random(3).randbytes(64 * 1024), PLAIN)},
                         version="9079.2+cpu", tag="py3-none-manylinux_2_35_x86_64")
    wheel = directory / written.name
    with zipfile.ZipFile(written) as source, zipfile.ZipFile(wheel, "w") as dest:
        for item in source.infolist():
            data = source.read(item)
            item.compress_type = zipfile.ZIP_DEFLATED
            dest.writestr(item, data)
    shutil.rmtree(written.parent)
    with zipfile.ZipFile(wheel) as archive:
        entry = archive.getinfo(MEMBER)
    data = bytearray(wheel.read_bytes())
    start = entry.header_offset + 30 + len(entry.filename) + len(entry.extra) + 8192
    data[start:start + 4096] = bytes(4096)
    wheel.write_bytes(bytes(data))
    return wheel


@pytest.fixture
def scene(tmp_path: Path, stack_project: StackProject) -> Scene:
    """The stack project with the real cpu recipe, and beside it the wheels and files the cases name."""
    project = stack_project.project
    shutil.copy(REPO / "recipes" / "cpu.toml", project.recipes_dir / "cpu.toml")
    inputs = tmp_path / "inputs"
    wheel = make_wheel(inputs / "wheel", {
        "hiraishin_llama/__init__.py": (SMOKE_PROGRAM.encode(), PLAIN),
        "hiraishin_llama-9079.4+cpu.dist-info/entry_points.txt": (ENTRY_POINTS.encode(), PLAIN),
    }, version="9079.4+cpu", tag="py3-none-any")
    unlabelled = make_wheel(inputs / "unlabelled", {}, version="9079.4", tag="py3-none-any")
    corrupt = damaged_wheel(inputs / "corrupt")
    (inputs / "empty" / "cpu").mkdir(parents=True)
    (inputs / "empty" / "cpu" / "build-cpu.log").write_text("a build that wrote no wheel\n")
    (inputs / "bogus").mkdir()
    (inputs / "bogus" / "hiraishin_llama-bogus.whl").write_bytes(b"PK\x05\x06" + bytes(18))
    good = inputs / "good"
    make_wheel(good / "cpu", {}, version="9079.4+cpu", tag="py3-none-any")
    foo = inputs / "foo.whl"
    foo.write_bytes(b"")
    pips = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    a_file = inputs / "a-file"
    a_file.write_text("not a directory\n")
    no_dependencies = inputs / "no-dependencies"
    no_dependencies.mkdir()
    # The cpu recipe needs a C and a C++ compiler on PATH; the cases stop before either would run.
    bin_dir = tmp_path / "bin"
    for compiler in ("cc", "c++"):
        stand_in(bin_dir, compiler, 'echo "cc (stand-in) 12.2.0"')
    places = {
        "wheel": str(wheel), "unlabelled": str(unlabelled), "corrupt": str(corrupt), "corrupt_dir": str(corrupt.parent),
        "member": MEMBER, "empty": str(inputs / "empty"), "bogus_dir": str(inputs / "bogus"),
        "unlabelled_dir": str(unlabelled.parent), "good_dir": str(good), "foo": str(foo),
        "pip": str(pips[0]) if pips else "", "a_file": str(a_file), "absent": str(tmp_path / "absent"),
        "site": str(tmp_path / "site"), "scratch": str(tmp_path / "scratch"), "no_deps": str(no_dependencies),
    }
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PIP_CONFIG_FILE": os.devnull}
    return Scene(project.root, stack_project.cache.root, places, env)


CATALOGUE = [
    # -- index -----------------------------------------------------------------------------------
    BadInput("index-a-wheel-with-a-corrupt-member", ("index", "{corrupt_dir}", "--out", "{site}"), 13,
             ("{corrupt}", "its member {member} is corrupt", "nothing was written")),
    BadInput("index-a-directory-without-wheels", ("index", "{empty}", "--out", "{site}"), 13,
             ("{empty} holds no hiraishin-llama wheel",)),
    BadInput("index-a-file-with-no-wheel-name", ("index", "{bogus_dir}", "--out", "{site}"), 13,
             ("hiraishin_llama-bogus.whl: not a wheel's file name", "NAME-VERSION-PYTHON-ABI-PLATFORM.whl")),
    BadInput("index-only-unlabelled-wheels", ("index", "{unlabelled_dir}", "--out", "{site}"), 13,
             ("holds no labelled hiraishin-llama wheel", "no variant label")),
    BadInput("index-a-site-that-cannot-be-written", ("index", "{good_dir}", "--out", "/proc/site"), 15,
             ("/proc", "cannot be written", "--out")),
    BadInput("index-a-site-inside-the-wheel-directory", ("index", "{good_dir}", "--out", "{good_dir}/site"), 15,
             ("{good_dir}/site is inside the wheel directory {good_dir}",)),
    BadInput("index-the-wheel-directory-as-the-site", ("index", "{good_dir}", "--out", "{good_dir}"), 15,
             ("is inside the wheel directory",)),
    BadInput("index-a-site-that-is-a-file", ("index", "{good_dir}", "--out", "{a_file}"), 2, ("is a file",)),
    BadInput("index-a-wheel-directory-that-does-not-exist", ("index", "{absent}", "--out", "{site}"), 2,
             ("does not exist",)),
    BadInput("index-a-wheel-directory-that-is-a-file", ("index", "{a_file}", "--out", "{site}"), 2, ("is a file",)),
    # -- smoke -----------------------------------------------------------------------------------
    BadInput("smoke-a-file-with-no-wheel-name", ("smoke", "{foo}"), 2,
             ("{foo}: not a wheel's file name", "NAME-VERSION-PYTHON-ABI-PLATFORM.whl")),
    BadInput("smoke-a-wheel-of-another-project", ("smoke", "{pip}"), 2, ("{pip} is a wheel of pip, not a "
                                                                         "hiraishin-llama wheel",)),
    BadInput("smoke-a-wheel-with-a-corrupt-member", ("smoke", "{corrupt}"), 2, ("its member {member} is corrupt",)),
    BadInput("smoke-a-usage-error-of-the-smoke-program",
             ("smoke", "{wheel}", "--find-links", "{no_deps}", "--out", "{scratch}", "--", "--batches", "abc"), 2,
             ("hiraishin-llama-smoke refused to run: argument --batches", "got 'abc'")),
    BadInput("smoke-a-model-to-serve-that-is-no-gguf", ("smoke", "{wheel}", "--serve-model", "/etc/passwd"), 2,
             ("/etc/passwd is not a GGUF model",)),
    BadInput("smoke-an-output-directory-that-cannot-be-written", ("smoke", "{wheel}", "--out", "/proc/x"), 15,
             ("/proc/x cannot be written", "--out")),
    BadInput("smoke-a-wheel-that-does-not-exist", ("smoke", "{absent}.whl"), 2, ("does not exist",)),
    BadInput("smoke-a-directory-as-the-wheel", ("smoke", "{good_dir}"), 2, ("is a directory",)),
    BadInput("smoke-from-its-index-a-wheel-without-a-label", ("smoke", "{unlabelled}", "--from-index"), 2,
             ("has no variant label",)),
    BadInput("smoke-find-links-that-does-not-exist", ("smoke", "{wheel}", "--find-links", "{absent}"), 2,
             ("does not exist",)),
    # -- sdist, wheel, build, doctor -------------------------------------------------------------
    BadInput("sdist-an-output-directory-that-cannot-be-written", ("sdist", "--out", "/proc/x"), 15,
             ("/proc/x cannot be written", "--out")),
    BadInput("sdist-an-output-directory-that-is-a-file", ("sdist", "--out", "{a_file}"), 2, ("is a file",)),
    BadInput("wheel-no-jobs", ("wheel", "--recipe", "cpu", "-j", "0"), 2, ("'--jobs'", "x>=1")),
    BadInput("wheel-negative-jobs", ("wheel", "--recipe", "cpu", "-j", "-1"), 2, ("'--jobs'", "x>=1")),
    BadInput("wheel-jobs-that-are-no-number", ("wheel", "--recipe", "cpu", "-j", "many"), 2, ("'--jobs'",)),
    BadInput("build-no-jobs", ("build", "-j", "0"), 2, ("'--jobs'", "x>=1")),
    BadInput("wheel-a-recipe-with-a-typo", ("wheel", "--recipe", "cpy"), 2,
             ("no recipe 'cpy'", "did you mean 'cpu'?")),
    BadInput("build-a-recipe-that-does-not-exist", ("build", "--recipe", "nosuch"), 2, ("no recipe 'nosuch'",)),
    BadInput("build-a-recipe-with-a-typo", ("build", "--recipe", "cpy"), 2, ("did you mean 'cpu'?",)),
    BadInput("doctor-a-recipe-with-a-typo", ("doctor", "--recipe", "cpy"), 2, ("did you mean 'cpu'?",)),
    BadInput("wheel-a-define-that-overrides-the-recipe", ("wheel", "--recipe", "cpu", "-D", "HIRAISHIN_RECIPE=x"),
             8, ("--cmake-define HIRAISHIN_RECIPE would override what recipe cpu sets",)),
    BadInput("wheel-a-define-that-is-not-key-value", ("wheel", "--recipe", "cpu", "-D", "ON"), 2, ("KEY=VALUE",)),
    BadInput("wheel-an-sdist-directory-without-pyproject", ("wheel", "--recipe", "cpu", "--sdist", "{good_dir}"), 8,
             ("without pyproject.toml",)),
    BadInput("wheel-an-sdist-whose-wheels-cannot-be-written", ("wheel", "--recipe", "cpu", "--sdist", "/proc/version"),
             15, ("/proc/wheels/cpu cannot be written", "copy the sdist")),
    BadInput("wheel-an-sdist-that-does-not-exist", ("wheel", "--recipe", "cpu", "--sdist", "{absent}"), 2,
             ("does not exist",)),
]
# Cases that need a setting of their own in the environment.
ENVIRONMENT = {
    "smoke-a-malformed-time-limit": {"HIRAISHIN_BUILD_TIMEOUT": "soon"},
    "wheel-a-malformed-time-limit": {"HIRAISHIN_BUILD_TIMEOUT": "soon"},
}
CATALOGUE += [
    BadInput("smoke-a-malformed-time-limit", ("smoke", "{wheel}", "--out", "{scratch}"), 2,
             ("HIRAISHIN_BUILD_TIMEOUT='soon' is not a number of seconds",)),
    BadInput("wheel-a-malformed-time-limit", ("wheel", "--recipe", "cpu"), 2,
             ("HIRAISHIN_BUILD_TIMEOUT='soon' is not a number of seconds",)),
]


@pytest.mark.parametrize("case", CATALOGUE, ids=lambda case: case.id)
def test_bad_input_fails_cleanly(case: BadInput, scene: Scene) -> None:
    if "{pip}" in case.args and not scene.places["pip"]:
        pytest.skip("this Python has no bundled pip wheel")
    scene.fails_cleanly(case, env=ENVIRONMENT.get(case.id))


# -- refused before the work, not after it -----------------------------------------------------

@pytest.mark.parametrize("recipe", ["nosuch", "cpy"])
def test_a_bad_recipe_is_refused_before_the_upstream_is_fetched(recipe: str, scene: Scene) -> None:
    shutil.rmtree(scene.cache)  # a fetch would fill it again
    ran = scene.fails_cleanly(BadInput("build", ("build", "--recipe", recipe), 2, (f"no recipe '{recipe}'",)))
    assert "fetching" not in ran.stderr
    assert not scene.cache.exists()


@pytest.mark.parametrize("case", [
    BadInput("a-model-to-serve-that-is-no-gguf", ("smoke", "{wheel}", "--out", "{scratch}", "--serve-model",
                                                  "/etc/passwd"), 2),
    BadInput("a-malformed-time-limit", ("smoke", "{wheel}", "--out", "{scratch}"), 2),
    BadInput("a-wheel-of-another-project", ("smoke", "{pip}", "--out", "{scratch}"), 2),
], ids=lambda case: case.id)
def test_a_smoke_test_refuses_before_it_makes_a_venv(case: BadInput, scene: Scene) -> None:
    if "{pip}" in case.args and not scene.places["pip"]:
        pytest.skip("this Python has no bundled pip wheel")
    started = time.monotonic()
    scene.fails_cleanly(case, env={"HIRAISHIN_BUILD_TIMEOUT": "soon"} if "time-limit" in case.id else None)
    assert time.monotonic() - started < 10
    assert not Path(scene.places["scratch"]).exists()


def test_a_failed_index_writes_no_site(scene: Scene) -> None:
    for directory in ("{corrupt_dir}", "{empty}", "{bogus_dir}", "{unlabelled_dir}"):
        ran = scene.run("index", directory, "--out", "{site}")
        assert ran.returncode == 13, ran
        assert not Path(scene.places["site"]).exists()
        assert [p.name for p in Path(scene.places["site"]).parent.glob(".site.*")] == []


def test_a_define_that_overrides_the_recipe_is_refused_before_the_sdist_is_made(scene: Scene) -> None:
    scene.fails_cleanly(BadInput("wheel", ("wheel", "--recipe", "cpu", "-D", "HIRAISHIN_RECIPE=x"), 8))
    assert not list((scene.project / "dist").glob("*.tar.gz"))


def test_a_good_recipe_still_fetches_the_missing_upstream_before_it_builds(scene: Scene) -> None:
    """Validating first moves nothing else: with a recipe that exists, a cache without the pin is filled from the
    pin's url before the sdist (which this project, without a wheel project, cannot make)."""
    shutil.rmtree(scene.cache)
    ran = scene.run("build", "--recipe", "cpu")
    assert_fails_cleanly(ran, exit_code=2, mentions=("pyproject.toml",), hint=False)  # that message has no hint yet
    assert "fetching" in ran.stderr
    assert (scene.cache / "upstream.git").is_dir()
