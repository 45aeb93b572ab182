#!/usr/bin/env bash
# One call on the GPU machine: the cu13-sm90 wheel from the sdist, its
# per-variant index, a fresh venv that sees the machine's CUDA 13 NVIDIA
# wheels (.pth), `pip install 'hiraishin-llama[cu13]'` from the file:// index,
# `hiraishin-llama --version` and a short smoke test. For a session with little
# device time left; gpu_session.sh is the full version.
#   bash benchmarks/device/wheel_index_smoke.sh SDIST [SMOKE ARGS]
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# shellcheck source=benchmarks/device/common.sh
source "$(dirname "$0")/common.sh"
sdist=$1; shift
t0=$(date +%s)
hiraishin -v wheel --recipe cu13-sm90 --sdist "$sdist" --no-build-isolation -j "$(nproc)" > "$OUT/wheel.out" 2>&1
rc=$?; echo "wheel exit $rc after $(( $(date +%s) - t0 ))s"; tail -3 "$OUT/wheel.out"; [ $rc = 0 ] || exit $rc
wheel_dir=$(dirname "$sdist")/wheels/cu13-sm90
# shellcheck disable=SC2012  # the listing is the record (sizes and dates), nothing parses it
ls -la "$wheel_dir"/*.whl | tee "$OUT/wheel-ls.txt"
hiraishin index "$wheel_dir" --out /tmp/site > "$OUT/index.txt" 2>&1 || { cat "$OUT/index.txt"; exit 1; }
user_venv /tmp/venv > "$OUT/nvidia-wheels.txt"
install_from_index /tmp/venv /tmp/site cu13-sm90 > "$OUT/install-transcript.txt" 2>&1
tail -4 "$OUT/install-transcript.txt"
t1=$(date +%s)
/tmp/venv/bin/hiraishin-llama-smoke --json "$OUT/smoke.json" "$@" > "$OUT/smoke.log" 2>&1
rc=$?; echo "smoke exit $rc after $(( $(date +%s) - t1 ))s"; tail -8 "$OUT/smoke.log"
echo "total $(( $(date +%s) - t0 ))s"
exit $rc
