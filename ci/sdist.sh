#!/usr/bin/env bash
# The one sdist every wheel of a run is built from.
#   ci/sdist.sh [OUT_DIR]    (default: dist/sdist)
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
out=$(abspath "${1:-dist/sdist}")
cd "$ROOT"
require_hiraishin
hiraishin sdist --out "$out"
