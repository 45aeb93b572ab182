"""``hiraishin-llama``: what this installation is and what it runs on."""

from __future__ import annotations

import json
import sys

from . import __version__, _launch, runtime
from ._args import ArgumentParser


def main(argv: list[str] | None = None) -> int | None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["coverage"]:
        # `hiraishin-llama coverage MODEL.gguf`, the same as hiraishin-llama-coverage
        from . import coverage
        return coverage.main(argv[1:], prog="hiraishin-llama coverage")
    # The wheel's own parser: a usage error is one line, as in its other programs.
    parser = ArgumentParser(prog="hiraishin-llama", description=__doc__,
                            epilog="hiraishin-llama coverage MODEL.gguf says whether batch-invariant mode covers a "
                                   "model (as hiraishin-llama-coverage)")
    parser.add_argument("--version", action="store_true", help="print the version and build information")
    parser.add_argument("--json", action="store_true", help="print it as JSON")
    args = parser.parse_args(argv)
    build = runtime.build_info()
    info = {"version": __version__, **build,
            # stack.json lists the backends the patch stack makes exact, the same for every wheel of the
            # stack; this wheel is exact only on those of them it was built with.
            "backends": runtime.built_backends(), "exact_backends": runtime.exact_backends(),
            "stack_exact_backends": build.get("exact_backends", []),
            "gpus": [gpu.__dict__ for gpu in runtime.gpus()], "warnings": runtime.environment_warnings(),
            # the worker of a model split across machines (llama-server --rpc HOST:PORT,...), where built
            "rpc_server": (_launch.BIN_DIR / _launch.RPC_SERVER).is_file()}
    if args.json:
        print(json.dumps(info, indent=2))
        return
    print(f"hiraishin-llama {__version__}")
    upstream = info.get("upstream", {})
    if upstream:
        print(f"upstream: {upstream.get('url')} {upstream.get('ref')} ({upstream.get('commit', '')[:12]})")
    patches = info.get("patches", [])
    if info.get("patched_commit"):
        # The commit the wheel is built from: the upstream commit with the patches below applied
        # (the same one `hiraishin-replay --version` and llama.cpp's own --version name).
        count = f"{len(patches)} patch" + ("" if len(patches) == 1 else "es")
        print(f"commit:   {info['patched_commit']} (upstream {upstream.get('commit', '')[:12]} + {count})")
    for patch in patches:
        # A hash of the patch file as shipped in patches/, not a commit.
        print(f"patch:    file sha256 {patch['sha256'][:12]}  {patch['subject']}")
    for name in info.get("omitted_patches", []):
        print(f"warning:  built WITHOUT {name} (a fault build, not a release)")
    for key in ("recipe", "cuda", "cuda_architectures", "cxx_compiler", "cmake"):
        if info.get(key):
            print(f"{key + ':':<9} {info[key]}")
    exact = ", ".join(info["exact_backends"]) or "none"
    print(f"backends: {', '.join(info['backends'])} (bit-exact verify batches: {exact})")
    if info["rpc_server"]:
        print("rpc:      rpc-server (a worker for --rpc HOST:PORT; a batch-invariant client refuses a worker "
              "whose mode is off)")
    for gpu in info["gpus"]:
        print(f"gpu:      {gpu['name']} (compute capability {gpu['compute_capability']})")
    for warning in info["warnings"]:
        print(f"warning:  {warning}")


if __name__ == "__main__":
    main()
