#!/usr/bin/env bash
# Flash attention of a prebuilt test-backend-ops on the GPU machine, in one call: the batch-invariance
# families with the switch on and off, the same with each setting a variant binary reads, and upstream's
# one-query perf cases, switch on and off. Nothing is built here.
#
#   WIP_BINARY=build/wip-fa-gather-diag.xz bash benchmarks/device/fa_session.sh
#
# WIP_BINARY: an xz-compressed static test-backend-ops for sm_90 (kernel_local_build.sh with KERNEL_BUILD_FA=ON).
# FA_FAMILIES: the families (default: the KV-length, KV-layout and batch-invariance ones).
# FA_VARIANT_ENV: settings the binary reads, separated by spaces, each NAME=VALUE[,NAME=VALUE...]; each gets a
#     run of the families with the switch on (FA_VARIANT_FAMILIES: other families for those runs).
# FA_PERF_ENV: settings as FA_VARIANT_ENV's, each a perf run with the switch on.
# FA_SUITE=1: upstream's FLASH_ATTN_EXT suite with the switch on too (its CPU comparison; FA_TIMEOUT bounds it),
#     FA_SUITE_MATCH: only its cases whose name matches (e.g. 'nb=(1|3|8|16),': the batch sizes the mode covers).
# FA_PERF: the perf cases' filter (default: one query, 'nb=1,': kv 4096-16384, heads of 64 and 128, GQA 1 and 4).
# Everything printed lands in $OUT/summary.txt, the logs in $OUT/logs.tar.gz (a device call returns at most 8 files).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/summary.txt") 2>&1
REPO=$PWD
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p /tmp/fa-session
xz -dc "$REPO/${WIP_BINARY:?name the binary: WIP_BINARY=build/....xz}" > /tmp/fa-session/tbo && chmod +x /tmp/fa-session/tbo || exit 1
# built elsewhere: this machine's CUDA runtime and cuBLAS wherever its toolkit keeps them
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cd /tmp/fa-session || exit 1
families=${FA_FAMILIES:-FLASH_ATTN_EXT_KV_LENGTH_INVARIANCE,FLASH_ATTN_EXT_KV_LAYOUT_INVARIANCE,FLASH_ATTN_EXT_BATCH_INVARIANCE}

# run NAME VAR=VALUE... -- ARGS: the binary with those settings, its log in $OUT/NAME.txt, its verdict printed
run() {
    local name=$1 t rc
    shift
    local settings=()
    while [ "$1" != -- ]; do settings+=("$1"); shift; done
    shift
    t=$(date +%s)
    timeout "${FA_TIMEOUT:-150}" env "${settings[@]}" ./tbo "$@" > "$OUT/$name.txt" 2>&1
    rc=$?
    echo "$name: rc=$rc in $(( $(date +%s) - t ))s: $(grep -E 'tests passed' "$OUT/$name.txt")"
    grep -E 'FAIL' "$OUT/$name.txt" | head -12 | cut -c1-200
}
# each setting as words for env: NAME=VALUE,NAME=VALUE -> NAME=VALUE NAME=VALUE
words() { tr ',' '\n' <<< "$1"; }
tag() { tr -c 'A-Za-z0-9_\n-' '-' <<< "$1"; }

run families-on GGML_BATCH_INVARIANT=1 -- -b CUDA0 -o "$families"
run families-off GGML_BATCH_INVARIANT=0 -- -b CUDA0 -o "$families"
for setting in ${FA_VARIANT_ENV:-}; do
    mapfile -t vars < <(words "$setting")
    run "families-on-$(tag "$setting")" "${vars[@]}" GGML_BATCH_INVARIANT=1 -- -b CUDA0 -o "${FA_VARIANT_FAMILIES:-$families}"
    grep -h '^fa-diag' "$OUT/families-on-$(tag "$setting").txt" | sort | uniq -c | sort -rn | head -8 | cut -c1-240
done
[ -n "${FA_SUITE:-}" ] && run suite-on GGML_BATCH_INVARIANT=1 -- -b CUDA0 -o FLASH_ATTN_EXT ${FA_SUITE_MATCH:+-p "$FA_SUITE_MATCH"}

perf=${FA_PERF:-nb=1,}
perf_run() {
    local name=$1
    shift
    timeout 120 env "$@" ./tbo perf -b CUDA0 -o FLASH_ATTN_EXT -p "$perf" > "$OUT/$name.txt" 2>&1
    echo "$name: $(grep -c 'us/run' "$OUT/$name.txt") cases timed"
    # printed too: a call cut at its limit returns what was printed, not the logs
    grep -E 'us/run' "$OUT/$name.txt" | tr -s ' ' | cut -c1-200
}
perf_run perf-on GGML_BATCH_INVARIANT=1
perf_run perf-off GGML_BATCH_INVARIANT=0
for setting in ${FA_PERF_ENV:-}; do
    mapfile -t vars < <(words "$setting")
    perf_run "perf-on-$(tag "$setting")" "${vars[@]}" GGML_BATCH_INVARIANT=1
done
(cd "$OUT" && find . -maxdepth 1 -type f ! -name summary.txt ! -name logs.tar.gz -printf '%P\n' |
    tar czf logs.tar.gz -T - --remove-files)
