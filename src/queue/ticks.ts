import type { JobsOptions, Queue } from 'bullmq';
import type { QueueName } from './catalog.js';
import type { QueueDefinition } from './queue-definition.js';
import type { SchedulerSpec } from './queue-keeper.js';

/** A dispatch that fails is not retried: the next tick, a second later, does it again. */
export const TICK_ONCE: JobsOptions = { attempts: 1, removeOnComplete: true, removeOnFail: { count: 100 } };

/**
 * Job schedulers tick the periodic work, so several schedflow processes never tick twice.
 * Created at start and put back by the QueueKeeper whenever Redis lost them.
 */
export function tickSchedulers<Settings>(
  definitions: Record<QueueName, QueueDefinition<Settings, never>>,
  queues: Record<QueueName, Queue>,
  settings: Settings,
  profiles: readonly string[],
): SchedulerSpec[] {
  return Object.values(definitions).flatMap((definition) =>
    (definition.ticks?.(settings, profiles) ?? []).map((tick) => ({ ...tick, queue: queues[definition.name] })),
  );
}

/** Creates (or updates) the ticks' job schedulers in Redis. */
export async function upsertTicks(ticks: readonly SchedulerSpec[]): Promise<void> {
  for (const tick of ticks) await tick.queue.upsertJobScheduler(tick.id, tick.repeat, tick.template);
}
