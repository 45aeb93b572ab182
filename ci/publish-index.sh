#!/usr/bin/env bash
# The publish job's site: per-variant PEP 503 indexes of the smoke-tested
# wheels under WHEELS_DIR (hiraishin index), written to SITE for GitHub Pages.
#   ci/publish-index.sh WHEELS_DIR SITE
# A site over GitHub Pages' 1 GB limit is refused here rather than by the deploy.
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
[[ $# == 2 ]] || die 2 "usage: ci/publish-index.sh WHEELS_DIR SITE"
wheels=$(abspath "$1")
site=$(abspath "$2")
cd "$ROOT"
require_hiraishin
[[ -d "$wheels" ]] || die 2 "no directory $wheels (the smoke-tested wheels)"

hiraishin index "$wheels" --out "$site"
shopt -s nullglob
indexes=("$site"/*/simple/index.html)
shopt -u nullglob
[[ ${#indexes[@]} -gt 0 ]] || die 13 "no variant index was written to $site: no labelled hiraishin_llama wheel under $wheels"

limit=${HIRAISHIN_SITE_LIMIT_BYTES:-1000000000}
bytes=$(du -sb "$site" | cut -f1)
echo "site: $site, ${#indexes[@]} variant index(es), $bytes bytes"
[[ $bytes -le $limit ]] || die 13 "the site is $bytes bytes, over the $limit-byte limit of GitHub Pages"
