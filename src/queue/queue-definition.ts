import {
  type ConnectionOptions,
  DelayedError,
  type Job,
  type JobsOptions,
  Queue,
  UnrecoverableError,
  Worker,
  type WorkerOptions,
} from 'bullmq';
import type { Logger } from '../logger.js';
import { backoffStrategy } from './backoffs.js';
import type { QueueName } from './catalog.js';
import type { SchedulerSpec } from './queue-keeper.js';

/**
 * One queue, written once: its name, its jobs' retry policy, its worker's options, its
 * processor, and what happens when the queue gives a job up or the shutdown hands one back.
 * The Queue producers (createQueues) and the Workers (startQueueWorker) are made from it; a
 * queue whose work is recorded in the history first also has a relay (src/queue/history-relay.ts)
 * in its definition's file. Definitions live in workers/<queue>.ts, the layer that may call the
 * domain code; what the layers below need of a queue is its name (src/queue/catalog.ts) and, for
 * the submit queue, its producer (src/queue/submit-queue.ts).
 */
export interface QueueDefinition<Settings, Services, Name extends QueueName = QueueName> {
  name: Name;
  /**
   * The queue's default job options: attempts, a backoff (a strategy of src/queue/backoffs.ts by
   * name, or BullMQ's own) and how long ended jobs are kept. Every job added through the daemon's
   * producer gets them unless it says otherwise.
   */
  jobOptions(settings: Settings): JobsOptions;
  /** Concurrency, locks and stall detection of the queue's worker. */
  workerOptions(settings: Settings): Omit<WorkerOptions, 'connection' | 'prefix' | 'settings'>;
  /**
   * How soon a job the shutdown cut short (its processor called `ctx.handBack()`) is taken up
   * again, by whichever process runs then. Handing back spends none of the job's attempts.
   */
  handedBackDelayMs: number;
  /** The queue's periodic jobs (ticked by job schedulers in processes of the `scheduler` role). */
  ticks?(settings: Settings, profiles: readonly string[]): TickSpec[];
  /** Makes the processor of the queue's jobs, given the services it calls. */
  processor(services: Services): QueueProcessor;
  /**
   * What a job the queue gave up on (its last attempt failed, or it was unrecoverable) leaves
   * in the history: settled, so nothing waits for it for ever. Not called for other failures.
   */
  givenUp?(services: Services, job: Job, error: Error): Promise<void>;
}

/** A periodic job of a queue, as its definition declares it (src/queue/ticks.ts adds the queue). */
export type TickSpec = Omit<SchedulerSpec, 'queue'>;

/** What a processor may ask of the worker besides BullMQ's job. */
export interface JobContext {
  token: string | undefined;
  /** Puts the job off for `delayMs` without spending an attempt (a wait, not a failure). */
  putOff(delayMs: number): Promise<never>;
  /** Hands the job back to its queue (the shutdown cut it short), as its definition says. */
  handBack(): Promise<never>;
}

export type QueueProcessor = (job: Job, ctx: JobContext) => Promise<unknown>;

/** A job cut short by shutdown is picked up again this soon (the webhook and summary queues). */
export const HANDED_BACK_DELAY_MS = 1000;

/** Whether `error` ends the job for good: BullMQ will not try it again. */
export function isGivenUp(job: Job, error: Error): boolean {
  return error instanceof UnrecoverableError || job.attemptsMade >= (job.opts.attempts ?? 1);
}

/** Moves the job to the delayed set for `delayMs` and tells BullMQ it was not a failure. */
async function putOff(job: Job, token: string | undefined, delayMs: number): Promise<never> {
  await job.moveToDelayed(Date.now() + delayMs, token);
  throw new DelayedError();
}

/** One producer per definition, each with its queue's default job options. */
export function createQueues<Settings>(
  definitions: Record<QueueName, QueueDefinition<Settings, never>>,
  settings: Settings,
  connection: ConnectionOptions,
  prefix: string,
): Record<QueueName, Queue> {
  return Object.fromEntries(
    Object.values(definitions).map((definition) => [
      definition.name,
      new Queue(definition.name, { connection, prefix, defaultJobOptions: definition.jobOptions(settings) }),
    ]),
  ) as Record<QueueName, Queue>;
}

export interface QueueWorkerDeps {
  connection: ConnectionOptions;
  prefix: string;
  logger: Logger;
  /** Told of a worker's connection errors (the Redis watch says it once, not per worker). */
  onError(error: Error, where: string): void;
}

/**
 * The worker of one definition: its processor (with put-off and hand-back), its options, the
 * backoff strategies by name, and its given-up handling on the `failed` event.
 */
export function startQueueWorker<Settings, Services>(
  definition: QueueDefinition<Settings, Services>,
  settings: Settings,
  services: Services,
  deps: QueueWorkerDeps,
): Worker {
  const process = definition.processor(services);
  const worker = new Worker(
    definition.name,
    (job: Job, token?: string) =>
      process(job, {
        token,
        putOff: (delayMs) => putOff(job, token, delayMs),
        handBack: () => putOff(job, token, definition.handedBackDelayMs),
      }),
    {
      ...definition.workerOptions(settings),
      connection: deps.connection,
      prefix: deps.prefix,
      settings: { backoffStrategy },
    },
  );
  const { logger } = deps;
  worker.on('failed', (job, error) => {
    logger.warn(
      { queue: definition.name, jobId: job?.id, attempts: job?.attemptsMade, err: error },
      'job attempt failed',
    );
    if (!job || !definition.givenUp || !isGivenUp(job, error)) return;
    definition
      .givenUp(services, job, error)
      .catch((failure: unknown) =>
        logger.error(
          { queue: definition.name, err: failure, jobId: job.id },
          'could not record in the history a job given up by the queue',
        ),
      );
  });
  worker.on('error', (error) => deps.onError(error, `worker ${definition.name}`));
  return worker;
}
