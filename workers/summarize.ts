import { z } from 'zod';
import { pendingSummaryIds } from '../src/db/summaries.js';
import { assertNever } from '../src/lib/assert-never.js';
import { BACKOFFS } from '../src/queue/backoffs.js';
import { HistoryRelay } from '../src/queue/history-relay.js';
import { HANDED_BACK_DELAY_MS, type QueueDefinition } from '../src/queue/queue-definition.js';
import { TICK_ONCE } from '../src/queue/ticks.js';
import type { QueueSettings, WorkerServices } from './services.js';

/** Job names of the summarize queue: one summary, or the tick that takes up ended work. */
const SUMMARIZE_JOB = 'summarize';
const SUMMARY_DISPATCH_JOB = 'dispatch';

/** A `summarize` job: write one summary (its id is also the job id). */
const summarizePayloadSchema = z.object({ summaryId: z.string().min(1) });

/** How often a summary already seen queued is looked up in the queue again. */
const RECHECK_MS = 60_000;

/**
 * The `summarize` queue: `dispatch` (the tick) takes up ended requests and runs, makes their
 * summaries and relays the pending ones to the queue; `summarize` writes one summary (one LLM
 * attempt). Summaries retry with the `summary` backoff (it honours the LLM's Retry-After), as
 * often and from the delay the summary settings say. Ended jobs are kept a day, failed ones a week.
 */
export const summarizeQueue: QueueDefinition<QueueSettings, WorkerServices, 'summarize'> = {
  name: 'summarize',
  jobOptions: ({ summaries }) => ({
    attempts: summaries.attempts,
    backoff: { type: BACKOFFS.summary, delay: summaries.backoffMs },
    removeOnComplete: { age: 24 * 3600, count: 1000 },
    removeOnFail: { age: 7 * 24 * 3600 },
  }),
  // One more than the LLM calls in flight, so the dispatch tick never waits behind them.
  workerOptions: ({ summaries }) => ({ concurrency: summaries.concurrency + 1 }),
  handedBackDelayMs: HANDED_BACK_DELAY_MS,
  ticks: ({ summaries }) => [
    {
      id: 'tick:summaries',
      repeat: { every: summaries.dispatchEveryMs },
      template: { name: SUMMARY_DISPATCH_JOB, data: {}, opts: TICK_ONCE },
    },
  ],
  processor(services) {
    const { summarizer, takeUp, logger } = services.summaries;
    const relay = summaryRelay(services);
    return async (job, ctx) => {
      if (job.name === SUMMARY_DISPATCH_JOB) {
        const now = services.clock.now();
        const made = await takeUp.run(now);
        const { queued } = await relay.run(now);
        if (made || queued) logger.debug({ made, queued }, 'summaries dispatched');
        return { made, queued };
      }
      const { summaryId } = summarizePayloadSchema.parse(job.data);
      // attemptsMade counts the attempts that failed before this one.
      const finalAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      const result = await summarizer.run(summaryId, { finalAttempt, signal: services.shutdown });
      switch (result.outcome) {
        case 'done':
          return { kind: result.kind, state: result.state };
        case 'skipped':
          return { skipped: result.why };
        case 'retry':
          // Thrown as it is: the backoff strategy reads the endpoint's Retry-After from it.
          throw result.error;
        case 'interrupted':
          return ctx.handBack();
        default:
          return assertNever(result);
      }
    };
  },
  /**
   * A summarize job the queue gave up on outside an attempt's record (stalled too often, or it
   * threw gathering facts) fails its summary, keeping the template when it can be made.
   */
  async givenUp(services, job, error) {
    if (job.name !== SUMMARIZE_JOB) return;
    const parsed = summarizePayloadSchema.safeParse(job.data);
    if (!parsed.success) return;
    const { summarizer, logger } = services.summaries;
    if (await summarizer.giveUp(parsed.data.summaryId, `the queue gave up: ${error.message}`)) {
      logger.error({ summaryId: parsed.data.summaryId, err: error }, 'summary given up by the queue');
    }
  },
};

/** Pending summaries of the history relayed to the summarize queue. */
function summaryRelay(services: WorkerServices): HistoryRelay<string> {
  const queue = services.queues.summarize;
  return new HistoryRelay<string>({
    queue,
    pending: () => pendingSummaryIds(services.store),
    idOf: (id) => id,
    async failed(id, job) {
      // The queue gave up and the `failed` handler did not settle the summary (the process died
      // in between): settle it as the handler would have.
      await services.summaries.summarizer.giveUp(id, `the queue gave up: ${job.failedReason ?? 'unknown reason'}`);
      return false;
    },
    // Attempts and backoff are the queue's default job options.
    add: (id) => queue.add(SUMMARIZE_JOB, { summaryId: id }, { jobId: id }),
    recheckMs: RECHECK_MS,
  });
}
