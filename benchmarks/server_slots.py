"""Does a request's greedy text depend on the requests beside it? llama-server with several slots.

    python3 benchmarks/server_slots.py --venv VENV --model M.gguf [--slots 4] [--prompts 8] [--n-predict 200]
        [--switch on|off|both] [--draft] [--kv-unified on|off] [--json report.json]

For each switch state, the llama-server of VENV (a venv with hiraishin-llama installed) answers every prompt
twice: first alone (``-np 1``, one request after the other: the reference), then with ``-np SLOTS`` and SLOTS
client threads sending the prompts at once, so that continuous batching puts the requests' prompts and
generated tokens into shared batches (a thread starts its next request as soon as its last one ends, so one
slot prefills while others generate). Requests are greedy (temperature 0, top_k 1) with ``cache_prompt``
false. Each concurrent request's tokens are compared with its reference; the guarantee this measures
(one request independent of the others, issue "several server slots") holds when every one is identical.

With ``--draft`` both servers draft with the model itself (``-md M --spec-type draft-simple``). Where a
GPU device is registered, the server in batch-invariant mode warns that ``-np`` above 1 is not covered;
on the CPU backend (stack revision 27) it is, and this script is the measurement behind it.

    python3 benchmarks/server_slots.py --venv VENV --model M.gguf --throughput 1,2,4,8 [--requests-per-slot 2]

measures instead what exactness costs a shared server: for each N, each switch state and each of drafting off
and on, one ``llama-server -np N`` answers N x --requests-per-slot greedy requests (the prompts in turn) from N
client threads, and the report gives the generated tokens per second over all slots, from the first request
sent to the last answer (server start-up left out), with exact/stock per N and whether exact decoding with
drafts beats stock decoding without them, and each drafting run's acceptance (drafted tokens the target kept).
The report is written after every server (``complete`` false until the last), so a run cut short by a time limit
or a failing server keeps what it measured.

The drafting servers draft with --draft-model, or with the model itself. A model drafting for itself has every
draft accepted but costs a target's step per drafted token, so those runs measure what exactness costs a server
that drafts, not what drafting gains: that needs a draft much cheaper than the target which agrees with it often.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import platform
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from hiraishin_build.smoke import llama_server  # noqa: E402
from server_exact import (DRAFT_ARGS, PROMPTS, PROMPTS_TEMPLATE, QUESTIONS, SWITCH_ENV, Answer, complete,  # noqa: E402
                          get_json, report_header, token_range)


# Context cells a slot gets, as server_exact.py's one-slot server has: a prompt and 200 tokens fit, a long
# prompt (long_prompt) included.
CTX_PER_SLOT = 2048

# The long prompts' document: notes on the subject of the question, varied enough that a tokenizer makes one to
# two tokens of each word.
NOTE_SUBJECTS = ("the first record", "an early account", "a later survey", "a disputed claim", "the main source",
                 "a careful reader", "the oldest copy", "a modern study")
NOTE_VERBS = ("describes", "questions", "corrects", "repeats", "extends", "doubts", "confirms", "summarises")
NOTE_OBJECTS = ("the order of events", "the numbers involved", "the people who took part", "the tools they used",
                "the places it happened", "what came before it", "what followed from it", "why it mattered")


def long_prompt(question: str, notes: int = 36) -> str:
    """A chat prompt of about 1,400 SmolLM2 tokens (48 notes made 1,858): ``notes`` numbered notes, then ``question`` about them. A slot
    prefills it over several ubatches while the other slots generate and draft, as a long agentic context does
    beside short chats."""
    lines = [f"Note {i + 1}: {NOTE_SUBJECTS[i % 8]} {NOTE_VERBS[(i // 8 + i) % 8]} {NOTE_OBJECTS[(3 * i) % 8]}, "
             f"and adds that the evidence from year {1200 + 37 * i} points the same way as note {max(1, i - 2)}."
             for i in range(notes)]
    return PROMPTS_TEMPLATE.format(question="Here are my notes.\n" + "\n".join(lines) + "\n\nWith them in mind: "
                                   + question)


def with_long_prompts(questions: tuple[str, ...], count: int) -> tuple[str, ...]:
    """The prompts of ``questions``, every other one long for the first ``count`` pairs (long, short, long, ...):
    clients taking them in turn start long prefills beside short requests already generating."""
    return tuple(long_prompt(q) if i % 2 == 0 and i // 2 < count else PROMPTS_TEMPLATE.format(question=q)
                 for i, q in enumerate(questions))


def server_args(model: Path, slots: int, *, draft: bool, kv_unified: bool, extra: tuple[str, ...] = (),
                draft_model: Path | None = None) -> list[str]:
    """``draft_model``: what a drafting server drafts with (default: the model itself)."""
    args = ["-m", str(model), "-c", str(CTX_PER_SLOT * slots), "-np", str(slots), "-t", "2",
            "-kvu" if kv_unified else "-no-kvu", *extra]
    if draft:
        args += ["-md", str(draft_model or model), *DRAFT_ARGS]
    return args


def answers(venv: Path, args: list[str], env: dict[str, str], log: Path, prompts: tuple[str, ...], n_predict: int,
            clients: int, banned: tuple[int, ...] = ()) -> tuple[dict[int, Answer], dict]:
    """Every prompt's answer (by prompt number) from ``clients`` threads at once, each taking the next prompt
    not yet asked as soon as its last answer came. The run's ``requests_s`` is the time from the first request
    to the last answer, its ``tokens`` the tokens generated in it."""
    results: dict[int, Answer] = {}
    started = time.monotonic()
    with llama_server(venv, args, log, env=env) as (base, startup):
        slots = get_json(f"{base}/slots", 10)
        pending = list(range(len(prompts)))

        def client() -> None:
            while pending:
                try:
                    number = pending.pop(0)
                except IndexError:
                    return
                asked = time.monotonic()
                results[number] = Answer.from_response(complete(base, prompts[number], n_predict, 600.0, banned),
                                                       time.monotonic() - asked)

        requests_started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            for future in [pool.submit(client) for _ in range(clients)]:
                future.result()
        requests_s = time.monotonic() - requests_started
    return results, {"startup_s": startup, "seconds": round(time.monotonic() - started, 1),
                     "requests_s": requests_s, "tokens": sum(len(a.tokens) for a in results.values()),
                     "slots": len(slots or []), "speculative": bool(slots and slots[0].get("speculative")),
                     "draft_n": sum(a.draft_n for a in results.values()),
                     "draft_n_accepted": sum(a.draft_n_accepted for a in results.values())}


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def switch_state(venv: Path, model: Path, log_dir: Path, *, switch_on: bool, slots: int, prompts: tuple[str, ...],
                 n_predict: int, draft: bool, kv_unified: bool, extra: tuple[str, ...] = (),
                 banned: tuple[int, ...] = ()) -> dict:
    name = "on" if switch_on else "off"
    env = SWITCH_ENV[switch_on]
    alone, alone_run = answers(venv, server_args(model, 1, draft=draft, kv_unified=kv_unified, extra=extra),
                               env, log_dir / f"alone-{name}.log", prompts, n_predict, clients=1, banned=banned)
    shared, shared_run = answers(venv, server_args(model, slots, draft=draft, kv_unified=kv_unified, extra=extra),
                                 env, log_dir / f"slots{slots}-{name}.log", prompts, n_predict, clients=slots,
                                 banned=banned)
    rows = []
    for number in range(len(prompts)):
        reference, other = alone[number].tokens, shared[number].tokens
        diff = first_difference(reference, other)
        rows.append({"prompt": number, "identical": diff is None, "first_diff_token": diff,
                     "tokens": [len(reference), len(other)]})
    return {"alone": alone_run, "shared": shared_run, "per_prompt": rows,
            "identical": sum(row["identical"] for row in rows), "compared": len(rows)}


def throughput(venv: Path, model: Path, log_dir: Path, *, counts: list[int], switches: tuple[str, ...],
               prompts: tuple[str, ...], requests_per_slot: int, n_predict: int, kv_unified: bool,
               extra: tuple[str, ...] = (), banned: tuple[int, ...] = (), draft_model: Path | None = None,
               after_each_run: Callable[[dict], None] | None = None) -> dict:
    """Tokens per second over all slots of ``llama-server -np N`` with N clients, for each N, switch state and
    drafting off and on (with ``draft_model``, default the model itself); then exact/stock per N and drafting,
    and exact with drafts against stock without. ``after_each_run`` gets the result so far (``complete`` false
    until the last run), so a run stopped by a time limit keeps the servers it measured."""
    runs: list[dict] = []

    def result(complete: bool) -> dict:
        return {"runs": runs, "summary": ratios(runs, counts), "requests_per_slot": requests_per_slot,
                "draft_model": draft_model.name if draft_model else None, "complete": complete}

    for n in counts:
        # the prompts in turn, as many requests as N clients take requests_per_slot times each
        workload = tuple(prompts[i % len(prompts)] for i in range(n * requests_per_slot))
        for draft in (False, True):
            for name in switches:
                label = f"np{n}-{'draft' if draft else 'plain'}-{name}"
                _, run = answers(venv, server_args(model, n, draft=draft, kv_unified=kv_unified, extra=extra,
                                                   draft_model=draft_model),
                                 SWITCH_ENV[name == "on"], log_dir / f"{label}.log", workload, n_predict, clients=n,
                                 banned=banned)
                tokens_per_s = run["tokens"] / run["requests_s"] if run["requests_s"] > 0 else 0.0
                drafted = run.get("draft_n", 0)
                run["acceptance"] = round(run.get("draft_n_accepted", 0) / drafted, 3) if drafted else None
                # "slots" is the -np asked for; the count the server's /slots listed is kept beside it
                run["server_slots"] = run.pop("slots")
                runs.append({**run, "slots": n, "draft": draft, "switch": name, "requests": len(workload),
                             "tokens_per_s": round(tokens_per_s, 2)})
                accepted = f", {run['acceptance']:.0%} of {drafted} drafted accepted" if drafted else ""
                print(f"-np {n} {'draft' if draft else 'plain'} switch {name}: {run['tokens']} tokens in "
                      f"{run['requests_s']:.2f} s, {tokens_per_s:.1f} tokens/s{accepted}", flush=True)
                if after_each_run:
                    after_each_run(result(False))
    return result(True)


def ratios(runs: list[dict], counts: list[int]) -> list[dict]:
    """Per slot count: exact over stock without and with drafts, and exact with drafts over stock without
    (None where a run of the pair is missing)."""
    rate = {(r["slots"], r["draft"], r["switch"]): r["tokens_per_s"] for r in runs}
    summary = []
    for n in counts:
        row: dict = {"slots": n}
        for draft in (False, True):
            exact, stock = rate.get((n, draft, "on")), rate.get((n, draft, "off"))
            row["exact_over_stock_" + ("draft" if draft else "plain")] = (
                round(exact / stock, 3) if exact and stock else None)
        exact_draft, stock_plain = rate.get((n, True, "on")), rate.get((n, False, "off"))
        row["exact_draft_over_stock_plain"] = round(exact_draft / stock_plain, 3) if exact_draft and stock_plain else None
        summary.append(row)
    return summary


def counts_of(text: str) -> list[int]:
    """--throughput's slot counts: a comma list of 1 to 8 each, in the order given, no repeats."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"{text}: give slot counts separated by commas, e.g. 1,2,4,8") from None
    bad = [n for n in counts if not 1 <= n <= 8]
    if bad or len(set(counts)) != len(counts):
        raise ValueError(f"{text}: each slot count once, from 1 to 8")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--slots", type=int, default=4, help="-np and client threads of the shared server (2..8)")
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--n-predict", type=int, default=200)
    parser.add_argument("--long-prompts", type=int, default=0, metavar="K",
                        help="make K prompts long (about 1,400 tokens), interleaved with short ones: prompts 0, 2, "
                             "... 2K-2")
    parser.add_argument("--switch", choices=("on", "off", "both"), default="both")
    parser.add_argument("--draft", action="store_true", help="both servers draft with the model itself")
    parser.add_argument("--kv-unified", choices=("on", "off"), default="on",
                        help="one KV cache for all slots (-kvu, the server's default for several slots) or one each")
    parser.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                        help="one more llama-server argument for both servers (repeat it), e.g. --server-arg=-ub "
                             "--server-arg=16")
    parser.add_argument("--ban-tokens", metavar="FIRST-LAST",
                        help="token ids no request may generate (logit_bias), e.g. 3-258 for a synthetic model's "
                             "byte tokens, which the server's reply parser refuses alone")
    parser.add_argument("--throughput", metavar="N,N,...",
                        help="measure tokens/s over all slots for these -np values (1 to 8), each switch state, "
                             "drafting off and on, instead of comparing requests")
    parser.add_argument("--requests-per-slot", type=int, default=2,
                        help="with --throughput: requests each client sends (default 2)")
    parser.add_argument("--draft-model", type=Path,
                        help="with --throughput: what the drafting servers draft with (default: the model itself, "
                             "whose drafts cost a target's step each, so drafting cannot gain)")
    parser.add_argument("--log-dir", type=Path, default=Path("server-slots-logs"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--device", default=f"{platform.machine()}, {platform.processor() or 'cpu'}")
    args = parser.parse_args()
    if not 2 <= args.slots <= 8:
        parser.error(f"--slots {args.slots}: give 2 to 8")
    if not 1 <= args.prompts <= len(PROMPTS):
        parser.error(f"--prompts {args.prompts}: give 1 to {len(PROMPTS)}")
    if args.requests_per_slot < 1:
        parser.error(f"--requests-per-slot {args.requests_per_slot}: give 1 or more")
    if args.draft_model is not None and not args.throughput:
        parser.error("--draft-model goes with --throughput; the comparison runs (--draft) draft with the model itself")
    if args.draft_model is not None and not args.draft_model.is_file():
        parser.error(f"--draft-model {args.draft_model}: no such file")
    try:
        banned = token_range(args.ban_tokens) if args.ban_tokens else ()
    except ValueError as error:
        parser.error(f"--ban-tokens {error}")
    try:
        counts = counts_of(args.throughput) if args.throughput else []
    except ValueError as error:
        parser.error(f"--throughput {error}")
    args.log_dir.mkdir(parents=True, exist_ok=True)
    if not 0 <= args.long_prompts <= (args.prompts + 1) // 2:
        parser.error(f"--long-prompts {args.long_prompts}: give 0 to {(args.prompts + 1) // 2} (every other prompt "
                     f"of --prompts {args.prompts})")
    prompts = with_long_prompts(QUESTIONS[:args.prompts], args.long_prompts)
    switches = ("on", "off") if args.switch == "both" else (args.switch,)
    header = {**report_header("benchmarks/server_slots.py", args.venv, args.device),
              "model": args.model.name, "server_args": args.server_arg, "banned_tokens": args.ban_tokens,
              "kv_unified": args.kv_unified, "n_predict": args.n_predict, "long_prompts": args.long_prompts}
    if counts:
        def write(result: dict) -> None:
            # written aside and renamed, so a kill in the middle of a write leaves the last whole report
            if args.json:
                partial = args.json.with_name(args.json.name + ".partial")
                partial.write_text(json.dumps({**header, "throughput": result}, indent=1) + "\n")
                partial.replace(args.json)

        result = throughput(args.venv, args.model, args.log_dir, counts=counts, switches=switches, prompts=prompts,
                            requests_per_slot=args.requests_per_slot, n_predict=args.n_predict,
                            kv_unified=args.kv_unified == "on", extra=tuple(args.server_arg), banned=banned,
                            draft_model=args.draft_model, after_each_run=write)
        for row in result["summary"]:
            print(f"-np {row['slots']}: exact/stock {row['exact_over_stock_plain']} plain, "
                  f"{row['exact_over_stock_draft']} with drafts; exact with drafts / stock without "
                  f"{row['exact_draft_over_stock_plain']}", flush=True)
        write(result)
        return
    states = {}
    for name in switches:
        states[name] = switch_state(args.venv, args.model, args.log_dir, switch_on=name == "on", slots=args.slots,
                                    prompts=prompts, n_predict=args.n_predict, draft=args.draft,
                                    kv_unified=args.kv_unified == "on", extra=tuple(args.server_arg), banned=banned)
        print(f"switch {name}: {states[name]['identical']}/{states[name]['compared']} requests identical to their "
              f"-np 1 run; first differing tokens {[r['first_diff_token'] for r in states[name]['per_prompt']]}",
              flush=True)
    report = {**header, "slots": args.slots, "draft": args.draft, "states": states}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
