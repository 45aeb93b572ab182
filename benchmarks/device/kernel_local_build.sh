#!/usr/bin/env bash
# Build test-backend-ops for sm_90 here, from the work tree, for kernel_session.sh to run
# without building on the GPU machine (a build there costs ~4.5 of its 30 device minutes; here
# the first build takes ~30 min on 2 cores, a rebuild after a kernel edit about a minute).
#
#   kernel_local_build.sh [BUILD_DIR [OUT]]   # defaults: /work/devbuild, build/wip-test-backend-ops.xz
#   FAULT_DIFF=benchmarks/faults/X.diff kernel_local_build.sh ...   # the same with the fault applied to the copy
#   VARIANT_DIFF=PATH.diff kernel_local_build.sh ...   # or a variant of the kernel (a diff against the work
#                                                      # tree, path relative to the repository), to time against it
#
# Static (one file to carry, ~10 MB compressed), flash-attention kernels off (their instances
# dominate the build; the FA cases then run on the CPU and say so; KERNEL_BUILD_FA=ON builds them, for
# a flash-attention experiment, in a build directory of its own), VMM off (no libcuda.so on a
# machine without a driver). Needs nvcc, cuBLAS headers and libraries: ci/cuda-toolkit-from-pypi.sh DIR makes
# them from PyPI's wheels (put the CUDA_HOME it prints, /bin, first on PATH).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-/work/devbuild}
out=$repo/${2:-build/wip-test-backend-ops.xz}
mkdir -p "$dir/src"
# tar keeps the work tree's timestamps, so ninja rebuilds only what changed since the last copy
tar c --exclude=.git -C "$repo/work/llama.cpp" . | tar x -C "$dir/src"
# A file edited while the last build ran is older than the object built from its earlier copy: ninja
# would keep that object. Touch every file whose content changed since the last copy.
(cd "$dir/src" && find . -type f \( -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) \
    -print0 | xargs -0 sha1sum | sort -k2) > "$dir/hashes.new"
reconfigure=0
if [ -f "$dir/hashes" ]; then
    # shellcheck disable=SC2016  # $1 is awk's
    join -1 2 -2 2 -o 0,1.1,2.1 "$dir/hashes" "$dir/hashes.new" | awk '$2 != $3 {print $1}' |
        (cd "$dir/src" && xargs -r touch)
    # a source file the last copy did not have: CMake globs its source lists at configure time only
    if join -1 2 -2 2 -v 2 "$dir/hashes" "$dir/hashes.new" | grep -q .; then reconfigure=1; fi
fi
mv "$dir/hashes.new" "$dir/hashes"
# A file a fault or variant changed in the last build came back with its older time: make ninja rebuild it.
if [ -f "$dir/diffed-files" ]; then
    xargs -I{} touch "$dir/src/{}" < "$dir/diffed-files"
    rm "$dir/diffed-files"
fi
# A file the last diff created is not in the work tree: take it out of the copy, and let CMake glob again
# (its source lists are globbed once, at configure time).
if [ -f "$dir/diffed-new-files" ]; then
    (cd "$dir/src" && xargs -r rm -f < "$dir/diffed-new-files")
    rm "$dir/diffed-new-files"
    reconfigure=1
fi
diff=${FAULT_DIFF:-${VARIANT_DIFF:-}}
if [ -n "$diff" ]; then
    # into the copy only: the work tree stays as it is
    patch -d "$dir/src" -p1 < "$repo/$diff"
    sed -n 's|^+++ b/||p' "$repo/$diff" > "$dir/diffed-files"
    xargs -I{} touch "$dir/src/{}" < "$dir/diffed-files"
    # new files: those whose old side is /dev/null
    awk '/^--- \/dev\/null/ {new = 1; next} new && /^\+\+\+ b\// {print substr($0, 7)} {new = 0}' "$repo/$diff" \
        > "$dir/diffed-new-files"
    [ -s "$dir/diffed-new-files" ] && reconfigure=1
fi
if [ ! -f "$dir/b/build.ninja" ] || [ "$reconfigure" = 1 ]; then
    cmake -S "$dir/src" -B "$dir/b" -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_NATIVE=OFF \
        -DGGML_CUDA_FA="${KERNEL_BUILD_FA:-OFF}" -DGGML_CUDA_NO_VMM=ON -DBUILD_SHARED_LIBS=OFF -DGGML_CUDA_NCCL=OFF -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
        -DGGML_OPENMP=OFF -DCMAKE_BUILD_TYPE=Release > "$dir/cmake.log"
fi
cmake --build "$dir/b" --target test-backend-ops -j "$(nproc)"
mkdir -p "$(dirname "$out")"
xz -T0 -6 -c "$dir/b/bin/test-backend-ops" > "$out"
ls -la "$out"
