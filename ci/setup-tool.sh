#!/usr/bin/env bash
# Install the hiraishin tool into a virtual environment and put it on PATH for
# the job's later steps (GitHub Actions: through $GITHUB_PATH; elsewhere the
# script prints the line to run).
#   ci/setup-tool.sh [--test] [--system]
#     --test    also what the tests and linters need (the [test] extra)
#     --system  first install what a bare build container lacks: with dnf
#               (the manylinux_2_28 image, nvidia/cuda *-rockylinux8: the
#               images the wheels are built in) git, and where the system gcc
#               is RHEL 8's 8.5, gcc-toolset-13; with apt-get (Ubuntu, Debian)
#               python3, git, a C/C++ compiler and ccache
# The venv is $HIRAISHIN_CI_VENV (default: $RUNNER_TEMP or $TMPDIR, then
# hiraishin-ci-venv).
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"

extras=""
system=0
for arg in "$@"; do
  case "$arg" in
    --test) extras="[test]" ;;
    --system) system=1 ;;
    *) die 2 "unknown option $arg (use --test, --system)" ;;
  esac
done

python=python3
toolset=""
if [[ $system == 1 ]]; then
  [[ $(id -u) == 0 ]] || die 2 "--system installs packages and needs root (it is for build containers)"
  if command -v dnf >/dev/null; then
    group "system packages (dnf)"
    dnf install -y -q git which >/dev/null
    # RHEL 8's gcc 8.5 is far older than what llama.cpp is built with (its C++17 <filesystem>
    # still needs -lstdc++fs there); gcc-toolset links what its newer libstdc++ adds statically
    # (libstdc++_nonshared), so the libraries still need only RHEL 8's GLIBCXX versions,
    # which keeps the manylinux_2_28 floor. The manylinux image has a toolset on PATH already.
    if (( $(gcc -dumpversion 2>/dev/null | cut -d. -f1 || echo 0) < 11 )); then
      dnf install -y -q gcc-toolset-13-gcc gcc-toolset-13-gcc-c++ >/dev/null
      toolset=/opt/rh/gcc-toolset-13/root/usr/bin
      export PATH="$toolset:$PATH"
    fi
    # The manylinux image carries CPython builds under /opt/python; elsewhere RHEL 8's python3.11.
    if [[ -x /opt/python/cp311-cp311/bin/python3 ]]; then
      python=/opt/python/cp311-cp311/bin/python3
    else
      dnf install -y -q python3.11 python3.11-devel >/dev/null
      python=python3.11
    fi
    endgroup
  elif command -v apt-get >/dev/null; then
    group "system packages (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends \
      python3 python3-venv python3-pip python3-dev git ca-certificates build-essential ccache >/dev/null
    endgroup
  else
    die 2 "--system needs dnf (manylinux_2_28, Rocky Linux 8 images) or apt-get (Ubuntu, Debian)"
  fi
fi

command -v "$python" >/dev/null || die 2 "$python (>= 3.10) is not on PATH"
command -v git >/dev/null || die 2 "git is not on PATH"
"$python" - <<'PY' || die 2 "hiraishin needs Python >= 3.10; $("$python" --version) is on PATH"
import sys
sys.exit(0 if sys.version_info >= (3, 10) else 1)
PY

venv=${HIRAISHIN_CI_VENV:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/hiraishin-ci-venv}
group "hiraishin$extras into $venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e "$ROOT$extras"
"$venv/bin/hiraishin" --version
endgroup

if [[ -n "${GITHUB_PATH:-}" ]]; then
  # Later lines of GITHUB_PATH come first on PATH: the venv, then the compiler toolset.
  if [[ -n $toolset ]]; then echo "$toolset" >> "$GITHUB_PATH"; fi
  echo "$venv/bin" >> "$GITHUB_PATH"
else
  echo "export PATH=\"$venv/bin${toolset:+:$toolset}:\$PATH\""
fi
