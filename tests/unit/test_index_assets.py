"""`hiraishin index --assets-url`: wheels hosted as release assets, the site holding the pages and the list of
every release's wheels, so that a second release keeps the first installable; checked with `pip install` over
HTTP from two servers on 127.0.0.1 (the site, the assets)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from hiraishin_build import index
from hiraishin_build.errors import PathError
from hiraishin_build.index import IndexBuildError, build_index

from ..helpers import QuietHandler, fresh_venv, hiraishin, pip_install, served, site_packages
from .test_index import labelled, snapshot

RELEASES = "https://github.com/example/hiraishin-llama/releases/download"
CPU_V1 = "hiraishin_llama-9079.2+cpu-py3-none-manylinux_2_35_x86_64.whl"
CPU_V2 = "hiraishin_llama-9080.0+cpu-py3-none-manylinux_2_35_x86_64.whl"


def release(tmp_path: Path, name: str, version: str) -> Path:
    wheels = tmp_path / f"wheels-{name}"
    labelled(wheels, "cpu", {"recipe": "cpu"}, version=version)
    labelled(wheels, "cu13.sm90", {"recipe": "cu13-sm90", "cuda": "13.0.88", "cuda_architectures": "90-real"},
             version=version)
    return wheels


def test_release_assets_are_linked_where_they_will_be_and_written_for_upload(tmp_path: Path) -> None:
    site, assets = tmp_path / "site", tmp_path / "assets"
    result = build_index(release(tmp_path, "v1", "9079.2"), site, assets_url=f"{RELEASES}/v1/", assets_out=assets)
    assert not list(site.rglob("*.whl")) and not list(site.rglob("*.whl.metadata"))  # the pages alone
    page = (site / "cpu" / "simple" / "hiraishin-llama" / "index.html").read_text()
    digest = hashlib.sha256((assets / CPU_V1).read_bytes()).hexdigest()
    assert (f'href="{RELEASES}/v1/hiraishin_llama-9079.2%2Bcpu-py3-none-manylinux_2_35_x86_64.whl'
            f'#sha256={digest}"') in page
    metadata = (assets / f"{CPU_V1}.metadata").read_bytes()  # beside the wheel, where pip looks for it
    assert f'data-core-metadata="sha256={hashlib.sha256(metadata).hexdigest()}"' in page
    assert sorted(p.name for p in assets.iterdir()) == sorted(
        [CPU_V1, f"{CPU_V1}.metadata", CPU_V1.replace("+cpu", "+cu13.sm90"),
         f"{CPU_V1.replace('+cpu', '+cu13.sm90')}.metadata"])
    listed = json.loads((site / index.MANIFEST).read_text())
    assert listed["format"] == index.MANIFEST_FORMAT and len(listed["wheels"]) == 2
    assert {w["href"].split("#")[0] for w in listed["wheels"]} == {
        f"{RELEASES}/v1/{n}" for n in ("hiraishin_llama-9079.2%2Bcpu-py3-none-manylinux_2_35_x86_64.whl",
                                       "hiraishin_llama-9079.2%2Bcu13.sm90-py3-none-manylinux_2_35_x86_64.whl")}
    assert result.variants_json == site / "hiraishin_llama-9079.2-variants.json"


def test_a_second_release_keeps_the_first_listed_from_the_site_alone(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_index(release(tmp_path, "v1", "9079.2"), site, assets_url=f"{RELEASES}/v1", assets_out=tmp_path / "a1")
    result = build_index(release(tmp_path, "v2", "9080.0"), site, assets_url=f"{RELEASES}/v2",
                         assets_out=tmp_path / "a2")
    assert [w.filename for w in result.variants["cpu"]] == [CPU_V1, CPU_V2]
    page = (site / "cpu" / "simple" / "hiraishin-llama" / "index.html").read_text()
    assert f"{RELEASES}/v1/hiraishin_llama-9079.2%2Bcpu" in page and f"{RELEASES}/v2/hiraishin_llama-9080.0%2Bcpu" in page
    assert sorted(p.name for p in (tmp_path / "a2").iterdir() if p.suffix == ".whl") == [
        CPU_V2, CPU_V2.replace("+cpu", "+cu13.sm90")]  # only the new release's files to upload
    assert len(json.loads((site / index.MANIFEST).read_text())["wheels"]) == 4
    assert {p.name for p in site.glob("*-variants.json")} == {"hiraishin_llama-9079.2-variants.json",
                                                              "hiraishin_llama-9080.0-variants.json"}


def test_a_listed_wheel_is_never_replaced_by_other_bytes(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_index(release(tmp_path, "v1", "9079.2"), site, assets_url=f"{RELEASES}/v1", assets_out=tmp_path / "a1")
    before = snapshot(site)
    other = tmp_path / "other"
    labelled(other, "cpu", {"recipe": "other bytes"}, version="9079.2")
    with pytest.raises(IndexBuildError, match="already exists with other contents"):
        build_index(other, site, assets_url=f"{RELEASES}/v1b", assets_out=tmp_path / "a1b")
    assert snapshot(site) == before and not (tmp_path / "a1b").exists()


def test_pip_installs_either_release_by_pin_over_http(tmp_path: Path) -> None:
    """Two servers as GitHub has them: the Pages site, and the release assets under one path per tag."""
    site, assets = tmp_path / "site", tmp_path / "assets"
    with served(site) as pages, served(assets) as downloads:
        build_index(release(tmp_path, "v1", "9079.2"), site, assets_url=f"{downloads}/v1", assets_out=assets / "v1")
        build_index(release(tmp_path, "v2", "9080.0"), site, assets_url=f"{downloads}/v2", assets_out=assets / "v2")
        for pin, label in (("==9079.2+cpu", "cpu"), ("==9080.0+cpu", "cpu"), ("", "cpu")):
            venv = fresh_venv(tmp_path / f"venv{pin or '-newest'}")
            completed = pip_install(venv, "--index-url", f"{pages}/cpu/simple", f"hiraishin-llama{pin}")
            assert completed.returncode == 0, completed.stdout + completed.stderr
            shown = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "show", "hiraishin-llama"],
                                   capture_output=True, text=True, check=True).stdout
            want = pin[2:] if pin else "9080.0+cpu"  # unpinned: the newest
            assert re.search(rf"^Version: {re.escape(want)}$", shown, re.MULTILINE), shown
            assert (site_packages(venv) / "hiraishin_llama" / "marker.txt").read_text() == label


def test_a_wheel_over_the_asset_limit_is_refused_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "RELEASE_ASSET_LIMIT_BYTES", 100)
    with pytest.raises(IndexBuildError, match=r"over the 100-byte limit of one GitHub release asset"):
        build_index(release(tmp_path, "v1", "9079.2"), tmp_path / "site", assets_url=f"{RELEASES}/v1",
                    assets_out=tmp_path / "assets")
    assert not (tmp_path / "site").exists() and not (tmp_path / "assets").exists()


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"assets_url": f"{RELEASES}/v1"}, "--assets-url and --assets-out go together"),
    ({"assets_out": Path("elsewhere")}, "--assets-url and --assets-out go together"),
    ({"assets_url": "ftp://example.com/x", "assets_out": Path("a")}, "is not an http\\(s\\) URL"),
    ({"assets_url": f"{RELEASES}/v1?x=1", "assets_out": Path("a")}, "is not an http\\(s\\) URL"),
])
def test_asset_options_that_do_not_fit_are_refused(tmp_path: Path, kwargs: dict, match: str) -> None:
    if "assets_out" in kwargs:
        kwargs = {**kwargs, "assets_out": tmp_path / kwargs["assets_out"]}
    with pytest.raises(IndexBuildError, match=match):
        build_index(release(tmp_path, "v1", "9079.2"), tmp_path / "site", **kwargs)
    assert not (tmp_path / "site").exists()


def test_assets_inside_the_site_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PathError, match="is inside the site"):
        build_index(release(tmp_path, "v1", "9079.2"), tmp_path / "site", assets_url=f"{RELEASES}/v1",
                    assets_out=tmp_path / "site" / "assets")


def test_a_damaged_list_of_releases_is_refused_naming_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_index(release(tmp_path, "v1", "9079.2"), site, assets_url=f"{RELEASES}/v1", assets_out=tmp_path / "a1")
    (site / index.MANIFEST).write_text('{"format": 1, "wheels": [{"variant": "cpu"}]}')
    before = snapshot(site)
    with pytest.raises(IndexBuildError, match=r"index\.json: not an index manifest this version can read"):
        build_index(release(tmp_path, "v2", "9080.0"), site, assets_url=f"{RELEASES}/v2", assets_out=tmp_path / "a2")
    assert snapshot(site) == before


def test_the_index_command_with_assets(tmp_path: Path) -> None:
    wheels = release(tmp_path, "v1", "9079.2")
    done = hiraishin("index", str(wheels), "--out", str(tmp_path / "site"), "--assets-url", f"{RELEASES}/v1",
                     "--assets-out", str(tmp_path / "assets"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "assets" / CPU_V1).is_file() and (tmp_path / "site" / index.MANIFEST).is_file()
    half = hiraishin("index", str(wheels), "--out", str(tmp_path / "site2"), "--assets-url", f"{RELEASES}/v1",
                     cwd=tmp_path)
    assert half.returncode != 0 and "--assets-url and --assets-out go together" in half.stderr


# --- the publish job's scripts --------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def script(name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([str(REPO / "ci" / name), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


class StatusHandler(QuietHandler):
    """Answers every request with the status in its path's first part (/500/...), else as a file server."""

    def do_GET(self) -> None:  # noqa: N802 (the base class's name)
        first = self.path.strip("/").split("/")[0]
        if first.isdigit():
            self.send_error(int(first))
            return
        super().do_GET()


