#!/usr/bin/env bash
# Builds upstream's llama-simple (plain greedy decoding, one token per decode
# call) against an installed hiraishin-llama wheel, twice: as upstream writes
# it (the whole prompt in one batch) and with llama-simple-split-prompt.diff
# (all prompt tokens but the last in one batch, then the last alone, as
# llama-speculative-simple processes a prompt). spec_vs_greedy.py --simple
# compares both with llama-speculative-simple.
#
#   build_llama_simple.sh LLAMA_CPP_SOURCE PYTHON OUT_DIR
#
# LLAMA_CPP_SOURCE: the llama.cpp tree the wheel was built from (the sdist's
# llama.cpp/ or the work tree); PYTHON: the venv's python with the wheel.
set -euo pipefail
src=$1 python=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
pkg=$("$python" -c 'import hiraishin_llama, pathlib; print(pathlib.Path(hiraishin_llama.__file__).parent)')
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/examples/simple"
cp "$src/examples/simple/simple.cpp" "$tmp/examples/simple/simple.cpp"
build() {
    "${CXX:-g++}" -O2 -std=c++17 "$tmp/examples/simple/simple.cpp" -I"$pkg/include" -L"$pkg/lib" \
        -lllama -lggml -lggml-base -Wl,-rpath,"$pkg/lib" -o "$out/$1"
}
build llama-simple
patch -s -p1 -d "$tmp" < "$here/llama-simple-split-prompt.diff"
build llama-simple-split-prompt
# ggml loads its backends from the executable's directory or the current one:
# the runs use the package's bin/ as their working directory.
echo "$pkg/bin" > "$out/backend-dir"
ls -l "$out"
