import type { Freshness } from './freshness.js';

/**
 * The fixed names upstream requests are counted under: no job ids, so a metric labelled with
 * them has a bounded number of series whatever the number of jobs.
 */
export const UPSTREAM_ENDPOINTS = [
  'submit',
  'cancel',
  'jobs_state',
  'jobs',
  'job',
  'accounting',
  'accounting_job',
  'ping',
  'meta',
  'other',
] as const;
export type UpstreamEndpoint = (typeof UPSTREAM_ENDPOINTS)[number];

/** The endpoint name of a request path of either flavor (`/sched/v0.0.44/job/12` → `job`). */
export function endpointOf(method: string, path: string): UpstreamEndpoint {
  if (path.startsWith('/meta/')) return 'meta';
  if (path === '/ping' || /^\/(sched|slurm)\/[^/]+\/ping$/.test(path)) return 'ping';
  const match = /^\/(sched|slurm|scheddb|slurmdb)\/[^/]+\/(.*)$/.exec(path);
  if (!match) return 'other';
  const accounting = match[1] === 'scheddb' || match[1] === 'slurmdb';
  const rest = match[2] ?? '';
  if (method === 'POST' && rest === 'job/submit') return 'submit';
  if (method === 'DELETE' && /^job\/\d+$/.test(rest)) return 'cancel';
  if (method !== 'GET') return 'other';
  if (rest === 'jobs/state') return accounting ? 'other' : 'jobs_state';
  if (rest === 'jobs') return accounting ? 'accounting' : 'jobs';
  if (/^job\/\d+$/.test(rest)) return accounting ? 'accounting_job' : 'job';
  return 'other';
}

/**
 * What a profile's upstream has been answering, as this process saw it: requests by endpoint
 * and status (`error` when no answer came), stale answers (served under stale-if-error while
 * the scheduler behind the proxy is down), when the freshest fresh answer was produced, and
 * since when answers have been stale. Kept in memory: it describes this process's view now,
 * for /metrics, /readyz and the Profiles page, and starts afresh with the process.
 */
export class UpstreamHealth {
  /** Requests by `endpoint status`. */
  readonly requests = new Map<string, number>();
  readonly staleAnswers = new Map<UpstreamEndpoint, number>();
  /** When the upstream produced the freshest fresh answer (by our clock); null before one. */
  freshestAnswerAtMs: number | null = null;
  /** Per endpoint: since when its answers have been stale (cleared by a fresh one). */
  private readonly staleSinceByEndpoint = new Map<UpstreamEndpoint, number>();

  constructor(readonly profile: string) {}

  /**
   * One request's outcome: its HTTP status, or null when no answer came. `freshness` is given
   * for answers that carry scheduler data (not the proxy's own meta and `/ping` answers, which
   * are always fresh and say nothing of the scheduler behind it).
   */
  record(endpoint: UpstreamEndpoint, status: number | null, freshness?: Freshness): void {
    const key = `${endpoint} ${status ?? 'error'}`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
    if (!freshness) return;
    if (freshness.stale) {
      this.staleAnswers.set(endpoint, (this.staleAnswers.get(endpoint) ?? 0) + 1);
      if (!this.staleSinceByEndpoint.has(endpoint))
        this.staleSinceByEndpoint.set(endpoint, freshness.fetchedAt.getTime());
      return;
    }
    this.staleSinceByEndpoint.delete(endpoint);
    const produced = freshness.producedAt.getTime();
    if (this.freshestAnswerAtMs === null || produced > this.freshestAnswerAtMs) this.freshestAnswerAtMs = produced;
  }

  /** Since when some endpoint's answers have been stale; null while the last answers were fresh. */
  staleSince(): number | null {
    let since: number | null = null;
    for (const at of this.staleSinceByEndpoint.values()) if (since === null || at < since) since = at;
    return since;
  }

  /** The endpoints whose last answer was stale. */
  staleEndpoints(): UpstreamEndpoint[] {
    return [...this.staleSinceByEndpoint.keys()];
  }

  /** "serving stale answers since <ISO time> (jobs_state, accounting)", or null. */
  staleNote(): string | null {
    const since = this.staleSince();
    if (since === null) return null;
    return `serving stale answers since ${new Date(since).toISOString()} (${this.staleEndpoints().join(', ')}): the scheduler behind the proxy does not answer`;
  }
}
