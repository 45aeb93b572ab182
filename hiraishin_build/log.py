"""Console output shared by the library and the CLI.

Library code logs through :func:`get_logger`; the CLI decides verbosity. On
GitHub Actions, long steps fold into groups so a log stays readable. Output
that is not a terminal (a CI log, a pipe, a file) is never wrapped: a line
broken at 80 columns splits the paths and URLs in it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence

from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.table import Table
from rich.text import Text

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
        console.print(f"[bold]==>[/bold] {escape(title)}")
    try:
        yield
    finally:
        if _on_github_actions():
            print("::endgroup::", flush=True)
        get_logger().debug("%s took %.1f s", title, time.monotonic() - started)


def table_lines(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> list[str]:
    """``rows`` aligned in columns (rich.table), as plain lines: no colour, no borders, two spaces
    between columns, never wrapped or cut (the lines are copied into logs and terminals alike)."""
    table = Table(box=None, show_header=header is not None, pad_edge=False, padding=(0, 2, 0, 0), header_style="")
    for name in header or [""] * max((len(row) for row in rows), default=0):
        table.add_column(name, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    out = Console(file=io.StringIO(), width=1 << 20, color_system=None, highlight=False)
    out.print(table)
    return [line.rstrip() for line in out.file.getvalue().splitlines()]  # type: ignore[attr-defined]