def test_the_published_list_is_fetched_and_a_missing_one_starts_a_first_release(tmp_path: Path) -> None:
    published = tmp_path / "published"
    build_index(release(tmp_path, "v1", "9079.2"), published, assets_url=f"{RELEASES}/v1", assets_out=tmp_path / "a")
    with served(published) as url:
        fetched = script("fetch-published-index.sh", url, str(tmp_path / "site"))
        assert fetched.returncode == 0, fetched.stderr
        assert (tmp_path / "site" / "index.json").read_bytes() == (published / "index.json").read_bytes()
        first = script("fetch-published-index.sh", f"{url}/nothing-here", str(tmp_path / "site2"))
        assert first.returncode == 0 and "this is the first" in first.stdout
        assert list((tmp_path / "site2").iterdir()) == []


def test_a_site_that_answers_with_an_error_fails_the_job_rather_than_drop_the_earlier_releases(
        tmp_path: Path) -> None:
    with served(tmp_path, StatusHandler) as url:
        failed = script("fetch-published-index.sh", f"{url}/503", str(tmp_path / "site"))
    assert failed.returncode == 13, failed.stdout + failed.stderr
    assert "answered 503" in failed.stderr and not (tmp_path / "site" / "index.json").exists()


def test_the_publish_script_writes_the_assets_and_the_pages_without_wheels(tmp_path: Path) -> None:
    done = script("publish-index.sh", str(release(tmp_path, "v1", "9079.2")), str(tmp_path / "site"),
                  str(tmp_path / "assets"), f"{RELEASES}/v1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "assets" / CPU_V1).is_file() and not list((tmp_path / "site").rglob("*.whl"))
    over = script("publish-index.sh", str(release(tmp_path, "v2", "9080.0")), str(tmp_path / "site"),
                  str(tmp_path / "assets2"), f"{RELEASES}/v2", env={"HIRAISHIN_SITE_LIMIT_BYTES": "10"})
    assert over.returncode == 13 and "over the 10-byte limit of GitHub Pages" in over.stderr


# --- yanking a release (PEP 592) ------------------------------------------------------------------------------


def test_a_yanked_release_is_installed_only_by_its_pin(tmp_path: Path) -> None:
    site, assets = tmp_path / "site", tmp_path / "assets"
    with served(site) as pages, served(assets) as downloads:
        build_index(release(tmp_path, "v1", "9079.2"), site, assets_url=f"{downloads}/v1", assets_out=assets / "v1")
        build_index(release(tmp_path, "v2", "9080.0"), site, assets_url=f"{downloads}/v2", assets_out=assets / "v2")
        hit = index.yank_release(site, "9080.0", "wrong tokens with KV q8_0")
        assert sorted(w.filename for w in hit) == [CPU_V2, CPU_V2.replace("+cpu", "+cu13.sm90")]
        page = (site / "cpu" / "simple" / "hiraishin-llama" / "index.html").read_text()
        assert page.count('data-yanked="wrong tokens with KV q8_0"') == 1
        for pin, wanted in (("", "9079.2+cpu"), ("==9080.0+cpu", "9080.0+cpu")):
            venv = fresh_venv(tmp_path / f"venv{pin or '-unpinned'}")
            completed = pip_install(venv, "--index-url", f"{pages}/cpu/simple", f"hiraishin-llama{pin}")
            assert completed.returncode == 0, completed.stdout + completed.stderr
            shown = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "show", "hiraishin-llama"],
                                   capture_output=True, text=True, check=True).stdout
            assert re.search(rf"^Version: {re.escape(wanted)}$", shown, re.MULTILINE), shown
        # the root page's command names the newest release that is not yanked
        assert "hiraishin-llama==9079.2+cpu" in (site / "index.html").read_text()
        # a later release keeps the yank
        build_index(release(tmp_path, "v3", "9081.0"), site, assets_url=f"{downloads}/v3", assets_out=assets / "v3")
        assert json.loads((site / index.MANIFEST).read_text())["yanked"] == {
            CPU_V2: "wrong tokens with KV q8_0", CPU_V2.replace("+cpu", "+cu13.sm90"): "wrong tokens with KV q8_0"}
        assert 'data-yanked="wrong tokens with KV q8_0"' in (site / "cpu" / "simple" / "hiraishin-llama" /
                                                             "index.html").read_text()


