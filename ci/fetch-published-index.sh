#!/usr/bin/env bash
# The list of every wheel the published site links (index.json), into SITE, so
# that this release's index keeps the earlier ones (the Pages deploy replaces
# the whole site).
#   ci/fetch-published-index.sh SITE_URL SITE
# 200: kept as SITE/index.json. 404: the first release (or a site from before
# the list existed), nothing to merge. Anything else fails the job: the
# release would otherwise drop every earlier one from the index.
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
[[ $# == 2 ]] || die 2 "usage: ci/fetch-published-index.sh SITE_URL SITE"
url="${1%/}/index.json"
site=$(abspath "$2")
mkdir -p "$site"
status=$(curl -sS -L --retry 3 -o "$site/index.json.part" -w '%{http_code}' "$url") || status=000
case $status in
    200) mv "$site/index.json.part" "$site/index.json"; echo "merging the releases listed at $url" ;;
    404) rm -f "$site/index.json.part"; echo "no release listed at $url yet: this is the first" ;;
    *) rm -f "$site/index.json.part"
       die 13 "$url answered $status; without it the earlier releases would drop out of the index (re-run the job)" ;;
esac
