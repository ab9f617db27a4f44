import type { TrackedRequest } from '../db/requests.js';
import { type Clock, systemClock } from '../lib/clock.js';
import { chunkJobIds, type SchedClient } from '../sched/client.js';
import { KILLED_BY_CONTROLLER } from '../sched/job-model.js';
import { type ArrayPlan, planArrays } from './array-poll.js';
import type { AccountingChunk, LightStates } from './poll-ask.js';
import type { PollDeps } from './poll-deps.js';
import { isTerminalRequest, requestStateFor } from './request-state.js';

/**
 * The planning of a poll cycle (src/requests/poller.ts): from the light states of the tracked
 * jobs, which of them accounting must describe, in which requests, and which are written from
 * the light states alone. Asks nothing and writes nothing.
 */

/** What a cycle will ask and write after the light states. */
export interface CyclePlan {
  /** The array requests among the tracked, and their plan (array-poll.ts); null without arrays. */
  arrays: TrackedRequest[];
  arrayPlan: ArrayPlan | null;
  /** Single jobs that finished or left the controller: their end is accounting's to describe. */
  needAccounting: TrackedRequest[];
  /** The accounting requests this cycle makes, in order. */
  queries: AccountingChunk[];
  /** The jobs waiting for accounting, longest waiting first (see accountingQueueOf). */
  queue: AccountingQueue;
  /** In a mass start: changed jobs written from the light states now, their full records with their end. */
  fromLightStates: TrackedRequest[];
}

/**
 * Plans one cycle. Finished jobs and jobs that left the controller need accounting's record
 * (exit code, times); jobs whose state changed want it too (the light listing has no reason,
 * start time or nodes), in the same request when one names them all. Past one request (a mass
 * start or end), ends go in chunks, the longest waiting first, as many as the budget allows this
 * cycle; started jobs are written from the light states, their full records coming with their end.
 */
export async function planCycle(deps: PollDeps, tracked: TrackedRequest[], light: LightStates): Promise<CyclePlan> {
  const { store, client } = deps;
  const needAccounting: TrackedRequest[] = [];
  const changedRows: TrackedRequest[] = [];
  // Array jobs: their tasks are followed through the same two requests (array-poll.ts).
  const arrays = tracked.filter((row) => row.arrayTaskCount !== null);
  const arrayPlan = arrays.length > 0 ? await planArrays(store, arrays, light.taskEntries, light.freshnessOf) : null;
  const completing = completingSinceOf(client);
  const now = (deps.clock ?? systemClock).now();
  const stillCompleting = new Set<string>();
  for (const row of tracked) {
    if (row.arrayTaskCount !== null) continue;
    const job = light.byId.get(row.jobId as number);
    if (job) {
      const to = requestStateFor(job.state);
      if (KILLED_BY_CONTROLLER.has(job.state) && job.state_flags.includes('COMPLETING')) {
        // Ended by the controller but still completing (its processes being killed): how the
        // script ended is not settled yet, in the controller's record or accounting's batch
        // step, and an end recorded now would keep it wrong. Waited for, within reason.
        const since = completing.get(row.id) ?? now;
        completing.set(row.id, since);
        stillCompleting.add(row.id);
        if (now - since < COMPLETING_PATIENCE_MS) continue;
      }
      // Finished: the accounting record carries exit code, times and elapsed. A state that
      // changed (pending to running): the light listing has no reason, start time or nodes,
      // so the full record comes with the same accounting request, not one more per job.
      if (to !== null && isTerminalRequest(to)) needAccounting.push(row);
      // A running job whose start the history lacks (accounting was behind last time) is asked again.
      else if (
        job.state_flags.join(',') !== row.rawState ||
        row.missingSince !== null ||
        (to === 'running' && row.startedAt === null)
      ) {
        changedRows.push(row);
      }
    } else {
      // Absent from an answer produced after the submission: it has left the controller.
      const freshness = light.freshnessOf(row);
      const producedNoEarlierThan = freshness.fetchedAt.getTime() - (freshness.ageSec + 1) * 1000;
      if (!freshness.stale && producedNoEarlierThan > (row.submittedAt ?? 0)) needAccounting.push(row);
    }
  }

  for (const id of completing.keys()) if (!stillCompleting.has(id)) completing.delete(id);

  const queue = accountingQueueOf(client, needAccounting, deps.clock);
  let queries: AccountingChunk[];
  let fromLightStates: TrackedRequest[] = [];
  const arrayIds = arrayPlan?.accountingIds ?? [];
  // An array that waited last cycle for accounting to show a task's end asks again under a new
  // URL: the proxy keeps an answer for up to a minute (30 s on the simulator's accounting), and
  // the one it kept, made before the end reached slurmdbd, would say the same until the patience
  // ran out (an array of quick tasks took 32 s to conclude where its tasks took 1).
  const waits = arrayWaitsOf(client);
  const arrayChunk = { arrays, arrayIds, afresh: arrays.some((row) => waits.has(row.id)) };
  // The same for a single job whose end accounting had not shown last cycle.
  const ends = endWaitsOf(client);
  if (ends.size > 0) {
    const ending = new Set(needAccounting.map((row) => row.id));
    for (const id of ends.keys()) if (!ending.has(id)) ends.delete(id);
  }
  const afresh = (rows: TrackedRequest[]) => rows.some((row) => ends.has(row.id));
  const allIds = [...needAccounting, ...changedRows].map((row) => row.jobId as number).concat(arrayIds);
  if (chunkJobIds(allIds, 'step').length <= 1) {
    // One query names them all: started jobs get their full record with the ends. Only started
    // jobs: it asks for active records alone (see resolveThroughAccounting).
    const rows = [...needAccounting, ...changedRows];
    const activeOnly = needAccounting.length === 0 && !arrayPlan?.ended;
    queries = allIds.length > 0 ? [{ rows, activeOnly, ...arrayChunk, afresh: arrayChunk.afresh || afresh(rows) }] : [];
  } else {
    // A mass start or end: ends go to accounting in chunks, the longest waiting first, as many
    // as the budget allows this cycle (the rest in the next ones). Started jobs get the light
    // record now, and the rest with their end: their full records would cost a chunk each.
    fromLightStates = changedRows;
    queries = queue
      .next(accountingChunksPerCycle(client))
      .map((rows) => ({ rows, activeOnly: false, afresh: afresh(rows) }));
    if (arrayIds.length > 0) queries.unshift({ rows: [], activeOnly: false, ...arrayChunk });
  }
  return { arrays, arrayPlan, needAccounting, queries, queue, fromLightStates };
}

