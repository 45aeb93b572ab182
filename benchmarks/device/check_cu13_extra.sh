set -u
source benchmarks/device/common.sh
echo "== doctor"; hiraishin doctor --recipe cu13-sm90 2>&1 | sed -n 7,9p; hiraishin doctor --recipe cu13-sm90 >/dev/null 2>&1; echo "doctor exit $?"
rm -rf /tmp/site
hiraishin index dist/wheels/cpu --out /tmp/site > /dev/null 2>&1
user_venv /tmp/venv
install_from_index /tmp/venv /tmp/site cpu 2>&1 | tail -4
/tmp/venv/bin/python -c 'from hiraishin_llama import runtime; print("nvidia lib dirs:", runtime.nvidia_library_dirs())'
