import { and, asc, gt, gte, sql } from 'drizzle-orm';
import type { Db } from '../../db/database.js';
import { jobRequests, jobTransitions, pipelineRuns } from '../../db/schema.js';
import type { Logger } from '../../logger.js';

/** One change a page may show: a request's new state (with its run) or a run's. */
export interface LiveChange {
  kind: 'job' | 'run';
  id: string;
  state: string;
  run?: string | null;
}

type Listener = (changes: LiveChange[]) => void;

/**
 * Feeds the UI's Server-Sent Events from the history, cheaply: one poller for
 * every open page, started with the first listener and stopped with the last.
 * Each tick reads the transitions after the last one seen (a range of the
 * primary key) and the runs updated since the last tick; nothing is read
 * while no page is open.
 */
export class LiveChanges {
  readonly #listeners = new Set<Listener>();
  #timer: NodeJS.Timeout | null = null;
  #lastTransitionId = 0;
  #runsSince = 0;

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    /** @defaultValue 1000 */
    private readonly everyMs = 1000,
  ) {}

  subscribe(listener: Listener): () => void {
    if (this.#listeners.size === 0) this.#start();
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
      if (this.#listeners.size === 0) this.#stop();
    };
  }

  close(): void {
    this.#listeners.clear();
    this.#stop();
  }

  #start(): void {
    const last = this.db
      .select({ id: sql<number>`coalesce(max(${jobTransitions.id}), 0)` })
      .from(jobTransitions)
      .get();
    this.#lastTransitionId = last?.id ?? 0;
    this.#runsSince = Date.now();
    this.#timer = setInterval(() => this.#tick(), this.everyMs);
    this.#timer.unref();
  }

  #stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  #tick(): void {
    try {
      const now = Date.now();
      const transitions = this.db
        .select({ id: jobTransitions.id, requestId: jobTransitions.requestId, state: jobTransitions.toState })
        .from(jobTransitions)
        .where(gt(jobTransitions.id, this.#lastTransitionId))
        .orderBy(asc(jobTransitions.id))
        .limit(1000)
        .all();
      const changes: LiveChange[] = [];
      if (transitions.length > 0) {
        this.#lastTransitionId = transitions[transitions.length - 1]?.id ?? this.#lastTransitionId;
        const runOf = new Map(
          this.db
            .select({ id: jobRequests.id, runId: jobRequests.runId })
            .from(jobRequests)
            .where(
              sql`${jobRequests.id} in (${sql.join(
                [...new Set(transitions.map((t) => t.requestId))].map((id) => sql`${id}`),
                sql`, `,
              )})`,
            )
            .all()
            .map((r) => [r.id, r.runId]),
        );
        for (const t of transitions) {
          changes.push({ kind: 'job', id: t.requestId, state: t.state, run: runOf.get(t.requestId) ?? null });
        }
      }
      // The runs table is small (and runs change seldom): a scan since the last tick,
      // overlapping by a second so a row written during the tick is not missed.
      const runs = this.db
        .select({ id: pipelineRuns.id, state: pipelineRuns.state })
        .from(pipelineRuns)
        .where(and(gte(pipelineRuns.updatedAt, this.#runsSince - 1000)))
        .all();
      this.#runsSince = now;
      for (const r of runs) changes.push({ kind: 'run', id: r.id, state: r.state, run: r.id });
      if (changes.length === 0) return;
      for (const listener of this.#listeners) listener(changes);
    } catch (error) {
      this.logger.warn({ err: error }, 'UI live updates: reading the history failed');
    }
  }
}
