import type { DaemonUnderTest } from './daemon.js';
import { sleep } from './processes.js';
import type { Random } from './random.js';

/** One submission the harness sent to the local API. */
export interface Submission {
  /** Unique job name, so scheduler jobs can be counted per submission as well as per marker. */
  name: string;
  sentAt: number;
  /** HTTP status, or undefined when no answer came (connection refused, cut off, timed out). */
  status?: number;
  /** The request id of a 2xx answer. */
  requestId?: string;
  error?: string;
}

/**
 * Part of every job name, so jobs of an earlier run on a cluster that outlives the run (the
 * real one: its accounting keeps them) are never counted as this run's duplicates.
 */
const RUN_TAG = Date.now().toString(36);

/**
 * A short job whose script succeeds: anything but `completed` for it is the fault's doing. Its
 * limit is a minute, as a user would give a job of a second: a slurmctld killed while such jobs
 * end can come back with them RUNNING from an older state save, holding the node until their
 * limit (docs/operations.md, the real-cluster chaos run), and the next trial's jobs wait that out.
 */
export function jobSpec(name: string) {
  return { name, script: '#!/bin/sh\nsleep 1\necho ok\n', time_limit: 1 };
}

/** POST /api/v1/jobs once; an answer that does not come within 5 s counts as none (a client gives up). */
export async function submitOne(daemon: DaemonUnderTest, name: string): Promise<Submission> {
  const sub: Submission = { name, sentAt: Date.now() };
  try {
    const res = await fetch(`${daemon.apiUrl}/api/v1/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${daemon.apiToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ spec: { ...jobSpec(name), ...daemon.specExtra } }),
      signal: AbortSignal.timeout(5000),
    });
    sub.status = res.status;
    const body = (await res.json().catch(() => ({}))) as { id?: string };
    if (res.ok && body.id) sub.requestId = body.id;
  } catch (error) {
    sub.error = (error as Error).name === 'TimeoutError' ? 'no answer in 5 s' : (error as Error).message;
  }
  return sub;
}

/**
 * A burst of `count` submissions, each started `gapMs` (random in the range) after the last
 * without waiting for the answer before (clients do not queue politely); resolves when every
 * one has its answer or none.
 */
export async function burst(
  daemon: DaemonUnderTest,
  prefix: string,
  count: number,
  random: Random,
  gapMs: [number, number] = [30, 250],
): Promise<Submission[]> {
  const pending: Promise<Submission>[] = [];
  for (let i = 0; i < count; i++) {
    pending.push(submitOne(daemon, `${prefix}-${RUN_TAG}-${i}`));
    if (i < count - 1) await sleep(random.int(gapMs[0], gapMs[1]));
  }
  return Promise.all(pending);
}
