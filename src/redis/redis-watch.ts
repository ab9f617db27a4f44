import { Redis } from 'ioredis';
import { isNetworkErrorCode } from '../lib/retry-policy.js';
import type { Logger } from '../logger.js';
import { type RedisTarget, redisOptions } from './redis-server.js';

/** BullMQ's error for a job whose keys are gone (`Missing key for job 12. moveToFinished`). */
const LOST_WITH_DATA = /^Missing key for job /;

/** A lost or refused connection, as ioredis and Node report it (the one list, src/lib/retry-policy.ts): an outage, not a fault. */
export function isConnectionError(error: Error): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return isNetworkErrorCode(code) || /Connection is closed|connect ETIMEDOUT/.test(error.message);
}

/**
 * Says once that Redis went away and once that it came back. Every queue and worker has
 * connections of its own, each failing every reconnect attempt while Redis is gone: their
 * errors are this one outage, not hundreds of log lines (nor, without a listener, ioredis's
 * stack traces on stderr). A connection of its own tells when Redis answers again.
 */
export class RedisWatch {
  readonly #logger: Logger;
  readonly #client: Redis;
  #downSince: number | null = null;
  #readyBefore = false;
  readonly #onReconnect: (() => void)[] = [];
  #changes = 0;

  constructor(target: RedisTarget, logger: Logger) {
    this.#logger = logger;
    this.#client = new Redis({ ...redisOptions(target), lazyConnect: false });
    this.#client.on('error', (error: Error) => this.failed(error));
    this.#client.on('ready', () => this.#ready());
  }

  /** False from the first connection error of an outage until Redis answers again. */
  get reachable(): boolean {
    return this.#downSince === null;
  }

  /**
   * Counts the times Redis was lost or found again: work that read Redis across a change (it
   * may have come back empty) reads it again.
   */
  get changes(): number {
    return this.#changes;
  }

  /**
   * Runs `listener` each time the connection is ready again after it was lost, also after a
   * restart too quick for an error to be seen: Redis may have come back without its data.
   */
  onReconnect(listener: () => void): void {
    this.#onReconnect.push(listener);
  }

  #ready(): void {
    this.#back();
    if (this.#readyBefore) this.#changes++;
    if (this.#readyBefore) for (const listener of this.#onReconnect) listener();
    this.#readyBefore = true;
  }

  /** For the 'error' event of queues and workers: outages are said once here, anything else as it comes. */
  readonly failed = (error: Error, source?: string): void => {
    if (LOST_WITH_DATA.test(error.message)) {
      // A job in flight when Redis came back without its data: BullMQ cannot finish what is no
      // longer there. Nothing is lost: the history keeps its request, outbox row or summary, and
      // the keeper and dispatchers queue them again; part of the outage already said.
      this.#logger.info({ source, err: error.message }, 'a job in flight ended with the data Redis lost');
      return;
    }
    if (!isConnectionError(error)) {
      this.#logger.error({ source, err: error }, 'Redis error');
      return;
    }
    if (this.#downSince !== null) return;
    this.#downSince = Date.now();
    this.#changes++;
    this.#logger.error({ err: error }, 'Redis unreachable: queued work waits and connections retry until it is back');
  };

  #back(): void {
    if (this.#downSince === null) return;
    this.#logger.info({ downForMs: Date.now() - this.#downSince }, 'Redis reachable again');
    this.#downSince = null;
  }

  close(): void {
    this.#client.disconnect();
  }
}
