import type { History } from '../../db/history.js';
import { lastTransitionId, ownershipOf, transitionIdsIn, transitionsAfter } from '../../db/requests.js';
import { runStatesSince } from '../../db/runs.js';
import type { Logger } from '../../logger.js';

/**
 * Transitions read again each tick on PostgreSQL: their ids are given at insert but committed in
 * any order (by other hosts, or this pool's other connections), so one with a smaller id than
 * the last seen may appear after it. A change committed later than this many others is not
 * shown live (the page shows it when loaded).
 */
const TRANSITION_OVERLAP = 200;

/** One change a page may show: a request's new state (with its run) or a run's. */
export interface LiveChange {
  kind: 'job' | 'run';
  id: string;
  state: string;
  run?: string | null;
}

/**
 * A change with whose it is: each stream passes on only those its session may read
 * (src/http/ui/live-streams.ts), and none of this goes to the page.
 */
export interface OwnedChange {
  change: LiveChange;
  owner: string;
  /** The pipeline of the run (of a run's change, or of a step's); null for a request not of a run. */
  pipeline: string | null;
}

type Listener = (changes: readonly OwnedChange[]) => void;

/** The poller of one stretch with listeners: what it has read up to. */
interface Feed {
  timer: NodeJS.Timeout;
  /** The last transition seen; null until the first read of where the transitions stand. */
  lastTransitionId: number | null;
  /** On PostgreSQL, the ids of the overlap already sent (see TRANSITION_OVERLAP). */
  sent: Set<number>;
  runsSince: number;
  /** A tick under way: the next one is skipped rather than read the same rows again. */
  busy: boolean;
}

/**
 * Feeds the UI's Server-Sent Events from the history, cheaply: one poller for
 * every open page, started with the first listener and stopped with the last.
 * Each tick reads the transitions after the last one seen (a range of the
 * primary key) and the runs updated since the last tick; nothing is read
 * while no page is open.
 */
export class LiveChanges {
  readonly #listeners = new Set<Listener>();
  #feed: Feed | null = null;

  constructor(
    private readonly store: History,
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
    const feed: Feed = {
      timer: setInterval(() => void this.#tick(feed), this.everyMs),
      lastTransitionId: null,
      sent: new Set(),
      runsSince: Date.now(),
      busy: false,
    };
    feed.timer.unref();
    this.#feed = feed;
    // At once: where the transitions stand now, so that the ticks report what comes after.
    void this.#tick(feed);
  }

  #stop(): void {
    if (this.#feed) clearInterval(this.#feed.timer);
    this.#feed = null;
  }

  async #tick(feed: Feed): Promise<void> {
    if (feed.busy) return;
    feed.busy = true;
    try {
      const changes = await this.#read(feed);
      // Stopped while reading: the listeners are another stretch's, or none.
      if (changes.length === 0 || this.#feed !== feed) return;
      for (const listener of this.#listeners) listener(changes);
    } catch (error) {
      this.logger.warn({ err: error }, 'UI live updates: reading the history failed');
    } finally {
      feed.busy = false;
    }
  }

  async #read(feed: Feed): Promise<OwnedChange[]> {
    const h = this.store;
    if (feed.lastTransitionId === null) {
      feed.lastTransitionId = await lastTransitionId(h);
      if (h.dialect === 'postgres') {
        // The overlap the next ticks read again is of before the page opened: not news.
        const before = await transitionIdsIn(h, feed.lastTransitionId - TRANSITION_OVERLAP, feed.lastTransitionId);
        for (const id of before) feed.sent.add(id);
      }
      return [];
    }
    const now = Date.now();
    const overlap = h.dialect === 'postgres' ? TRANSITION_OVERLAP : 0;
    const read = await transitionsAfter(h, feed.lastTransitionId - overlap);
    const transitions = overlap ? read.filter((t) => !feed.sent.has(t.id)) : read;
    const changes: OwnedChange[] = [];
    if (overlap) {
      for (const t of transitions) feed.sent.add(t.id);
      const floor = Math.max(feed.lastTransitionId, read.at(-1)?.id ?? 0) - overlap;
      for (const id of feed.sent) if (id <= floor) feed.sent.delete(id);
    }
    if (transitions.length > 0) {
      feed.lastTransitionId = Math.max(feed.lastTransitionId, read.at(-1)?.id ?? feed.lastTransitionId);
      const whose = await ownershipOf(h, [...new Set(transitions.map((t) => t.requestId))]);
      for (const t of transitions) {
        const of = whose.get(t.requestId);
        // A request gone since (deleted by retention): nobody's to show.
        if (!of) continue;
        changes.push({
          change: { kind: 'job', id: t.requestId, state: t.state, run: of.runId },
          owner: of.owner,
          pipeline: of.pipeline,
        });
      }
    }
    // The runs table is small (and runs change seldom): a scan since the last tick,
    // overlapping by a second so a row written during the tick is not missed.
    const runs = await runStatesSince(h, feed.runsSince - 1000);
    feed.runsSince = now;
    for (const r of runs) {
      changes.push({
        change: { kind: 'run', id: r.id, state: r.state, run: r.id },
        owner: r.owner,
        pipeline: r.pipeline,
      });
    }
    return changes;
  }
}
