#!/usr/bin/env bash
# Performance runs on the H200 against the wheel that gpu_session.sh built
# (`build`) and installed (`install`) in the same call:
#
#   perf_session.sh bench [ARGS]  hiraishin-llama-bench in the venv: exact vs stock verify
#                                 passes b=1..16, plain and speculative tokens/s, the floor
#   perf_session.sh bench-start 'NAME:ARGS' ...   the same in the background, one after another (for
#                                 full-depth MoE models, longer than one call)
#   perf_session.sh bench-wait SECONDS NAME...    wait for them; their reports go to $OUT
#   perf_session.sh kernels       test-backend-ops perf on the verify-batch MUL_MAT cases
#                                 (Qwen3-8B matrices x 1..16 tokens), switch on and off
#                                 (about 2.5 min per switch on the H200; needs a wheel build
#                                 with -D HIRAISHIN_BUILD_TESTS=ON, not the development build)
#   perf_session.sh tune ROWS...  exact verify passes with mmvq rows per block forced to each
#                                 ROWS (needs mmvq-rows-per-block.patch, from the tuning folder of commit dc51127,
#                                 applied on top of the stack)
#   perf_session.sh ncu           Nsight Compute on one verify pass of 16 tokens, exact and
#                                 stock: the matrix kernels of one layer and flash attention
#   perf_session.sh timeline [PRESET [QUANT [BATCHES]]]   every kernel of one verify pass of the
#                                 bench's one-layer model (default qwen3moe Q4_K_M, b = 1 4 8), exact
#                                 and stock, summed per kernel by benchmarks/ncu_timeline.py
#
# Models are the benchmark's own, kept in $MODELS between phases.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
REPO=$PWD
BUILD=$REPO/build/cu13-sm90
VENV=/tmp/venv
MODELS=/tmp/bench-models
QUANT=${QUANT:-Q4_K_M}
model() { echo "$MODELS/qwen3-8b-36l-seed1-$QUANT-direct.gguf"; }
replay() { "$VENV/bin/hiraishin-replay" "$@"; }

case "${1:-}" in
bench)
    shift
    "$VENV/bin/hiraishin-llama-bench" --work-dir "$MODELS" --json "$OUT/bench.json" "$@" 2>&1 | tee "$OUT/bench.txt"
    ;;
bench-start)
    # bench-start 'NAME:ARGS' ...: the benches one after another in the background, so that they outlive
    # this call (a call has 10 minutes; a full-depth MoE model takes several); bench-wait collects them.
    shift
    jobs=""
    for spec in "$@"; do
        name=${spec%%:*}; args=${spec#*:}
        rm -f "/tmp/bench-$name.rc" "/tmp/bench-$name.json"
        jobs+="$VENV/bin/hiraishin-llama-bench --work-dir $MODELS --json /tmp/bench-$name.json $args > /tmp/bench-$name.txt 2>&1; echo \$? > /tmp/bench-$name.rc; "
    done
    setsid bash -c "$jobs" < /dev/null > /dev/null 2>&1 &
    echo "started: $*"
    ;;
bench-wait)
    # bench-wait SECONDS NAME...: until every named bench has finished or SECONDS have passed; what each
    # wrote so far goes to $OUT either way. Exit 0 when all finished with 0, 3 while any still runs.
    limit=$2; shift 2
    t=$(date +%s)
    while :; do
        running=0
        for name in "$@"; do [ -f "/tmp/bench-$name.rc" ] || running=1; done
        [ "$running" = 0 ] && break
        [ $(( $(date +%s) - t )) -ge "$limit" ] && break
        sleep 5
    done
    rc=0
    for name in "$@"; do
        cp "/tmp/bench-$name.txt" "/tmp/bench-$name.json" "$OUT/" 2>/dev/null
        state=$(cat "/tmp/bench-$name.rc" 2>/dev/null || echo running)
        echo "== bench $name: exit $state after $(( $(date +%s) - t ))s of waiting"; tail -4 "/tmp/bench-$name.txt" 2>/dev/null
        [ "$state" = 0 ] || rc=3
    done
    exit $rc
    ;;
