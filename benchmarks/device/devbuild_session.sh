#!/usr/bin/env bash
# Runs the smoke test and the performance phases on the H200 against a development
# build of the patched tree made on another machine, for sessions whose GPU time
# does not hold a wheel build there (~5.5 min):
#
#   devbuild_session.sh setup     unpack build/devbuild.tar.xz and put the programs where
#                                 perf_session.sh and gpu_session.sh smoke look for them
#
# build/devbuild.tar.xz, made by benchmarks/device/pack_devbuild.sh, holds the CMake build's
# bin/ (libraries, hiraishin-replay) and llama-quantize at the absolute paths their RPATH
# names (/tmp/cuda-build), plus the sdist's stack.json and _version.py and the build's
# build_info.json, so hiraishin-llama-smoke judges the CUDA backend as it does for a wheel.
# After setup, /tmp/venv/bin holds hiraishin-replay, hiraishin-llama-smoke and
# hiraishin-llama-bench, running the build's binaries and this checkout's Python package.
set -uo pipefail
REPO=$PWD
DEV=/tmp/cuda-build
VENV=/tmp/venv
TOOLS=/tmp/devbin

case "${1:-}" in
setup)
    tar xJf build/devbuild.tar.xz -C / tmp || exit 1
    rm -rf /tmp/devmeta && mkdir -p /tmp/devmeta && tar xJf build/devbuild.tar.xz -C /tmp/devmeta meta || exit 1
    cp /tmp/devmeta/meta/*/hiraishin_llama/stack.json /tmp/devmeta/meta/*/hiraishin_llama/_version.py \
       /tmp/devmeta/meta/build_info.json wheels/hiraishin_llama/ || exit 1
    python3 -m pip install -q --no-index --no-deps --target /tmp/devsite .whl/gguf-*.whl || exit 1
    mkdir -p "$TOOLS" "$VENV/bin"
    ln -sf "$DEV/bin/hiraishin-replay" "$TOOLS/hiraishin-replay"
    ln -sf "$DEV/tools/quantize/llama-quantize" "$TOOLS/llama-quantize"
    pythonpath="$REPO/wheels:/tmp/devsite"
    nvlib=$(PYTHONPATH=$pythonpath python3 -c \
        'from hiraishin_llama import runtime; print(":".join(map(str, runtime.nvidia_library_dirs())))')
    # shellcheck disable=SC2016  # $LD_LIBRARY_PATH is expanded by the wrapper, not here
    printf '#!/bin/sh\nexport LD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexec %s "$@"\n' \
        "$nvlib" "$DEV/bin/hiraishin-replay" > "$VENV/bin/hiraishin-replay"
    for program in smoke bench; do
        printf '#!/bin/sh\nexport PYTHONPATH=%s HIRAISHIN_LLAMA_BIN_DIR=%s\nexec python3 -m hiraishin_llama.%s "$@"\n' \
            "$pythonpath" "$TOOLS" "$program" > "$VENV/bin/hiraishin-llama-$program"
    done
    chmod +x "$VENV"/bin/*
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
    PYTHONPATH=$pythonpath python3 -m hiraishin_llama.info
    ;;
*)
    sed -n '2,18p' "$0"
    exit 2
    ;;
esac
