#!/usr/bin/env bash
# A kernel under development on the GPU machine in one call: a CMake build of a llama.cpp
# source tree (build/wip-src.tar.gz: the work tree's files, e.g. `tar czf build/wip-src.tar.gz
# --exclude=.git -C work llama.cpp`) with only test-backend-ops, then its batch-invariance
# cases with the switch on and off and the verify-batch perf cases of a Qwen3-8B-shaped model,
# each log in $OUT as soon as it is written.
#
#   kernel_session.sh [PERF_REGEX]   (PERF_TIMEOUT, VARIANT_PERF: below)
#
# With WIP_BINARY (an xz-compressed test-backend-ops built elsewhere, e.g. by
# kernel_local_build.sh: build/wip-test-backend-ops.xz) nothing is built here, and
# WIP_FAULT_BINARY, if set, is the same built with a fault, run in place of the
# FAULT_DIFF rebuild. WIP_VARIANT_BINARY (one or more) are kernel variants timed
# next to it; NCU_CASE (one or more products) are profiled with Nsight Compute.
# At the end benchmarks/kernel_session_report.py prints what every log says and writes it to
# $OUT/report.json, for benchmarks/record.py; everything printed also goes to
# $OUT/summary.txt, and the other logs to $OUT/logs.tar.gz (a device call returns
# at most 8 files).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/summary.txt") 2>&1
REPO=$PWD
perf=${1:-'type_a=q4_K,type_b=f32,m=(4096|12288),n=(1|4|8|9|12|16),k=(4096|12288),bs=\[1,1\]'}
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
rm -rf /tmp/wip && mkdir -p /tmp/wip/build/bin
if [ -n "${WIP_BINARY:-}" ]; then
    xz -dc "$WIP_BINARY" > /tmp/wip/build/bin/test-backend-ops && chmod +x /tmp/wip/build/bin/test-backend-ops || exit 1
    # built elsewhere: find this machine's CUDA runtime and cuBLAS wherever its toolkit keeps them
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "prebuilt $WIP_BINARY"
else
    tar xzf build/wip-src.tar.gz -C /tmp/wip || exit 1
    t=$(date +%s)
    # WIP_CMAKE_ARGS holds several arguments: split on purpose
    # shellcheck disable=SC2086
    cmake -S /tmp/wip/llama.cpp -B /tmp/wip/build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_NATIVE=OFF \
        -DGGML_CUDA_NCCL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release ${WIP_CMAKE_ARGS:-} > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
    cmake --build /tmp/wip/build --target test-backend-ops -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -m5 -B2 -A5 'error' "$OUT/build.log"; exit 1; }
    echo "built in $(( $(date +%s) - t ))s"
fi
cd /tmp/wip/build/bin || exit 1
# BI_OPS: the batch-invariance families to run (default: all of them); BI_MATCH: only their cases whose name matches
# this regex (e.g. 'type_a=(q5_K|q8_0),'); BI_TIMEOUT: seconds for each run
bi_ops=${BI_OPS:-MUL_MAT_BATCH_INVARIANCE,FFN_BATCH_INVARIANCE,MUL_MAT_ID_BATCH_INVARIANCE,MOE_FFN_BATCH_INVARIANCE}
bi_timeout=${BI_TIMEOUT:-420}
for on in 1 0; do
    t=$(date +%s)
    GGML_BATCH_INVARIANT=$on timeout "$bi_timeout" ./test-backend-ops -b CUDA0 -o "$bi_ops" ${BI_MATCH:+-p "$BI_MATCH"} \
        > "$OUT/tbo-bi-$on.txt" 2>&1
    echo "batch-invariance cases, switch $on, in $(( $(date +%s) - t ))s: $(grep -E 'tests passed' "$OUT/tbo-bi-$on.txt")"
    grep -E 'FAIL' "$OUT/tbo-bi-$on.txt" | head -40 | cut -c1-160
done
# PERF_TIMEOUT: seconds for each perf run (test-backend-ops times a case for about a second)
perf_timeout=${PERF_TIMEOUT:-90}
for on in 1 0; do
    GGML_BATCH_INVARIANT=$on timeout "$perf_timeout" ./test-backend-ops perf -b CUDA0 -o MUL_MAT -p "$perf" > "$OUT/perf-$on.txt" 2>&1
    echo "perf, switch $on: $(grep -c 'us/run' "$OUT/perf-$on.txt") cases timed"
    [ -n "${PERF_PRINT:-}" ] && grep -E 'us/run' "$OUT/perf-$on.txt" | tr -s ' ' | cut -c1-140
done
# With WIP_VARIANT_BINARY (built like WIP_BINARY, with the variant's diff in kernel_local_build.sh's
# VARIANT_DIFF; several, separated by spaces), the same perf cases with the switch on (or those of
# VARIANT_PERF, e.g. only the type a variant changes), to time each variant against the kernel as it stands.
for variant in ${WIP_VARIANT_BINARY:-}; do
    xz -dc "$REPO/$variant" > ./test-backend-ops-variant && chmod +x ./test-backend-ops-variant || exit 1
    log="$OUT/perf-variant-$(basename "$variant" .xz).txt"
    GGML_BATCH_INVARIANT=1 timeout "$perf_timeout" ./test-backend-ops-variant perf -b CUDA0 -o MUL_MAT -p "${VARIANT_PERF:-$perf}" \
        > "$log" 2>&1
    echo "perf of $variant, switch 1: $(grep -c 'us/run' "$log") cases timed"