kernels)
    cd "$BUILD/bin" || exit 1
    filter='type_a=q4_K,type_b=f32,m=(1024|4096|12288|32000),n=([0-9]|1[0-6]),k=(4096|12288),bs=\[1,1\]'
    for switch in 1 0; do
        echo "== test-backend-ops perf MUL_MAT, GGML_CUDA_BATCH_INVARIANT=$switch"
        # The console output: its csv format leaves out the timings (us/run).
        GGML_CUDA_BATCH_INVARIANT=$switch timeout 240 ./test-backend-ops perf -b CUDA0 -o MUL_MAT -p "$filter" \
            > "$OUT/kernels-switch$switch.txt" 2>&1
        echo "rc=$? cases=$(grep -c 'us/run' "$OUT/kernels-switch$switch.txt")"
    done
    ;;
tune)
    shift
    for rows in "$@"; do
        echo "== exact verify passes, mmvq rows per block = $rows"
        HIRAISHIN_MMVQ_BI_ROWS=$rows GGML_CUDA_BATCH_INVARIANT=1 replay bench --model "$(model)" --ctx 2048 \
            --n-prompt 512 --n-gen 64 --reps 20 --warmup 5 --bandwidth-mib 0 --json "$OUT/tune-rows$rows.json" \
            | tail -18
    done
    ;;
ncu)
    # A one-layer model (the benchmark's draft) has the same matrices and attention as the
    # 36-layer one, and ncu's kernel replay saves and restores far less memory per pass.
    layers=1
    ncu_model="$MODELS/qwen3-8b-${layers}l-seed1-$QUANT-direct.gguf"
    [ -f "$ncu_model" ] || { echo "no $ncu_model: run the bench phase (with speculative decoding) first"; exit 1; }
    NCU=$(command -v ncu || find /opt/nvidia -name ncu -type f 2>/dev/null | head -1)
    [ -n "$NCU" ] || { echo "ncu not found"; exit 1; }
    "$NCU" --version | tail -1
    # hiraishin-replay bench with --batches 16 decodes, in this order: the warm-up's 16-token
    # batch and one token, the 512-token prompt, one plain token, then the timed 16-token pass.
    # Matrix products: the first 8 launches are the warm-up batch's layer (7) and the output
    # matrix, the same kernels as in any pass of 16 tokens. Flash attention (one launch per
    # layer and decode) depends on the KV length, so skip to the timed pass: 4 decodes.
    for switch in 1 0; do
        mode=$([ "$switch" = 1 ] && echo exact || echo stock)
        matmul='regex:mul_mat_vec_q|mul_mat_q'
        GGML_CUDA_BATCH_INVARIANT=$switch timeout 200 "$NCU" --clock-control none --target-processes all \
            --kernel-name-base demangled --kernel-name "$matmul" --launch-skip 0 --launch-count 8 \
            --section SpeedOfLight --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
            --section WarpStateStats --section SchedulerStats --csv --page details \
            "$VENV/bin/hiraishin-replay" bench --model "$ncu_model" \
            --ctx 2048 --n-prompt 512 --n-gen 1 --batches 16 --reps 1 --warmup 0 --bandwidth-mib 0 \
            > "$OUT/ncu-matmul-$mode.csv" 2> "$OUT/ncu-matmul-$mode.err"
        echo "$mode matmul: rc=$? $(wc -l < "$OUT/ncu-matmul-$mode.csv") lines"
        GGML_CUDA_BATCH_INVARIANT=$switch timeout 200 "$NCU" --clock-control none --target-processes all \
            --kernel-name-base demangled --kernel-name "regex:flash_attn_(ext|tile)" --launch-skip $((4 * layers)) --launch-count "$layers" \
            --section SpeedOfLight --section Occupancy --section LaunchStats --csv --page details \
            "$VENV/bin/hiraishin-replay" bench --model "$ncu_model" \
            --ctx 2048 --n-prompt 512 --n-gen 1 --batches 16 --reps 1 --warmup 0 --bandwidth-mib 0 \
            > "$OUT/ncu-fattn-$mode.csv" 2> "$OUT/ncu-fattn-$mode.err"
        echo "$mode flash attention: rc=$? $(wc -l < "$OUT/ncu-fattn-$mode.csv") lines"
    done
    ;;
