#!/usr/bin/env bash
# The build job of one recipe: its wheel from the run's sdist.
#   ci/build-wheel.sh RECIPE SDIST    (SDIST: the .tar.gz, or the directory holding exactly one)
# `hiraishin doctor --recipe` runs first and ends the job (exit 11, saying what
# is missing and how to get it) before anything is unpacked or compiled when
# this machine cannot build the recipe. The sdist is unpacked beside itself and
# built in place, so source and build paths stay the same from run to run and
# ccache (used when on PATH) hits. The repaired wheel lands in
# <sdist dir>/wheels/RECIPE/.
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
[[ $# == 2 ]] || die 2 "usage: ci/build-wheel.sh RECIPE SDIST"
recipe=$1
sdist=$(abspath "$2")
cd "$ROOT"
require_hiraishin

if [[ -d "$sdist" ]]; then
  shopt -s nullglob
  found=("$sdist"/hiraishin_llama-*.tar.gz)
  shopt -u nullglob
  [[ ${#found[@]} == 1 ]] || die 2 "$sdist holds ${#found[@]} hiraishin_llama-*.tar.gz files, not one (make it with ci/sdist.sh)"
  sdist=${found[0]}
fi
[[ -f "$sdist" ]] || die 2 "no sdist at $sdist (make it with ci/sdist.sh)"

group "doctor: can this machine build $recipe?"
hiraishin doctor --recipe "$recipe"
endgroup

dist=$(dirname "$sdist")
source_dir="$dist/$(basename "$sdist" .tar.gz)"
group "unpacking $(basename "$sdist")"
rm -rf "$source_dir"
tar -xzf "$sdist" -C "$dist"
[[ -f "$source_dir/pyproject.toml" ]] || die 8 "$sdist did not unpack to $source_dir/pyproject.toml"
endgroup

if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-2G}"
  ccache --zero-stats >/dev/null
fi

jobs=$(nproc 2>/dev/null || echo 2)
# --manylinux recipe: built in the recipe's manylinux image, a wheel above its floor fails here
hiraishin -v wheel --recipe "$recipe" --sdist "$source_dir" -j "$jobs" --manylinux recipe

if command -v ccache >/dev/null; then
  group "ccache"
  ccache --show-stats
  endgroup
fi
ls -l "$dist/wheels/$recipe/"*.whl