done
# With VARIANT_ENV (settings NAME=VALUE, separated by spaces, that the WIP binary reads to pick a kernel variant
# built into it), the perf cases of each setting with the switch on, and with VARIANT_ENV_BI its batch-invariance
# cases too (switch on): one build holds every variant, and each is checked against the others' widths.
for setting in ${VARIANT_ENV:-}; do
    tag=$(echo "$setting" | tr -c 'A-Za-z0-9_\n-' '-')
    if [ -n "${VARIANT_ENV_BI:-}" ]; then
        t=$(date +%s)
        # VARIANT_BI_MATCH: the cases of the variants' runs (default BI_MATCH's)
        variant_match=${VARIANT_BI_MATCH:-${BI_MATCH:-}}
        env "$setting" GGML_BATCH_INVARIANT=1 timeout "$bi_timeout" ./test-backend-ops -b CUDA0 -o "$bi_ops" \
            ${variant_match:+-p "$variant_match"} > "$OUT/tbo-bi-$tag.txt" 2>&1
        echo "batch-invariance cases, $setting, switch 1, in $(( $(date +%s) - t ))s: $(grep -E 'tests passed' "$OUT/tbo-bi-$tag.txt")"
        grep -E 'FAIL' "$OUT/tbo-bi-$tag.txt" | head -20 | cut -c1-160
    fi
    env "$setting" GGML_BATCH_INVARIANT=1 timeout "$perf_timeout" ./test-backend-ops perf -b CUDA0 -o MUL_MAT \
        -p "${VARIANT_PERF:-$perf}" > "$OUT/perf-env-$tag.txt" 2>&1
    echo "perf with $setting, switch 1: $(grep -c 'us/run' "$OUT/perf-env-$tag.txt") cases timed"
    # printed too: a call cut at its limit returns what was printed, not the logs
    grep -E 'us/run' "$OUT/perf-env-$tag.txt" | tr -s ' ' | cut -c1-140
done
# With FAULT_DIFF set (a diff against the tree, e.g. benchmarks/faults/*.diff), the tree is
# rebuilt with it applied and the batch-invariance cases run once more, switch on.
if [ -n "${WIP_FAULT_BINARY:-}" ]; then
    xz -dc "$REPO/$WIP_FAULT_BINARY" > ./test-backend-ops-fault && chmod +x ./test-backend-ops-fault || exit 1
    # BI_FAULT_MATCH: the cases the fault run takes (default BI_MATCH's; '.' for all)
    fault_match=${BI_FAULT_MATCH:-${BI_MATCH:-}}
    GGML_BATCH_INVARIANT=1 timeout "$bi_timeout" ./test-backend-ops-fault -b CUDA0 -o "$bi_ops" ${fault_match:+-p "$fault_match"} \
        > "$OUT/tbo-bi-fault.txt" 2>&1
    echo "fault binary, switch 1: $(grep -E 'tests passed' "$OUT/tbo-bi-fault.txt")"
    grep -E 'FAIL' "$OUT/tbo-bi-fault.txt" | head -40 | cut -c1-160
elif [ -n "${FAULT_DIFF:-}" ]; then
    patch -d /tmp/wip/llama.cpp -p1 < "$REPO/$FAULT_DIFF" > "$OUT/fault-patch.txt" 2>&1 || { cat "$OUT/fault-patch.txt"; exit 1; }
    t=$(date +%s)
    cmake --build /tmp/wip/build --target test-backend-ops -j "$(nproc)" > "$OUT/build-fault.log" 2>&1 || { grep -m5 -B2 -A5 'error' "$OUT/build-fault.log"; exit 1; }
    echo "rebuilt with $FAULT_DIFF in $(( $(date +%s) - t ))s"
    GGML_BATCH_INVARIANT=1 timeout "$bi_timeout" ./test-backend-ops -b CUDA0 -o "$bi_ops" > "$OUT/tbo-bi-fault.txt" 2>&1
fi
# With NCU_CASE (a test-backend-ops perf filter, e.g. 'type_a=q4_K,type_b=f32,m=4096,n=16,k=12288'),
# Nsight Compute's warp-state, scheduler and instruction sections for the tensor-core kernels
# of that product, switch on (benchmarks/ncu_report.py reads the CSV); NCU_KERNEL: the kernels' name filter.
if [ -n "${NCU_CASE:-}" ]; then
    NCU=$(command -v ncu || find /opt/nvidia /usr/local/cuda* -name ncu -type f 2>/dev/null | head -1)
    # several products, separated by spaces, each in its own CSV
    i=0
    for ncu_case in $NCU_CASE; do
        i=$((i + 1))
        GGML_BATCH_INVARIANT=1 timeout 240 "$NCU" --clock-control none --kernel-name-base demangled \
            --kernel-name "${NCU_KERNEL:-regex:bi_mma|bi_sb}" --launch-skip 2 --launch-count 2 \
            --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
            --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
            --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' --csv --page details \
            ./test-backend-ops perf -b CUDA0 -o MUL_MAT -p "$ncu_case" > "$OUT/ncu-bi-mma-$i.csv" 2> "$OUT/ncu-bi-mma-$i.err"
        echo "ncu on $ncu_case: rc=$? $(wc -l < "$OUT/ncu-bi-mma-$i.csv") lines"
    done
fi
python3 "$REPO/benchmarks/kernel_session_report.py" "$OUT" --out "$OUT/report.json"
# a device call returns at most 8 files: every log but the summary and the report travels in one archive
(cd "$OUT" && find . -maxdepth 1 -type f ! -name summary.txt ! -name report.json ! -name logs.tar.gz -printf '%P\n' |
    tar czf logs.tar.gz -T - --remove-files)
