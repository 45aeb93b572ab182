"""`hiraishin index`: per-variant PEP 503 indexes, checked with a real `pip install` from file://."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hiraishin_build import index
from hiraishin_build.index import IndexBuildError, build_index

from ..helpers import PLAIN, fresh_venv, hiraishin, make_wheel, pip_install, record_hash, site_packages


def labelled(directory: Path, label: str, build_info: dict | None = None, version: str = "9079.2",
             metadata: str = "") -> Path:
    files = {"hiraishin_llama/marker.txt": (label.encode(), PLAIN)}
    if build_info is not None:
        files["hiraishin_llama/build_info.json"] = (json.dumps(build_info).encode(), PLAIN)
    return make_wheel(directory, files, version=f"{version}+{label}" if label else version,
                      tag="py3-none-manylinux_2_35_x86_64", metadata=metadata)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture()
def wheels(tmp_path: Path) -> Path:
    out = tmp_path / "dist"
    labelled(out / "cpu", "cpu", {"recipe": "cpu", "cuda": "", "cuda_architectures": ""})
    labelled(out / "cu13-sm90", "cu13.sm90",
             {"recipe": "cu13-sm90", "cuda": "13.0.88", "cuda_architectures": "90-real;90-virtual"})
    labelled(out / "cu12-sm89", "cu12.sm89", {"recipe": "cu12-sm89", "cuda": "12.9.86", "cuda_architectures": "89-real"})
    labelled(out / "cu12-sm89" / "unrepaired", "")  # pip's output: never indexed
    labelled(out / "old", "")  # no label: skipped, with the reason
    return out


def test_variant_of() -> None:
    assert index.variant_of("hiraishin_llama-9079.2+cu12.sm89-py3-none-manylinux_2_35_x86_64.whl") == "cu12-sm89"
    assert index.variant_of("hiraishin_llama-9079.2+cpu-py3-none-manylinux_2_35_x86_64.whl") == "cpu"
    assert index.variant_of("hiraishin_llama-9079.2-py3-none-linux_x86_64.whl") is None


def test_index_layout_hashes_and_metadata(tmp_path: Path, wheels: Path) -> None:
    site = tmp_path / "site"
    result = build_index(wheels, site)
    assert sorted(result.variants) == ["cpu", "cu12-sm89", "cu13-sm90"]
    assert len(result.added) == 3 and len(result.skipped) == 1 and "no variant label" in result.skipped[0]
    root = (site / "cu12-sm89" / "simple" / "index.html").read_text()
    assert '<a href="hiraishin-llama/">hiraishin-llama</a>' in root
    project = site / "cu12-sm89" / "simple" / "hiraishin-llama"
    page = (project / "index.html").read_text()
    name = "hiraishin_llama-9079.2+cu12.sm89-py3-none-manylinux_2_35_x86_64.whl"
    digest = hashlib.sha256((project / name).read_bytes()).hexdigest()
    assert f'href="hiraishin_llama-9079.2%2Bcu12.sm89-py3-none-manylinux_2_35_x86_64.whl#sha256={digest}"' in page
    assert 'data-requires-python="&gt;=3.10"' in page
    metadata = (project / f"{name}.metadata").read_bytes()
    assert f'data-core-metadata="sha256={hashlib.sha256(metadata).hexdigest()}"' in page
    assert b"Version: 9079.2+cu12.sm89" in metadata
    assert "cu13" not in page and "cpu" not in page  # one variant per index
    # The draft variant metadata: nvidia namespace properties per GPU variant.
    assert result.variants_json == site / "hiraishin_llama-9079.2-variants.json"
    document = json.loads(result.variants_json.read_text())
    assert document["variants"]["cu13_sm90"] == {"nvidia": {"cuda_version_lower_bound": ["13.0"],
                                                            "sm_arch": ["90_real", "90_virtual"]}}
    assert document["variants"]["cu12_sm89"]["nvidia"]["sm_arch"] == ["89_real"]
    assert "cpu" not in document["variants"]


def test_index_is_additive_and_never_replaces_a_published_wheel(tmp_path: Path, wheels: Path) -> None:
    site = tmp_path / "site"
    build_index(wheels, site)
    newer = tmp_path / "newer"
    labelled(newer, "cpu", version="9080.0")
    result = build_index(newer, site)
    assert [w.filename.split("-")[1] for w in result.variants["cpu"]] == ["9079.2+cpu", "9080.0+cpu"]
    assert len(result.variants["cu13-sm90"]) == 1  # other variants untouched
    again = build_index(newer, site)  # the same bytes again: fine
    assert len(again.variants["cpu"]) == 2
    changed = tmp_path / "changed"
    labelled(changed, "cpu", {"recipe": "different bytes"}, version="9080.0")
    with pytest.raises(IndexBuildError, match="already exists with other contents"):
        build_index(changed, site)


def test_pip_installs_the_variant_from_a_file_index(tmp_path: Path, wheels: Path) -> None:
    site = tmp_path / "site"
    build_index(wheels, site)
    url = (site / "cu13-sm90" / "simple").as_uri()
    venv = fresh_venv(tmp_path / "venv")
    completed = pip_install(venv, "--index-url", url, "hiraishin-llama")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    shown = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "show", "hiraishin-llama"],
                           capture_output=True, text=True, check=True).stdout
    assert re.search(r"^Version: 9079\.2\+cu13\.sm90$", shown, re.MULTILINE)
    marker = site_packages(venv) / "hiraishin_llama" / "marker.txt"
    assert marker.read_text() == "cu13.sm90"


def test_index_command(tmp_path: Path, wheels: Path) -> None:
    completed = hiraishin("index", str(wheels), "--out", str(tmp_path / "site"), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert (f"cu12-sm89    1 wheel(s): pip install hiraishin-llama==9079.2+cu12.sm89 "
            f"--index-url {(tmp_path / 'site').as_uri()}/cu12-sm89/simple --extra-index-url https://pypi.org/simple"
            ) in completed.stdout
    assert "skipped:" in completed.stderr and "variants.json" in completed.stdout


def corrupt_wheel(directory: Path, version: str = "9080.0+cpu") -> Path:
    """A file with a wheel's name that is not a zip (e.g. a download cut short)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"hiraishin_llama-{version}-py3-none-manylinux_2_35_x86_64.whl"
    path.write_bytes(b"PK\x03\x04 cut short")
    return path


