import type { Job, Queue } from 'bullmq';

/**
 * What a queue whose work is recorded in the history first (a request to submit, a webhook
 * delivery of the outbox, a summary to write) says to its relay.
 */
export interface RelaySpec<Row> {
  queue: Queue;
  /** The history's rows whose work is still to do. */
  pending(): Promise<readonly Row[]>;
  /** A row's id, which is also its job's id: a row is never queued twice. */
  idOf(row: Row): string;
  /**
   * Rows left alone this time: `skip` (another attempt of this process has it) or `defer` (to
   * be looked at again, counted in the result). @defaultValue none
   */
  hold?(row: Row): 'skip' | 'defer' | null;
  /**
   * The queue gave up on the row's job and nothing settled the row (the process died between
   * the two): settle it, or give the job another go. True when the job was given another go.
   */
  failed(row: Row, job: Job): Promise<boolean>;
  /** Before a new job is added for a row without a live one. */
  beforeAdd?(row: Row): Promise<void>;
  /** Adds the row's job (the queue's producer); rows are added in the order `pending` gave them. */
  add(id: string, row: Row): Promise<unknown>;
  /**
   * How often a row already seen with a live job is looked up in the queue again; unset: every
   * run. A row waiting out a long backoff then costs no Redis call in between.
   */
  recheckMs?: number;
}

/**
 * The history → queue relay: the history is the truth, the queue is how its work gets done. Each
 * run reads the pending rows and looks each one's job up: a job the queue gave up on settles
 * the row (or is tried again), a missing, completed or unknown one is made anew, a live one
 * (waiting, delayed, active, …) is left on its way. It makes good a crash between recording
 * and queueing, a job that ended without settling its row, and a Redis that lost its data.
 */
export class HistoryRelay<Row> {
  /** Rows known to have a live job, and when that was checked. */
  private readonly checkedAt = new Map<string, number>();

  constructor(private readonly spec: RelaySpec<Row>) {}

  /** One pass; `queued`: jobs made or given another go, `deferred`: rows held for later. */
  async run(now = Date.now()): Promise<{ queued: number; deferred: number }> {
    const { spec } = this;
    const pending = await spec.pending();
    const pendingIds = new Set(pending.map((row) => spec.idOf(row)));
    for (const id of this.checkedAt.keys()) if (!pendingIds.has(id)) this.checkedAt.delete(id);
    let queued = 0;
    let deferred = 0;
    for (const row of pending) {
      const id = spec.idOf(row);
      const held = spec.hold?.(row) ?? null;
      if (held === 'skip') continue;
      if (held === 'defer') {
        deferred++;
        continue;
      }
      const checked = this.checkedAt.get(id);
      if (spec.recheckMs !== undefined && checked !== undefined && now - checked < spec.recheckMs) continue;
      const job = await spec.queue.getJob(id);
      const state = job ? await job.getState() : 'missing';
      if (job && state === 'failed') {
        if (await spec.failed(row, job)) queued++;
        continue;
      }
      if (state === 'missing' || state === 'completed' || state === 'unknown') {
        await spec.beforeAdd?.(row);
        // A finished job would block the id: make way for a new one.
        await job?.remove();
        await spec.add(id, row);
        queued++;
      }
      // Otherwise waiting, delayed (a backoff), active, prioritized, waiting-children: on its way.
      if (spec.recheckMs !== undefined) this.checkedAt.set(id, now);
    }
    return { queued, deferred };
  }
}
