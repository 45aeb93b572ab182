#!/usr/bin/env bash
# How the [cu13] extra resolves on the GPU machine: doctor for cu13-sm90, then the cpu wheel
# installed with [cu13] from its own index into a fresh venv, and the NVIDIA library
# directories the wheel's runtime finds there. Run from the repository root:
#   bash benchmarks/device/check_cu13_extra.sh
set -u
# shellcheck source=benchmarks/device/common.sh
source benchmarks/device/common.sh
echo "== doctor"; hiraishin doctor --recipe cu13-sm90 2>&1 | sed -n 7,9p; hiraishin doctor --recipe cu13-sm90 >/dev/null 2>&1; echo "doctor exit $?"
rm -rf /tmp/site
hiraishin index dist/wheels/cpu --out /tmp/site > /dev/null 2>&1
user_venv /tmp/venv
install_from_index /tmp/venv /tmp/site cpu 2>&1 | tail -4
/tmp/venv/bin/python -c 'from hiraishin_llama import runtime; print("nvidia lib dirs:", runtime.nvidia_library_dirs())'