timeline)
    # Which kernels make a MoE verify pass of b tokens cost more exact than stock: every launch's duration
    # over a run that ends in three timed passes alike (--reps 3 --warmup 0), which ncu_timeline.py cuts out.
    preset=${2:-qwen3moe}
    mkdir -p "$MODELS"
    quant=${3:-$([ "$preset" = gpt-oss ] && echo MXFP4_MOE || echo Q4_K_M)}
    timeline_model="$MODELS/$preset-1l-seed1-$quant-direct.gguf"
    # the bench's draft model, made here when no bench ran before (the wheel's llama-quantize on PATH)
    [ -f "$timeline_model" ] || PATH=$VENV/bin:$PATH "$VENV/bin/python" -m hiraishin_llama.synthetic --preset "$preset" \
        --n-layer 1 --seed 1 --direct --quant "$quant" --out "$timeline_model" > /dev/null || exit 1
    NCU=$(command -v ncu || find /opt/nvidia -name ncu -type f 2>/dev/null | head -1)
    [ -n "$NCU" ] || { echo "ncu not found"; exit 1; }
    # ncu on the program itself, not on its Python launcher: under ncu the launcher's execve ran for 150 s
    # without one kernel profiled (revision 19, b = 1). The launcher's environment (library path, switch) is
    # set here instead; the switch per mode below.
    replay_bin=$("$VENV/bin/python" -c 'from hiraishin_llama import _launch; print(_launch.program_path("hiraishin-replay"))')
    replay_libs=$("$VENV/bin/python" -c 'from hiraishin_llama import _launch; print(_launch.program_environment().get("LD_LIBRARY_PATH", ""))')
    files=()
    for b in ${4:-1 4 8}; do
        for switch in 1 0; do
            mode=$([ "$switch" = 1 ] && echo exact || echo stock)
            # TIMELINE_TAG names a variant's files (e.g. the kernel a tuning variable selects)
            csv="$OUT/timeline-$preset${TIMELINE_TAG:+-$TIMELINE_TAG}-b$b-$mode.csv"
            # the duration alone: one replay pass a launch; a short prompt keeps the run's launches few
            t=$(date +%s)
            GGML_BATCH_INVARIANT=$switch GGML_CUDA_BATCH_INVARIANT=$switch LD_LIBRARY_PATH=$replay_libs \
                timeout "${TIMELINE_LIMIT:-120}" "$NCU" --clock-control none --target-processes all \
                --kernel-name-base demangled --metrics gpu__time_duration.sum --csv --page details \
                "$replay_bin" bench --model "$timeline_model" --ctx 1024 --n-prompt 64 --n-gen 1 \
                --batches "$b" --reps 3 --warmup 0 --bandwidth-mib 0 > "$csv" 2> "${csv%.csv}.err"
            echo "b=$b $mode: rc=$? in $(( $(date +%s) - t ))s, $(grep -c 'gpu__time_duration' "$csv") launches"
            files+=("$csv")
        done
    done
    python3 benchmarks/ncu_timeline.py "${files[@]}" --out "$OUT/timeline-$preset${TIMELINE_TAG:+-$TIMELINE_TAG}.json"
    ;;
*)
    sed -n '2,19p' "$0"
    exit 2
    ;;
esac
