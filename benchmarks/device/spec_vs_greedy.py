"""Does the wheel's llama-speculative-simple print the text plain greedy decoding gives?

llama-speculative-simple decodes each prompt with a draft model (the target
itself, so every verify batch is full, or a small model sharing the
vocabulary) and greedy sampling. Its text must equal plain greedy decoding of
the same prompt, character for character, over the text both produced. The
reference is the same program with drafting disabled (--draft-min above
--draft-max clears every draft), i.e. one token per decode call, as
llama-simple decodes. (llama-server's /completion cannot be the reference for
synthetic models: it answers 500 "Failed to parse input" as soon as the
generated text is not valid UTF-8, which random weights produce.)

    python3 spec_vs_greedy.py --model TARGET.gguf --draft DRAFT.gguf [--draft TARGET.gguf] \
        --n-predict 600 --prompts 4 --json report.json [--expect identical|differ] \
        [--simple BIN --backend-dir DIR]

--simple adds upstream's llama-simple (built against the wheel by
benchmarks/reference/build_llama_simple.sh) as a second plain-greedy program:
its text is compared with the no-draft reference and reported, without
entering the verdict. llama-simple decodes the whole prompt in one batch,
llama-speculative-simple all of it but the last token and then that token
alone; a prompt batch of more than 16 tokens runs the stock kernels, so the
two can start generating from different KV values. The split-prompt build
of llama-simple processes the prompt as llama-speculative-simple does.

Uses the console scripts on PATH (a venv with hiraishin-llama installed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path


def prompts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = "the of and a to in is was that for on with as by at from his her they this which".split()
    return [" ".join(rng.choice(words) for _ in range(48)) for _ in range(n)]


def generated_text(stdout: bytes, prompt: str) -> str:
    """The text after the echoed prompt (both programs print the prompt, the text, then newlines),
    kept byte for byte: it need not be valid UTF-8."""
    printed = stdout.decode("utf-8", errors="surrogateescape")
    start = printed.find(prompt)
    return (printed[start + len(prompt):] if start >= 0 else printed).rstrip("\n")


def speculative(model: Path, draft: Path, text: str, n_predict: int, ctx: int, draft_max: int,
                draft_min: int = 0, threads: int | None = None) -> tuple[str, dict]:
    # On the CPU the thread count changes how a query's KV range is split, so
    # programs compared with each other must use the same count.
    thread_args = ["-t", str(threads), "-tb", str(threads)] if threads else []
    run = subprocess.run(
        ["llama-speculative-simple", "-m", str(model), "-md", str(draft), "-p", text, "-n", str(n_predict),
         "-c", str(ctx), "-ngl", "99", "-ngld", "99", "-fa", "on", "--temp", "0", "--top-k", "1",
         "--draft-max", str(draft_max), "--draft-min", str(draft_min), "--draft-p-min", "0.0", *thread_args],
        capture_output=True)
    stderr = run.stderr.decode("utf-8", errors="replace")
    if run.returncode != 0:
        raise SystemExit(f"llama-speculative-simple failed ({run.returncode}):\n{stderr[-3000:]}")
    stats = {}
    for line in stderr.splitlines():
        for key in ("n_draft", "n_predict", "n_drafted", "n_accept", "accept"):
            if line.strip().startswith(key + " ") or line.strip().startswith(key + "\t"):
                stats[key] = line.split("=", 1)[-1].strip()
    return generated_text(run.stdout, text), stats


def simple(binary: Path, backend_dir: Path | None, model: Path, text: str, n_predict: int) -> str:
    run = subprocess.run([str(binary), "-m", str(model), "-n", str(n_predict), "-ngl", "99", text],
                         capture_output=True, cwd=backend_dir)
    if run.returncode != 0:
        raise SystemExit(f"{binary} failed ({run.returncode}):\n{run.stderr.decode('utf-8', 'replace')[-3000:]}")
    return generated_text(run.stdout, text)


def first_difference(a: str, b: str) -> tuple[int | None, int]:
    n = min(len(a), len(b))
    return next((k for k in range(n) if a[k] != b[k]), None), n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--draft", type=Path, action="append", required=True, help="draft model (repeatable)")
    ap.add_argument("--n-predict", type=int, default=600)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--draft-max", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--expect", choices=["identical", "differ"], default="identical")
    ap.add_argument("--simple", type=Path, action="append", default=[],
                    help="a llama-simple binary to compare with the no-draft reference (repeatable)")
    ap.add_argument("--threads", type=int,
                    help="CPU threads of llama-speculative-simple (llama-simple always uses 4: pass 4 on the CPU)")
    ap.add_argument("--backend-dir", type=Path,
                    help="where --simple binaries find ggml's backends (the package's bin/); their working directory")
    args = ap.parse_args()

    texts = prompts(args.prompts, args.seed)
    reference = []
    for text in texts:
        generated, stats = speculative(args.model, args.model, text, args.n_predict, args.ctx, args.draft_max,
                                       draft_min=args.draft_max + 1000, threads=args.threads)
        if stats.get("n_drafted") not in (None, "0"):
            raise SystemExit(f"drafting was not disabled for the reference: {stats}")
        reference.append(generated)
    runs = []
    for draft in args.draft:
        for i, text in enumerate(texts):
            generated, stats = speculative(args.model, draft, text, args.n_predict, args.ctx, args.draft_max,
                                           threads=args.threads)
            ref = reference[i]
            first_diff, n = first_difference(ref, generated)
            runs.append({"draft": draft.name, "prompt": i, "reference_chars": len(ref), "speculative_chars": len(generated),
                         "compared_chars": n, "identical": first_diff is None and n > 0,
                         "first_differing_char": first_diff, "stats": stats})
            print(f"draft {draft.name} prompt {i}: {'identical' if first_diff is None else f'differs at char {first_diff}'} "
                  f"over {n} chars; {stats}", flush=True)
    simple_runs = []
    for binary in args.simple:
        for i, text in enumerate(texts):
            generated = simple(binary, args.backend_dir, args.model, text, args.n_predict)
            first_diff, n = first_difference(reference[i], generated)
            simple_runs.append({"program": binary.name, "prompt": i, "compared_chars": n,
                                "identical": first_diff is None and n > 0, "first_differing_char": first_diff})
            print(f"{binary.name} prompt {i}: {'identical to' if first_diff is None else f'differs at char {first_diff} from'} "
                  f"the no-draft reference over {n} chars", flush=True)
    identical = all(r["identical"] for r in runs)
    report = {"tool": "spec_vs_greedy.py", "reference": "no-draft decoding", "model": args.model.name,
              "n_predict": args.n_predict,
              "draft_max": args.draft_max, "threads": args.threads, "switch": {k: os.environ.get(k) for k in
                                                      ("GGML_BATCH_INVARIANT", "GGML_CUDA_BATCH_INVARIANT")},
              "expect": args.expect, "all_identical": identical, "runs": runs, "simple": simple_runs}
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    ok = identical if args.expect == "identical" else not identical
    print(f"{'PASS' if ok else 'FAIL'}: {sum(r['identical'] for r in runs)}/{len(runs)} identical (expected {args.expect})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
