import type { Job } from 'bullmq';
import { z } from 'zod';
import type { Logger } from '../src/logger.js';
import type { PipelineRegistry } from '../src/pipelines/pipeline-registry.js';
import { runDeadlineMisses } from '../src/pipelines/run-deadlines.js';
import { advanceActiveRuns, type RunEngineDeps } from '../src/pipelines/run-engine.js';
import { makeDueAttempts } from '../src/requests/attempts.js';
import { checkDeadlines } from '../src/requests/deadlines.js';

const firePayload = z.object({
  pipeline: z.string().min(1),
  /** Set for catch-up; a job scheduler's tick carries its time in the job's options instead. */
  scheduledFor: z.number().optional(),
  trigger: z.enum(['schedule', 'catchup']).default('schedule'),
});

export interface PipelineWorkerDeps {
  registry: PipelineRegistry;
  engine: RunEngineDeps;
  logger: Logger;
  /** The scheduler's reason for a pending job, for deadline reports. */
  jobReason?(profile: string, jobId: number): Promise<string | null>;
}

/**
 * The `pipeline` queue: `fire` (a cron tick or a catch-up of one) makes a run;
 * `tick` (every couple of seconds) makes the retries that are due, advances active
 * runs, catches up missed ticks and checks deadlines.
 */
export function pipelineProcessor(deps: PipelineWorkerDeps) {
  return async (job: Job): Promise<unknown> => {
    if (job.name === 'fire') {
      const payload = firePayload.parse(job.data);
      const scheduledFor = payload.scheduledFor ?? job.opts.prevMillis;
      if (scheduledFor === undefined) throw new Error(`fire job ${job.id} carries no tick time`);
      const run = await deps.registry.fire(payload.pipeline, scheduledFor, payload.trigger);
      return run ? { runId: run.id, state: run.state } : null;
    }
    if (job.name === 'tick') {
      // Retries first: a step whose next attempt is made now is seen by this pass of its run.
      const attempts = await makeDueAttempts(deps.engine);
      const ended = await advanceActiveRuns(deps.engine);
      for (const run of ended) {
        deps.logger.info(
          { pipeline: run.pipeline, runId: run.id, state: run.state, detail: run.detail },
          'pipeline run ended',
        );
      }
      const caughtUp = await deps.registry.catchUp();
      const misses = await checkDeadlines(deps.engine.db, deps.logger, {
        reasonOf: deps.jobReason,
        moreMisses: runDeadlineMisses,
      });
      return { retried: attempts.made.length, ended: ended.length, caughtUp, misses: misses.length };
    }
    throw new Error(`unknown pipeline job "${job.name}"`);
  };
}
