#!/usr/bin/env python3
"""Submit a job to schedflow's local API and wait until it ends.

    SCHEDFLOW_TOKEN=sfa_... python3 submit_and_wait.py [job.json]

job.json is a submit body (POST /api/v1/jobs, e.g. {"spec": {"name": ..., "script": ...}});
without it, a small hello job. SCHEDFLOW_URL is the daemon's address (default
http://127.0.0.1:8080). Needs `requests` (pip install requests, or Debian's python3-requests).

The submission carries an Idempotency-Key made once, so sending it again (after a 429 or 503,
honouring Retry-After, or a connection that broke before the answer) never makes a second job.
A 4xx other than 429 is the request's own mistake: it is printed and not sent again.

Prints the final state on stdout, `<request id> <state> exit_code=<n>`, and exits 0 when the job
completed, 1 when it ended otherwise (failed, timeout, cancelled, ...), 2 when the API refused
the request or could not be reached.
"""

import json
import math
import os
import random
import sys
import time
import uuid
from email.utils import parsedate_to_datetime

import requests

BASE_URL = os.environ.get("SCHEDFLOW_URL", "http://127.0.0.1:8080").rstrip("/")
TOKEN = os.environ.get("SCHEDFLOW_TOKEN", "")

# The request states nothing changes any more (`lost` is not one: accounting may still find it).
TERMINAL = {
    "completed", "failed", "timeout", "cancelled", "node_fail", "out_of_memory",
    "preempted", "boot_fail", "deadline", "submit_failed",
}
ATTEMPTS = 8  # tries of one call before giving up on 429/503/connection errors
TIMEOUT = (5, 30)  # seconds: to connect, to read an answer
MAX_WAIT = 300  # seconds: a longer Retry-After (a daily quota spent) is reported, not slept through

HELLO = {
    "spec": {
        "name": "hello",
        "script": "#!/bin/sh\necho hello from job $SLURM_JOB_ID\n",
        "time_limit": 10,
    }
}


class ApiError(Exception):
    """An answer that retrying will not change (a 4xx other than 429), or retries ran out."""

    def __init__(self, status, body):
        error = body.get("error", {}) if isinstance(body, dict) else {}
        self.status = status
        self.code = error.get("code", "?")
        self.message = error.get("message", str(body))
        self.fields = error.get("fields", [])
        super().__init__(f"{status} {self.code}: {self.message}")


def retry_after(response, attempt):
    """Seconds to wait before the next try: the answer's Retry-After, else a backoff with jitter."""
    value = response.headers.get("Retry-After") if response is not None else None
    if value:
        try:
            wait = float(value)
        except ValueError:  # an HTTP date, as RFC 9110 also allows
            try:
                wait = parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError):
                wait = math.nan
        if not math.isnan(wait):
            return max(0.0, wait)
    return min(30.0, 2 ** attempt) * random.uniform(0.5, 1.0)


def retryable(response):
    if response.status_code in (429, 503):
        return True
    # The same key while its first request is still being answered: 409 with Retry-After: 1.
    return response.status_code == 409 and error_code(response) == "SCHEDFLOW_ERR_IDEMPOTENCY_KEY_IN_USE"


def error_code(response):
    try:
        return response.json().get("error", {}).get("code")
    except ValueError:
        return None


def call(session, method, path, **kwargs):
    """One API call, tried again on 429/503 (after Retry-After) and on connection errors."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            response = session.request(method, BASE_URL + path, timeout=TIMEOUT, **kwargs)
        except (requests.ConnectionError, requests.Timeout) as error:
            if attempt == ATTEMPTS:
                raise
            wait = retry_after(None, attempt)
            print(f"{method} {path}: {error.__class__.__name__}; again in {wait:.1f} s", file=sys.stderr)
            time.sleep(wait)
            continue
        if response.ok:
            return response
        wait = retry_after(response, attempt)
        if not retryable(response) or attempt == ATTEMPTS or wait > MAX_WAIT:
            try:
                body = response.json()
            except ValueError:
                body = response.text
            raise ApiError(response.status_code, body)
        print(f"{method} {path}: {response.status_code} {error_code(response)}; again in {wait:.1f} s", file=sys.stderr)
        time.sleep(wait)
    raise AssertionError("unreachable")


def submit(session, body):
    # One key for every try of this submission: a repeat is answered with the first request.
    key = str(uuid.uuid4())
    response = call(session, "POST", "/api/v1/jobs", json=body, headers={"Idempotency-Key": key})
    created = response.json()
    replayed = " (replayed)" if response.headers.get("Idempotent-Replayed") == "true" else ""
    print(f"submitted {created['id']}: {created['state']}{replayed}", file=sys.stderr)
    return created


def wait(session, created):
    """Polls the job, 1 s apart at first, backing off to 30 s, until it ends."""
    delay, last = 1.0, None
    while True:
        job = call(session, "GET", created["links"]["self"]).json()
        if job["state"] != last:
            print(f"{job['id']}: {job['state']}", file=sys.stderr)
            last = job["state"]
        if job["state"] in TERMINAL:
            return job
        time.sleep(delay * random.uniform(0.8, 1.2))
        delay = min(delay * 1.5, 30.0)


def main():
    if not TOKEN:
        print("set SCHEDFLOW_TOKEN (schedflow tokens create --name NAME --scopes submit,read)", file=sys.stderr)
        return 2
    body = HELLO
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as f:
            body = json.load(f)
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {TOKEN}"
        try:
            job = wait(session, submit(session, body))
        except ApiError as error:
            print(f"refused: {error}", file=sys.stderr)
            for field in error.fields:
                print(f"  {field['in']} {field['path']}: {field['reason']}", file=sys.stderr)
            return 2
        except requests.RequestException as error:
            print(f"could not reach {BASE_URL}: {error}", file=sys.stderr)
            return 2
    exit_code = job["exit_code"] if job["exit_code"] is not None else "none"
    print(f"{job['id']} {job['state']} exit_code={exit_code}")
    if job.get("error"):
        print(f"error: {job['error']['message']}", file=sys.stderr)
    return 0 if job["state"] == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
