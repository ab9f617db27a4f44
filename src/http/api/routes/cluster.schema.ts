import { z } from 'zod';
import { CLUSTER_VIEWS } from '../../../sched/cluster-view.js';
import { named, time } from '../shared-schemas.js';

/** Schemas of the cluster view's routes (cluster.ts). */

export const clusterParams = z.strictObject({
  profile: z.string().min(1).max(64).describe('a scheduler profile of the daemon'),
  view: z.enum(CLUSTER_VIEWS).describe('which view'),
});

const timeLimit = z
  .union([z.number().int().describe('minutes'), z.literal('infinite')])
  .nullable()
  .describe('minutes, `infinite`, or null when unset');

const names = z.array(z.string());

const partitionSchema = named(
  'ClusterPartition',
  z.object({
    name: z.string(),
    state: z.string().describe('UP, DOWN, DRAIN, INACTIVE'),
    state_flags: names,
    node_list: z.string(),
    node_count: z.number().int(),
    priority_tier: z.number().int(),
    cpus: z
      .object({
        total: z.number().int(),
        allocated: z.number().int(),
        idle: z.number().int(),
        other: z.number().int().describe('free CPUs on nodes that cannot take work (down, drained…)'),
      })
      .describe('as `sinfo -o %C` counts them: a node in two partitions counts in both'),
    memory_mb: z.object({ total: z.number().int(), allocated: z.number().int() }),
    jobs: z.object({ running: z.number().int(), pending: z.number().int() }),
    limits: z.object({
      max_time: timeLimit,
      default_time: timeLimit,
      max_memory_per_node_mb: z.number().int().nullable(),
      max_memory_per_cpu_mb: z.number().int().nullable(),
      max_nodes: z.number().int().nullable(),
      max_cpus_per_node: z.number().int().nullable(),
    }),
    access: z
      .object({
        allowed_accounts: names,
        denied_accounts: names,
        allowed_groups: names,
        allowed_qos: names,
        denied_qos: names,
      })
      .describe('an empty list is no restriction of that kind'),
  }),
  'A partition, with what its nodes and the controller’s queue say of it.',
);

const nodeSchema = named(
  'ClusterNode',
  z.object({
    name: z.string(),
    state: z.string().describe('IDLE, MIXED, ALLOCATED, DOWN, FUTURE, UNKNOWN, ERROR'),
    state_flags: names.describe('every flag as Slurm sends it, e.g. `["IDLE","DRAIN"]`'),
    available: z.boolean().describe('whether it can take work now'),
    reason: z.string().nullable(),
    reason_set_by: z.string().nullable(),
    reason_since: time.nullable(),
    cpus: z.number().int(),
    allocated_cpus: z.number().int(),
    cpu_load: z.number().nullable().describe('load × 100, as slurmd reports it'),
    memory_mb: z.number().int(),
    allocated_memory_mb: z.number().int(),
    free_memory_mb: z.number().int().nullable(),
    features: names,
    active_features: names,
    gres: z.string(),
    gres_used: z.string(),
    partitions: names,
    job_ids: z.array(z.number().int()).describe('running or suspended jobs on it'),
  }),
  'A node of the cluster, with the jobs on it.',
);

const reservationSchema = named(
  'ClusterReservation',
  z.object({
    name: z.string(),
    start_time: time.nullable(),
    end_time: time.nullable(),
    node_list: z.string(),
    node_count: z.number().int(),
    core_count: z.number().int(),
    flags: names,
    users: names,
    accounts: names,
    groups: names,
    partition: z.string().nullable(),
    tres: z.string(),
  }),
  'A reservation of the controller.',
);

const queueJobSchema = named(
  'ClusterQueueJob',
  z.object({
    job_id: z.number().int(),
    array_job_id: z.number().int().nullable(),
    array_task_id: z.number().int().nullable(),
    name: z.string().nullable().describe('null when hidden (a token without `admin` or `audit`)'),
    user: z.string().nullable().describe('null when hidden'),
    account: z.string().nullable().describe('null when hidden'),
    partition: z.string(),
    state: z.string(),
    state_flags: names,
    reason: z.string().nullable().describe('why it waits (`Priority`, `Resources`…); null for none'),
    submit_time: time.nullable(),
    start_time: time.nullable().describe('when it started; null while it waits'),
    time_limit: timeLimit,
    cpus: z.number().int().nullable(),
    memory_per_node_mb: z.number().int().nullable(),
    nodes: z.string().nullable(),
  }),
  'A job in the controller’s queue (pending, running or suspended).',
);

const meta = {
  profile: z.string(),
  view: z.enum(CLUSTER_VIEWS),
  fetched_at: time.describe('when the oldest upstream listing it is made of was read'),
  age_sec: z.number().int(),
  ttl_sec: z.number().describe('how long one answer serves every viewer (`clusterViewTtlMs`)'),
  stale: z.boolean().describe('true when the scheduler could not be read and the last answer is served'),
  stale_reason: z.string().nullable(),
};

export const clusterAnswerSchema = named(
  'ClusterView',
  z.object({
    ...meta,
    anonymised: z
      .boolean()
      .describe('queue only: true when names, users and accounts are hidden (a token without `admin` or `audit`)'),
    partitions: z.array(partitionSchema).optional(),
    nodes: z.array(nodeSchema).optional(),
    reservations: z.array(reservationSchema).optional(),
    jobs: z.array(queueJobSchema).optional(),
    last_update: time.nullable().optional().describe('queue only: the controller’s last update of it'),
  }),
  'One view of the cluster, the same answer for every viewer within its lifetime. Exactly one of partitions, nodes, reservations, jobs is present: the view asked for.',
);

export type ClusterAnswerBody = z.infer<typeof clusterAnswerSchema>;
