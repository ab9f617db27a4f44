import { z } from 'zod';
import type { AttemptPolicy, EscalatedField, Escalation, RequestState } from '../db/schema.js';

export type { AttemptPolicy, EscalatedField, Escalation } from '../db/schema.js';

import { durationSchema } from '../lib/duration.js';
import { type JobSpec, parseMemoryMb, parseTimeLimit } from '../sched/job-spec.js';

/**
 * The retry policy of a job request or a pipeline step, as data: on which final states a new
 * attempt is made, how many, how long after, and which resources grow for it within the user's
 * bounds (and the partition's limits). The same schema is read from job files, API submissions
 * and pipeline steps; the arithmetic here is pure, the attempts are made by
 * src/requests/attempts.ts. Not src/lib/retry-policy.ts, which is the HTTP client's retries.
 */

/**
 * Slurm end states an attempt may be retried on (Slurm's spelling; the request states
 * lower-cased). Not CANCELLED: a cancel is someone's decision (`schedflow jobs cancel`, the UI,
 * a run's cancel, `scancel` by the user or an admin), and a retry would undo it; the one cancel
 * Slurm makes itself, of a job whose dependency can never be met, a retry would only repeat
 * (a pipeline makes such steps again behind the new attempt of the step they need).
 */
export const RETRY_STATES = [
  'NODE_FAIL',
  'PREEMPTED',
  'BOOT_FAIL',
  'FAILED',
  'TIMEOUT',
  'OUT_OF_MEMORY',
  'DEADLINE',
] as const;
export type RetryState = (typeof RETRY_STATES)[number];

/** Why `on` may not name CANCELLED, said where a policy comes in. */
export const CANCELLED_NOT_RETRIED =
  "CANCELLED is never retried: a cancel is a person's (schedflow jobs cancel, the web UI, scancel) and a retry would undo it; remove it from on";

// Other values keep zod's message, which lists the states.
const retryStateSchema = z.enum(RETRY_STATES, {
  error: (issue) => (issue.input === 'CANCELLED' ? CANCELLED_NOT_RETRIED : undefined),
});

/** Further attempts after the first, at most. */
export const MAX_RETRY_LIMIT = 10;

/** What a partition allows, where known (read from the scheduler, or declared in the profile). */
export interface PartitionLimits {
  maxMemoryPerNodeMb?: number | null;
  maxTimeMin?: number | null;
}

function notation(parse: (value: number | string) => number | 'infinite', what: string) {
  return z
    .union([z.number().int().positive(), z.string()])
    .transform((value, ctx): number => {
      try {
        const parsed = parse(value);
        if (parsed === 'infinite') throw new Error(`a bound must be finite, not "${value}"`);
        return parsed;
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message });
        return z.NEVER;
      }
    })
    .meta({ description: what });
}

const factorSchema = z
  .number()
  .gt(1, 'a factor above 1 (2 doubles)')
  .max(16)
  .describe('multiplies the value at each retry (2 doubles it)');

const escalationOf = (max: ReturnType<typeof notation>) =>
  z.strictObject({ factor: factorSchema, max }).transform((e): Escalation => ({ factor: e.factor, max: e.max }));

