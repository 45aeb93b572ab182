"""Command-line parsing shared by hiraishin-llama-smoke and hiraishin-llama-bench."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable


class ArgumentParser(argparse.ArgumentParser):
    """A usage error is one line, saying what is wrong and how to fix it; exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parse_batches(text: str) -> tuple[int, ...]:
    """'1-16' or '1,2,4,8' (or a mix) -> sorted batch sizes, each 1..16."""
    sizes: set[int] = set()
    try:
        for item in text.split(","):
            first, _, last = item.partition("-")
            sizes.update(range(int(first), int(last or first) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"batch sizes must look like 1-16 or 1,2,4, got {text!r}") from None
    if not sizes or min(sizes) < 1 or max(sizes) > 16:
        raise argparse.ArgumentTypeError(f"batch sizes must be between 1 and 16, got {text!r}")
    return tuple(sorted(sizes))


def name_list(valid: Iterable[str], what: str, normalize: Callable[[str], str] = str.strip) -> Callable[[str], tuple[str, ...]]:
    """An argparse type: a comma-separated list, each item one of ``valid`` (after ``normalize``)."""
    choices = tuple(valid)

    def parse(text: str) -> tuple[str, ...]:
        items = tuple(normalize(item) for item in text.split(","))
        for item in items:
            if item not in choices:
                raise argparse.ArgumentTypeError(f"unknown {what} {item!r} in {text!r}; valid: {', '.join(choices)}")
        return items

    return parse


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse
