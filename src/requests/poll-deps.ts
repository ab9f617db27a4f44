import type { History } from '../db/history.js';
import type { Clock } from '../lib/clock.js';
import type { HeapCollector } from '../lib/heap-collector.js';
import type { Logger } from '../logger.js';
import type { SchedClient } from '../sched/client.js';

/** What a poll cycle (src/requests/poller.ts) and its plan, ask and apply steps are given. */
export interface PollSettings {
  /** How long a job may be missing from both controller and accounting before it is `lost`. @defaultValue 300000 */
  lostGraceMs: number;
  /**
   * How many times a request whose job the controller lost before it started is submitted again
   * (src/requests/lost-resubmit.ts); 0: never. @defaultValue 1
   */
  lostResubmits?: number;
  /** How often a profile with nothing to track is checked (the poll interval's ceiling). @defaultValue 60000 */
  pollCeilingMs?: number;
  /**
   * How long an array task's end, shown by the controller, waits for accounting's record before
   * the controller's full record gives it. @defaultValue 30000
   */
  arrayEndPatienceMs?: number;
  /**
   * How long a single job's end, shown by the controller, waits for accounting's record (asked
   * again each cycle) before one controller listing gives it. @defaultValue 10000
   */
  endPatienceMs?: number;
  /**
   * How often a pending job's full controller record is read for Slurm's reason and expected
   * start (src/requests/pending-details.ts); 0: never. @defaultValue 30000
   */
  pendingDetailsEveryMs?: number;
}

export interface PollDeps {
  store: History;
  client: SchedClient;
  logger: Logger;
  settings: PollSettings;
  signal?: AbortSignal;
  /** The daemon's heap collector, told when a cycle wrote a mass start or end. */
  heap?: Pick<HeapCollector, 'afterBurst'>;
  /** The daemon's clock: when things were seen and moved. @defaultValue systemClock */
  clock?: Clock;
}
