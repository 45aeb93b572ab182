"""The CPU wheel installed as a user installs a release: `pip install hiraishin-llama --index-url
http://.../cpu/simple` from a site whose pages link the wheel as a release asset, the site and the assets served by
two HTTP servers on 127.0.0.1 as GitHub Pages and GitHub Releases serve them; then a second release published over
the first, and each installed by its pin. The dependencies (numpy, gguf) come from PyPI, as the printed install
command says."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from hiraishin_build.index import PYPI, build_index, install_command
from tests.helpers import PLAIN, fresh_venv, make_wheel, pip_install, served


def installed_version(venv: Path) -> str:
    shown = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "show", "hiraishin-llama"],
                           capture_output=True, text=True, check=True).stdout
    return re.search(r"^Version: (\S+)$", shown, re.MULTILINE)[1]


def test_two_releases_install_over_http_each_by_its_pin(cpu_wheel: Path, tmp_path: Path) -> None:
    first = tmp_path / "release-1"
    first.mkdir()
    shutil.copy2(cpu_wheel, first / cpu_wheel.name)
    version = cpu_wheel.name.split("-")[1]  # 10400.21+cpu
    build, revision = (int(part) for part in version.split("+")[0].split("."))
    # the next release: a small wheel of the next stack revision (another CPU wheel would take 15 minutes to build)
    newer = f"{build}.{revision + 1}+cpu"
    second = tmp_path / "release-2"
    make_wheel(second, {"hiraishin_llama/marker.txt": (b"release 2", PLAIN)}, version=newer,
               tag=cpu_wheel.name.split("-", 2)[2].removesuffix(".whl"))
    site, assets = tmp_path / "site", tmp_path / "assets"
    with served(site) as pages, served(assets) as downloads:
        build_index(first, site, assets_url=f"{downloads}/v{version}", assets_out=assets / f"v{version}")
        result = build_index(second, site, assets_url=f"{downloads}/v{newer}", assets_out=assets / f"v{newer}")
        index_url = f"{pages}/cpu/simple"
        command = install_command(result.variants["cpu"], index_url)
        assert command == f"pip install hiraishin-llama=={newer} --index-url {index_url} --extra-index-url {PYPI}"
        for pin, wanted in ((f"=={version}", version), (f"=={newer}", newer)):
            venv = fresh_venv(tmp_path / f"venv-{wanted}")
            completed = pip_install(venv, f"hiraishin-llama{pin}", "--index-url", index_url, "--extra-index-url", PYPI)
            assert completed.returncode == 0, completed.stdout + completed.stderr
            assert installed_version(venv) == wanted
        # the real wheel runs as installed over HTTP
        real = tmp_path / f"venv-{version}"
        shown = subprocess.run([str(real / "bin" / "hiraishin-llama"), "--version"], capture_output=True, text=True,
                               timeout=120)
        assert shown.returncode == 0 and shown.stdout.startswith(f"hiraishin-llama {version}"), shown.stdout + shown.stderr
