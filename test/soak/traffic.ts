import { join } from 'node:path';
import type { SubmitJobBody } from '../../src/client/api-shapes.js';
import { SchedflowApiError, type SchedflowClientError } from '../../src/client/client-errors.js';
import { SchedflowClient } from '../../src/client/index.js';
import { sleep } from '../chaos/processes.js';
import type { Random } from '../chaos/random.js';
import type { SoakWorld } from './world.js';

/** What the traffic sent and how the API answered, by kind. */
export interface TrafficCounts {
  sent: Record<Kind, number>;
  accepted: Record<Kind, number>;
  /** No answer after the client's own retries (the daemon down for longer than they wait). */
  unanswered: number;
  /** An answer that refused (4xx/5xx after the client's retries). */
  refused: number;
  cancelsAnswered: number;
  /** The request had ended before the cancel reached it (or a retried cancel found its own work done). */
  cancelsTooLate: number;
  cancelsRefused: number;
}

export type Kind = 'steady' | 'array' | 'cancel' | 'retry';

/** Part of every job name, so two soaks on one simulator never mix up. */
const RUN_TAG = Date.now().toString(36);

/**
 * The soak's clients, each on its own clock until `stop()`: steady submissions at a fixed
 * rate (each with a webhook, every fourth asking for a summary), an array of 4 every 30 s,
 * a long job cancelled a few seconds after it was accepted every 20 s, and every 30 s a job
 * that fails its first attempt and succeeds its retry (its retry policy on FAILED). Every
 * request the API accepts is handed to `onAccepted`, for the ledger.
 */
export class Traffic {
  readonly counts: TrafficCounts = {
    sent: { steady: 0, array: 0, cancel: 0, retry: 0 },
    accepted: { steady: 0, array: 0, cancel: 0, retry: 0 },
    unanswered: 0,
    refused: 0,
    cancelsAnswered: 0,
    cancelsTooLate: 0,
    cancelsRefused: 0,
  };
  readonly errors = new Map<string, number>();
  #stopped = false;
  #loops: Promise<void>[] = [];
  #inFlight = new Set<Promise<unknown>>();
  readonly #client: SchedflowClient;

  constructor(
    private readonly world: SoakWorld,
    private readonly random: Random,
    private readonly ratePerMinute: number,
    private readonly onAccepted: (requestId: string, kind: Kind) => void,
  ) {
    this.#client = new SchedflowClient({
      baseUrl: world.daemon.apiUrl,
      token: world.daemon.apiToken,
      // A daemon killed by the faults takes a few seconds to start again: the client waits it out,
      // with the same Idempotency-Key at each try (what makes a retry after a lost answer safe).
      retry: { maxAttempts: 8, baseDelayMs: 500, maxDelayMs: 10_000 },
      requestTimeoutMs: 10_000,
    });
  }

  start(): void {
    this.#loops = [
      this.#every(60_000 / this.ratePerMinute, (i) => this.#steady(i)),
      this.#every(30_000, (i) => this.#array(i)),
      this.#every(20_000, (i) => this.#cancelled(i)),
      this.#every(30_000, (i) => this.#failsOnce(i)),
    ];
  }

  /** Stops sending and waits for every call under way to be answered (or given up). */
  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
    await Promise.allSettled([...this.#inFlight]);
  }

  /** Runs `send` every `gapMs` (±20 %, seeded), without waiting for the last one's answer. */
  async #every(gapMs: number, send: (index: number) => Promise<void>): Promise<void> {
    await sleep(this.random.int(0, Math.round(gapMs)));
    for (let i = 0; !this.#stopped; i++) {
      const call = send(i);
      this.#inFlight.add(call);
      void call.finally(() => this.#inFlight.delete(call));
      await sleep(Math.round(gapMs * (0.8 + 0.4 * this.random.next())));
    }
  }

  async #submit(kind: Kind, body: SubmitJobBody): Promise<string | undefined> {
    this.counts.sent[kind]++;
    try {
      const made = await this.#client.submitJob(body, { idempotencyKey: `${body.spec?.name ?? kind}` });
      this.counts.accepted[kind]++;
      this.onAccepted(made.id, kind);
      return made.id;
    } catch (error) {
      this.#count(error as SchedflowClientError);
      return undefined;
    }
  }

  #count(error: SchedflowClientError): void {
    if (error instanceof SchedflowApiError) this.counts.refused++;
    else this.counts.unanswered++;
    const key = `${error.name}: ${error.message.slice(0, 100)}`;
    this.errors.set(key, (this.errors.get(key) ?? 0) + 1);
  }

  async #steady(i: number): Promise<void> {
    const seconds = this.random.int(1, 3);
    await this.#submit('steady', {
      spec: { name: `soak-${RUN_TAG}-s${i}`, script: `#!/bin/sh\nsleep ${seconds}\necho ok\n`, time_limit: 5 },
      webhook_url: `${this.world.receiver.url}/job`,
      summarize: i % 4 === 0,
    });
  }

  async #array(i: number): Promise<void> {
    await this.#submit('array', {
      spec: {
        name: `soak-${RUN_TAG}-a${i}`,
        script: '#!/bin/sh\nsleep 1\necho task $SLURM_ARRAY_TASK_ID\n',
        time_limit: 5,
        array: '0-3',
      },
    });
  }

  async #cancelled(i: number): Promise<void> {
    const id = await this.#submit('cancel', {
      spec: { name: `soak-${RUN_TAG}-c${i}`, script: '#!/bin/sh\nsleep 120\n', time_limit: 5 },
    });
    if (!id) return;
    await sleep(this.random.int(1000, 6000));
    // 409 while it is being submitted (Retry-After): asked again until it is taken or has ended.
    for (let attempt = 0; attempt < 10; attempt++) {
      try {
        await this.#client.cancelJob(id);
        this.counts.cancelsAnswered++;
        return;
      } catch (error) {
        if (error instanceof SchedflowApiError && error.code === 'SCHEDFLOW_ERR_JOB_ENDED') {
          this.counts.cancelsTooLate++;
          return;
        }
        if (error instanceof SchedflowApiError && error.status === 409) {
          await sleep(1000);
          continue;
        }
        this.counts.cancelsRefused++;
        this.#count(error as SchedflowClientError);
        return;
      }
    }
    this.counts.cancelsRefused++;
  }

  async #failsOnce(i: number): Promise<void> {
    const name = `soak-${RUN_TAG}-r${i}`;
    const flag = join(this.world.flagsDir, name);
    await this.#submit('retry', {
      spec: {
        name,
        // Fails (exit 3) the first time, leaving its mark; the retry finds the mark and succeeds.
        script: `#!/bin/sh\nif [ -e ${flag} ]; then echo ok; exit 0; fi\ntouch ${flag}\nexit 3\n`,
        time_limit: 5,
      },
      retry: { on: ['FAILED'], exit_codes: [3], limit: 2, backoff: '2s' },
    });
  }
}
