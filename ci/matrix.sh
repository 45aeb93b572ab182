#!/usr/bin/env bash
# The wheel matrix, derived from recipes/ and ci/matrix.toml by
# `hiraishin matrix`: written as the step output `matrix` on GitHub Actions,
# printed otherwise. Recipes to keep (default: all) come as arguments or,
# space-separated, in $HIRAISHIN_RECIPES.
#   ci/matrix.sh [RECIPE...]
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
cd "$ROOT"
require_hiraishin

recipes=("$@")
if [[ ${#recipes[@]} == 0 && -n "${HIRAISHIN_RECIPES:-}" ]]; then
  read -r -a recipes <<< "$HIRAISHIN_RECIPES"
fi
only=()
for recipe in "${recipes[@]}"; do
  only+=(--recipe "$recipe")
done

hiraishin matrix "${only[@]}"
matrix=$(hiraishin matrix --format github "${only[@]}")
if [[ -n "${GITHUB_OUTPUT:-}" ]]; then
  echo "matrix=$matrix" >> "$GITHUB_OUTPUT"
else
  echo "$matrix"
fi
