#!/usr/bin/env bash
# The scheduled upstream watch: fetch upstream, scan the stack onto the newest
# tags (hiraishin rebase --scan), and when it stops applying on one of them
# open one issue, or update the open one, with the report (gh, with
# $GH_TOKEN). When the stack applies again, the open issue is closed with a
# comment saying so.
#   ci/upstream-watch.sh [--dry-run] [--no-fetch] [--from PATH_OR_URL] [TAG...]
#     --dry-run   print the report and what would be done with the issue
#                 (also $HIRAISHIN_WATCH_DRY_RUN=1, and whenever gh is not on PATH)
#     --no-fetch  scan what the cache already holds (offline)
#     TAG...      scan these refs instead of the newest $HIRAISHIN_WATCH_TAGS (3)
#                 tags newer than the pin
# The report goes to $HIRAISHIN_WATCH_OUT (default: work/upstream-watch/).
# shellcheck source=ci/common.sh
source "$(dirname "$0")/common.sh"

TITLE="Upstream watch: the patch stack stops applying on a new upstream tag"
LABEL="upstream-watch"

dry_run=${HIRAISHIN_WATCH_DRY_RUN:-0}
fetch=1
from=()
tags=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --no-fetch) fetch=0 ;;
    --from) [[ $# -ge 2 ]] || die 2 "--from needs a path or URL"; from=(--from "$2"); shift ;;
    -*) die 2 "unknown option $1 (use --dry-run, --no-fetch, --from SRC)" ;;
    *) tags+=("$1") ;;
  esac
  shift
done
out=$(abspath "${HIRAISHIN_WATCH_OUT:-work/upstream-watch}")
cd "$ROOT"
require_hiraishin
mkdir -p "$out"

if [[ $fetch == 1 ]]; then
  group "fetching upstream"
  hiraishin upstream fetch "${from[@]}"
  endgroup
fi

if [[ ${#tags[@]} == 0 ]]; then
  # `hiraishin upstream tags` lists one tag per indented line, oldest first.
  listing=$(hiraishin upstream tags)
  echo "$listing"
  mapfile -t tags < <(awk '/^  [^ ]/ { print $1 }' <<< "$listing" | tail -n "${HIRAISHIN_WATCH_TAGS:-3}")
fi
if [[ ${#tags[@]} == 0 ]]; then
  echo "no upstream tag newer than the pin: nothing to scan"
  exit 0
fi

group "scanning the stack onto ${tags[*]}"
hiraishin rebase --scan "${tags[@]}" --report "$out/scan"
endgroup

# The refs where the stack stops applying, one "REF: patch N (NAME)" line each.
python3 - "$out/scan.json" > "$out/conflicts.txt" <<'PY'
import json
import sys

with open(sys.argv[1], encoding="utf-8") as handle:
    report = json.load(handle)
for row in report["rows"]:
    if row.get("first_conflict"):
        number = report["patches"].index(row["first_conflict"]) + 1
        print(f"{row['ref']}: patch {number} ({row['first_conflict']})")
PY

{
  if [[ -s "$out/conflicts.txt" ]]; then
    echo "The patch stack stops applying on a newer upstream tag:"
  else
    echo "The patch stack applies on every tag scanned."
  fi
  echo
  sed 's/^/- /' "$out/conflicts.txt"
  echo
  echo '```'
  cat "$out/scan.txt"
  echo '```'
  echo
  echo "Scanned by the upstream watch on $(date -u +%Y-%m-%dT%H:%M:%SZ)${GITHUB_RUN_ID:+ (run $GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID)}."
  echo "To move the stack: \`hiraishin rebase --onto TAG\`, resolve, \`hiraishin rebase --continue\`."
} > "$out/issue.md"
if [[ -n "${GITHUB_STEP_SUMMARY:-}" ]]; then
  cat "$out/issue.md" >> "$GITHUB_STEP_SUMMARY"
fi

if [[ $dry_run != 1 ]] && ! command -v gh >/dev/null; then
  echo "gh is not on PATH: reporting only (dry run)"
  dry_run=1
fi

open_issue=""
if [[ $dry_run != 1 ]]; then
  open_issue=$(gh issue list --state open --label "$LABEL" --search "\"$TITLE\" in:title" \
    --json number --jq '.[0].number // empty')
fi

if [[ -s "$out/conflicts.txt" ]]; then
  echo "the stack stops applying:"
  cat "$out/conflicts.txt"
  if [[ $dry_run == 1 ]]; then
    echo "dry run: would open the issue \"$TITLE\" (label $LABEL), or update the open one, with $out/issue.md"
  elif [[ -n "$open_issue" ]]; then
    gh issue edit "$open_issue" --body-file "$out/issue.md"
    gh issue comment "$open_issue" --body "Scanned again: $(tr '\n' ' ' < "$out/conflicts.txt")"
    echo "updated issue #$open_issue"
  else
    gh label create "$LABEL" --description "The patch stack against new upstream tags" --force
    gh issue create --title "$TITLE" --label "$LABEL" --body-file "$out/issue.md"
  fi
else
  echo "the stack applies on ${tags[*]}"
  if [[ $dry_run == 1 ]]; then
    echo "dry run: would close an open issue \"$TITLE\" (label $LABEL), if there is one"
  elif [[ -n "$open_issue" ]]; then
    gh issue close "$open_issue" --comment "The stack applies again on ${tags[*]}."
    echo "closed issue #$open_issue"
  fi
fi