@pytest.mark.parametrize(("version", "reason", "match"), [
    ("9099.0", "broken", r"has no release 9099\.0.*"),
    ("not a version", "broken", "is not a version"),
    ("9079.2", "  ", "a yank needs its reason"),
])
def test_a_yank_that_names_no_release_or_gives_no_reason_changes_nothing(
        tmp_path: Path, version: str, reason: str, match: str) -> None:
    site = tmp_path / "site"
    build_index(release(tmp_path, "v1", "9079.2"), site, assets_url=f"{RELEASES}/v1", assets_out=tmp_path / "a1")
    before = snapshot(site)
    with pytest.raises(IndexBuildError, match=match) as raised:
        index.yank_release(site, version, reason)
    if "has no release" in match:
        assert "its releases: 9079.2" in (raised.value.hint or "")
    assert snapshot(site) == before


def test_the_yank_command(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_index(release(tmp_path, "v1", "9079.2"), site, assets_url=f"{RELEASES}/v1", assets_out=tmp_path / "a1")
    done = hiraishin("yank", "9079.2", "--site", str(site), "--reason", "a bad build", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"yanked     cpu/{CPU_V1}" in done.stdout
    missing = hiraishin("yank", "9079.2", "--site", str(site), cwd=tmp_path)
    assert missing.returncode == 2 and "--reason" in missing.stderr


def test_a_yank_on_the_published_list_alone_writes_the_whole_site(tmp_path: Path) -> None:
    """The yank workflow has the published index.json only: the pages and variant files come back from it."""
    published = tmp_path / "published"
    build_index(release(tmp_path, "v1", "9079.2"), published, assets_url=f"{RELEASES}/v1", assets_out=tmp_path / "a1")
    build_index(release(tmp_path, "v2", "9080.0"), published, assets_url=f"{RELEASES}/v2", assets_out=tmp_path / "a2")
    fetched = tmp_path / "site"
    fetched.mkdir()
    (fetched / index.MANIFEST).write_bytes((published / index.MANIFEST).read_bytes())
    index.yank_release(fetched, "9079.2", "superseded")
    index.yank_release(published, "9079.2", "superseded")
    assert snapshot(fetched) == snapshot(published)


def test_a_list_whose_yanks_are_damaged_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_index(release(tmp_path, "v1", "9079.2"), site, assets_url=f"{RELEASES}/v1", assets_out=tmp_path / "a1")
    listed = json.loads((site / index.MANIFEST).read_text())
    (site / index.MANIFEST).write_text(json.dumps({**listed, "yanked": ["9079.2"]}))
    before = snapshot(site)
    with pytest.raises(IndexBuildError, match="its 'yanked' is not a map of file names to reasons"):
        build_index(release(tmp_path, "v2", "9080.0"), site, assets_url=f"{RELEASES}/v2", assets_out=tmp_path / "a2")
    assert snapshot(site) == before and not (tmp_path / "a2").exists()


# --- where the site is served ---------------------------------------------------------------------------------

PAGES = "https://example.github.io/hiraishin-llama"


def test_the_root_page_names_the_real_indexes_and_the_site_remembers_where_it_is(tmp_path: Path) -> None:
    site = tmp_path / "site"
    first = build_index(release(tmp_path, "v1", "9079.2"), site, assets_url=f"{RELEASES}/v1",
                        assets_out=tmp_path / "a1", site_url=f"{PAGES}/")
    assert first.site_url == PAGES
    root = (site / "index.html").read_text()
    assert f"--index-url {PAGES}/cpu/simple" in root and f"--index-url {PAGES}/cu13-sm90/simple" in root
    assert "&lt;this site&gt;" not in root
    assert json.loads((site / index.MANIFEST).read_text())["site_url"] == PAGES
    # the next release and a yank are not told again: index.json says it
    second = build_index(release(tmp_path, "v2", "9080.0"), site, assets_url=f"{RELEASES}/v2",
                         assets_out=tmp_path / "a2")
    assert second.site_url == PAGES and f"{PAGES}/cpu/simple" in (site / "index.html").read_text()
    index.yank_release(site, "9079.2", "superseded")
    assert f"{PAGES}/cpu/simple" in (site / "index.html").read_text()


def test_a_site_without_its_url_says_so_on_its_root_page(tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert build_index(release(tmp_path, "v1", "9079.2"), site).site_url is None
    assert "&lt;this site&gt;/cpu/simple" in (site / "index.html").read_text()


@pytest.mark.parametrize("url", ["example.github.io/hiraishin-llama", "ftp://example.org/site",
                                 "https://example.github.io/hiraishin-llama?x=1", "https://"])
def test_a_site_url_that_is_no_http_directory_is_refused_before_anything_is_written(tmp_path: Path, url: str) -> None:
    site = tmp_path / "site"
    build_index(release(tmp_path, "v1", "9079.2"), site)
    before = snapshot(site)
    with pytest.raises(IndexBuildError, match="--site-url .* is not an http.s. URL of a directory") as raised:
        build_index(release(tmp_path, "v2", "9080.0"), site, site_url=url)
    assert "https://OWNER.github.io/REPO" in (raised.value.hint or "")
    assert snapshot(site) == before


def test_a_damaged_site_url_in_the_list_is_refused_naming_the_file(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_index(release(tmp_path, "v1", "9079.2"), site, assets_url=f"{RELEASES}/v1", assets_out=tmp_path / "a1",
                site_url=PAGES)
    listed = json.loads((site / index.MANIFEST).read_text())
    for damaged in (42, "not a url"):
        (site / index.MANIFEST).write_text(json.dumps({**listed, "site_url": damaged}))
        before = snapshot(site)
        with pytest.raises(IndexBuildError, match=r"index\.json: .*site_url"):
            build_index(release(tmp_path, "v2", "9080.0"), site, assets_url=f"{RELEASES}/v2",
                        assets_out=tmp_path / "a2")
        assert snapshot(site) == before and not (tmp_path / "a2").exists()


def test_the_index_command_takes_the_site_url_from_the_publish_job_s_environment(tmp_path: Path) -> None:
    done = hiraishin("index", str(release(tmp_path, "v1", "9079.2")), "--out", str(tmp_path / "site"), cwd=tmp_path,
                     env={"HIRAISHIN_SITE_URL": PAGES})
    assert done.returncode == 0, done.stderr
    assert re.search(rf"^cpu +1 wheel\(s\): pip install .* --index-url {re.escape(PAGES)}/cpu/simple", done.stdout,
                     re.M), done.stdout
