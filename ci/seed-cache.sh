#!/usr/bin/env bash
# CI reaches no network but the package registries. Where the tool's upstream
# cache lacks the pin and the seeded cache that every CI run has beside the
# project (../shared/data/upstream-cache/, a tarball of a cache filled from the
# pin's repository) is there, unpack it into a temporary directory and print
# `HIRAISHIN_CACHE_DIR=<dir>` for the caller to export; print nothing
# otherwise (the wheel and integration tests then skip, saying why).
#   ci/seed-cache.sh [SEED_DIR]
# The tarball's sha256 must be the one its README states: a damaged or
# half-copied seed is refused, not used.
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
cd "$ROOT"
require_hiraishin

seed_dir=${1:-${HIRAISHIN_SEED_DIR:-$ROOT/../shared/data/upstream-cache}}
tarball=$seed_dir/hiraishin-cache.tar.gz

if hiraishin upstream verify >/dev/null 2>&1; then
  echo "ci/seed-cache.sh: the tool's cache already holds the pin; not seeding" >&2
  exit 0
fi
if [[ ! -f "$tarball" ]]; then
  echo "ci/seed-cache.sh: no seeded cache at $tarball; the cache stays as it is" >&2
  exit 0
fi
stated=$(sed -n 's/^sha256 of the tarball: *\([0-9a-f]\{64\}\).*/\1/p' "$seed_dir/README.md" 2>/dev/null | head -1)
actual=$(sha256sum "$tarball" | cut -d' ' -f1)
[[ -n "$stated" ]] || die 4 "$seed_dir/README.md states no 'sha256 of the tarball:'; refusing to use $tarball unchecked"
[[ "$stated" == "$actual" ]] || die 4 "$tarball has sha256 $actual, but $seed_dir/README.md states $stated: a damaged or partial copy"

group "seeding the upstream cache from $tarball"
cache=$(mktemp -d "${TMPDIR:-/tmp}/hiraishin-seeded-cache.XXXXXX")
tar xzf "$tarball" -C "$cache"
HIRAISHIN_CACHE_DIR=$cache hiraishin upstream verify >&2 \
  || die 4 "the seeded cache in $cache does not hold the pin of recipes/upstream.toml"
endgroup
echo "HIRAISHIN_CACHE_DIR=$cache"
