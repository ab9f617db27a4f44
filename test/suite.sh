#!/usr/bin/env bash
# npm test: the type check beside the tests, not before them. The test files leave the 2 cores
# idle about a third of the time (they wait on servers and processes), and tsc's 25 s of CPU
# fits there; run first, it added its whole time to the suite's. Its report comes after the
# tests' (so the two do not interleave), and either failing fails the run.
set -u
report=$(mktemp)
trap 'rm -f "$report"' EXIT
npx tsc -p tsconfig.json --noEmit >"$report" 2>&1 &
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
exit "$status"
