#!/usr/bin/env bash
# The publish job's site: per-variant PEP 503 indexes of the smoke-tested
# wheels under WHEELS_DIR (hiraishin index), written to SITE for GitHub Pages.
#   ci/publish-index.sh WHEELS_DIR SITE                    # the wheels inside the site
#   ci/publish-index.sh WHEELS_DIR SITE ASSETS_DIR ASSETS_URL
# With ASSETS_URL (the release's download URL) the pages link the wheels
# there, and ASSETS_DIR receives the files to upload as the release's assets
# (the wheels and their .metadata); SITE/index.json, when the job fetched the
# published one, lists the earlier releases, which stay in the pages.
# A wheel over GitHub's 2 GiB asset limit (hiraishin index) and a site over
# GitHub Pages' 1 GB limit are refused here, before anything is uploaded.
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
[[ $# == 2 || $# == 4 ]] || die 2 "usage: ci/publish-index.sh WHEELS_DIR SITE [ASSETS_DIR ASSETS_URL]"
wheels=$(abspath "$1")
site=$(abspath "$2")
assets=()
if [[ $# == 4 ]]; then assets=(--assets-out "$(abspath "$3")" --assets-url "$4"); fi
cd "$ROOT"
require_hiraishin
[[ -d "$wheels" ]] || die 2 "no directory $wheels (the smoke-tested wheels)"

hiraishin index "$wheels" --out "$site" "${assets[@]}"
shopt -s nullglob
indexes=("$site"/*/simple/index.html)
shopt -u nullglob
[[ ${#indexes[@]} -gt 0 ]] || die 13 "no variant index was written to $site: no labelled hiraishin_llama wheel under $wheels"

limit=${HIRAISHIN_SITE_LIMIT_BYTES:-1000000000}
bytes=$(du -sb "$site" | cut -f1)
echo "site: $site, ${#indexes[@]} variant index(es), $bytes bytes"
[[ $bytes -le $limit ]] || die 13 "the site is $bytes bytes, over the $limit-byte limit of GitHub Pages"
