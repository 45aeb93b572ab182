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
        --n-predict 600 --prompts 4 --json report.json [--expect identical|differ]

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


def speculative(model: Path, draft: Path, text: str, n_predict: int, ctx: int, draft_max: int,
                draft_min: int = 0) -> tuple[str, dict]:
    run = subprocess.run(
        ["llama-speculative-simple", "-m", str(model), "-md", str(draft), "-p", text, "-n", str(n_predict),
         "-c", str(ctx), "-cd", str(ctx), "-ngl", "99", "-ngld", "99", "-fa", "on", "--temp", "0", "--top-k", "1",
         "--draft-max", str(draft_max), "--draft-min", str(draft_min), "--draft-p-min", "0.0"],
        capture_output=True)
    # the generated text need not be valid UTF-8: keep its exact bytes
    stdout = run.stdout.decode("utf-8", errors="surrogateescape")
    stderr = run.stderr.decode("utf-8", errors="replace")
    if run.returncode != 0:
        raise SystemExit(f"llama-speculative-simple failed ({run.returncode}):\n{stderr[-3000:]}")
    # it prints the prompt, then the generated text, then two newlines
    start = stdout.find(text)
    generated = stdout[start + len(text):] if start >= 0 else stdout
    stats = {}
    for line in stderr.splitlines():
        for key in ("n_draft", "n_predict", "n_drafted", "n_accept", "accept"):
            if line.strip().startswith(key + " ") or line.strip().startswith(key + "\t"):
                stats[key] = line.split("=", 1)[-1].strip()
    return generated.rstrip("\n"), stats


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
    args = ap.parse_args()

    texts = prompts(args.prompts, args.seed)
    reference = []
    for text in texts:
        generated, stats = speculative(args.model, args.model, text, args.n_predict, args.ctx, args.draft_max,
                                       draft_min=args.draft_max + 1000)
        if stats.get("n_drafted") not in (None, "0"):
            raise SystemExit(f"drafting was not disabled for the reference: {stats}")
        reference.append(generated)
    runs = []
    for draft in args.draft:
        for i, text in enumerate(texts):
            generated, stats = speculative(args.model, draft, text, args.n_predict, args.ctx, args.draft_max)
            ref = reference[i]
            n = min(len(ref), len(generated))
            first_diff = next((k for k in range(n) if ref[k] != generated[k]), None)
            runs.append({"draft": draft.name, "prompt": i, "reference_chars": len(ref), "speculative_chars": len(generated),
                         "compared_chars": n, "identical": first_diff is None and n > 0,
                         "first_differing_char": first_diff, "stats": stats})
            print(f"draft {draft.name} prompt {i}: {'identical' if first_diff is None else f'differs at char {first_diff}'} "
                  f"over {n} chars; {stats}", flush=True)
    identical = all(r["identical"] for r in runs)
    report = {"tool": "spec_vs_greedy.py", "reference": "no-draft decoding", "model": args.model.name,
              "n_predict": args.n_predict,
              "draft_max": args.draft_max, "switch": {k: os.environ.get(k) for k in
                                                      ("GGML_BATCH_INVARIANT", "GGML_CUDA_BATCH_INVARIANT")},
              "expect": args.expect, "all_identical": identical, "runs": runs}
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    ok = identical if args.expect == "identical" else not identical
    print(f"{'PASS' if ok else 'FAIL'}: {sum(r['identical'] for r in runs)}/{len(runs)} identical (expected {args.expect})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
