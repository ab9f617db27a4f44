#!/usr/bin/env bash
# npm test: the type check and the lint beside the tests, not before them. The tests begin with
# the files that run alone, one at a time (vitest.config.ts, SERIAL), which leave a core to tsc's
# 25 s of CPU and biome's 5; run first, they added their whole time to the suite's. Their reports
# come after the tests' (so they do not interleave), and any of the three failing fails the run.
set -u
typecheck_report=$(mktemp)
lint_report=$(mktemp)
typecheck=
lint=
# A run stopped by a signal (a CI cancel, kill) stops its type check and lint too.
trap '[ -n "$typecheck" ] && kill "$typecheck" 2>/dev/null; [ -n "$lint" ] && kill "$lint" 2>/dev/null; rm -f "$typecheck_report" "$lint_report"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
node_modules/.bin/tsc -p tsconfig.json --noEmit >"$typecheck_report" 2>&1 &
typecheck=$!
node_modules/.bin/biome check . >"$lint_report" 2>&1 &
lint=$!
status=0
npx vitest run --project unit --project default --project serial || status=1
if wait "$lint"; then
  echo "lint: no findings"
else
  echo "lint failed:"
  cat "$lint_report"
  status=1
fi
lint=
if wait "$typecheck"; then
  echo "typecheck: no errors"
else
  echo "typecheck failed:"
  cat "$typecheck_report"
  status=1
fi
typecheck=
exit "$status"
