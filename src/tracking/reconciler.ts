import { getProfileSync, recordAccountingAnswer, updateProfileSync, upsertAccountingJob } from '../db/accounting.js';
import type { Db } from '../db/database.js';
import { getRequest, requestByJobId } from '../db/requests.js';
import type { Logger } from '../logger.js';
import type { SchedClient } from '../sched/client.js';
import { ownRecord } from './job-identity.js';
import { applyJob } from './poller.js';
import { isTerminalRequest, requestStateFor } from './request-state.js';

export interface ReconcileSettings {
  /** On the first run, import this far back. @defaultValue 86400 */
  initialLookbackSec: number;
  /** Each run starts this long before the last one ended, so late records are not missed. @defaultValue 600 */
  overlapSec: number;
}

export interface ReconcileReport {
  imported: number;
  linked: number;
  external: number;
}

const MARKER = /^schedflow:(\S+)/;

/**
 * Imports the accounting records of the profile's account since the last sync:
 * jobs schedflow submitted are linked to their requests (by the marker in the
 * comment) and give them accounting fields; the others are kept as external.
 */
export async function reconcileProfile(
  deps: { db: Db; client: SchedClient; logger: Logger; settings: ReconcileSettings; signal?: AbortSignal },
  profile: string,
): Promise<ReconcileReport> {
  const { db, client, settings } = deps;
  const sync = getProfileSync(db, profile);
  const nowSec = Math.floor(Date.now() / 1000);
  const from = (sync?.accountingSyncedTo ?? nowSec - settings.initialLookbackSec) - settings.overlapSec;
  const account = client.profile.account;
  const { data, freshness } = await client.listAccountingJobs(
    { startTime: from, accounts: account ? [account] : undefined },
    { signal: deps.signal },
  );
  let linked = 0;
  const at = Date.now();
  for (const job of data) {
    // By the marker, or else by job id: slurmdbd keeps the comment holding the marker only with
    // AccountingStoreFlags=job_comment, which clusters do not set by default. A job id can come
    // again (a cluster's state reset, a crashed slurmctld), so the job must fit the request: its
    // name, and not older than the request (jobIdentity).
    // A same-name record submitted well after the request's submission is linked, not applied:
    // only the controller's record can say whether it is its job (the poller asks, see ownRecord).
    const requestId = MARKER.exec(job.comment)?.[1] ?? null;
    const byId = requestId ? undefined : requestByJobId(db, profile, job.job_id);
    const identity = byId ? ownRecord([job], byId).kind : null;
    const request =
      (requestId ? getRequest(db, requestId) : undefined) ??
      (byId && (identity === 'ours' || identity === 'suspect') ? byId : undefined);
    upsertAccountingJob(db, profile, job, request ? request.id : null, at);
    if (request && request.jobId === job.job_id) {
      linked++;
      // A job the controller no longer has, which accounting still holds active (lagging, or a
      // runaway slurmctld lost): the poller's grace decides; an import must not reset it.
      const ended = isTerminalRequest(requestStateFor(job.state) ?? 'running');
      if (identity !== 'suspect' && (ended || request.missingSince === null)) {
        applyJob(db, request, job, 'accounting', freshness);
      }
    }
  }
  updateProfileSync(db, profile, { accountingSyncedTo: nowSec, accountingSyncedAt: at });
  recordAccountingAnswer(db, profile, null, at);
  deps.logger.debug({ profile, imported: data.length, linked }, 'accounting reconciled');
  return { imported: data.length, linked, external: data.length - linked };
}
