import type { Queue } from 'bullmq';
import { z } from 'zod';
import { OWNER_NAME } from '../access/principal.js';

/**
 * Fair share between owners on the submit queue (docs/fair-share.md): start-time fair queueing
 * on BullMQ's job priorities. Every submit job gets a priority, its owner's next "round": an
 * owner with a backlog of 10,000 holds rounds 1 to 10,000, and another owner's single request,
 * added later, gets the round being served now, so it goes right after the jobs already there
 * (equal priorities are served in the order they were added) instead of after the backlog.
 *
 * Why priorities, and not a window fed from the history: the submit job stays the one thing
 * that says "submit this request", added by the door in the same turn as now, re-added by the
 * relay after a Redis outage, with its job id the request id (one job per request). Only the
 * order the worker takes jobs in changes. A window fed from the history would leave most
 * `queued` requests without a job, which is what the relay takes for a lost job, and would need
 * a feeder that every process agrees on.
 *
 * The tags (SFQ: start = max(virtual time, the owner's last finish); finish = start + 1/weight)
 * live in one Redis hash beside the queue, changed by one script so that processes adding at
 * once do not interleave. The virtual time is read from the queue itself: the round of the
 * first job waiting, or, when none waits, the last finish of all (everyone served).
 */

/** BullMQ's highest priority (2^21 - 1); a lower number is served first, 0 is "none". */
export const MAX_SUBMIT_PRIORITY = 2 ** 21 - 1;
/**
 * Tags are whole numbers of this unit a round (so that weights 1 to 16 and their halves
 * divide it exactly, and the sums stay exact in Redis's Lua doubles).
 */
const UNIT = 720_720;
/**
 * Rounds go up by one each time every owner with a backlog has had its share, forever. Once
 * past this and with nothing waiting, the tags start again from 0 (nothing waits whose order
 * they would change). Until then, a daemon that never empties its submit queue for 2^21 rounds
 * would reach BullMQ's ceiling: priorities stay at it and are served first come, first served.
 */
const RESTART_AFTER_ROUNDS = 2 ** 20;

/** Weights by owner: an owner of weight 2 gets two submissions a round. Unlisted owners: 1. */
export const fairShareWeightsSchema = z.record(
  z.string().regex(OWNER_NAME, 'an owner name'),
  z.number().positive().max(1000, 'at most 1000'),
);
export type FairShareWeights = z.output<typeof fairShareWeightsSchema>;

/** The environment variable of the weights: `lab-a=2,lab-b=0.5`. */
export const FAIR_SHARE_WEIGHTS_ENV = 'SCHEDFLOW_FAIR_SHARE_WEIGHTS';

/** Reads `owner=weight,…`; what it cannot read is left for the schema to refuse, by name. */
export function fairShareWeightsFromEnv(env: NodeJS.ProcessEnv): Record<string, unknown> | undefined {
  const text = env[FAIR_SHARE_WEIGHTS_ENV]?.trim();
  if (!text) return undefined;
  const weights: Record<string, unknown> = {};
  for (const entry of text.split(',')) {
    const [owner = '', weight] = entry.split('=').map((part) => part.trim());
    if (owner === '' && weight === undefined) continue;
    weights[owner] = weight === undefined || weight === '' ? weight : Number(weight);
  }
  return weights;
}

/**
 * KEYS[1] the tags (a hash: `v` virtual time, `top` the highest finish, `f:<owner>` each
 * owner's last finish), KEYS[2] the queue's prioritized set (score: priority * 2^32 + a
 * counter). ARGV: unit, restart tag, max priority, then owner and tag increment pairs, in the
 * order the jobs are added. Answers the jobs' priorities.
 */
const TAG_SCRIPT = `
local state = KEYS[1]
local unit = tonumber(ARGV[1])
local restart_at = tonumber(ARGV[2])
local max_priority = tonumber(ARGV[3])
local v = tonumber(redis.call('HGET', state, 'v') or '0')
local top = tonumber(redis.call('HGET', state, 'top') or '0')
local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if head[2] then
  local round = math.floor(tonumber(head[2]) / 4294967296) - 1
  if round * unit > v then v = round * unit end
else
  if top > v then v = top end
  if v >= restart_at then
    redis.call('DEL', state)
    v = 0
    top = 0
  end
end
local finish = {}
local out = {}
for i = 4, #ARGV, 2 do
  local owner = ARGV[i]
  local last = finish[owner] or tonumber(redis.call('HGET', state, 'f:' .. owner) or '0')
  local start = math.max(v, last)
  finish[owner] = start + tonumber(ARGV[i + 1])
  if finish[owner] > top then top = finish[owner] end
  out[#out + 1] = math.min(math.floor(start / unit) + 1, max_priority)
end
for owner, f in pairs(finish) do
  redis.call('HSET', state, 'f:' .. owner, string.format('%d', f))
end
redis.call('HSET', state, 'v', string.format('%d', v), 'top', string.format('%d', top))
return out
`;

const TAG_COMMAND = 'schedflowFairShareTags';
/** Connections the script is defined on. */
const scripted = new WeakSet<object>();

/** The submit queue's fair share: the priorities of the next submit jobs of given owners. */
export class SubmitFairShare {
  readonly #key: string;

  constructor(
    private readonly queue: Queue,
    private readonly weights: FairShareWeights = {},
  ) {
    // Beside the queue's keys, never among them: a job's key is `<prefix>:submit:<request id>`.
    this.#key = `${queue.opts.prefix ?? 'bull'}:fair-share:${queue.name}`;
  }

  weightOf(owner: string): number {
    return this.weights[owner] ?? 1;
  }

  /** The priorities of jobs about to be added for these owners' requests, in this order. */
  async priorities(owners: readonly string[]): Promise<number[]> {
    if (owners.length === 0) return [];
    const client = await this.queue.getBackend().client;
    // Defined once per connection (the queue's client is made again after a reconnect).
    if (!scripted.has(client)) {
      client.defineCommand(TAG_COMMAND, { numberOfKeys: 2, lua: TAG_SCRIPT });
      scripted.add(client);
    }
    const args: (string | number)[] = [this.#key, this.queue.keys.prioritized as string];
    args.push(UNIT, RESTART_AFTER_ROUNDS * UNIT, MAX_SUBMIT_PRIORITY);
    for (const owner of owners) args.push(owner, Math.max(1, Math.round(UNIT / this.weightOf(owner))));
    const answer: unknown = await client.runCommand(TAG_COMMAND, args);
    if (!Array.isArray(answer) || answer.length !== owners.length) {
      throw new Error('the fair-share script answered something else than one priority per job');
    }
    return answer.map(Number);
  }
}
