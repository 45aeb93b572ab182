"""Batch-invariant mode: what the two switch names, together, ask for.

``GGML_CUDA_BATCH_INVARIANT`` and ``GGML_BATCH_INVARIANT`` name one switch. The
patched library and these launchers read them by the same rule, so a user
cannot get it wrong:

- each value is stripped of whitespace and lowercased; an empty value is unset;
- ``0``, ``off``, ``false``, ``no`` mean off; ``1``, ``on``, ``true``, ``yes``
  mean on; any other value means on, with a warning naming it;
- off by either name turns the mode off for every backend; else on by either
  name turns it on; else (neither set) the default holds: off in the library,
  on in this wheel's console scripts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

NAMES = ("GGML_CUDA_BATCH_INVARIANT", "GGML_BATCH_INVARIANT")
OFF_VALUES = frozenset({"0", "off", "false", "no"})
ON_VALUES = frozenset({"1", "on", "true", "yes"})


@dataclass(frozen=True)
class Resolved:
    on: bool
    warnings: tuple[str, ...] = ()
    """One per value that is neither an on nor an off word (taken as on)."""

    def environment(self) -> dict[str, str]:
        """Both names with the answer, so that every backend of a child process sees it."""
        return {name: "1" if self.on else "0" for name in NAMES}


def resolve(env: Mapping[str, str], *, default: bool) -> Resolved:
    """The mode ``env`` asks for; ``default`` when neither name is set."""
    said: set[bool] = set()
    warnings: list[str] = []
    for name in NAMES:
        value = env.get(name, "").strip().lower()
        if not value:
            continue
        if value in OFF_VALUES:
            said.add(False)
        else:
            said.add(True)
            if value not in ON_VALUES:
                warnings.append(f"{name}={env[name]!r} is not one of 1/on/true/yes or 0/off/false/no; taking it as on")
    on = False if False in said else (True if said else default)
    return Resolved(on, tuple(warnings))
