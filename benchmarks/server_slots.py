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
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from hiraishin_build.smoke import llama_server  # noqa: E402
from server_exact import DRAFT_ARGS, PROMPTS, SWITCH_ENV, Answer, complete, get_json, report_header  # noqa: E402


# Context cells a slot gets, as server_exact.py's one-slot server has: a prompt and 200 tokens fit.
CTX_PER_SLOT = 2048


def server_args(model: Path, slots: int, *, draft: bool, kv_unified: bool, extra: tuple[str, ...] = ()) -> list[str]:
    args = ["-m", str(model), "-c", str(CTX_PER_SLOT * slots), "-np", str(slots), "-t", "2",
            "-kvu" if kv_unified else "-no-kvu", *extra]
    if draft:
        args += ["-md", str(model), *DRAFT_ARGS]
    return args


def answers(venv: Path, args: list[str], env: dict[str, str], log: Path, prompts: tuple[str, ...], n_predict: int,
            clients: int) -> tuple[dict[int, Answer], dict]:
    """Every prompt's answer (by prompt number) from ``clients`` threads at once, each taking the next prompt
    not yet asked as soon as its last answer came."""
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
                results[number] = Answer.from_response(complete(base, prompts[number], n_predict, 600.0),
                                                       time.monotonic() - asked)

        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            for future in [pool.submit(client) for _ in range(clients)]:
                future.result()
    return results, {"startup_s": startup, "seconds": round(time.monotonic() - started, 1),
                     "slots": len(slots or []), "speculative": bool(slots and slots[0].get("speculative"))}


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def switch_state(venv: Path, model: Path, log_dir: Path, *, switch_on: bool, slots: int, prompts: tuple[str, ...],
                 n_predict: int, draft: bool, kv_unified: bool, extra: tuple[str, ...] = ()) -> dict:
    name = "on" if switch_on else "off"
    env = SWITCH_ENV[switch_on]
    alone, alone_run = answers(venv, server_args(model, 1, draft=draft, kv_unified=kv_unified, extra=extra),
                               env, log_dir / f"alone-{name}.log", prompts, n_predict, clients=1)
    shared, shared_run = answers(venv, server_args(model, slots, draft=draft, kv_unified=kv_unified, extra=extra),
                                 env, log_dir / f"slots{slots}-{name}.log", prompts, n_predict, clients=slots)
    rows = []
    for number in range(len(prompts)):
        reference, other = alone[number].tokens, shared[number].tokens
        diff = first_difference(reference, other)
        rows.append({"prompt": number, "identical": diff is None, "first_diff_token": diff,
                     "tokens": [len(reference), len(other)]})
    return {"alone": alone_run, "shared": shared_run, "per_prompt": rows,
            "identical": sum(row["identical"] for row in rows), "compared": len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--slots", type=int, default=4, help="-np and client threads of the shared server (2..8)")
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--n-predict", type=int, default=200)
    parser.add_argument("--switch", choices=("on", "off", "both"), default="both")
    parser.add_argument("--draft", action="store_true", help="both servers draft with the model itself")
    parser.add_argument("--kv-unified", choices=("on", "off"), default="on",
                        help="one KV cache for all slots (-kvu, the server's default for several slots) or one each")
    parser.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                        help="one more llama-server argument for both servers (repeat it), e.g. --server-arg=-ub "
                             "--server-arg=16")
    parser.add_argument("--log-dir", type=Path, default=Path("server-slots-logs"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--device", default=f"{platform.machine()}, {platform.processor() or 'cpu'}")
    args = parser.parse_args()
    if not 2 <= args.slots <= 8:
        parser.error(f"--slots {args.slots}: give 2 to 8")
    args.log_dir.mkdir(parents=True, exist_ok=True)
    prompts = PROMPTS[:args.prompts]
    states = {}
    for name in (("on", "off") if args.switch == "both" else (args.switch,)):
        states[name] = switch_state(args.venv, args.model, args.log_dir, switch_on=name == "on", slots=args.slots,
                                    prompts=prompts, n_predict=args.n_predict, draft=args.draft,
                                    kv_unified=args.kv_unified == "on", extra=tuple(args.server_arg))
        print(f"switch {name}: {states[name]['identical']}/{states[name]['compared']} requests identical to their "
              f"-np 1 run; first differing tokens {[r['first_diff_token'] for r in states[name]['per_prompt']]}",
              flush=True)
    report = {**report_header("benchmarks/server_slots.py", args.venv, args.device),
              "model": args.model.name, "slots": args.slots, "server_args": args.server_arg, "draft": args.draft,
              "kv_unified": args.kv_unified, "n_predict": args.n_predict, "states": states}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
