#!/usr/bin/env bash
# npm test: the type check beside the tests, not before them. The tests begin with the files
# that run alone, one at a time (vitest.config.ts, SERIAL), which leave a core to tsc's 25 s of
# CPU; run first, it added its whole time to the suite's. Its report comes after the tests'
# (so the two do not interleave), and either failing fails the run.
set -u
report=$(mktemp)
typecheck=
# A run stopped by a signal (a CI cancel, kill) stops its type check too.
trap '[ -n "$typecheck" ] && kill "$typecheck" 2>/dev/null; rm -f "$report"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
node_modules/.bin/tsc -p tsconfig.json --noEmit >"$report" 2>&1 &
typecheck=$!
status=0
npx biome check . || status=1
if [ "$status" -eq 0 ]; then
  npx vitest run --project unit --project default --project serial || status=1
fi
if wait "$typecheck"; then
  echo "typecheck: no errors"
else
  echo "typecheck failed:"
  cat "$report"
  status=1
fi
typecheck=
exit "$status"
