#!/usr/bin/env bash
# The stack applies on the pinned upstream without fuzz and re-exports byte for
# byte (run ci/fetch-upstream.sh first where the cache may lack the pin).
#   ci/patches-check.sh
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
cd "$ROOT"
require_hiraishin
hiraishin upstream verify
hiraishin patches check
