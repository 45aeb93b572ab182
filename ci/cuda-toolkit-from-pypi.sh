#!/usr/bin/env bash
# A CUDA 13 compiler for a machine without a GPU or a CUDA installation, from NVIDIA's wheels on PyPI:
# nvcc (nvidia-cuda-nvcc), its front end cicc and libdevice (nvidia-nvvm), the headers and the runtime
# (nvidia-cuda-crt, nvidia-cuda-runtime, nvidia-cuda-cccl) and cuBLAS (nvidia-cublas), unpacked into one
# toolkit directory in the layout nvcc.profile expects. It compiles and links the CUDA backend for any
# architecture nvcc 13 knows; it cannot run what it builds (no driver). CUDA 12 has no such set: PyPI's
# nvidia-cuda-nvcc-cu12 ships ptxas only.
#
#   ci/cuda-toolkit-from-pypi.sh DIR     # prints CUDA_HOME=DIR/nvidia/cu13 on success
#
# Then: cmake -DGGML_CUDA=ON -DGGML_CUDA_NO_VMM=ON -DCMAKE_CUDA_COMPILER=$CUDA_HOME/bin/nvcc
# -DCUDAToolkit_ROOT=$CUDA_HOME ... (no libcuda.so here, so no VMM). About 600 MB of wheels, 1.6 GB unpacked.
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
dir=$(abspath "${1:?usage: ci/cuda-toolkit-from-pypi.sh DIR}")
mkdir -p "$dir/wheels"
# The major version the cu13 recipes build with; pip picks each package's newest 13.x.
packages=(nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-crt nvidia-cuda-runtime nvidia-cuda-cccl nvidia-cublas)
python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$dir/wheels" \
    "${packages[@]/%/==13.*}" >&2
for wheel in "$dir"/wheels/*.whl; do
    python3 -m zipfile -e "$wheel" "$dir"
done
cuda_home=$dir/nvidia/cu13
[[ -f $cuda_home/bin/nvcc && -f $cuda_home/nvvm/bin/cicc ]] ||
    die 1 "the wheels did not give $cuda_home/bin/nvcc and nvvm/bin/cicc; the layout of NVIDIA's wheels may have" \
          "changed (see $dir/wheels)"
# zipfile keeps no permission bits; CMake's FindCUDAToolkit wants the unversioned library names.
chmod +x "$cuda_home"/bin/* "$cuda_home"/nvvm/bin/*
for lib in cudart cublas cublasLt; do
    versioned=$(find "$cuda_home/lib" -maxdepth 1 -name "lib$lib.so.*" -printf '%f\n' | sort | head -1)
    [[ -n $versioned ]] || die 1 "no lib$lib.so.* in $cuda_home/lib"
    ln -sf "$versioned" "$cuda_home/lib/lib$lib.so"
done
# Prove it compiles device code before anyone relies on it.
probe=$dir/probe.cu
printf '__global__ void probe(float *x) { x[threadIdx.x] *= 2.0f; }\n' > "$probe"
"$cuda_home/bin/nvcc" -arch=sm_90 -c "$probe" -o "$dir/probe.o" >&2 ||
    die 1 "$cuda_home/bin/nvcc could not compile a kernel for sm_90"
"$cuda_home/bin/nvcc" --version | tail -1 >&2
echo "CUDA_HOME=$cuda_home"
