"""The upstream pin: which repository, tag and commit the patch stack sits on.

Stored in ``recipes/upstream.toml``. The commit is recorded in full so that a
tag that moves upstream is noticed instead of silently followed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import tomlfile
from .errors import ConfigError
from .sparse import SparseRules

PIN_FILE = Path("recipes") / "upstream.toml"

_FULL_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# The subset of git-check-ref-format rules that a tag or branch name we would
# accept can break; git itself re-checks when the ref is used.
_BAD_REF = re.compile(r"(^[-/.])|(\.\.)|([\s~^:?*\[\\])|(@\{)|(/$)|(\.lock$)|(\.$)")


@dataclass(frozen=True)
class UpstreamPin:
    url: str
    """Where the upstream repository lives (the default source of ``upstream fetch``)."""

    ref: str
    """The upstream tag (or branch) the stack is based on."""

    commit: str
    """The full 40-hex commit ``ref`` named when the pin was made."""

    checkout: SparseRules = field(default_factory=SparseRules)
    """Paths a work tree leaves out because no build needs them."""

    source: Path | None = None
    """The file this pin was read from, for error messages."""

    @property
    def short(self) -> str:
        return self.commit[:12]

    def moved_to(self, ref: str, commit: str, *, url: str | None = None) -> UpstreamPin:
        """The pin on ``ref`` at ``commit``, in the repository ``url`` (default: the same one)."""
        return replace(self, ref=ref, commit=commit, url=url or self.url)


def validate_commit(path: Path, key: str, value: str) -> str:
    if not _FULL_COMMIT.match(value):
        problem = "is too short" if re.fullmatch(r"[0-9a-fA-F]{4,39}", value) else "is malformed"
        raise ConfigError(
            f"{path}: '{key}' {problem}: {value!r}",
            hint="record the full 40-character lowercase hex commit (git rev-parse REF^{commit})",
        )
    return value


def load_pin(path: Path) -> UpstreamPin:
    data = tomlfile.load(path)
    tomlfile.reject_unknown_keys(path, data, ["url", "ref", "commit", "checkout"])
    url = tomlfile.require(path, data, "url", str).strip()
    ref = tomlfile.require(path, data, "ref", str).strip()
    commit = validate_commit(path, "commit", tomlfile.require(path, data, "commit", str).strip())
    if not url:
        raise ConfigError(f"{path}: 'url' is empty")
    if not ref or _BAD_REF.search(ref):
        raise ConfigError(f"{path}: 'ref' is not a valid git ref name: {ref!r}")
    checkout = tomlfile.optional_table(path, data, "checkout")
    tomlfile.reject_unknown_keys(path, checkout, ["exclude"], where="checkout")
    excludes = checkout.get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(item, str) for item in excludes):
        raise ConfigError(f"{path}: 'checkout.exclude' must be a list of strings")
    try:
        rules = SparseRules(tuple(excludes))
    except ValueError as exc:
        raise ConfigError(f"{path}: 'checkout.exclude': {exc}") from None
    return UpstreamPin(url=url, ref=ref, commit=commit, checkout=rules, source=path)


def render_pin(pin: UpstreamPin) -> str:
    """The file text for ``pin``; stable so that moving the pin is a small diff."""
    excludes = "".join(f'    "{pattern}",\n' for pattern in pin.checkout.excludes)
    return (
        "# The upstream the patch stack is based on. `commit` is verified on every use:\n"
        "# a `ref` that now names another commit is refused.\n"
        f'url = "{pin.url}"\n'
        f'ref = "{pin.ref}"\n'
        f'commit = "{pin.commit}"\n'
        "\n"
        "# Paths a work tree leaves out: nothing the wheels build reads them, and some\n"
        "# of their blobs (multi-megabyte vocab files, the web UI bundle) may be absent\n"
        "# from a mirror.\n"
        "[checkout]\n"
        f"exclude = [\n{excludes}]\n"
    )


def write_pin(path: Path, pin: UpstreamPin) -> None:
    from .fsutil import atomic_write_text

    atomic_write_text(path, render_pin(pin))
