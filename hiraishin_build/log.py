"""Console output shared by the library and the CLI.

Library code logs through :func:`get_logger`; the CLI decides verbosity. On
GitHub Actions, long steps fold into groups so a log stays readable. Output
that is not a terminal (a CI log, a pipe, a file) is never wrapped: a line
broken at 80 columns splits the paths and URLs in it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator

from rich.console import Console
from rich.logging import RichHandler

console = Console(stderr=True, highlight=False)

_LOGGER_NAME = "hiraishin"


def get_logger() -> logging.Logger:
    return logging.getLogger(_LOGGER_NAME)


def configure(verbose: int) -> None:
    level = logging.DEBUG if verbose >= 1 else logging.INFO
    logger = get_logger()
    logger.handlers.clear()
    handler: logging.Handler
    if console.is_terminal:
        console.soft_wrap = False
        handler = RichHandler(console=console, show_time=False, show_path=False, markup=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
    else:
        # One record, one line, as long as it is; the level column as on a terminal.
        console.soft_wrap = True
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)-8s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def _on_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


@contextlib.contextmanager
def step(title: str) -> Iterator[None]:
    """A timed step; folded into a ``::group::`` on GitHub Actions."""
    started = time.monotonic()
    if _on_github_actions():
        print(f"::group::{title}", flush=True)
    else:
        console.print(f"[bold]==>[/bold] {title}")
    try:
        yield
    finally:
        if _on_github_actions():
            print("::endgroup::", flush=True)
        get_logger().debug("%s took %.1f s", title, time.monotonic() - started)
