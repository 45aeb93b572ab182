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
    assert pin.commit == "a6f3d363e4c6a672803d0e6e036f8a75cf43d0ae"
    assert pin.ref == "b10018-1.2.0"
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
    assert info.value.message.startswith(f"{path}: ")


def test_missing_pin_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_pin(tmp_path / "absent.toml")


@pytest.mark.parametrize(("text", "message", "hint"), [
    (GOOD.replace("69d8e4be47243e83b3d0d71e932bc7aa61c644dc", "69d8e4be"), "'commit' is too short: '69d8e4be'",
     "record the full 40-character lowercase hex commit (git rev-parse REF^{commit})"),
    (GOOD.replace('url = "https://example.invalid/llama.git"', 'url = "  "'), "'url' is empty", None),
    (GOOD.replace('ref = "b101"', 'ref = "b 101"'), "'ref' is not a valid git ref name: 'b 101'", None),
    (GOOD.replace('["docs/"]', '"docs/"'), "'checkout.exclude' must be a list of strings", None),
    (GOOD.replace('["docs/"]', '["docs/", 3]'), "'checkout.exclude' must be a list of strings", None),
])
def test_bad_pin_messages_in_full(tmp_path: Path, text: str, message: str, hint: str | None) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_pin(path)
    assert info.value.message == f"{path}: {message}"
    assert info.value.hint == hint


@pytest.mark.parametrize("ref", ["-b101", "/b101", ".b101", "b..101", "b101~1", "b101^", "b:101", "b?101", "b*101",
                                 "b[101", "b@{101", "b101/", "b101.lock", "b101.", "b\t101"])
def test_refs_git_would_refuse_are_refused(tmp_path: Path, ref: str) -> None:
    with pytest.raises(ConfigError, match="not a valid git ref name"):
        load_pin(write(tmp_path, GOOD.replace('ref = "b101"', f'ref = "{ref}"')))


@pytest.mark.parametrize("ref", ["b101", "feature-turboquant-kv-cache-b9079-69d8e4b", "release/b9079", "v1.2.3", "b101.x"])
def test_ordinary_refs_are_accepted(tmp_path: Path, ref: str) -> None:
    assert load_pin(write(tmp_path, GOOD.replace('ref = "b101"', f'ref = "{ref}"'))).ref == ref


def test_a_pin_made_in_code() -> None:
    import dataclasses

    from hiraishin_build.sparse import SparseRules

    pin = UpstreamPin("u", "b101", "69d8e4be47243e83b3d0d71e932bc7aa61c644dc")
    assert pin.checkout == SparseRules() and pin.source is None
    assert pin.short == "69d8e4be4724"
    moved = pin.moved_to("b102", "a" * 40)
    assert (moved.url, moved.ref, moved.commit, pin.ref) == ("u", "b102", "a" * 40, "b101")
    with pytest.raises(dataclasses.FrozenInstanceError):
        pin.ref = "b102"  # type: ignore[misc]


def test_a_project_reads_its_pin_from_recipes_upstream_toml(tmp_path: Path) -> None:
    from hiraishin_build.project import Project

    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "upstream.toml").write_text(GOOD)
    project = Project(tmp_path)
    assert project.pin_file == tmp_path / "recipes" / "upstream.toml"
    assert project.pin().source == tmp_path / "recipes" / "upstream.toml"
    assert Project.find(tmp_path / "recipes").root == tmp_path
