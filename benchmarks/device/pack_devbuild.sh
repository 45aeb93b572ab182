#!/usr/bin/env bash
# Builds the patched tree for sm_90 with CMake on this machine and packs what
# devbuild_session.sh unpacks on the GPU machine into build/devbuild.tar.xz.
#
#   pack_devbuild.sh SDIST [BUILD_DIR]
#
# SDIST is the `hiraishin sdist` output the build must match (its stack.json and
# _version.py travel with the binaries). Needs nvcc 13 and the cuBLAS headers and
# libraries (e.g. from the nvidia-cublas wheel) in the CUDA toolkit; without a
# driver, CUDA::cuda_driver is satisfied by an empty stub libcuda.so.1, and
# libggml-cuda.so is given its real NEEDED entry for libcuda.so.1 afterwards.
# The first build takes about 25 minutes on 2 cores; later ones only recompile
# what changed.
set -euo pipefail
sdist=$(realpath "$1")
build=${2:-/tmp/cuda-build}
repo=$(cd "$(dirname "$0")/../.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

if [ "$build" != /tmp/cuda-build ]; then
    echo "the build's RPATH must be /tmp/cuda-build/bin, where devbuild_session.sh unpacks it" >&2
    exit 2
fi
if [ ! -f "$build/build.ninja" ]; then
    mkdir -p /tmp/cudastub "$build"
    echo 'void hiraishin_cuda_stub(void) {}' > /tmp/cudastub/stub.c
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o /tmp/cudastub/libcuda.so /tmp/cudastub/stub.c
    cmake -G Ninja -S "$repo/wheels" -B "$build" -DHIRAISHIN_LLAMA_SOURCE="$repo/work/llama.cpp" \
        -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_NATIVE=OFF \
        -DGGML_CUDA_NCCL=OFF -DLLAMA_CURL=OFF -DHIRAISHIN_BUILD_TESTS=ON \
        -DCUDA_cuda_driver_LIBRARY=/tmp/cudastub/libcuda.so "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined"
fi
ninja -C "$build" -j"$(nproc)" ggml-cuda llama hiraishin-replay llama-quantize

mkdir -p "$stage/tmp/cuda-build/bin" "$stage/tmp/cuda-build/tools/quantize" "$stage/meta"
cp -a "$build"/bin/hiraishin-replay "$build"/bin/libggml*.so* "$build"/bin/libllama.so "$build"/bin/libllama-common.so "$stage/tmp/cuda-build/bin/"
cp -a "$build/tools/quantize/llama-quantize" "$stage/tmp/cuda-build/tools/quantize/"
cuda_lib=$(readlink -f "$stage/tmp/cuda-build/bin/libggml-cuda.so")
patchelf --add-needed libcuda.so.1 "$cuda_lib"
patchelf --set-rpath /tmp/cuda-build/bin "$cuda_lib"
tar xzf "$sdist" -C "$stage/meta" --wildcards '*/hiraishin_llama/stack.json' '*/hiraishin_llama/_version.py'
python3 - "$build/build_info.json" "$stage/meta/build_info.json" "$(nvcc --version | grep -o 'V[0-9][0-9.]*' | tr -d V)" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
info.update(recipe="dev-cu13-sm90", cuda=sys.argv[3],
            dev_build="CMake build of wheels/ on the development machine (GGML_CUDA=ON, 90-real), not a wheel")
json.dump(info, open(sys.argv[2], "w"), indent=2)
PY
mkdir -p "$repo/build"
tar cf - -C "$stage" tmp meta | xz -T0 -6 > "$repo/build/devbuild.tar.xz"
ls -la "$repo/build/devbuild.tar.xz"
