#!/usr/bin/env bash
# The test job: the README's test command (the tool installed with the [test]
# extra by ci/setup-tool.sh --test). Integration tests skip, saying why,
# where the upstream cache lacks the pin. Arguments go to pytest.
#   ci/unit-tests.sh [PYTEST ARGS]
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"
cd "$ROOT"
python3 -m pytest "$@"
