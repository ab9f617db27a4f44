import type { Queue } from 'bullmq';
import type { Logger } from '../logger.js';
import type { SubmitJobOf } from './submit-queue.js';

/** A job scheduler schedflow keeps in Redis: the periodic ticks (poll, reconcile, pipelines, …). */
export interface SchedulerSpec {
  queue: Queue;
  id: string;
  repeat: Parameters<Queue['upsertJobScheduler']>[1];
  template: NonNullable<Parameters<Queue['upsertJobScheduler']>[2]>;
}

export interface QueueKeeperDeps {
  logger: Logger;
  /** How often to check (one cheap read per job scheduler); each reconnect also checks at once. */
  everyMs: number;
  /** The ticks this process owns (the `scheduler` role); empty otherwise. */
  schedulers: readonly SchedulerSpec[];
  /** Puts back the pipelines' cron job schedulers that are missing; returns how many. */
  ensurePipelineSchedules?: () => Promise<number>;
  /** Queues again every request recorded but not submitted whose job is missing; `deferred`: those to look at again later. */
  requeue(): Promise<{ deferred: number }>;
  /** Adds the submit jobs producers left to the keeper, in this order (src/queue/submit-queue.ts). */
  addLeft(jobs: readonly SubmitJobOf[]): Promise<unknown>;
  redisReachable(): boolean;
  /** Changes each time Redis is lost or found again (RedisWatch.changes). */
  redisChanges(): number;
}

/** Passes of one check while Redis keeps coming and going; the next check goes on. */
const MAX_PASSES = 3;
/** Jobs left by producers added in one call at most (one fair-share script, one addBulk). */
const LEFT_BATCH = 500;

/**
 * Keeps what schedflow needs in Redis there. Everything in Redis can be rebuilt from the
 * history and the configuration, and Redis may come back from a restart without its data
 * (no append-only file, a new server): the job schedulers that tick polling are then gone
 * and, without this, nothing would poll again until the daemon restarts. So on every check
 * (each `everyMs`, and at once when a connection to Redis is ready again) the missing job
 * schedulers are put back; when any was missing, when Redis reconnected, or when a
 * producer could not queue a job, the requests of the history that are not submitted are
 * queued again (their job id is the request id: nothing is queued twice). Requests already
 * submitted need nothing more: the poller follows them from the history. The jobs producers
 * left to it meanwhile (Redis away or slow, or the keeper behind) are added after, in the order
 * their requests were accepted.
 */
export class QueueKeeper {
  readonly #deps: QueueKeeperDeps;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | null = null;
  #sweepDue = false;
  /** Requests another process may have been submitting are to be looked at again (no one waits for it). */
  #recheckDue = false;
  #closed = false;
  /** Submit jobs producers left to the keeper, in the order their requests were accepted. */
  readonly #left: SubmitJobOf[] = [];
  #requeueing = false;

  constructor(deps: QueueKeeperDeps) {
    this.#deps = deps;
  }

  start(): void {
    this.#timer = setInterval(() => void this.check(), this.#deps.everyMs);
    this.#timer.unref();
  }

  /**
   * Producers' jobs to add at the next check, after what it puts back; without any, a producer's
   * job may not be in Redis: requeue at the next check.
   */
  readonly sweepLater = (left: readonly SubmitJobOf[] = []): void => {
    if (left.length === 0) this.#sweepDue = true;
    else this.#left.push(...left);
  };

  /**
   * True while jobs are to be put back or left jobs added: a producer's job added now would get
   * its owner's next round before theirs (src/queue/fair-share.ts), and that owner's requests
   * would be submitted out of the order they were accepted in. Producers then leave theirs to
   * the keeper too (src/queue/submit-queue.ts), which adds them after.
   */
  get behind(): boolean {
    return this.#sweepDue || this.#requeueing || this.#left.length > 0;
  }

  /** Redis answered again after losing the connection: it may have come back empty. */
  readonly reconnected = (): void => {
    this.#sweepDue = true;
    void this.check();
  };

  /** One check at a time; a check asked for while one runs is skipped (the next tick comes soon). */
  check(): Promise<void> {
    if (this.#closed || this.#running || !this.#deps.redisReachable()) return this.#running ?? Promise.resolve();
    this.#running = this.#check()
      .catch((error: Error) => {
        // Redis went away again mid-check: the watch says so; the next check redoes it.
        this.#sweepDue = true;
        this.#deps.logger.debug({ err: error }, 'queue check did not finish');
      })
      .finally(() => {
        this.#running = null;
      });
    return this.#running;
  }

  async #check(): Promise<void> {
    const { logger } = this.#deps;
    const missing = new Set<string>();
    let pipelines = 0;
    // A pass Redis went away in the middle of (and came back empty) found the first schedulers
    // there and the last missing: it is made again, and what both found missing said once.
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      const changes = this.#deps.redisChanges();
      for (const spec of this.#deps.schedulers) {
        if (await spec.queue.getJobScheduler(spec.id)) continue;
        await spec.queue.upsertJobScheduler(spec.id, spec.repeat, spec.template);
        missing.add(spec.id);
      }
      pipelines += (await this.#deps.ensurePipelineSchedules?.()) ?? 0;
      if (this.#deps.redisChanges() === changes) break;
    }
    if (missing.size > 0 || pipelines > 0) {
      logger.warn(
        { schedulers: [...missing], pipelineSchedules: pipelines },
        'job schedulers were missing from Redis (restarted without its data?): put back',
      );
    }
    const putBack = missing.size > 0 || pipelines > 0 || this.#sweepDue || this.#recheckDue;
    if (!putBack && this.#left.length === 0) return;
    this.#requeueing = true;
    try {
      if (putBack) {
        // Cleared before the sweep, not after: a producer that defers its add while the sweep runs
        // (its request recorded after the sweep read the history) asks for the next one. Cleared
        // after, 365 of bench:submit's requests stayed queued with no job under a loaded Redis.
        this.#sweepDue = false;
        this.#recheckDue = false;
        // Left before the sweep reads the history: recorded by then, so the sweep queues them.
        const covered = this.#left.length;
        const { deferred } = await this.#deps.requeue();
        this.#left.splice(0, covered);
        // A request another process may be submitting right now is looked at again next time.
        // Producers need not wait for that: its attempt, not its place in the queue, decides
        // when it is submitted.
        if (deferred > 0) this.#recheckDue = true;
      }
      // Left meanwhile (producers wait behind the sweep): after it, oldest first. Until none is
      // left: producers add their jobs themselves again only once every earlier one is in.
      while (this.#left.length > 0) {
        const batch = this.#left.slice(0, LEFT_BATCH);
        await this.#deps.addLeft(batch);
        this.#left.splice(0, batch.length);
      }
    } finally {
      this.#requeueing = false;
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#running;
  }
}
