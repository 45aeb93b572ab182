"""Does a request's greedy text depend on the prefix its slot kept from the request before? llama-server with
``cache_prompt``.

    python3 benchmarks/server_prefix.py --venv VENV --model M.gguf [--prompts 8] [--n-predict 200]
        [--switch on|off|both] [--draft] [--ban-tokens FIRST-LAST] [--server-arg=ARG ...] [--json report.json]

For each switch state one llama-server of VENV (``-np 1``, the server's default batch sizes) answers every
prompt twice, one request after the other: first with ``cache_prompt`` true, so that each request reuses the
system-message prefix the previous request left in the slot's KV cache and processes only the rest of its
prompt (the response's ``timings.cache_n`` says how many tokens it reused), then with ``cache_prompt`` false, so
that each processes its whole prompt from an empty cache (the reference). The prompts share SmolLM2-Instruct's
chat template and one system message; they differ in the question. The guarantee this measures (issue "several
server slots", part 2) holds when every reusing request gives its reference's tokens: the prompt's KV then does
not depend on how the prompt was cut into batches.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from hiraishin_build.smoke import llama_server  # noqa: E402
from server_exact import PROMPTS, SWITCH_ENV, complete, report_header, server_args, token_range  # noqa: E402
from server_slots import first_difference  # noqa: E402


def switch_state(venv: Path, model: Path, log_dir: Path, *, switch_on: bool, prompts: tuple[str, ...],
                 n_predict: int, draft: bool, extra: tuple[str, ...] = (), banned: tuple[int, ...] = ()) -> dict:
    """``extra``: more llama-server arguments (``-ngl 99`` on a GPU); ``banned``: token ids no request may
    sample, as server_slots.py's --ban-tokens."""
    name = "on" if switch_on else "off"
    args = server_args(model, draft=draft, extra=extra)
    started = time.monotonic()
    with llama_server(venv, args, log_dir / f"prefix-{name}.log", env=SWITCH_ENV[switch_on]) as (base, _):
        reusing = [complete(base, prompt, n_predict, 600.0, banned, cache_prompt=True) for prompt in prompts]
        fresh = [complete(base, prompt, n_predict, 600.0, banned, cache_prompt=False) for prompt in prompts]
    rows = []
    for number, (reused, reference) in enumerate(zip(reusing, fresh)):
        diff = first_difference(reference["tokens"], reused["tokens"])
        rows.append({"prompt": number, "identical": diff is None, "first_diff_token": diff,
                     "cache_n": (reused.get("timings") or {}).get("cache_n"),
                     "prompt_n": (reused.get("timings") or {}).get("prompt_n"),
                     "tokens": [len(reference["tokens"]), len(reused["tokens"])]})
    return {"seconds": round(time.monotonic() - started, 1), "per_prompt": rows,
            "reused_prefix": sum(bool(row["cache_n"]) for row in rows),
            "identical": sum(row["identical"] for row in rows), "compared": len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--n-predict", type=int, default=200)
    parser.add_argument("--switch", choices=("on", "off", "both"), default="both")
    parser.add_argument("--draft", action="store_true", help="the server drafts with the model itself")
    parser.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                        help="one more llama-server argument (repeat; --server-arg=-ngl --server-arg=99 on a GPU)")
    parser.add_argument("--ban-tokens", metavar="FIRST-LAST",
                        help="token ids no request may sample, e.g. 3-258 (a synthetic model's byte tokens, whose "
                             "lone pieces the server's reply parser refuses)")
    parser.add_argument("--log-dir", type=Path, default=Path("server-prefix-logs"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--device", default=f"{platform.machine()}, {platform.processor() or 'cpu'}")
    args = parser.parse_args()
    if not 2 <= args.prompts <= len(PROMPTS):
        parser.error(f"--prompts {args.prompts}: give 2 to {len(PROMPTS)} (the first request has no prefix to reuse)")
    try:
        banned = token_range(args.ban_tokens) if args.ban_tokens else ()
    except ValueError as error:
        parser.error(f"--ban-tokens {error}")
    args.log_dir.mkdir(parents=True, exist_ok=True)
    states = {}
    for name in (("on", "off") if args.switch == "both" else (args.switch,)):
        states[name] = switch_state(args.venv, args.model, args.log_dir, switch_on=name == "on",
                                    prompts=PROMPTS[:args.prompts], n_predict=args.n_predict, draft=args.draft,
                                    extra=tuple(args.server_arg), banned=banned)
        state = states[name]
        print(f"switch {name}: {state['identical']}/{state['compared']} requests identical to their empty-cache "
              f"run ({state['reused_prefix']} reused a cached prefix); first differing tokens "
              f"{[r['first_diff_token'] for r in state['per_prompt']]}", flush=True)
    report = {**report_header("benchmarks/server_prefix.py", args.venv, args.device),
              "model": args.model.name, "draft": args.draft, "n_predict": args.n_predict,
              "server_args": args.server_arg, "banned_tokens": args.ban_tokens, "states": states}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
