#!/usr/bin/env bash
# Installs and starts what the test suite needs beyond npm packages, on Debian:
# munge (the MUNGE authentication tests) with munged running, redis-server
# (the daemon's tests start their own servers from it), postgresql (likewise, for the history
# on PostgreSQL), chromium (the web UI's tests), iproute2 (the two-host tests), systemd
# (systemd-analyze, for the packaged unit's test), jq and python3-requests (the HTTP API's
# examples in examples/, run by their test).
# Safe to run again: it only does what is missing.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "test-setup: not root and no sudo; install munge, redis-server, postgresql, chromium, iproute2, systemd, jq and python3-requests yourself (apt-get install munge redis-server postgresql chromium iproute2 systemd jq python3-requests) and start munged" >&2
    exit 1
  fi
fi

missing=()
command -v munge >/dev/null 2>&1 || missing+=(munge)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# Debian's chromium for the web UI's browser tests (playwright-core drives /usr/bin/chromium;
# playwright's own browser download does not work on these machines).
[ -x /usr/bin/chromium ] || missing+=(chromium)
# Debian's PostgreSQL server binaries: the history tests on PostgreSQL start servers of their own
# from them (test/helpers/postgres.ts). The package also makes a `main` cluster on port 5432,
# started where an init system runs; the tests never use it.
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql)
# `ip netns`: the two-host tests make hosts as network namespaces (test/helpers/netns.ts).
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
# `systemd-analyze verify` checks the packaged unit (test/integration/service/systemd-unit.test.ts);
# Debian's `systemd` package has it and the units it names. Nothing is started: on a machine
# without systemd as init the package is only files.
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
# The examples of docs/http-api.md (test/integration/api/api-examples.test.ts): the shell one
# with curl and jq, the Python one with `requests` (Debian's python3-requests brings python3).
command -v jq >/dev/null 2>&1 || missing+=(jq)
has_requests() { python3 -c 'import requests' >/dev/null 2>&1 || /usr/bin/python3 -c 'import requests' >/dev/null 2>&1; }
has_requests || missing+=(python3-requests)
if [ ${#missing[@]} -gt 0 ]; then
  echo "test-setup: installing ${missing[*]} (Debian packages)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# python3-requests is Debian's python3's; the examples' test runs that one when another python3
# first on the PATH (pyenv, a venv) has no `requests`.
if ! has_requests; then
  echo "test-setup: neither python3 nor /usr/bin/python3 can import requests; install python3-requests" >&2
  exit 1
fi

# munged must answer on the default socket. Started directly as the munge user: the init
# script takes any munged on the machine (a test Slurm cluster runs one on its own socket)
# for this one and starts nothing.
if ! munge -n >/dev/null 2>&1; then
  echo "test-setup: starting munged"
  $SUDO install -d -o munge -g munge -m 0755 /run/munge
  $SUDO runuser -u munge -- /usr/sbin/munged --force
  for _ in 1 2 3 4 5 6 7 8 9 10; do munge -n >/dev/null 2>&1 && break; sleep 0.5; done
fi
munge -n -t 5 | unmunge >/dev/null

# Run as root, the simulator runs job scripts as this unprivileged user, never as root (as
# `schedflow setup` makes it for `npm start`); the tests' job folders are given to it. Tests
# that do not run as root run jobs as themselves and need no such user.
if [ "$(id -u)" -eq 0 ] && ! getent passwd schedflow-job >/dev/null; then
  echo "test-setup: creating the user schedflow-job"
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin schedflow-job
fi
