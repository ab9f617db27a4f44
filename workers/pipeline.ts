import { z } from 'zod';
import { systemClock } from '../src/lib/clock.js';
import type { Logger } from '../src/logger.js';
import type { PipelineRegistry } from '../src/pipelines/pipeline-registry.js';
import { runDeadlineMisses } from '../src/pipelines/run-deadlines.js';
import { advanceActiveRuns, type RunEngineDeps } from '../src/pipelines/run-engine.js';
import type { QueueDefinition, QueueProcessor } from '../src/queue/queue-definition.js';
import { makeDueAttempts } from '../src/requests/attempts.js';
import { checkDeadlines } from '../src/requests/deadlines.js';
import { movePendingJobs, type PendingMoverDeps } from '../src/requests/pending-mover.js';
import type { QueueSettings, WorkerServices } from './services.js';

const firePayload = z.object({
  pipeline: z.string().min(1),
  /** Set for catch-up; a job scheduler's tick carries its time in the job's options instead. */
  scheduledFor: z.number().optional(),
  trigger: z.enum(['schedule', 'catchup']).default('schedule'),
});

interface PipelineWorkerDeps {
  registry: PipelineRegistry;
  engine: RunEngineDeps;
  logger: Logger;
  /** The scheduler's reason for a pending job, for deadline reports. */
  jobReason?(profile: string, jobId: number): Promise<string | null>;
  /** Moves jobs that wait too long (`on_pending`: src/requests/pending-mover.ts). */
  mover: PendingMoverDeps;
}

/**
 * The `pipeline` queue: `fire` (a cron tick of a pipeline's schedule, or a catch-up of one) makes
 * a run; `tick` (every couple of seconds) makes the retries that are due, moves jobs that waited
 * too long (`on_pending`), advances active runs, starts the runs that ended runs start (`on:`),
 * catches up missed ticks and checks deadlines. A
 * job that fails is retried briefly; the next tick redoes periodic work anyway. One job at a time:
 * runs advance, ticks fire and queued runs start in order.
 */
export const pipelineQueue: QueueDefinition<QueueSettings, WorkerServices, 'pipeline'> = {
  name: 'pipeline',
  jobOptions: () => ({
    attempts: 3,
    backoff: { type: 'exponential', delay: 1000 },
    removeOnComplete: true,
    removeOnFail: { count: 100 },
  }),
  workerOptions: () => ({ concurrency: 1 }),
  // A tick cut short is not handed back: the next one, seconds later, does its work.
  handedBackDelayMs: 0,
  ticks: ({ config }) => [
    { id: 'tick:pipelines', repeat: { every: config.pipelineTickMs }, template: { name: 'tick', data: {} } },
  ],
  processor: (services) =>
    pipelineProcessor({
      registry: services.pipelines,
      engine: services.engine,
      logger: services.rootLogger.child({ component: 'pipelines' }),
      jobReason: services.jobReason,
      mover: {
        ...services.engine,
        logger: services.rootLogger.child({ component: 'mover' }),
        scheduler: (profile) => services.clients.get(profile),
      },
    }),
};

function pipelineProcessor(deps: PipelineWorkerDeps): QueueProcessor {
  return async (job): Promise<unknown> => {
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
      // Then moves: a move by resubmission makes an attempt, which this pass of its run sees.
      const moves = await movePendingJobs(deps.mover);
      const ended = await advanceActiveRuns(deps.engine, (pipeline) => deps.registry.outputsUsedDownstream(pipeline));
      for (const run of ended) {
        deps.logger.info(
          { pipeline: run.pipeline, runId: run.id, state: run.state, detail: run.detail },
          'pipeline run ended',
        );
      }
      // Then the runs those ends start (other pipelines' `on:`), and any end not followed yet.
      const started = await deps.registry.followUpstream();
      const caughtUp = await deps.registry.catchUp();
      const misses = await checkDeadlines(deps.engine.store, deps.logger, {
        now: (deps.engine.clock ?? systemClock).now(),
        reasonOf: deps.jobReason,
        moreMisses: runDeadlineMisses,
      });
      return {
        retried: attempts.made.length,
        moved: moves.moved.length + moves.resubmitted.length,
        ended: ended.length,
        started: started.length,
        caughtUp,
        misses: misses.length,
      };
    }
    throw new Error(`unknown pipeline job "${job.name}"`);
  };
}
