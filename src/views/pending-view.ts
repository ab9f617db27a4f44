import type { JobRequestRow } from '../db/schema.js';
import { explainReason } from '../sched/slurm-reasons.js';

/**
 * Why a pending request waits, as shown (API, CLI, UI): Slurm's reason, in plain words with what
 * the user can do (src/sched/slurm-reasons.ts), and the scheduler's expected start when it gives
 * one. Null for a request that is not pending: a forecast means nothing once the job started.
 */
export function pendingView(row: Pick<JobRequestRow, 'state' | 'reason' | 'expectedStartAt'>) {
  if (row.state !== 'pending') return null;
  const explained = explainReason(row.reason);
  return {
    reason: explained?.code ?? null,
    meaning: explained?.meaning ?? null,
    action: explained?.action ?? null,
    expected_start: row.expectedStartAt === null ? null : new Date(row.expectedStartAt).toISOString(),
  };
}

export type PendingView = NonNullable<ReturnType<typeof pendingView>>;
