import type { History } from '../db/history.js';
import { unfinishedRuns } from '../db/runs.js';
import type { DeadlineKind, PipelineRunRow } from '../db/schema.js';
import type { DeadlineMiss } from '../requests/deadlines.js';
import { nextFireAfter } from './cron-times.js';
import type { RunPlan } from './run-plan.js';

/**
 * Deadlines of unfinished pipeline runs: start-by and finish-by from the pipeline file, and a
 * scheduled run that had not started when the next tick came. The request deadline checker
 * (src/requests/deadlines.ts) records and reports them with the misses of requests.
 */
export async function runDeadlineMisses(h: History, now: number): Promise<DeadlineMiss[]> {
  const runs = await unfinishedRuns(h);
  const misses: DeadlineMiss[] = [];
  for (const run of runs) {
    const plan = run.definition as RunPlan;
    const miss = (kind: DeadlineKind, detail: string) =>
      misses.push({ kind, requestId: null, runId: run.id, detail, webhookUrl: run.webhookUrl });
    const d = plan.deadlines;
    if (d?.startBy !== undefined && run.startedAt === null && now > d.startBy) {
      miss('start_by', `${runLabel(run)} had not started by ${iso(d.startBy)}`);
    }
    if (d?.finishBy !== undefined && now > d.finishBy) {
      miss('finish_by', `${runLabel(run)} had not finished by ${iso(d.finishBy)}`);
    }
    if (plan.schedule && run.scheduledFor !== null && run.startedAt === null) {
      const next = nextFireAfter(plan.schedule.cron, plan.schedule.timezone, run.scheduledFor);
      if (now >= next) {
        miss('never_started', `${runLabel(run)} had not started when the next tick (${iso(next)}) came`);
      }
    }
  }
  return misses;
}

const runLabel = (run: PipelineRunRow) =>
  `run ${run.id} of ${run.pipeline}${run.scheduledFor !== null ? ` for ${iso(run.scheduledFor)}` : ''}`;
const iso = (ms: number) => new Date(ms).toISOString();
