#!/usr/bin/env bash
# The smoke job of one wheel, as a user installs it: the wheel's own PEP 503
# index (hiraishin index), a fresh venv, `pip install 'hiraishin-llama[<extra>]'`
# from that index (the NVIDIA runtime wheels of a CUDA variant and the other
# dependencies from PyPI, or $HIRAISHIN_DEPS_INDEX), then
# `hiraishin-llama --version` and `hiraishin-llama-smoke`. Arguments after the
# wheel go to the smoke test. A CUDA wheel needs a GPU of its architecture.
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

# hiraishin_llama-9079.4+cu13.sm90-py3-none-manylinux_2_35_x86_64.whl
name=$(basename "$wheel")
version=${name#hiraishin_llama-}
version=${version%%-*}
[[ "$version" == *+* ]] || die 2 "$name has no variant label (+cpu, +cu13.sm90): not a wheel from hiraishin wheel"
label=${version#*+}
variant=${label//./-}
extra=""
if [[ "$label" == cu* ]]; then
  extra="[${label%%.*}]"
fi

work=$(abspath "${HIRAISHIN_SMOKE_DIR:-$(dirname "$wheel")/smoke}")
rm -rf "$work"
mkdir -p "$work"

group "index of $name"
hiraishin index "$(dirname "$wheel")" --out "$work/site"
endgroup

group "pip install 'hiraishin-llama$extra==$version' into a fresh venv"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip install "hiraishin-llama$extra==$version" \
  --index-url "file://$work/site/$variant/simple" \
  --extra-index-url "${HIRAISHIN_DEPS_INDEX:-https://pypi.org/simple}"
endgroup

"$work/venv/bin/hiraishin-llama" --version
"$work/venv/bin/hiraishin-llama-smoke" --json "$work/smoke.json" "$@"
echo "smoke report: $work/smoke.json"
