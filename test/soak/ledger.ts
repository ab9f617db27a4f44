import type { SimJob } from '../chaos/upstream.js';
import { TERMINAL } from '../chaos/verdict.js';
import type { RequestRow } from './history-stats.js';
import type { Kind } from './traffic.js';

/** The marker a submission carries in its comment (src/sched/marker-lookup.ts: `schedflow:<request id>`). */
const MARKER = /^schedflow:(\S+)/;

/** A name the traffic gives one request alone (a retry repeats its first attempt's name; an array's tasks share theirs). */
const ONE_REQUEST_NAME = /-(s|c)\d+$/;

/** How long an ended request's scheduler job may take to show in the simulator's saved table. */
const JOB_TABLE_LAG_MS = 30_000;

export interface LedgerCounts {
  accepted: number;
  /** Every request the history showed (pipeline steps and retries included). */
  seen: number;
  ended: number;
  open: number;
  duplicates: number;
  lost: number;
  stuck: number;
  notes: string[];
}

interface Followed {
  state: string;
  jobId: number | null;
  firstSeenAt: number;
  endedAt?: number;
}

/**
 * The soak's count of duplicates, losses and stuck requests, as chaos's verdict counts them
 * (test/chaos/verdict.ts) but followed over the whole run rather than judged once: retention
 * removes ended requests from the history, and the simulator's saved table may drop old jobs,
 * so each is noted when it is seen and kept here.
 * - duplicate: more than one scheduler job (an array counts once) for one request's marker, or
 *   for one name that only one request has;
 * - lost: accepted by the API but never in the history; or ended without a scheduler job ever
 *   made for it (a cancel before submission excepted); or ended `submit_failed` / `lost`,
 *   although every fault the soak makes is transient;
 * - stuck: not ended `stuckAfterMs` after the history first showed it (at the end: not ended
 *   when the drain ran out).
 */
export class Ledger {
  readonly #accepted = new Map<string, { kind: Kind; at: number }>();
  readonly #requests = new Map<string, Followed>();
  readonly #jobsByRequest = new Map<string, Set<number>>();
  readonly #jobsByName = new Map<string, Set<number>>();

  accept(requestId: string, kind: Kind): void {
    this.#accepted.set(requestId, { kind, at: Date.now() });
  }

  observe(rows: RequestRow[], jobs: SimJob[], now = Date.now()): void {
    for (const row of rows) {
      const known = this.#requests.get(row.id);
      const followed: Followed = known ?? { state: row.state, jobId: row.jobId, firstSeenAt: now };
      followed.state = row.state;
      followed.jobId = row.jobId;
      if (TERMINAL.has(row.state)) followed.endedAt ??= now;
      this.#requests.set(row.id, followed);
    }
    for (const job of jobs) {
      const base = job.arrayJobId ?? job.jobId;
      const id = MARKER.exec(job.comment ?? '')?.[1];
      if (id) add(this.#jobsByRequest, id, base);
      if (ONE_REQUEST_NAME.test(job.name)) add(this.#jobsByName, job.name, base);
    }
  }

  /**
   * The counts now. `final`: the drain is over, so every request that is not ended is stuck
   * and every accepted one the history never showed is lost; `cutoff` leaves out requests the
   * history first showed after it (the cron's runs during the drain).
   */
  counts(options: { now?: number; stuckAfterMs: number; final?: boolean; cutoff?: number }): LedgerCounts {
    const now = options.now ?? Date.now();
    const out: LedgerCounts = {
      accepted: this.#accepted.size,
      seen: this.#requests.size,
      ended: 0,
      open: 0,
      duplicates: 0,
      lost: 0,
      stuck: 0,
      notes: [],
    };
    for (const [id, jobs] of this.#jobsByRequest) {
      if (jobs.size > 1) {
        out.duplicates += jobs.size - 1;
        out.notes.push(`duplicate: request ${id} has jobs ${[...jobs].join(', ')}`);
      }
    }
    for (const [name, jobs] of this.#jobsByName) {
      if (jobs.size > 1) {
        out.duplicates += jobs.size - 1;
        out.notes.push(`duplicate: name ${name} has jobs ${[...jobs].join(', ')}`);
      }
    }
    for (const [id, accepted] of this.#accepted) {
      // Not yet in the history is not yet lost: a request accepted while Redis is down is written at once, but a sample may come first.
      if (!this.#requests.has(id) && (options.final || now - accepted.at > 60_000)) {
        out.lost++;
        out.notes.push(`lost: ${accepted.kind} request ${id} accepted but never in the history`);
      }
    }
    for (const [id, r] of this.#requests) {
      if (options.cutoff !== undefined && r.firstSeenAt > options.cutoff) continue;
      if (r.endedAt === undefined) {
        out.open++;
        if (options.final || now - r.firstSeenAt > options.stuckAfterMs) {
          out.stuck++;
          out.notes.push(`stuck: request ${id} still ${r.state}, job ${r.jobId ?? 'none'}`);
        }
        continue;
      }
      out.ended++;
      if (r.state === 'submit_failed' || r.state === 'lost') {
        out.lost++;
        out.notes.push(`lost: request ${id} ended ${r.state}`);
        continue;
      }
      const madeJob = (this.#jobsByRequest.get(id)?.size ?? 0) > 0;
      const withdrawn = r.state === 'cancelled' && r.jobId === null;
      if (!madeJob && !withdrawn && (options.final || now - r.endedAt > JOB_TABLE_LAG_MS)) {
        out.lost++;
        out.notes.push(`lost: request ${id} ended ${r.state} without a scheduler job`);
      }
    }
    return out;
  }
}

function add(map: Map<string, Set<number>>, key: string, value: number): void {
  let set = map.get(key);
  if (!set) {
    set = new Set();
    map.set(key, set);
  }
  set.add(value);
}