def test_a_corrupt_wheel_is_refused_before_the_site_changes(tmp_path: Path, wheels: Path) -> None:
    site = tmp_path / "site"
    build_index(wheels, site)
    published = snapshot(site)
    new = tmp_path / "new"
    labelled(new, "cpu", version="9080.1")  # a good wheel first: it must not be copied alone
    bad = corrupt_wheel(new)
    with pytest.raises(IndexBuildError, match=f"{re.escape(str(bad))}: not a wheel"):
        build_index(new, site)
    assert snapshot(site) == published
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist", "new", "site"]  # no staging left behind


def test_the_index_command_refuses_a_corrupt_wheel_without_writing_a_site(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    labelled(dist, "cpu")
    corrupt_wheel(dist)
    completed = subprocess.run([sys.executable, "-m", "hiraishin_build.cli", "index", str(dist),
                                "--out", str(tmp_path / "site")], check=False, capture_output=True, text=True)
    assert completed.returncode == 13, completed.stderr
    assert "not a wheel" in completed.stderr and "Traceback" not in completed.stderr
    assert not (tmp_path / "site").exists()


def test_an_interrupted_index_leaves_the_old_site_whole(tmp_path: Path, wheels: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    build_index(wheels, site)
    published = snapshot(site)
    newer = tmp_path / "newer"
    labelled(newer, "cpu", version="9080.0")
    real_page, calls = index._page, []

    def failing_page(title: str, links: object) -> bytes:
        calls.append(title)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_page(title, links)

    monkeypatch.setattr(index, "_page", failing_page)
    with pytest.raises(KeyboardInterrupt):
        build_index(newer, site)
    assert snapshot(site) == published
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist", "newer", "site"]


def dependency_index(root: Path) -> str:
    """A PEP 503 index holding one small wheel, hiraishin-test-dependency 1.0: where the dependencies come from."""
    name = "hiraishin_test_dependency-1.0-py3-none-any.whl"
    project = root / "simple" / "hiraishin-test-dependency"
    project.mkdir(parents=True)
    info = "hiraishin_test_dependency-1.0.dist-info"
    with zipfile.ZipFile(project / name, "w") as archive:
        archive.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: hiraishin-test-dependency\nVersion: 1.0\n")
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{info}/RECORD", f"{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    (project / "index.html").write_text(f'<a href="{name}">{name}</a>\n')
    (root / "simple" / "index.html").write_text('<a href="hiraishin-test-dependency/">hiraishin-test-dependency</a>\n')
    return (root / "simple").as_uri()


def test_the_printed_install_command_works_on_a_clean_pip(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    labelled(dist, "cu13.sm90", metadata="Provides-Extra: cu13\nRequires-Dist: hiraishin-test-dependency\n")
    deps = dependency_index(tmp_path / "deps")
    completed = subprocess.run([sys.executable, "-m", "hiraishin_build.cli", "index", str(dist),
                                "--out", str(tmp_path / "site")], check=False, capture_output=True, text=True,
                               env={**os.environ, "HIRAISHIN_DEPS_INDEX": deps})
    assert completed.returncode == 0, completed.stderr
    line = next(line for line in completed.stdout.splitlines() if line.startswith("cu13-sm90"))
    command = shlex.split(line.split(": ", 1)[1])
    assert command[:2] == ["pip", "install"]
    # As printed, on a pip that reads no configuration: the dependency must come from the printed command.
    venv = fresh_venv(tmp_path / "venv")
    installed = pip_install(venv, *command[2:])
    assert installed.returncode == 0, line + "\n" + installed.stdout + installed.stderr
    shown = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
                           capture_output=True, text=True, check=True).stdout
    assert "hiraishin-llama==9079.2+cu13.sm90" in shown and "hiraishin-test-dependency==1.0" in shown
    # The local label pins the variant's wheel: a package of that name on the dependency index cannot win.
    assert "hiraishin-llama[cu13]==9079.2+cu13.sm90" in command


# -- bad input and a site that holds several releases ---------------------------------

def test_two_different_wheels_of_one_name_are_refused(tmp_path: Path) -> None:
    first = labelled(tmp_path / "dist" / "a", "cpu", {"recipe": "cpu"})
    labelled(tmp_path / "dist" / "b", "cpu", {"recipe": "another build"})
    with pytest.raises(IndexBuildError) as info:
        build_index(tmp_path / "dist", tmp_path / "site")
    assert info.value.message == f"two different wheels are named {first.name} under {tmp_path / 'dist'}"
    assert not list((tmp_path / "site").rglob("index.html"))  # no index lists either
    # The same bytes twice (a copy under another directory) are one wheel.
    labelled(tmp_path / "same" / "a", "cpu", {"recipe": "cpu"})
    labelled(tmp_path / "same" / "b", "cpu", {"recipe": "cpu"})
    result = build_index(tmp_path / "same", tmp_path / "site")
    assert [w.filename for w in result.added] == [first.name]


def test_a_file_named_like_a_wheel_that_is_not_one_is_refused(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    broken = dist / "hiraishin_llama-9079.2+cpu-py3-none-manylinux_2_35_x86_64.whl"
    broken.write_text("<html>a download that went wrong</html>\n")
    with pytest.raises(IndexBuildError) as info:
        build_index(dist, tmp_path / "site")
    assert info.value.message.startswith(f"{broken}: not a wheel")
    with zipfile.ZipFile(broken, "w") as archive:
        archive.writestr("hiraishin_llama/__init__.py", "")
    with pytest.raises(IndexBuildError) as info:
        build_index(dist, tmp_path / "site")
    assert info.value.message.startswith(f"{broken}: not a wheel")
    command = hiraishin("index", str(dist), "--out", str(tmp_path / "site"), cwd=tmp_path)
    assert command.returncode == IndexBuildError.exit_code and "not a wheel" in command.stderr
    assert "Traceback" not in command.stderr


def test_other_files_beside_the_wheels_are_left_alone(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    labelled(dist, "cpu", {"recipe": "cpu"})
    (dist / "build-cpu.log").write_text("log\n")
    (dist / "SHA256SUMS").write_text("x\n")
    (dist / "other_project-1.0-py3-none-any.whl").write_text("not ours\n")
    result = build_index(dist, tmp_path / "site")
    assert [w.filename for w in result.added] == ["hiraishin_llama-9079.2+cpu-py3-none-manylinux_2_35_x86_64.whl"]
    assert result.skipped == ()
    listed = sorted(p.name for p in (tmp_path / "site" / "cpu" / "simple" / "hiraishin-llama").iterdir())
    assert listed == ["hiraishin_llama-9079.2+cpu-py3-none-manylinux_2_35_x86_64.whl",
                      "hiraishin_llama-9079.2+cpu-py3-none-manylinux_2_35_x86_64.whl.metadata", "index.html"]


def test_a_site_with_two_releases_has_variant_metadata_for_each(tmp_path: Path, wheels: Path) -> None:
    site = tmp_path / "site"
    build_index(wheels, site)
    before = (site / "hiraishin_llama-9079.2-variants.json").read_bytes()
    newer = tmp_path / "newer"
    labelled(newer, "cu13.sm90", {"cuda": "13.1.0", "cuda_architectures": "90-real"}, version="9080.0")
    labelled(newer, "cu13.sm120", {"cuda": "13.1.0", "cuda_architectures": "120-real"}, version="9080.0")
    result = build_index(newer, site)
    assert result.variants_files == (site / "hiraishin_llama-9079.2-variants.json",
                                     site / "hiraishin_llama-9080.0-variants.json")
    assert result.variants_json == site / "hiraishin_llama-9080.0-variants.json"
    # Each release's file describes that release's wheels, and the older one is unchanged.
    assert (site / "hiraishin_llama-9079.2-variants.json").read_bytes() == before
    document = json.loads(result.variants_json.read_text())
    assert document == {"default-priorities": {"namespace": ["nvidia"]},
                        "variants": {"cu13_sm120": {"nvidia": {"cuda_version_lower_bound": ["13.1"],
                                                               "sm_arch": ["120_real"]}},
                                     "cu13_sm90": {"nvidia": {"cuda_version_lower_bound": ["13.1"],
                                                              "sm_arch": ["90_real"]}}}}
    shown = hiraishin("index", str(newer), "--out", str(site), cwd=tmp_path)
    assert f"variant metadata (draft PEP 825): {result.variants_json}" in shown.stdout


def test_a_site_of_cpu_wheels_only_has_no_variant_metadata(tmp_path: Path) -> None:
    labelled(tmp_path / "dist", "cpu", {"recipe": "cpu", "cuda": "", "cuda_architectures": ""})
    result = build_index(tmp_path / "dist", tmp_path / "site")
    assert result.variants_json is None and result.variants_files == ()
    assert not list((tmp_path / "site").glob("*.json"))


# -- the parts, exactly ------------------------------------------------------------------

def _wheel(filename: str = "hiraishin_llama-9079.2+cu13.sm90-py3-none-manylinux_2_35_x86_64.whl",
           **changes: object) -> index.IndexedWheel:
    values: dict = {"variant": "cu13-sm90", "filename": filename, "sha256": "ab" * 32, "requires_python": ">=3.10",
                    "metadata": b"Metadata-Version: 2.1\n", **changes}
    return index.IndexedWheel(**values)


def test_an_indexed_wheel_and_a_result_in_code() -> None:
    import dataclasses

    wheel = _wheel()
    assert (wheel.build_info, wheel.extras) == ({}, ())
    assert str(wheel.version) == "9079.2+cu13.sm90"
    result = index.IndexResult(Path("site"), {}, (), ())
    assert (result.variants_json, result.variants_files) == (None, ())
    for value in (wheel, result):
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.variant = "cpu"  # type: ignore[misc]
    assert (index.PROJECT, index.PYPI) == ("hiraishin-llama", "https://pypi.org/simple")


def test_requirements_name_the_extra_only_when_the_wheel_has_it() -> None:
    assert _wheel(extras=("cu13",)).requirement() == "hiraishin-llama[cu13]==9079.2+cu13.sm90"
    assert _wheel(extras=("cu12",)).requirement() == "hiraishin-llama==9079.2+cu13.sm90"
    assert _wheel().requirement() == "hiraishin-llama==9079.2+cu13.sm90"
    cpu = _wheel("hiraishin_llama-9079.2+cpu-py3-none-manylinux_2_35_x86_64.whl", extras=("cu12", "cu13"))
    assert cpu.requirement() == "hiraishin-llama==9079.2+cpu"
    plain = _wheel("hiraishin_llama-9079.2-py3-none-any.whl", extras=("cu13",))
    assert plain.requirement() == "hiraishin-llama==9079.2"


def test_the_install_command_takes_the_newest_wheel() -> None:
    older = _wheel(extras=("cu13",))
    newer = _wheel("hiraishin_llama-9080.0+cu13.sm90-py3-none-manylinux_2_35_x86_64.whl", extras=("cu13",))
    assert index.install_command([newer, older], "https://x.invalid/cu13-sm90/simple") == (
        "pip install 'hiraishin-llama[cu13]==9080.0+cu13.sm90' --index-url https://x.invalid/cu13-sm90/simple "
        "--extra-index-url https://pypi.org/simple")
    assert index.install_command([older, newer], "u", deps_index="file:///deps").endswith(
        "'hiraishin-llama[cu13]==9080.0+cu13.sm90' --index-url u --extra-index-url file:///deps")


def test_a_page_and_its_links_in_full() -> None:
    assert index._page("Links for <x>", ["<a>1</a>", "<a>2</a>"]) == (
        b'<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.1">\n'
        b"    <title>Links for &lt;x&gt;</title>\n  </head>\n  <body>\n    <h1>Links for &lt;x&gt;</h1>\n"
        b"    <a>1</a><br/>\n    <a>2</a><br/>\n  </body>\n</html>\n")
    wheel = _wheel(requires_python=">=3.10,<4")
    digest = hashlib.sha256(b"Metadata-Version: 2.1\n").hexdigest()
    assert index._file_link(wheel) == (
        f'<a href="hiraishin_llama-9079.2%2Bcu13.sm90-py3-none-manylinux_2_35_x86_64.whl#sha256={"ab" * 32}" '
        f'data-requires-python="&gt;=3.10,&lt;4" data-dist-info-metadata="sha256={digest}" '
        f'data-core-metadata="sha256={digest}">hiraishin_llama-9079.2+cu13.sm90-py3-none-manylinux_2_35_x86_64.whl</a>')
    assert "data-requires-python" not in index._file_link(_wheel(requires_python=None))
    assert "data-requires-python" not in index._file_link(_wheel(requires_python=""))


def test_find_wheels_leaves_out_unrepaired_ones_and_other_projects(tmp_path: Path) -> None:
    for relative in ("b/hiraishin_llama-1.0+cpu-py3-none-any.whl", "a/deep/hiraishin_llama-1.0+cu13.sm90-py3-none-any.whl",
                     "a/unrepaired/hiraishin_llama-1.0-py3-none-any.whl", "other_project-1.0-py3-none-any.whl",
                     "hiraishin_llama-1.0+cpu.tar.gz"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_bytes(b"")
    assert index.find_wheels(tmp_path) == [tmp_path / "a/deep/hiraishin_llama-1.0+cu13.sm90-py3-none-any.whl",
                                           tmp_path / "b/hiraishin_llama-1.0+cpu-py3-none-any.whl"]


@pytest.mark.parametrize(("infos", "properties"), [
    ([{"cuda": "13.0.88", "cuda_architectures": "90-real;90-virtual"}, {"cuda": "13.0.1", "cuda_architectures": "90-real"}],
     {"nvidia": {"cuda_version_lower_bound": ["13.0"], "sm_arch": ["90_real", "90_virtual"]}}),
    ([{"cuda": "12.9.86", "cuda_architectures": "89,120"}, {"cuda": "12.8", "cuda_architectures": "120;;"}],
     {"nvidia": {"cuda_version_lower_bound": ["12.9", "12.8"], "sm_arch": ["89_real", "120_real"]}}),
    ([{"cuda_architectures": "90-real"}], {"nvidia": {"sm_arch": ["90_real"]}}),
    ([{"cuda": "unknown", "cuda_architectures": "90-real"}], {"nvidia": {"sm_arch": ["90_real"]}}),
    ([{"cuda": "13.0.1", "cuda_architectures": ""}, {}], {}),
])
def test_variant_properties(infos: list[dict], properties: dict) -> None:
    assert index._variant_properties([_wheel(build_info=info) for info in infos]) == properties


def test_variants_json_in_full(tmp_path: Path) -> None:
    gpu = _wheel(build_info={"cuda": "13.0.88", "cuda_architectures": "90-real"})
    cpu = _wheel("hiraishin_llama-9080.0+cpu-py3-none-any.whl", variant="cpu", build_info={"cuda": ""})
    written = index.write_variants_json(tmp_path, {"cu13-sm90": (gpu,), "cpu": (cpu,)})
    assert written == (tmp_path / "hiraishin_llama-9079.2-variants.json",)  # 9080.0 has no GPU wheel: no file
    assert written[0].read_text() == """{
  "default-priorities": {
    "namespace": [
      "nvidia"
    ]
  },
  "variants": {
    "cu13_sm90": {
      "nvidia": {
        "cuda_version_lower_bound": [
          "13.0"
        ],
        "sm_arch": [
          "90_real"
        ]
      }
    }
  }
}
"""


def test_a_wheel_whose_metadata_disagrees_with_its_name_in_full(tmp_path: Path) -> None:
    wheel = labelled(tmp_path / "dist", "cpu")
    renamed = wheel.with_name(wheel.name.replace("9079.2", "9079.3"))
    wheel.rename(renamed)
    with pytest.raises(IndexBuildError) as info:
        index.read_wheel(renamed, "cpu")
    assert info.value.message == (f"{renamed}: its METADATA says hiraishin-llama 9079.2+cpu, its name says "
                                  "hiraishin-llama 9079.3+cpu")
    assert info.value.hint == "rebuild it; nothing was written"
    broken = renamed.with_name("hiraishin_llama-9079.4+cpu-py3-none-any.whl")
    broken.write_bytes(b"not a zip")
    with pytest.raises(IndexBuildError) as info:
        index.read_wheel(broken, "cpu")
    assert info.value.message.startswith(f"{broken}: not a wheel (")
    assert info.value.hint == "rebuild it, or remove it from the directory; nothing was written"


def test_a_wheel_read_in_full(tmp_path: Path) -> None:
    wheel = labelled(tmp_path, "cu13.sm90", {"cuda": "13.0.88"}, metadata="Provides-Extra: cu13\nProvides-Extra: x\n")
    read = index.read_wheel(wheel, "cu13-sm90")
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read("hiraishin_llama-9079.2+cu13.sm90.dist-info/METADATA")
    assert read == index.IndexedWheel("cu13-sm90", wheel.name, hashlib.sha256(wheel.read_bytes()).hexdigest(), ">=3.10",
                                      metadata, {"cuda": "13.0.88"}, ("cu13", "x"))
    # build_info.json counts only at the top of a package, not deeper or in the .dist-info.
    deep = make_wheel(tmp_path / "deep", {"hiraishin_llama/sub/build_info.json": (b'{"cuda": "12.0"}', PLAIN)})
    assert index.read_wheel(deep, "cpu").build_info == {}


def test_index_messages_in_full(tmp_path: Path, wheels: Path) -> None:
    with pytest.raises(IndexBuildError) as info:
        build_index(tmp_path / "absent", tmp_path / "site")
    assert info.value.message == f"{tmp_path / 'absent'} is not a directory"
    site = tmp_path / "site"
    result = build_index(wheels, site)
    old = next(p for p in wheels.rglob("*.whl") if p.parent.name == "old")
    assert result.skipped == (f"{old}: no variant label in its version (build it with `hiraishin wheel`)",)
    changed = tmp_path / "changed"
    name = labelled(changed, "cpu", {"recipe": "different bytes"}).name
    with pytest.raises(IndexBuildError) as info:
        build_index(changed, site)
    assert info.value.message == (f"{site / 'cpu' / 'simple' / 'hiraishin-llama' / name} already exists with other "
                                  "contents")
    assert info.value.hint == "a published wheel is never replaced; raise the stack revision instead"


def test_the_site_root_page_in_full(tmp_path: Path, wheels: Path, caplog: pytest.LogCaptureFixture) -> None:
    site = tmp_path / "site"
    with caplog.at_level("INFO", logger="hiraishin"):
        result = build_index(wheels, site)
    names = [w.filename for w in result.added]
    assert [r.getMessage() for r in caplog.records if r.name == "hiraishin"] == [
        f"indexed {name} under {variant}/simple" for name, variant in zip(names, ("cpu", "cu12-sm89", "cu13-sm90"))]
    page = (site / "index.html").read_text()
    assert page == index._page("hiraishin-llama indexes", [
        f'<a href="{variant}/simple/">{variant}</a>: pip install hiraishin-llama==9079.2+{label} --index-url '
        f"&#x27;&lt;this site&gt;/{variant}/simple&#x27; --extra-index-url https://pypi.org/simple"  # shell-quoted
        for variant, label in (("cpu", "cpu"), ("cu12-sm89", "cu12.sm89"), ("cu13-sm90", "cu13.sm90"))]).decode()
    root = (site / "cu13-sm90" / "simple" / "index.html").read_bytes()
    assert root == index._page("Simple index", ['<a href="hiraishin-llama/">hiraishin-llama</a>'])
    project = site / "cu13-sm90" / "simple" / "hiraishin-llama"
    assert (project / "index.html").read_bytes() == index._page("Links for hiraishin-llama",
                                                                [index._file_link(w) for w in result.variants["cu13-sm90"]])


def test_published_wheels_are_linked_or_else_copied_into_the_new_site(tmp_path: Path, wheels: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    build_index(wheels, site)
    name = "hiraishin_llama-9079.2+cpu-py3-none-manylinux_2_35_x86_64.whl"
    published = site / "cpu" / "simple" / "hiraishin-llama" / name
    data, inode = published.read_bytes(), published.stat().st_ino
    newer = tmp_path / "newer"
    labelled(newer, "cpu", version="9080.0")
    build_index(newer, site)
    assert published.stat().st_ino == inode and published.read_bytes() == data  # a hard link: the same file

    def no_links(source: str, target: str) -> None:
        raise OSError("cross-device link")

    monkeypatch.setattr(index.os, "link", no_links)
    labelled(newer, "cpu", version="9080.1")
    build_index(newer, site)
    assert published.stat().st_ino != inode and published.read_bytes() == data  # copied


def test_a_wheel_whose_metadata_lacks_name_or_version_is_refused(tmp_path: Path) -> None:
    wheel = labelled(tmp_path / "dist", "cpu")
    for line in (b"Name: hiraishin-llama\n", b"Version: 9079.2+cpu\n"):
        bare = tmp_path / line.split(b":")[0].decode() / wheel.name
        bare.parent.mkdir()
        # Built that way (its RECORD right): a wheel changed after its build is refused for its RECORD first.
        with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(bare, "w") as dest:
            rows = []
            for entry in source.infolist():
                if entry.filename.endswith("/RECORD"):
                    dest.writestr(entry, "\n".join([*rows, f"{entry.filename},,"]) + "\n")
                    continue
                data = source.read(entry)
                data = data.replace(line, b"") if entry.filename.endswith("/METADATA") else data
                dest.writestr(entry, data)
                rows.append(f"{entry.filename},{record_hash(data)},{len(data)}")
        with pytest.raises(IndexBuildError) as info:
            index.read_wheel(bare, "cpu")
        said = "None 9079.2+cpu" if line.startswith(b"Name") else "hiraishin-llama None"
        assert info.value.message == f"{bare}: its METADATA says {said}, its name says hiraishin-llama 9079.2+cpu"


def test_a_release_without_gpu_wheels_does_not_end_the_variant_files(tmp_path: Path) -> None:
    cpu = _wheel("hiraishin_llama-9079.2+cpu-py3-none-any.whl", variant="cpu", build_info={"cuda": ""})
    gpu = _wheel("hiraishin_llama-9080.0+cu13.sm90-py3-none-any.whl", build_info={"cuda": "13.0.88",
                                                                               "cuda_architectures": "90-real"})
    assert index.write_variants_json(tmp_path, {"cpu": (cpu,), "cu13-sm90": (gpu,)}) == (
        tmp_path / "hiraishin_llama-9080.0-variants.json",)


def test_wheels_after_an_unlabelled_one_or_a_copy_are_still_indexed(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    labelled(dist / "a-old", "")  # sorts first: skipped, with the reason
    labelled(dist / "b", "cpu", {"recipe": "cpu"})
    labelled(dist / "c", "cpu", {"recipe": "cpu"})  # the same bytes again: one wheel
    labelled(dist / "d", "cu13.sm90", {"recipe": "cu13-sm90"})
    result = build_index(dist, tmp_path / "site")
    assert [w.variant for w in result.added] == ["cpu", "cu13-sm90"] and len(result.skipped) == 1


def test_links_in_the_site_stay_links(tmp_path: Path, wheels: Path) -> None:
    site = tmp_path / "site"
    build_index(wheels, site)
    (site / "latest").symlink_to("cu13-sm90")  # the maintainer's own, say
    newer = tmp_path / "newer"
    labelled(newer, "cpu", version="9080.0")
    build_index(newer, site)
    assert (site / "latest").is_symlink() and os.readlink(site / "latest") == "cu13-sm90"


# -- what a publish step must refuse --------------------------------------------------

def damaged(directory: Path, damage: str) -> tuple[Path, str]:
    """A labelled wheel one member of which is damaged after it was written: 4 KiB of it zeroed (what a bad
    disk or a patched-up download does), or its compressed data overwritten so that it no longer inflates."""
    import random

    member = "hiraishin_llama/lib/libggml-cpu.so"
    noise = random.Random(7).randbytes(64 * 1024)  # barely compressible: the zeroed bytes land in the data
    written = make_wheel(directory / "stored", {member: (noise, PLAIN)}, version="9079.2+cpu",
                         tag="py3-none-manylinux_2_35_x86_64")
    wheel = directory / written.name
    with zipfile.ZipFile(written) as source, zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as dest:
        for item in source.infolist():  # deflated, as auditwheel writes a wheel
            data = source.read(item)
            item.compress_type = zipfile.ZIP_DEFLATED
            dest.writestr(item, data)
    import shutil

    shutil.rmtree(written.parent)
    with zipfile.ZipFile(wheel) as archive:
        entry = archive.getinfo(member)
    data = bytearray(wheel.read_bytes())
    start = entry.header_offset + 30 + len(entry.filename.encode()) + len(entry.extra)
    if damage == "zeroed":
        data[start + 8192:start + 8192 + 4096] = bytes(4096)
    else:
        data[start:start + 16] = b"\xff" * 16  # a deflate block of the reserved type
    wheel.write_bytes(bytes(data))
    return wheel, member


@pytest.mark.parametrize(("damage", "why"), [
    ("zeroed", "its bytes do not match the CRC the zip records for them"),
    ("garbled", "its compressed data is damaged and does not decompress"),
])
def test_a_wheel_with_a_damaged_member_is_refused_naming_the_member(damage: str, why: str, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    labelled(dist / "good", "cu13.sm90")  # a good wheel beside it must not be published alone
    wheel, member = damaged(dist / "cpu", damage)
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("hiraishin_llama-9079.2+cpu.dist-info/METADATA")  # it opens, its METADATA reads
    with pytest.raises(IndexBuildError) as info:
        build_index(dist, tmp_path / "site")
    assert info.value.message == f"{wheel}: its member {member} is corrupt: {why}"
    assert "nothing was written" in (info.value.hint or "")
    assert not (tmp_path / "site").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist"]


def test_a_directory_without_wheels_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "dist"
    (empty / "cpu").mkdir(parents=True)
    (empty / "cpu" / "build-cpu.log").write_text("a build that wrote no wheel\n")
    with pytest.raises(IndexBuildError) as info:
        build_index(empty, tmp_path / "site")
    assert info.value.message == f"{empty} holds no hiraishin-llama wheel (no hiraishin_llama-*.whl in it or below)"
    assert not (tmp_path / "site").exists()


def test_a_directory_of_unlabelled_wheels_only_is_refused(tmp_path: Path, wheels: Path) -> None:
    site = tmp_path / "site"
    build_index(wheels, site)  # a site that already holds wheels: publishing nothing new is still refused
    published = snapshot(site)
    unlabelled = tmp_path / "unlabelled"
    old = labelled(unlabelled, "")
    with pytest.raises(IndexBuildError) as info:
        build_index(unlabelled, site)
    assert info.value.message == (f"{unlabelled} holds no labelled hiraishin-llama wheel: {old}: no variant label in "
                                  "its version (build it with `hiraishin wheel`)")
    assert snapshot(site) == published


@pytest.mark.parametrize("name", ["hiraishin_llama-bogus.whl", "hiraishin_llama-9079.2+cpu.whl",
                                  "hiraishin_llama-not!a!version-py3-none-any.whl"])
def test_a_file_whose_name_is_no_wheel_name_is_refused_naming_it(name: str, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    labelled(dist, "cpu")
    (dist / name).write_bytes(b"")
    with pytest.raises(IndexBuildError) as info:
        build_index(dist, tmp_path / "site")
    assert info.value.message.startswith(f"{dist / name}: not a wheel's file name (")
    assert "NAME-VERSION-PYTHON-ABI-PLATFORM.whl" in (info.value.hint or "")
    assert not (tmp_path / "site").exists()


def test_a_site_inside_the_wheel_directory_is_refused(tmp_path: Path, wheels: Path) -> None:
    from hiraishin_build.errors import PathError

    for site in (wheels / "site", wheels):
        with pytest.raises(PathError) as info:
            build_index(wheels, site)
        assert info.value.message.startswith(f"the site {site} is inside the wheel directory {wheels}")
    assert not (wheels / "site").exists()


def test_a_site_that_cannot_be_written_is_refused_before_anything_is_read(tmp_path: Path, wheels: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from hiraishin_build.errors import PathError

    read: list[Path] = []
    monkeypatch.setattr(index, "read_wheel", lambda path, variant: read.append(path))
    with pytest.raises(PathError) as info:
        build_index(wheels, Path("/proc/site"))
    assert info.value.message.startswith("the directory of the site /proc cannot be written")
    assert info.value.exit_code == 15
    a_file = tmp_path / "site"
    a_file.write_text("not a directory\n")
    with pytest.raises(PathError, match="is not a directory"):
        build_index(wheels, a_file)
    assert read == []
