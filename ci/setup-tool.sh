#!/usr/bin/env bash
# Install the hiraishin tool into a virtual environment and put it on PATH for
# the job's later steps (GitHub Actions: through $GITHUB_PATH; elsewhere the
# script prints the line to run).
#   ci/setup-tool.sh [--test] [--system]
#     --test    also what the tests and linters need (the [test] extra)
#     --system  first install python3, git, a C/C++ compiler and ccache with
#               apt-get (bare build containers: ubuntu, nvidia/cuda devel)
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

if [[ $system == 1 ]]; then
  [[ $(id -u) == 0 ]] || die 2 "--system installs packages with apt-get and needs root (it is for build containers)"
  command -v apt-get >/dev/null || die 2 "--system needs apt-get (an Ubuntu or Debian container)"
  group "system packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends \
    python3 python3-venv python3-pip python3-dev git ca-certificates build-essential ccache >/dev/null
  endgroup
fi

command -v python3 >/dev/null || die 2 "python3 (>= 3.10) is not on PATH"
command -v git >/dev/null || die 2 "git is not on PATH"
python3 - <<'PY' || die 2 "hiraishin needs Python >= 3.10; $(python3 --version) is on PATH"
import sys
sys.exit(0 if sys.version_info >= (3, 10) else 1)
PY

venv=${HIRAISHIN_CI_VENV:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/hiraishin-ci-venv}
group "hiraishin$extras into $venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e "$ROOT$extras"
"$venv/bin/hiraishin" --version
endgroup

if [[ -n "${GITHUB_PATH:-}" ]]; then
  echo "$venv/bin" >> "$GITHUB_PATH"
else
  echo "export PATH=\"$venv/bin:\$PATH\""
fi
