import { insertMiss, missRecorded, requestsWithDeadlines } from '../db/deadline-misses.js';
import type { History } from '../db/history.js';
import { getRun } from '../db/runs.js';
import type { DeadlineKind, JobRequestRow } from '../db/schema.js';
import { addDelivery } from '../db/webhooks.js';
import type { Logger } from '../logger.js';
import { deadlineMissedBody } from '../notify/events.js';

export interface DeadlineMiss {
  kind: DeadlineKind;
  requestId: string | null;
  runId: string | null;
  detail: string;
  /** Where the miss is reported besides the history. */
  webhookUrl: string | null;
}

/**
 * Finds deadlines missed by unfinished requests: too long PENDING (with the
 * scheduler's reason), not started by start-by, not ended by finish-by; and
 * those `moreMisses` finds (pipeline runs). Each miss is recorded once, with its
 * webhook delivery; the ones new this time are returned.
 */
export async function checkDeadlines(
  h: History,
  logger: Logger,
  options: {
    now?: number;
    /** The scheduler's current reason for a pending job (the cheap state listing carries none). */
    reasonOf?: (profile: string, jobId: number) => Promise<string | null>;
    /**
     * Misses of what is made of requests (pipeline runs: src/pipelines/run-deadlines.ts), found
     * by the layer that knows them and recorded and reported here like a request's.
     */
    moreMisses?: (h: History, now: number) => Promise<DeadlineMiss[]>;
  } = {},
): Promise<DeadlineMiss[]> {
  const now = options.now ?? Date.now();
  const recorded: DeadlineMiss[] = [];
  const candidates = [...(await requestMisses(h, now)), ...((await options.moreMisses?.(h, now)) ?? [])];
  for (const candidate of candidates) {
    const subject = candidate.requestId ? `request:${candidate.requestId}` : `run:${candidate.runId}`;
    if (await missRecorded(h, subject, candidate.kind)) continue;
    const miss = {
      ...candidate,
      detail: candidate.detail.replace(REASON, await reasonFor(candidate, options.reasonOf, logger)),
    };
    // The miss is recorded once (by its unique subject and kind): of two hosts' ticks that find it
    // at once, one inserts it and makes its delivery, the other's insert does nothing.
    const inserted = await h.transaction(async (tx) => {
      const row = await insertMiss(tx, {
        subject,
        requestId: miss.requestId,
        runId: miss.runId,
        kind: miss.kind,
        at: now,
        detail: miss.detail,
      });
      if (!row) return undefined;
      // A step reports to its run's webhook.
      const url = miss.webhookUrl ?? (miss.runId ? (await getRun(tx, miss.runId))?.webhookUrl : null);
      if (url) {
        await addDelivery(tx, {
          event: 'deadline.missed',
          url,
          requestId: miss.requestId,
          runId: miss.runId,
          payload: deadlineMissedBody(row),
          at: now,
        });
      }
      return row;
    });
    if (!inserted) continue;
    logger.warn({ kind: miss.kind, requestId: miss.requestId, runId: miss.runId }, miss.detail);
    recorded.push(miss);
  }
  return recorded;
}

/** Stands in a detail for the scheduler's reason until it is known. */
const REASON = '{reason}';

async function reasonFor(
  miss: DeadlineMiss & { row?: JobRequestRow },
  reasonOf: ((profile: string, jobId: number) => Promise<string | null>) | undefined,
  logger: Logger,
): Promise<string> {
  const row = miss.row;
  if (!row) return 'none given';
  if (row.reason) return row.reason;
  if (!reasonOf || row.jobId === null) return 'none given';
  try {
    return (await reasonOf(row.profile, row.jobId)) ?? 'none given';
  } catch (error) {
    logger.debug({ requestId: row.id, err: error }, 'could not ask for the pending reason');
    return 'unknown (the scheduler did not answer)';
  }
}

async function requestMisses(h: History, now: number): Promise<(DeadlineMiss & { row: JobRequestRow })[]> {
  const rows = await requestsWithDeadlines(h);
  const misses: (DeadlineMiss & { row: JobRequestRow })[] = [];
  for (const row of rows) {
    const d = row.deadlines;
    if (!d) continue;
    const miss = (kind: DeadlineKind, detail: string) =>
      misses.push({ kind, requestId: row.id, runId: row.runId, detail, webhookUrl: row.webhookUrl, row });
    const waitingSince = row.submittedAt ?? row.createdAt;
    if (d.maxPendingSec !== undefined && row.startedAt === null && now - waitingSince > d.maxPendingSec * 1000) {
      miss(
        'max_pending',
        `${label(row)} has been waiting to start for ${minutes(now - waitingSince)} (limit ${minutes(d.maxPendingSec * 1000)}); scheduler reason: ${REASON}`,
      );
    }
    if (d.startBy !== undefined && row.startedAt === null && now > d.startBy) {
      miss('start_by', `${label(row)} had not started by ${iso(d.startBy)} (state ${row.state}, reason: ${REASON})`);
    }
    if (d.finishBy !== undefined && now > d.finishBy) {
      miss('finish_by', `${label(row)} had not finished by ${iso(d.finishBy)} (state ${row.state})`);
    }
  }
  return misses;
}

const label = (row: JobRequestRow) =>
  row.step
    ? `step "${row.step}" (request ${row.id}${row.jobId ? `, job ${row.jobId}` : ''})`
    : `request ${row.id}${row.jobId ? ` (job ${row.jobId})` : ''}`;
const iso = (ms: number) => new Date(ms).toISOString();
const minutes = (ms: number) => (ms < 120_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`);
