import { z } from 'zod';
import { durationSchema } from '../lib/duration.js';

/**
 * `on_pending: { after: 30m, partitions: [b, c] }` in a job spec or a pipeline step: a job still
 * PENDING that long in its partition is moved to the next partition of the list (Nextflow's
 * `maxSubmitAwait`, jobflow-remote #419). It is schedflow's, never sent to Slurm (the codecs leave
 * it out of `job_desc_msg`); the daemon's mover acts on it (src/requests/pending-mover.ts).
 */
export interface OnPending {
  /** Seconds a job may wait in one partition before it is moved on. */
  after: number;
  /** Where it goes, in this order: each move takes the next. */
  partitions: string[];
}

export const onPendingSchema = z
  .strictObject({
    after: durationSchema.describe('how long the job may wait in one partition: seconds, or 90s, 30m, 2h, 1d'),
    partitions: z
      .array(z.string().min(1, 'a partition name is not empty'))
      .min(1, 'name at least one partition to move the job to')
      .superRefine((names, ctx) => {
        const seen = new Set<string>();
        for (const [index, name] of names.entries()) {
          if (seen.has(name)) {
            ctx.addIssue({ code: 'custom', path: [index], message: `partition "${name}" is named twice` });
          }
          seen.add(name);
        }
      })
      .describe('partitions to move the job to, one after the other'),
  })
  .describe('move the job to the next partition when it has waited `after` in its own');

/**
 * What the spec's other members rule out: moving a job into the partition it is submitted to
 * (the move would change nothing), and arrays, whose tasks start one by one (a move of the
 * array's pending record would split it between partitions: not done).
 */
export function onPendingIssues(spec: { partition?: string; array?: string; on_pending?: OnPending }): {
  path: (string | number)[];
  message: string;
}[] {
  const onPending = spec.on_pending;
  if (!onPending) return [];
  const issues: { path: (string | number)[]; message: string }[] = [];
  const own = spec.partition === undefined ? -1 : onPending.partitions.indexOf(spec.partition);
  if (own >= 0) {
    issues.push({
      path: ['on_pending', 'partitions', own],
      message: `"${spec.partition}" is the job's own partition (partition:); list only the partitions to move it to`,
    });
  }
  if (spec.array !== undefined) {
    issues.push({
      path: ['on_pending'],
      message: 'an array job is not moved (its tasks start one by one); leave on_pending out, or submit single jobs',
    });
  }
  return issues;
}
