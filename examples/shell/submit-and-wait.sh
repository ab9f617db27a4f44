#!/usr/bin/env bash
# Submit a job to schedflow's local API and wait until it ends, with curl and jq.
#
#   SCHEDFLOW_TOKEN=sfa_... ./submit-and-wait.sh [job.json]
#
# job.json is a submit body (POST /api/v1/jobs, e.g. {"spec": {"name": ..., "script": ...}});
# without it, a small hello job. SCHEDFLOW_URL is the daemon's address (default
# http://127.0.0.1:8080).
#
# The submission carries an Idempotency-Key made once, so sending it again (after a 429 or 503,
# honouring Retry-After, or a connection that broke before the answer) never makes a second job.
# A 4xx other than 429 is the request's own mistake: it is printed and not sent again.
#
# Prints the final state on stdout, `<request id> <state> exit_code=<n>`, and exits 0 when the
# job completed, 1 when it ended otherwise (failed, timeout, cancelled, ...), 2 when the API
# refused the request or could not be reached.
set -euo pipefail

base=${SCHEDFLOW_URL:-http://127.0.0.1:8080}
base=${base%/}
if [ -z "${SCHEDFLOW_TOKEN:-}" ]; then
  echo "set SCHEDFLOW_TOKEN (schedflow tokens create --name NAME --scopes submit,read)" >&2
  exit 2
fi
attempts=8 # tries of one call before giving up on 429/503/connection errors
# The request states nothing changes any more (`lost` is not one: accounting may still find it).
terminal=' completed failed timeout cancelled node_fail out_of_memory preempted boot_fail deadline submit_failed '

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The body goes to curl in a file too: a job's environment may hold secrets, and one argument
# is at most 128 KiB where the API takes 1 MiB.
if [ $# -gt 0 ]; then
  jq -c . "$1" >"$tmp/request.json"
else
  jq -nc '{spec: {name: "hello", script: "#!/bin/sh\necho hello from job $SLURM_JOB_ID\n", time_limit: 10}}' >"$tmp/request.json"
fi
# The token goes to curl in a file of ours, never on its command line (where `ps` shows it).
printf 'Authorization: Bearer %s\n' "$SCHEDFLOW_TOKEN" >"$tmp/auth"
chmod 600 "$tmp/auth"

# call METHOD PATH [curl args...]: the answer's body in $tmp/body, its headers in $tmp/headers,
# its status in $status. Tried again on 429/503 (after Retry-After) and on connection errors.
call() {
  local method=$1 path=$2 attempt pause code
  shift 2
  for ((attempt = 1; ; attempt++)); do
    if status=$(curl -sS -X "$method" -H "@$tmp/auth" --connect-timeout 5 --max-time 30 \
      -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' "$@" "$base$path"); then
      [ "$status" -lt 400 ] && return 0
      code=$(jq -r '.error.code? // empty' "$tmp/body" 2>/dev/null || true)
      # 409 IDEMPOTENCY_KEY_IN_USE: the same key while its first request is still being answered.
      if [ "$status" != 429 ] && [ "$status" != 503 ] && [ "$code" != SCHEDFLOW_ERR_IDEMPOTENCY_KEY_IN_USE ]; then
        return 1
      fi
      [ "$attempt" -ge "$attempts" ] && return 1
      pause=$(tr -d '\r' <"$tmp/headers" | awk -F': *' 'tolower($1) == "retry-after" { print $2 }' | tail -n 1)
      [[ "$pause" =~ ^[0-9]+$ ]] || pause=$((attempt < 5 ? 2 ** attempt : 30))
      # A longer wait (a daily quota spent) is reported, not slept through.
      [ "$pause" -gt 300 ] && return 1
      echo "$method $path: $status $code; again in $pause s" >&2
    else
      status=000 # no answer: refused, reset or timed out
      [ "$attempt" -ge "$attempts" ] && return 1
      pause=$((attempt < 5 ? 2 ** attempt : 30))
      echo "$method $path: no answer; again in $pause s" >&2
    fi
    sleep "$pause"
  done
}

# refused: prints an error answer (code, message, each field's problem) and exits 2.
refused() {
  if [ "$status" = 000 ]; then
    echo "could not reach $base" >&2
  else
    jq -r --arg status "$status" '"refused: \($status) \(.error.code): \(.error.message)",
      (.error.fields[]? | "  \(.in) \(.path): \(.reason)")' "$tmp/body" >&2 2>/dev/null ||
      echo "refused: $status $(cat "$tmp/body")" >&2
  fi
  exit 2
}

# One key for every try of this submission: a repeat is answered with the first request.
key=$(cat /proc/sys/kernel/random/uuid 2>/dev/null || uuidgen)
call POST /api/v1/jobs -H 'Content-Type: application/json' -H "Idempotency-Key: $key" \
  --data-binary "@$tmp/request.json" || refused
id=$(jq -r .id "$tmp/body")
self=$(jq -r .links.self "$tmp/body")
replayed=$(grep -qi '^idempotent-replayed: *true' "$tmp/headers" && echo ' (replayed)' || true)
echo "submitted $id: $(jq -r .state "$tmp/body")$replayed" >&2

# Poll, 1 s apart at first, backing off to 30 s, until it ends.
delay=1 last=
while :; do
  call GET "$self" || refused
  state=$(jq -r .state "$tmp/body")
  [ "$state" != "$last" ] && echo "$id: $state" >&2 && last=$state
  [[ "$terminal" == *" $state "* ]] && break
  sleep "$delay"
  delay=$((delay * 3 / 2 + 1 > 30 ? 30 : delay * 3 / 2 + 1))
done

echo "$id $state exit_code=$(jq -r '.exit_code // "none"' "$tmp/body")"
jq -r '.error.message? // empty | "error: \(.)"' "$tmp/body" >&2
[ "$state" = completed ]
