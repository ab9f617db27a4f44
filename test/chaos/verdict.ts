import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { hasMarker } from '../../src/sched/marker-lookup.js';
import type { DaemonUnderTest } from './daemon.js';
import { pollUntil } from './processes.js';
import type { JobTable } from './upstream.js';
import type { Submission } from './workload.js';

/** The request states that end a request (the history's own words). */
export const TERMINAL = new Set([
  'completed',
  'failed',
  'timeout',
  'cancelled',
  'node_fail',
  'out_of_memory',
  'preempted',
  'boot_fail',
  'deadline',
  'submit_failed',
  'lost',
]);

/** The daemon's terminal state for each Slurm end state of a job whose script succeeded. */
const SLURM_TO_REQUEST: Record<string, string> = {
  COMPLETED: 'completed',
  FAILED: 'failed',
  NODE_FAIL: 'node_fail',
  CANCELLED: 'cancelled',
  TIMEOUT: 'timeout',
  PREEMPTED: 'preempted',
  BOOT_FAIL: 'boot_fail',
  OUT_OF_MEMORY: 'out_of_memory',
  DEADLINE: 'deadline',
};

interface Row {
  id: string;
  state: string;
  job_id: number | null;
  reason: string | null;
  next_attempt_id: string | null;
  retry_due_at: number | null;
}

export interface TrialVerdict {
  jobs: number;
  /** Scheduler jobs beyond the first for one submission (by its unique name) or one request (by its marker). */
  duplicates: number;
  lost: number;
  stuck: number;
  wronglyFailed: number;
  /** From the end of the fault until every accepted request was terminal; undefined if never. */
  recoverMs?: number;
  /** One line per bad request, for the details under the table. */
  notes: string[];
}

function readRows(daemon: DaemonUnderTest, ids: string[]): Map<string, Row> {
  const file = join(daemon.dataDir, 'history.sqlite');
  const rows = new Map<string, Row>();
  if (!existsSync(file) || ids.length === 0) return rows;
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 2000');
    const stmt = db.prepare(
      'SELECT id, state, job_id, reason, next_attempt_id, retry_due_at FROM job_requests WHERE id = ?',
    );
    for (const id of ids) {
      // A request's last attempt is what became of it (a job the controller lost before it
      // started is submitted again as a new attempt); one whose next attempt is due is not done.
      let row = stmt.get(id) as Row | undefined;
      while (row?.next_attempt_id) row = (stmt.get(row.next_attempt_id) as Row | undefined) ?? row;
      if (row) rows.set(id, row.retry_due_at === null ? row : { ...row, state: 'retry due' });
    }
  } finally {
    db.close();
  }
  return rows;
}

/**
 * Waits until every accepted request of a trial is terminal (or the deadline passes), then
 * holds the history against the scheduler's own job table:
 * - duplicate: more than one scheduler job for one submission or one request's marker;
 * - lost: accepted (2xx) but no row in the history, or ended without a scheduler job ever
 *   made for it (one refused for good is a wrong failure instead);
 * - stuck: not terminal at the deadline (with a job or without: it is counted once, here);
 * - wrongly failed: terminal, not what the scheduler says became of its job (its script
 *   succeeds: `completed` unless the fault itself ended the job), or `submit_failed` / `lost`
 *   although every fault is transient.
 */
export async function judge(
  daemon: DaemonUnderTest,
  table: JobTable,
  subs: Submission[],
  faultEndedAt: number,
  deadlineMs: number,
): Promise<TrialVerdict> {
  const accepted = subs.filter((s) => s.requestId !== undefined);
  const ids = accepted.map((s) => s.requestId as string);
  const allTerminal = await pollUntil(
    () => {
      const rows = readRows(daemon, ids);
      return ids.every((id) => TERMINAL.has(rows.get(id)?.state ?? '')) ? Date.now() : undefined;
    },
    Math.max(0, faultEndedAt + deadlineMs - Date.now()),
    250,
  );
  // Let the simulator's state file catch up with the last ends (it is written within 50 ms).
  await new Promise((r) => setTimeout(r, 200));
  const rows = readRows(daemon, ids);
  const jobs = await table.jobs();
  const verdict: TrialVerdict = { jobs: 0, duplicates: 0, lost: 0, stuck: 0, wronglyFailed: 0, notes: [] };
  if (allTerminal !== undefined) verdict.recoverMs = Math.max(0, allTerminal - faultEndedAt);
  for (const sub of subs) {
    const byName = jobs.filter((j) => j.name === sub.name);
    const byMarker = sub.requestId ? jobs.filter((j) => hasMarker(j.comment, sub.requestId as string)) : [];
    verdict.jobs += byName.length;
    const extra = Math.max(byName.length, byMarker.length) - 1;
    if (extra > 0) {
      verdict.duplicates += extra;
      verdict.notes.push(`duplicate: ${sub.name} has jobs ${byName.map((j) => j.jobId).join(', ')}`);
    }
    if (!sub.requestId) continue;
    const row = rows.get(sub.requestId);
    if (!row) {
      verdict.lost++;
      verdict.notes.push(`lost: ${sub.name} (request ${sub.requestId}, ${sub.status}) has no row in the history`);
      continue;
    }
    if (!TERMINAL.has(row.state)) {
      verdict.stuck++;
      verdict.notes.push(`stuck: ${sub.name} (request ${row.id}) still ${row.state}, job ${row.job_id ?? 'none'}`);
      continue;
    }
    if (byName.length === 0 && row.state !== 'submit_failed') {
      verdict.lost++;
      // Still a loss (counted), but Slurm's, and said: the controller lost the job (a crash).
      verdict.notes.push(
        row.reason === 'JobLostByController'
          ? `lost: ${sub.name} (request ${row.id}) ended ${row.state}: the controller lost its job, and the history says so`
          : `lost: ${sub.name} (request ${row.id}) ended ${row.state} without a scheduler job`,
      );
      continue;
    }
    const job = byName.find((j) => j.jobId === row.job_id) ?? byName[0];
    const truth = job ? SLURM_TO_REQUEST[job.state] : undefined;
    if (row.state === 'submit_failed' || row.state === 'lost' || (truth !== undefined && row.state !== truth)) {
      verdict.wronglyFailed++;
      verdict.notes.push(
        `wrongly failed: ${sub.name} (request ${row.id}) is ${row.state}; the scheduler's job: ${job ? `${job.jobId} ${job.state}` : 'none'}`,
      );
    }
  }
  return verdict;
}
