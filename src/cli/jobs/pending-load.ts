import type { JobRequestRow } from '../../db/schema.js';
import { type PartitionLoad, partitionLoadWords } from '../../views/partition-load.js';
import { callDaemon, segment } from '../daemon-api.js';
import { time } from './jobs-flags.js';

/** What `jobs show` learns of a pending request's partition load: the load, or why none. */
export type PendingLoadSeen = { load: PartitionLoad } | { load: null; why: string };

/**
 * A pending request's partition load for `jobs show`, as the daemon's API job detail says it:
 * the daemon keeps the cluster view (in Redis) and reads it from its last answer, never from the
 * scheduler, so this costs the upstream nothing. The shell reads the rest from the history; with
 * no daemon to ask, the load is not known and the line says so.
 */
export async function pendingLoadSeen(dataDir: string, row: JobRequestRow): Promise<PendingLoadSeen | null> {
  if (row.state !== 'pending') return null;
  try {
    const { body } = await callDaemon<{ pending: { partition: PartitionLoad | null } | null }>(dataDir, {
      method: 'GET',
      path: `/api/v1/jobs/${segment(row.id)}`,
      nothing: 'its partition load is not known',
    });
    const load = body.pending?.partition ?? null;
    return load
      ? { load }
      : { load: null, why: "the cluster view keeps no recent answer (open the UI's Cluster page to read it)" };
  } catch {
    return { load: null, why: 'no running daemon to ask its cluster view' };
  }
}

/** `partition debug: 2/2 CPUs allocated, 1 job running, 3 jobs pending (as of 29/11/2026, 12:01:00)`. */
export function pendingLoadLine(seen: PendingLoadSeen | null): string[] {
  if (!seen) return [];
  if (!seen.load) return [`partition load not known: ${seen.why}`];
  return [`partition ${partitionLoadWords(seen.load)} (as of ${time(Date.parse(seen.load.as_of))})`];
}
