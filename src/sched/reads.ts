import type { Freshness } from './freshness.js';
import type { SchedJob } from './job-model.js';

/** Data read from the scheduler, with how fresh it is. */
export interface Read<T> {
  data: T;
  freshness: Freshness;
}

export interface ReadOptions {
  /** A read made for polling: served first, and accepts stale data during an outage. */
  forPolling?: boolean;
  /** Seconds of staleness accepted from the proxy's cache while the upstream is down (forPolling: the poll's). */
  staleIfErrorSec?: number;
  /** Retry a failed read with backoff (the profile's `retries`). @defaultValue true */
  retry?: boolean;
  signal?: AbortSignal;
}

export interface JobListing {
  jobs: SchedJob[];
  /** `last_update` of the controller: pass it as `updateTime` next time. */
  lastUpdate: number | null;
  /** False when `updateTime` was given and slurmctld said nothing changed since (an empty list). */
  changed: boolean;
}

export interface AccountingQuery {
  /** Unix seconds: jobs that were eligible, running or ended after this. */
  startTime?: number;
  endTime?: number;
  accounts?: string[];
  jobNames?: string[];
  states?: string[];
  users?: string[];
  partitions?: string[];
  jobIds?: number[];
}
