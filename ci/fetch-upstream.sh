#!/usr/bin/env bash
# Make sure the upstream cache holds the pinned commit: fetch it when the cache
# (restored by CI, or the user's) lacks it, then verify the pin.
#   ci/fetch-upstream.sh [--from PATH_OR_URL]
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
cd "$ROOT"
require_hiraishin

if hiraishin upstream verify >/dev/null 2>&1; then
  hiraishin upstream verify
else
  group "fetching the pinned upstream"
  hiraishin upstream fetch "$@"
  endgroup
fi
