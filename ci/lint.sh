#!/usr/bin/env bash
# The lint job: Python (ruff: pyflakes' checks and syntax errors), the CI
# scripts (shellcheck), the workflows (installed copies in sync with
# ci/workflows/, actionlint clean), and the generated pages of docs/ (the
# command reference and the cost page, current with their sources).
#   ci/lint.sh
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
cd "$ROOT"
require_hiraishin

group "ruff"
ruff check --no-cache --select F,E4,E7,E9 hiraishin_build tests benchmarks wheels
endgroup

group "shellcheck ci/*.sh .ci/run benchmarks/device/*.sh"
shellcheck -x ci/*.sh .ci/run benchmarks/device/*.sh
endgroup

group "workflows"
hiraishin workflows check
endgroup

group "generated docs"
hiraishin docs --check
endgroup
