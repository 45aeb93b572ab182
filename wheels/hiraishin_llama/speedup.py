"""What exactness costs end to end: expected speculative speedup from measured pass times.

Greedy speculative decoding drafts k tokens, then verifies them in one target
pass of b = k + 1 tokens (the last accepted token and the k drafts). With each
drafted token accepted with probability ``acceptance`` once the ones before it
were (the usual i.i.d. model of Leviathan et al., 2023), an iteration yields on
average (1 - a^(k+1)) / (1 - a) tokens and costs k draft steps plus one verify
pass. A draft step costs ``draft_cost`` times a one-token target pass. Plain
decoding costs one one-token pass per token, so

    speedup(k) = E[tokens](k) * T(1) / (k * draft_cost * T(1) + T(k + 1))

where T(b) is the measured time of a verify pass of b tokens. Each setting is
evaluated at its best draft length, separately for exact and stock passes, as
a user would tune it.

Each speedup is over its own mode's plain decoding, whose one-token pass need
not cost the same exact and stock. What exactness costs end to end is
therefore the ratio of speculative tokens per second, exact over stock:

    exact/stock = (speedup_exact / T_exact(1)) / (speedup_stock / T_stock(1))

``python -m hiraishin_llama.speedup BENCH.json`` prints the table for every
model of a ``hiraishin-llama-bench`` report (or of a results file that holds
one under "raw").
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ACCEPTANCE_RATES = (0.5, 0.6, 0.7, 0.8, 0.9)
DRAFT_COSTS = (0.02, 0.05, 0.10)


@dataclass(frozen=True)
class BestDraft:
    draft_length: int
    speedup: float


@dataclass(frozen=True)
class SpeedupRow:
    acceptance: float
    draft_cost: float
    exact: BestDraft
    stock: BestDraft
    # the one-token passes, plain decoding's cost per token in each mode
    exact_plain_ms: float
    stock_plain_ms: float

    @property
    def exact_over_stock(self) -> float:
        """Speculative tokens per second, exact over stock (below 1: exactness costs)."""
        return (self.exact.speedup / self.exact_plain_ms) / (self.stock.speedup / self.stock_plain_ms)

    @classmethod
    def from_json(cls, row: Mapping) -> SpeedupRow:
        """A row as table_json writes it."""
        return cls(row["acceptance"], row["draft_cost"], BestDraft(**row["exact"]), BestDraft(**row["stock"]),
                   row["exact_plain_ms"], row["stock_plain_ms"])


def expected_tokens(acceptance: float, draft_length: int) -> float:
    """Tokens one iteration yields: the accepted drafts plus the one the verify pass adds."""
    if not 0.0 <= acceptance <= 1.0:
        raise ValueError(f"acceptance rate {acceptance} is not in [0, 1]")
    if acceptance == 1.0:
        return float(draft_length + 1)
    return (1.0 - acceptance ** (draft_length + 1)) / (1.0 - acceptance)


def speedup(pass_ms: Mapping[int, float], acceptance: float, draft_cost: float, draft_length: int) -> float:
    one_token = pass_ms[1]
    iteration_ms = draft_length * draft_cost * one_token + pass_ms[draft_length + 1]
    return expected_tokens(acceptance, draft_length) * one_token / iteration_ms


def best_draft(pass_ms: Mapping[int, float], acceptance: float, draft_cost: float) -> BestDraft:
    """The draft length with the highest expected speedup among the measured verify sizes."""
    if 1 not in pass_ms:
        raise ValueError("the one-token pass (b = 1) was not measured: it is what plain decoding costs")
    lengths = sorted(b - 1 for b in pass_ms if b >= 2)
    if not lengths:
        raise ValueError("no verify pass of 2 or more tokens was measured")
    return max((BestDraft(k, speedup(pass_ms, acceptance, draft_cost, k)) for k in lengths),
               key=lambda choice: choice.speedup)


def speedup_table(verify: Sequence[Mapping], acceptance_rates: Sequence[float] = ACCEPTANCE_RATES,
                  draft_costs: Sequence[float] = DRAFT_COSTS) -> list[SpeedupRow]:
    """``verify`` holds the bench's rows: {"b", "exact_ms", "stock_ms", ...}."""
    exact = {row["b"]: row["exact_ms"] for row in verify}
    stock = {row["b"]: row["stock_ms"] for row in verify}
    return [SpeedupRow(a, c, best_draft(exact, a, c), best_draft(stock, a, c), exact[1], stock[1])
            for a in acceptance_rates for c in draft_costs]


def table_json(rows: Sequence[SpeedupRow]) -> dict:
    return {
        "model": "speedup(k) = (1 - a^(k+1)) / (1 - a) * T(1) / (k * draft_cost * T(1) + T(k+1)), "
                 "best k among the measured verify sizes, T = median verify-pass time; exact_over_stock = "
                 "speculative tokens per second exact over stock, (speedup_exact / T_exact(1)) / "
                 "(speedup_stock / T_stock(1))",
        "rows": [{**asdict(row), "exact_over_stock": row.exact_over_stock} for row in rows],
    }


def render(rows: Sequence[SpeedupRow]) -> str:
    header = (f"{'accept':>6} {'draft cost':>10} {'exact x':>8} {'k':>3} {'stock x':>8} {'k':>3} "
              f"{'exact/stock':>12}")
    lines = ["expected speculative speedup over plain decoding of the same mode (best draft length k);",
             "exact/stock: speculative tokens per second, exact over stock", header, "-" * len(header)]
    for row in rows:
        lines.append(f"{row.acceptance:>6.2f} {100 * row.draft_cost:>9.0f}% {row.exact.speedup:>8.2f} "
                     f"{row.exact.draft_length:>3} {row.stock.speedup:>8.2f} {row.stock.draft_length:>3} "
                     f"{row.exact_over_stock:>12.3f}")
    return "\n".join(lines)


def bench_report(document: dict) -> dict:
    """The bench report itself, or the one a results file (benchmarks/record.py) keeps under "raw"."""
    if "results" not in document and isinstance(document.get("raw"), dict):
        for raw in document["raw"].values():
            if isinstance(raw, dict) and raw.get("tool") == "hiraishin-llama-bench":
                return raw
    return document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hiraishin_llama.speedup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", type=Path, help="a hiraishin-llama-bench JSON report")
    args = parser.parse_args(argv)
    try:
        report = bench_report(json.loads(args.report.read_text()))
        results = report["results"]
        for quant, result in results.items():
            print(f"{quant}:\n{render(speedup_table(result['verify']))}\n")
    except (OSError, json.JSONDecodeError) as error:
        print(f"{parser.prog}: error: cannot read {args.report}: {error}", file=sys.stderr)
        return 2
    except (KeyError, TypeError) as error:
        print(f"{parser.prog}: error: {args.report} is not a hiraishin-llama-bench report (missing {error})",
              file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"{parser.prog}: error: {args.report}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
