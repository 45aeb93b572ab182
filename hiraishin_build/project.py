"""Where the project's files live."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError
from .pin import PIN_FILE, UpstreamPin, load_pin


@dataclass(frozen=True)
class Project:
    root: Path

    def __post_init__(self) -> None:
        # Patches are applied by git inside a scratch or work tree, not in the caller's directory: a relative root
        # would name files that git cannot find there.
        object.__setattr__(self, "root", Path(self.root).resolve())

    @property
    def pin_file(self) -> Path:
        return self.root / PIN_FILE

    @property
    def patches_dir(self) -> Path:
        return self.root / "patches"

    @property
    def wheels_dir(self) -> Path:
        return self.root / "wheels"

    @property
    def recipes_dir(self) -> Path:
        return self.root / "recipes"

    @property
    def dist_dir(self) -> Path:
        return self.root / "dist"

    @property
    def default_workdir(self) -> Path:
        return self.root / "work" / "llama.cpp"

    def pin(self) -> UpstreamPin:
        return load_pin(self.pin_file)

    @classmethod
    def find(cls, start: Path | None = None) -> Project:
        here = (start or Path.cwd()).resolve()
        for candidate in (here, *here.parents):
            if (candidate / PIN_FILE).is_file():
                return cls(candidate)
        raise ConfigError(
            f"no {PIN_FILE} in {here} or any directory above it",
            hint="run hiraishin inside a hiraishin-llama checkout, or pass --project DIR",
        )