/** The policy as users write it: `retry:` in job files and pipeline steps, `retry` in API submissions. */
export const attemptPolicySchema = z
  .strictObject({
    on: z
      .array(retryStateSchema)
      .min(1)
      .describe(
        'Slurm end states that give another attempt: NODE_FAIL, PREEMPTED, BOOT_FAIL, FAILED, TIMEOUT, OUT_OF_MEMORY, DEADLINE (never CANCELLED: a cancel is not undone)',
      ),
    limit: z.number().int().min(1).max(MAX_RETRY_LIMIT).describe('further attempts after the first'),
    exit_codes: z
      .array(z.number().int().min(0).max(255))
      .min(1)
      .optional()
      .describe('FAILED is retried only with one of these exit codes (default: any)'),
    backoff: z
      .union([
        durationSchema,
        z.strictObject({
          delay: durationSchema,
          factor: z.number().min(1).max(16).default(2),
          max: durationSchema.optional(),
        }),
      ])
      .optional()
      .describe('wait before a retry: a duration, or { delay, factor, max } growing at each attempt (default: none)'),
    escalate: z
      .strictObject({
        memory_per_node: escalationOf(notation(parseMemoryMb, 'memory: MB, or 512M, 16G'))
          .optional()
          .describe('on OUT_OF_MEMORY: { factor, max }, e.g. { factor: 2, max: 16G }'),
        time_limit: escalationOf(notation(parseTimeLimit, 'minutes, or HH:MM:SS, D-HH:MM:SS'))
          .optional()
          .describe('on TIMEOUT: { factor, max }, e.g. { factor: 1.5, max: "4:00:00" }'),
      })
      .optional()
      .describe('resources that grow at each retry, within the bounds given'),
  })
  .superRefine((p, ctx) => {
    if (p.exit_codes && !p.on.includes('FAILED')) {
      ctx.addIssue({ code: 'custom', path: ['exit_codes'], message: 'exit_codes is about FAILED: add FAILED to on' });
    }
    if (p.escalate?.memory_per_node && !p.on.includes('OUT_OF_MEMORY')) {
      ctx.addIssue({
        code: 'custom',
        path: ['escalate', 'memory_per_node'],
        message: 'memory_per_node grows on OUT_OF_MEMORY: add OUT_OF_MEMORY to on',
      });
    }
    if (p.escalate?.time_limit && !p.on.includes('TIMEOUT')) {
      ctx.addIssue({
        code: 'custom',
        path: ['escalate', 'time_limit'],
        message: 'time_limit grows on TIMEOUT: add TIMEOUT to on',
      });
    }
  })
  .transform((p): AttemptPolicy => {
    const backoff =
      p.backoff === undefined
        ? null
        : typeof p.backoff === 'number'
          ? { delaySec: p.backoff, factor: 1, maxSec: null }
          : { delaySec: p.backoff.delay, factor: p.backoff.factor, maxSec: p.backoff.max ?? null };
    const escalate: NonNullable<AttemptPolicy['escalate']> = {};
    if (p.escalate?.memory_per_node) escalate.memoryPerNode = p.escalate.memory_per_node;
    if (p.escalate?.time_limit) escalate.timeLimit = p.escalate.time_limit;
    return {
      on: [...new Set(p.on)].map((state) => state.toLowerCase() as RequestState),
      limit: p.limit,
      exitCodes: p.exit_codes ?? null,
      backoff,
      escalate: Object.keys(escalate).length ? escalate : null,
    };
  });

export type AttemptPolicyInput = z.input<typeof attemptPolicySchema>;

/**
 * What a policy cannot do with this spec, in words (empty when it fits): a resource can only
 * grow from a value the spec sets, and not when it is at or above its bound already.
 */
export function policyIssues(policy: AttemptPolicy, spec: Pick<JobSpec, 'memory_per_node' | 'time_limit'>): string[] {
  const issues: string[] = [];
  const memory = policy.escalate?.memoryPerNode;
  if (memory) {
    if (spec.memory_per_node === undefined || spec.memory_per_node === 'infinite') {
      issues.push("retry.escalate.memory_per_node grows the job's memory_per_node: set memory_per_node");
    } else if (spec.memory_per_node >= memory.max) {
      issues.push(
        `retry.escalate.memory_per_node: the job's memory_per_node (${formatMemory(spec.memory_per_node)}) is already at its bound (${formatMemory(memory.max)})`,
      );
    }
  }
  const time = policy.escalate?.timeLimit;
  if (time) {
    if (spec.time_limit === undefined || spec.time_limit === 'infinite') {
      issues.push("retry.escalate.time_limit grows the job's time_limit: set a finite time_limit");
    } else if (spec.time_limit >= time.max) {
      issues.push(
        `retry.escalate.time_limit: the job's time_limit (${formatMinutes(spec.time_limit)}) is already at its bound (${formatMinutes(time.max)})`,
      );
    }
  }
  return issues;
}

/** An attempt's end, as the policy reads it. */
export interface AttemptEnd {
  state: RequestState;
  exitCode: number | null;
  /** 1 for the first attempt. */
  attempt: number;
}

/**
 * Whether the policy retries this end: `no` (not a state or exit code it names), `exhausted`
 * (it would, but `limit` further attempts were made), or `yes`.
 */
export function retryMatch(policy: AttemptPolicy, end: AttemptEnd): 'no' | 'exhausted' | 'yes' {
  // A cancel is never retried, also under a policy stored (or a pipeline plan loaded) before
  // the schema refused CANCELLED.
  if (end.state === 'cancelled' || !policy.on.includes(end.state)) return 'no';
  const codes = policy.exitCodes;
  if (end.state === 'failed' && codes && codes.length > 0) {
    if (end.exitCode === null || !codes.includes(end.exitCode)) return 'no';
  }
  return end.attempt <= policy.limit ? 'yes' : 'exhausted';
}

/** The wait after attempt `attempt` ended, before the next one is made. */
export function backoffMs(policy: AttemptPolicy, attempt: number): number {
  const b = policy.backoff;
  if (!b) return 0;
  const sec = b.delaySec * b.factor ** Math.max(0, attempt - 1);
  return Math.round(Math.min(sec, b.maxSec ?? Number.POSITIVE_INFINITY) * 1000);
}

