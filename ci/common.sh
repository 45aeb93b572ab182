# Sourced by every ci/*.sh script (not run on its own): strict mode, the
# repository root, the cache locations CI restores, and log folds.
# shellcheck shell=bash
set -euo pipefail

# shellcheck disable=SC2034  # used by the scripts that source this file
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PYTHONUNBUFFERED=1

# On GitHub Actions the caches live in the workspace, where actions/cache
# restores them (.cache/pip, .cache/ccache, .cache/hiraishin), also inside a
# container job. Anywhere else the user's own caches are used.
if [[ -n "${GITHUB_WORKSPACE:-}" ]]; then
  export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$GITHUB_WORKSPACE/.cache/pip}"
  export CCACHE_DIR="${CCACHE_DIR:-$GITHUB_WORKSPACE/.cache/ccache}"
  export HIRAISHIN_CACHE_DIR="${HIRAISHIN_CACHE_DIR:-$GITHUB_WORKSPACE/.cache/hiraishin}"
fi

group() {
  if [[ "${GITHUB_ACTIONS:-}" == "true" ]]; then echo "::group::$*"; else echo "==> $*"; fi
}

endgroup() {
  if [[ "${GITHUB_ACTIONS:-}" == "true" ]]; then echo "::endgroup::"; fi
}

die() {
  local code=$1
  shift
  if [[ "${GITHUB_ACTIONS:-}" == "true" ]]; then echo "::error::$*"; fi
  echo "error: $*" >&2
  exit "$code"
}

abspath() {
  realpath -m -- "$1"
}

require_hiraishin() {
  command -v hiraishin >/dev/null \
    || die 2 "hiraishin is not on PATH: run ci/setup-tool.sh (it prints the PATH line), or python3 -m pip install -e ."
}
