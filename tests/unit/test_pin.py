from pathlib import Path

import pytest

from hiraishin_build.errors import ConfigError
from hiraishin_build.pin import UpstreamPin, load_pin, render_pin
from hiraishin_build.sparse import SparseRules

GOOD = '''url = "https://example.invalid/llama.git"
ref = "b101"
commit = "69d8e4be47243e83b3d0d71e932bc7aa61c644dc"

[checkout]
exclude = ["docs/"]
'''


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "upstream.toml"
    path.write_text(text)
    return path


def test_loads_a_valid_pin(tmp_path: Path) -> None:
    pin = load_pin(write(tmp_path, GOOD))
    assert pin.ref == "b101"
    assert pin.commit == "69d8e4be47243e83b3d0d71e932bc7aa61c644dc"
    assert pin.checkout.excludes == ("docs/",)


def test_render_round_trips(tmp_path: Path) -> None:
    pin = UpstreamPin("https://x.invalid/r.git", "tag-1", "a" * 40, SparseRules(("docs/", "models/*.gguf")))
    path = write(tmp_path, render_pin(pin))
    loaded = load_pin(path)
    assert (loaded.url, loaded.ref, loaded.commit, loaded.checkout) == (pin.url, pin.ref, pin.commit, pin.checkout)


def test_the_repository_pin_is_valid() -> None:
    pin = load_pin(Path(__file__).parents[2] / "recipes" / "upstream.toml")
    assert pin.commit == "066cc29b42eed73b9e7b1a1e6ad45dc3dd2c9b07"
    assert pin.ref == "feature-turboquant-kv-cache-b10354-066cc29"
    assert pin.url == "https://github.com/AtomicBot-ai/atomic-llama-cpp-turboquant.git"  # where the tag lives


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("commit =", "comit ="), "unknown key 'comit'.*did you mean 'commit'"),
        (GOOD.replace('exclude = ["docs/"]', 'excludes = ["docs/"]'), "unknown key 'checkout.excludes'.*did you mean 'exclude'"),
        (GOOD.replace("69d8e4be47243e83b3d0d71e932bc7aa61c644dc", "69d8e4be"), "'commit' is too short"),
        (GOOD.replace("69d8e4be47243e83b3d0d71e932bc7aa61c644dc", "z" * 40), "'commit' is malformed"),
        (GOOD.replace("69d8e4be47243e83b3d0d71e932bc7aa61c644dc", "69D8E4BE47243E83B3D0D71E932BC7AA61C644DC"), "'commit' is malformed"),
        ("\n".join(line for line in GOOD.splitlines() if not line.startswith("ref")), "missing required key 'ref'"),
        (GOOD.replace('ref = "b101"', "ref = 101"), "'ref' must be a str"),
        (GOOD.replace('ref = "b101"', 'ref = "b 101"'), "not a valid git ref name"),
        (GOOD.replace('url = "https://example.invalid/llama.git"', 'url = ""'), "'url' is empty"),
        (GOOD.replace('["docs/"]', '["/docs/"]'), "checkout.exclude.*anchored"),
        (GOOD.replace('["docs/"]', '"docs/"'), "checkout.exclude' must be a list"),
        ("url = [", "not valid TOML"),
    ],
)
def test_bad_pins_name_the_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match="(?s)" + expected) as info:
        load_pin(path)
    assert str(path) in str(info.value)


def test_missing_pin_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_pin(tmp_path / "absent.toml")