/** Since when each request has waited for a record, per profile connection: one map per client. */
function waitsPerClient(): (client: SchedClient) => Map<string, number> {
  const byClient = new WeakMap<SchedClient, Map<string, number>>();
  return (client) => {
    let waits = byClient.get(client);
    if (!waits) {
      waits = new Map();
      byClient.set(client, waits);
    }
    return waits;
  };
}

/**
 * Since when each single job's end, shown by the controller, has waited for accounting's record
 * (see resolveThroughAccounting, poller.ts).
 */
export const endWaitsOf = waitsPerClient();

/** Since when each single job has been shown ended but still completing by the controller. */
const completingSinceOf = waitsPerClient();

/**
 * How long an ended job's COMPLETING is waited for before its end is recorded as it stands:
 * Slurm's KillWait (30 s by default) between the SIGTERM and the SIGKILL, and an epilog.
 */
export const COMPLETING_PATIENCE_MS = 60_000;

/** Since when each array request has waited for the controller's records. */
export const arrayWaitsOf = waitsPerClient();

/**
 * Accounting chunks one cycle may ask for in a mass end: half the profile's burst (its bucket's
 * capacity), so the other half stays for submissions; one while the proxy's rate limit holds the
 * profile. At the default budget (10, 5/s) five chunks: 2,500 ends a cycle.
 */
function accountingChunksPerCycle(client: SchedClient): number {
  if (client.isRateLimited()) return 1;
  return Math.max(1, Math.floor(client.profile.rateLimit.capacity / 2));
}

/**
 * The jobs waiting for accounting, per profile connection: for each request, when it was last
 * asked for, or began to wait. The smallest go first, so a job asked for goes behind every job
 * that has waited since, and none waits forever (jobs accounting never describes, such as lost
 * ones, included). Kept in memory: after a restart every job waits from then, oldest request first.
 */
const accountingQueues = new WeakMap<SchedClient, Map<string, number>>();

export type AccountingQueue = ReturnType<typeof accountingQueueOf>;

function accountingQueueOf(client: SchedClient, waiting: TrackedRequest[], clock: Clock = systemClock) {
  let since = accountingQueues.get(client);
  if (!since) {
    since = new Map();
    accountingQueues.set(client, since);
  }
  const queue = since;
  const now = clock.now();
  const still = new Set(waiting.map((row) => row.id));
  for (const id of queue.keys()) if (!still.has(id)) queue.delete(id);
  for (const row of waiting) if (!queue.has(row.id)) queue.set(row.id, now);
  return {
    /** The next `count` chunks of requests, the longest waiting first. */
    next(count: number): TrackedRequest[][] {
      const order = [...waiting].sort(
        (a, b) =>
          (queue.get(a.id) ?? now) - (queue.get(b.id) ?? now) ||
          a.createdAt - b.createdAt ||
          (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
      );
      const byJobId = new Map(order.map((row) => [row.jobId as number, row]));
      const chunks = chunkJobIds(
        order.map((row) => row.jobId as number),
        'step',
      ).slice(0, count);
      return chunks.map((ids) => ids.map((id) => byJobId.get(id) as TrackedRequest));
    },
    asked(rows: TrackedRequest[]): void {
      const at = clock.now();
      for (const row of rows) if (queue.has(row.id)) queue.set(row.id, at);
    },
  };
}
