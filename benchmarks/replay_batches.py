"""Which batch widths hiraishin-replay runs at each b, so that a fault planted at one width is predicted right.

    python3 benchmarks/replay_batches.py [--n-prompt 64] [--n-gen 600] [--no-256-guard] [--width W]
    python3 benchmarks/replay_batches.py --check SMOKE.json

The replay pushes the reference tokens through in batches of b, and with its 256 guard (the default) cuts a
batch that would cross a multiple of 256 KV cells at that multiple; the next batch starts there. So a b
that does not divide the distance to the next multiple runs one shorter batch, e.g. b = 11 after a 64-token
prompt runs 5 tokens at positions 251-255 (192 = 17 x 11 + 5): a fault planted in 5-column products shows
at b = 5 and at b = 11. The rule is replay_in_batches in wheels/src/replay/hiraishin_replay.cpp, mirrored here.

--width W prints the b in 1..16 whose replay runs a batch of W tokens (and from which position on the
logits can differ); without it, every b's widths. --check reads a smoke or replay report and exits 1 if a
case's positions_compared differs from the mirror's count, which is how the mirror is held to the C++ rule.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

KV_WINDOW_STEP = 256
MAX_B = 16


@dataclass(frozen=True)
class Batch:
    first: int  # index of its first generated token
    width: int


def replay_batches(b: int, n_prompt: int, n_gen: int, guard_256: bool = True) -> list[Batch]:
    """The batches of one replay at b; a trailing partial batch is left out, as the replay leaves it out."""
    if b < 1:
        raise ValueError(f"batch size must be at least 1, got {b}")
    batches: list[Batch] = []
    first = 0
    while True:
        width = b
        if guard_256:
            width = min(width, KV_WINDOW_STEP - (n_prompt + first) % KV_WINDOW_STEP)
        if first + width > n_gen:
            return batches
        batches.append(Batch(first, width))
        first += width


def batch_sizes_with_width(width: int, n_prompt: int, n_gen: int, guard_256: bool = True) -> dict[int, int]:
    """b -> the KV position of its first batch of `width` tokens, for every b in 1..16 that runs one."""
    found = {}
    for b in range(1, MAX_B + 1):
        for batch in replay_batches(b, n_prompt, n_gen, guard_256):
            if batch.width == width:
                found[b] = n_prompt + batch.first
                break
    return found


def _cases(report: dict) -> list[dict]:
    """The replay reports in a smoke report (its cases), a results file wrapping one, or one replay report."""
    if "raw" in report:
        report = report["raw"].get("smoke.json", report["raw"])
    if "cases" in report:
        return [case["report"] for case in report["cases"] if case.get("report")]
    return [report]


def check(path: Path) -> list[str]:
    mismatches = []
    for replay in _cases(json.loads(path.read_text())):
        if replay.get("mode", "replay") != "replay":
            continue
        n_prompt, n_gen, guard = replay["n_prompt"], replay["n_gen"], replay.get("guard_256", True)
        for result in replay["results"]:
            b = result["b"]
            expected = sum(batch.width for batch in replay_batches(b, n_prompt, n_gen, guard))
            if result["positions_compared"] != expected:
                mismatches.append(f"{replay.get('model_path', '?')} b={b}: the report compared "
                                  f"{result['positions_compared']} positions, the mirror counts {expected}")
    return mismatches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-prompt", type=int, default=64)
    parser.add_argument("--n-gen", type=int, default=600)
    parser.add_argument("--no-256-guard", dest="guard_256", action="store_false")
    parser.add_argument("--width", type=int, help="the b whose replay runs a batch of this many tokens")
    parser.add_argument("--check", type=Path, metavar="REPORT", help="compare a report's positions_compared")
    args = parser.parse_args(argv)
    if args.check:
        mismatches = check(args.check)
        for line in mismatches:
            print(line)
        print(f"{args.check}: {'mismatch' if mismatches else 'every b as the mirror counts'}")
        return 1 if mismatches else 0
    if args.width is not None:
        found = batch_sizes_with_width(args.width, args.n_prompt, args.n_gen, args.guard_256)
        for b, position in found.items():
            print(f"b={b}: a {args.width}-token batch from KV position {position}")
        return 0
    for b in range(1, MAX_B + 1):
        widths = Counter(batch.width for batch in replay_batches(b, args.n_prompt, args.n_gen, args.guard_256))
        print(f"b={b:2d}: " + ", ".join(f"{n} x {w}" for w, n in sorted(widths.items(), reverse=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
