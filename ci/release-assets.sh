#!/usr/bin/env bash
# The files hiraishin index wrote for the release (the wheels and their
# .metadata) as the assets of the tag's GitHub Release, made if absent.
#   GH_TOKEN=... ci/release-assets.sh TAG ASSETS_DIR
# Run after ci/publish-index.sh, which refuses a wheel over the asset limit
# and a site over the Pages limit before anything is uploaded. A re-run
# uploads the same bytes again (hiraishin index never lets a name change them).
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
[[ $# == 2 ]] || die 2 "usage: ci/release-assets.sh TAG ASSETS_DIR"
tag=$1
assets=$(abspath "$2")
shopt -s nullglob
files=("$assets"/*.whl "$assets"/*.whl.metadata)
shopt -u nullglob
[[ ${#files[@]} -gt 0 ]] || die 13 "no wheel in $assets: run ci/publish-index.sh with ASSETS_DIR first"
command -v gh > /dev/null || die 127 "gh (the GitHub CLI) is not installed"
gh release view "$tag" > /dev/null 2>&1 ||
    gh release create "$tag" --verify-tag --title "$tag" --notes "hiraishin-llama $tag"
gh release upload "$tag" "${files[@]}" --clobber
echo "uploaded ${#files[@]} file(s) to the release $tag"
