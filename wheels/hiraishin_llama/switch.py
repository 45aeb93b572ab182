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
    decided_by: tuple[str, ...] = ()
    """The settings that gave the answer, as NAME=value; empty when neither name is set."""

    def environment(self) -> dict[str, str]:
        """Both names with the answer, so that every backend of a child process sees it."""
        return {name: "1" if self.on else "0" for name in NAMES}

    def describe(self, default: bool) -> str:
        """The mode and what set it, in one line: a user reading a server's log sees which mode ran."""
        state = "on" if self.on else "off"
        if self.decided_by:
            return f"batch-invariant mode {state} ({', '.join(self.decided_by)} set)"
        flip = "GGML_BATCH_INVARIANT=0 turns it off" if default else "GGML_BATCH_INVARIANT=1 turns it on"
        return f"batch-invariant mode {state} (the default; {flip})"


def resolve(env: Mapping[str, str], *, default: bool) -> Resolved:
    """The mode ``env`` asks for; ``default`` when neither name is set."""
    said: dict[bool, list[str]] = {True: [], False: []}
    warnings: list[str] = []
    for name in NAMES:
        value = env.get(name, "").strip().lower()
        if not value:
            continue
        setting = f"{name}={env[name].strip()}"
        if value in OFF_VALUES:
            said[False].append(setting)
        else:
            said[True].append(setting)
            if value not in ON_VALUES:
                warnings.append(f"{name}={env[name]!r} is not one of 1/on/true/yes or 0/off/false/no; taking it as on")
    on = False if said[False] else (True if said[True] else default)
    decided_by = tuple(said[False] or said[True])
    return Resolved(on, tuple(warnings), decided_by)
