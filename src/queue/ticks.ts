import type { Queue } from 'bullmq';
import { DISPATCH_JOB } from '../notify/delivery-dispatcher.js';
import { type QueueName, SUMMARY_DISPATCH_JOB } from './catalog.js';
import type { SchedulerSpec } from './queue-keeper.js';

/** How often each periodic job ticks (the daemon's configuration). */
export interface TickSettings {
  pollFloorMs: number;
  reconcileEveryMs: number;
  pipelineTickMs: number;
  notifyEveryMs: number;
  summaryDispatchEveryMs: number;
}

/**
 * Job schedulers tick the periodic work, so several schedflow processes never tick twice.
 * Created at start and put back by the QueueKeeper whenever Redis lost them.
 */
export function tickSchedulers(
  queues: Record<QueueName, Queue>,
  profiles: Iterable<string>,
  settings: TickSettings,
): SchedulerSpec[] {
  const ticks: SchedulerSpec[] = [];
  for (const name of profiles) {
    ticks.push(
      {
        queue: queues.poll,
        id: `poll:${name}`,
        repeat: { every: settings.pollFloorMs },
        template: { name: 'poll', data: { profile: name } },
      },
      {
        queue: queues.reconcile,
        id: `reconcile:${name}`,
        repeat: { every: settings.reconcileEveryMs },
        template: { name: 'reconcile', data: { profile: name } },
      },
    );
  }
  // A dispatch that fails is not retried: the next tick, a second later, does it again.
  const once = { attempts: 1, removeOnComplete: true, removeOnFail: { count: 100 } };
  ticks.push(
    {
      queue: queues.pipeline,
      id: 'tick:pipelines',
      repeat: { every: settings.pipelineTickMs },
      template: { name: 'tick', data: {} },
    },
    {
      queue: queues.notify,
      id: 'tick:notify',
      repeat: { every: settings.notifyEveryMs },
      template: { name: DISPATCH_JOB, data: {}, opts: once },
    },
    {
      queue: queues.summarize,
      id: 'tick:summaries',
      repeat: { every: settings.summaryDispatchEveryMs },
      template: { name: SUMMARY_DISPATCH_JOB, data: {}, opts: once },
    },
  );
  return ticks;
}

/** Creates (or updates) the ticks' job schedulers in Redis. */
export async function upsertTicks(ticks: readonly SchedulerSpec[]): Promise<void> {
  for (const tick of ticks) await tick.queue.upsertJobScheduler(tick.id, tick.repeat, tick.template);
}