export type NextSpec =
  | { kind: 'retry'; spec: JobSpec; escalated: EscalatedField[] }
  | { kind: 'bound'; reason: string };

/**
 * The spec of the next attempt after an end the policy retries: the same spec, with memory or
 * time grown when the end calls for it. A value the next step would take past the bound is set
 * to the bound (the lower of the policy's and the partition's); one already there cannot grow,
 * and then no retry is made (`bound`, with why): the same job would end the same way.
 */
export function nextSpec(
  policy: AttemptPolicy,
  spec: JobSpec,
  state: RequestState,
  limits: PartitionLimits = {},
): NextSpec {
  const grow = (
    field: EscalatedField['field'],
    current: number,
    escalation: Escalation,
    partitionMax: number | null | undefined,
    format: (n: number) => string,
  ): EscalatedField | string => {
    const partitionBinds = partitionMax != null && partitionMax < escalation.max;
    const bound = partitionBinds ? partitionMax : escalation.max;
    const whose = partitionBinds ? "the partition's limit" : "the policy's bound";
    if (current >= bound) {
      return `${state.toUpperCase()}: ${field} is ${format(current)} already, and ${whose} is ${format(bound)}; no retry is made`;
    }
    const wanted = Math.ceil(current * escalation.factor);
    if (wanted <= bound) return { field, from: current, to: wanted };
    return { field, from: current, to: bound, cappedBy: partitionBinds ? 'partition' : 'policy' };
  };

  let next: JobSpec = spec;
  const escalated: EscalatedField[] = [];
  const memory = policy.escalate?.memoryPerNode;
  if (state === 'out_of_memory' && memory) {
    if (spec.memory_per_node === undefined || spec.memory_per_node === 'infinite') {
      return { kind: 'bound', reason: 'OUT_OF_MEMORY: the job sets no memory_per_node to grow; no retry is made' };
    }
    const change = grow('memory_per_node', spec.memory_per_node, memory, limits.maxMemoryPerNodeMb, formatMemory);
    if (typeof change === 'string') return { kind: 'bound', reason: change };
    next = { ...next, memory_per_node: change.to };
    escalated.push(change);
  }
  const time = policy.escalate?.timeLimit;
  if (state === 'timeout' && time) {
    if (spec.time_limit === undefined || spec.time_limit === 'infinite') {
      return { kind: 'bound', reason: 'TIMEOUT: the job sets no finite time_limit to grow; no retry is made' };
    }
    const change = grow('time_limit', spec.time_limit, time, limits.maxTimeMin, formatMinutes);
    if (typeof change === 'string') return { kind: 'bound', reason: change };
    next = { ...next, time_limit: change.to };
    escalated.push(change);
  }
  return { kind: 'retry', spec: next, escalated };
}

/** Why an attempt was made, in words: `OUT_OF_MEMORY on attempt 1; memory_per_node 4G → 8G`. */
export function retryReason(end: AttemptEnd, escalated: readonly EscalatedField[]): string {
  const exit = end.state === 'failed' && end.exitCode !== null ? ` (exit ${end.exitCode})` : '';
  const changes = escalated.map((e) => {
    const format = e.field === 'memory_per_node' ? formatMemory : formatMinutes;
    const capped = e.cappedBy ? ` (${e.cappedBy === 'partition' ? "the partition's limit" : 'the bound'})` : '';
    return `${e.field} ${format(e.from)} → ${format(e.to)}${capped}`;
  });
  return [`${end.state.toUpperCase()}${exit} on attempt ${end.attempt}`, ...changes].join('; ');
}

/** Why no further attempt is made after the policy's last one. */
export function exhaustedReason(policy: AttemptPolicy, end: AttemptEnd): string {
  return `${end.state.toUpperCase()} on attempt ${end.attempt}: the policy's limit of ${policy.limit} ${policy.limit === 1 ? 'retry is' : 'retries is'} reached`;
}

/** MB as Slurm writes memory: `16G` when whole gigabytes, else `1536M`. */
export function formatMemory(mb: number): string {
  return mb % 1024 === 0 ? `${mb / 1024}G` : `${mb}M`;
}

/** Minutes as Slurm writes a time limit: `H:MM:00`, with `D-` beyond a day. */
export function formatMinutes(min: number): string {
  const days = Math.floor(min / 1440);
  const hours = Math.floor((min % 1440) / 60);
  const minutes = min % 60;
  const hm = `${days ? `${days}-${String(hours).padStart(2, '0')}` : hours}:${String(minutes).padStart(2, '0')}:00`;
  return hm;
}
