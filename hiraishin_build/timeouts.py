"""How long a step may run before it is stopped.

One limit per kind of step, each changed by an environment variable (seconds;
0 turns the limit off). The defaults are generous: they exist to stop what has
stalled (a fetch from a remote that stopped answering, a build that hangs), not
what is slow.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from .errors import ConfigError


@dataclass(frozen=True)
class Limit:
    name: str
    variable: str
    """The environment variable that sets it, in seconds."""

    default_s: float
    bounds: str
    """What it bounds, for messages: "a network step (git fetch, pip install)"."""

    def seconds(self) -> float | None:
        """The limit now in force; None when turned off (0)."""
        raw = os.environ.get(self.variable, "").strip()
        if not raw:
            return self.default_s
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"{self.variable}={raw!r} is not a number of seconds",
                              hint=f"set it to the seconds {self.bounds} may take (0: no limit), "
                                   f"or unset it for the default of {describe(self.default_s)}")
        return value or None


NETWORK = Limit("network", "HIRAISHIN_NETWORK_TIMEOUT", 30 * 60, "a network step (git fetch, pip install)")
BUILD = Limit("build", "HIRAISHIN_BUILD_TIMEOUT", 6 * 3600, "a long step (a wheel build, a smoke test)")
COMMAND = Limit("command", "HIRAISHIN_COMMAND_TIMEOUT", 60 * 60, "any other command")
# A quick "is it there?" before a fetch: a source that does not answer is reported as unreachable.
CONNECT = Limit("connect", "HIRAISHIN_CONNECT_TIMEOUT", 60, "reaching an upstream source (git ls-remote)")


def check_settings(*limits: Limit) -> None:
    """Refuse a malformed setting of any of ``limits`` now (ConfigError), not when the step it bounds comes,
    which may be minutes into a build or a smoke test."""
    for limit in limits:
        limit.seconds()


def describe(seconds: float) -> str:
    """1 -> '1 s', 5400 -> '1.5 h'."""
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
