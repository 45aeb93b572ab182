#!/usr/bin/env bash
# Tuning of the batch-invariant MUL_MAT_ID launch on the GPU machine, with a prebuilt test-backend-ops
# (kernel_local_build.sh with VARIANT_DIFF=moe-bi-rows-of-warps.patch, from the tuning folder of commit dc51127) whose launch
# is chosen by HIRAISHIN_MOE_BI_ROWS (0: as the stack has it; 1: a block of nwarps rows for several
# tokens; 2: for one token too). The rows a block owns do not change the order of any sum, so every
# mode must pass the batch-invariance cases; the perf cases say which is fastest.
#
#   WIP_BINARY=build/wip-moe-rows.xz moe_tune_session.sh [MODES]   # MODES: default "0 1 2"
#   MOE_TUNE_VAR=HIRAISHIN_MOE_BI_KERNEL MOE_TUNE_BASE=none moe_tune_session.sh "block warp warp1"
#       # the kernels revision 22 (patch 23) picks from, with the test-backend-ops of the wheel
#       # gpu_session.sh built (WIP_BINARY unset)
#
# MOE_TUNE_VAR names the variable (default HIRAISHIN_MOE_BI_ROWS); every mode but MOE_TUNE_BASE (the stack's
# own launch, default 0; none: no mode is skipped) also runs the batch-invariance cases, unless MOE_TUNE_PERF_ONLY=1.
#
# Logs and report.json (benchmarks/kernel_session_report.py) go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/summary.txt") 2>&1
REPO=$PWD
modes=${1:-0 1 2}
var=${MOE_TUNE_VAR:-HIRAISHIN_MOE_BI_ROWS}
base=${MOE_TUNE_BASE:-0}
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
if [ -n "${WIP_BINARY:-}" ]; then
    mkdir -p /tmp/wip/build/bin && cd /tmp/wip/build/bin || exit 1
    xz -dc "$REPO/$WIP_BINARY" > ./test-backend-ops && chmod +x ./test-backend-ops || exit 1
else
    # the test-backend-ops of the wheel `gpu_session.sh build` made, beside the libraries it links
    cd "$REPO/build/cu13-sm90/bin" 2>/dev/null && [ -x ./test-backend-ops ] ||
        { echo "no test-backend-ops in $REPO/build/cu13-sm90/bin: run gpu_session.sh build first, or set WIP_BINARY"; exit 1; }
fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The products of one Qwen3-30B-A3B layer (128 experts, 8 used, 2048 -> 768) and of gpt-oss-20b (32, 4,
# 2880 -> 2880) at 1, 4 and 8 tokens, alone and fused with their gate and GLU.
perf='type_a=(q4_K|q6_K|q8_0|mxfp4),type_b=f32,n_mats=(128|32),n_used=(8|4),b=0,m=(768|2880),n=(1|4|8),k=(2048|2880)'
for mode in $modes; do
    env "$var=$mode" GGML_BATCH_INVARIANT=1 timeout 40 ./test-backend-ops perf -b CUDA0 -o MUL_MAT_ID -p "$perf" \
        > "$OUT/perf-rows$mode.txt" 2>&1
    echo "perf, rows mode $mode, switch 1: $(grep -c 'us/run' "$OUT/perf-rows$mode.txt") cases timed"
done
GGML_BATCH_INVARIANT=0 timeout 40 ./test-backend-ops perf -b CUDA0 -o MUL_MAT_ID -p "$perf" > "$OUT/perf-stock.txt" 2>&1
echo "perf, stock (switch 0): $(grep -c 'us/run' "$OUT/perf-stock.txt") cases timed"
# Correctness of the modes that give a batch other rows per block than one token.
cases='type_a=(q4_K|q6_K|mxfp4|q8_0)'
for mode in $modes; do
    [ "$mode" = "$base" ] && continue
    # MOE_TUNE_PERF_ONLY=1: the timings alone, where the op tests of the kernel that ships run elsewhere
    [ "${MOE_TUNE_PERF_ONLY:-0}" = 1 ] && break
    t=$(date +%s)
    env "$var=$mode" GGML_BATCH_INVARIANT=1 timeout "${BI_TIMEOUT:-100}" ./test-backend-ops -b CUDA0 \
        -o MUL_MAT_ID_BATCH_INVARIANCE,MOE_FFN_BATCH_INVARIANCE -p "$cases" > "$OUT/tbo-bi-rows$mode.txt" 2>&1
    echo "batch-invariance cases, rows mode $mode, in $(( $(date +%s) - t ))s: $(grep -E 'tests passed' "$OUT/tbo-bi-rows$mode.txt")"
    grep -E 'FAIL' "$OUT/tbo-bi-rows$mode.txt" | head -20 | cut -c1-160
done
# us/run per case and mode, side by side
# shellcheck disable=SC2086  # one argument per mode
python3 - "$OUT" $modes <<'PY'
import re, sys, pathlib
out = pathlib.Path(sys.argv[1]); modes = sys.argv[2:]
def times(name):
    p = out / name
    t, case = {}, None
    # the case's name starts a line; its timing may end that line or the next (after a log line)
    for line in (p.read_text().splitlines() if p.exists() else []):
        named = re.match(r"^\s*(MUL_MAT_ID\S*\(.*?\)):", line)
        case = named.group(1) if named else case
        timed = re.search(r"\s([\d.]+) us/run", line)
        if timed and case:
            t[case] = float(timed.group(1))
            case = None
    return t
runs = {f"rows{m}": times(f"perf-rows{m}.txt") for m in modes}
runs["stock"] = times("perf-stock.txt")
print(f"{'case':<110} " + " ".join(f"{k:>9}" for k in runs))
for case in runs["stock"]:
    print(f"{case[:110]:<110} " + " ".join(f"{runs[k].get(case, float('nan')):>9.1f}" for k in runs))
PY
