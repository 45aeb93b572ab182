set -u
source benchmarks/device/common.sh
echo "== doctor"; hiraishin doctor --recipe cu13-sm90 2>&1 | sed -n 7,9p; hiraishin doctor --recipe cu13-sm90 >/dev/null 2>&1; echo "doctor exit $?"
rm -rf /tmp/site /tmp/venv
hiraishin index dist/wheels/cpu --out /tmp/site > /dev/null 2>&1
python3 -m venv /tmp/venv
nvsite=$(find / -maxdepth 9 -type d -path '*-packages/nvidia/cu13' 2>/dev/null | head -1); nvsite=$(dirname "$(dirname "$nvsite")")
echo "NVIDIA wheels at $nvsite"
echo "$nvsite" > "$(/tmp/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/machine-nvidia-wheels.pth"
/tmp/venv/bin/pip list 2>/dev/null | grep -i '^nvidia'
echo "\$ pip install 'hiraishin-llama[cu13]' --index-url file:///tmp/site/cpu/simple --find-links .whl"
/tmp/venv/bin/pip install --no-cache-dir --index-url file:///tmp/site/cpu/simple --find-links .whl 'hiraishin-llama[cu13]' 2>&1 | tail -4
/tmp/venv/bin/python -c 'from hiraishin_llama import runtime; print("nvidia lib dirs:", runtime.nvidia_library_dirs())'
