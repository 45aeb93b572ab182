#!/usr/bin/env bash
# The smoke job of one wheel, as a user installs it (`hiraishin smoke
# --from-index`): the wheel's own PEP 503 index, a fresh venv,
# `pip install 'hiraishin-llama[<extra>]==<version>'` from that index (the NVIDIA
# runtime wheels of a CUDA variant and the other dependencies from PyPI, or
# $HIRAISHIN_DEPS_INDEX), then `hiraishin-llama --version` and
# `hiraishin-llama-smoke`. Arguments after the wheel go to the smoke test. A
# CUDA wheel needs a GPU of its architecture.
#   ci/smoke.sh WHEEL [SMOKE ARGS]    (WHEEL: the .whl, or the directory holding exactly one)
# The venv, index and report go to $HIRAISHIN_SMOKE_DIR (default: <wheel dir>/smoke).
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
[[ $# -ge 1 ]] || die 2 "usage: ci/smoke.sh WHEEL [SMOKE ARGS]"
wheel=$(abspath "$1")
shift
cd "$ROOT"
require_hiraishin

if [[ -d "$wheel" ]]; then
  shopt -s nullglob
  found=("$wheel"/hiraishin_llama-*.whl)
  shopt -u nullglob
  [[ ${#found[@]} == 1 ]] || die 2 "$wheel holds ${#found[@]} hiraishin_llama-*.whl files, not one"
  wheel=${found[0]}
fi
[[ -f "$wheel" ]] || die 2 "no wheel at $wheel"

work=$(abspath "${HIRAISHIN_SMOKE_DIR:-$(dirname "$wheel")/smoke}")
group "smoke test of $(basename "$wheel"), installed from its own index"
hiraishin smoke "$wheel" --from-index --out "$work" -- "$@"
endgroup
