import { z } from 'zod';
import type { Node, NodeRecord, Partition, PartitionRecord, Queue, ReservationRecord } from './cluster-model.js';
import { nonZero, noValNumber, noValSchema, timeLimitOf } from './codecs/common.js';
import { expandHostlist } from './hostlist.js';
import { isTerminalState, type SchedJob } from './job-model.js';
import type { ApiVersion } from './versions.js';

/**
 * Decoders of the controller's cluster answers (`partitions[]`, `nodes[]`, `reservations[]`).
 * The members read are the same in data parsers v0.0.42, v0.0.43 and v0.0.44 (their documents
 * and Slurm 25.11.7's answers in test/fixtures/real-slurm-25.11/cluster_*: v0.0.44 adds only
 * `topology` and a node's TLS certificate members), so one decoder per record serves every
 * version; `clusterDecoderFor` is where a version that differs gets its own. Each schema lists
 * only what is read, optional where Slurm may leave it out, so a member added or dropped
 * elsewhere never breaks a read.
 */

/** A record schedflow cannot read: names the member. */
export class ClusterDecodeError extends Error {
  override name = 'ClusterDecodeError';
}

/** Slurm's comma-separated name lists (`"lab,other"`); empty is none. */
const csv = z
  .string()
  .optional()
  .transform((s) =>
    (s ?? '')
      .split(',')
      .map((x) => x.trim())
      .filter((x) => x !== ''),
  );

const textOrNull = z
  .string()
  .optional()
  .transform((s) => (s ? s : null));

const partitionSchema = z.object({
  name: z.string(),
  partition: z.object({ state: z.array(z.string()).optional() }).optional(),
  nodes: z.object({ configured: z.string().optional(), total: z.number().optional() }).optional(),
  cpus: z.object({ total: z.number().optional() }).optional(),
  priority: z.object({ tier: z.number().optional() }).optional(),
  accounts: z.object({ allowed: csv, deny: csv }).optional(),
  groups: z.object({ allowed: csv }).optional(),
  qos: z.object({ allowed: csv, deny: csv }).optional(),
  defaults: z.object({ time: noValSchema.optional() }).optional(),
  maximums: z
    .object({
      time: noValSchema.optional(),
      partition_memory_per_node: noValSchema.optional(),
      partition_memory_per_cpu: noValSchema.optional(),
      nodes: noValSchema.optional(),
      cpus_per_node: noValSchema.optional(),
    })
    .optional(),
});

const nodeSchema = z.object({
  name: z.string(),
  state: z.array(z.string()).optional(),
  reason: z.string().optional(),
  reason_set_by_user: z.string().optional(),
  reason_changed_at: noValSchema.optional(),
  cpus: z.number().optional(),
  alloc_cpus: z.number().optional(),
  cpu_load: z.number().optional(),
  real_memory: z.number().optional(),
  alloc_memory: z.number().optional(),
  free_mem: noValSchema.optional(),
  features: z.array(z.string()).optional(),
  active_features: z.array(z.string()).optional(),
  gres: z.string().optional(),
  gres_used: z.string().optional(),
  partitions: z.array(z.string()).optional(),
});

const reservationSchema = z.object({
  name: z.string(),
  start_time: noValSchema.optional(),
  end_time: noValSchema.optional(),
  node_list: z.string().optional(),
  node_count: z.number().optional(),
  core_count: z.number().optional(),
  flags: z.array(z.string()).optional(),
  users: csv,
  accounts: csv,
  groups: csv,
  partition: textOrNull,
  tres: z.string().optional(),
});

function parse<T>(schema: z.ZodType<T>, raw: unknown, what: string): T {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const where = issue?.path.length ? issue.path.join('.') : what;
  throw new ClusterDecodeError(`${what} record: ${where}: ${issue?.message ?? 'unreadable'}`);
}

export function decodePartition(raw: unknown): PartitionRecord {
  const p = parse(partitionSchema, raw, 'partition');
  const flags = p.partition?.state ?? [];
  return {
    name: p.name,
    state: flags[0] ?? 'UNKNOWN',
    stateFlags: flags,
    nodeList: p.nodes?.configured ?? '',
    nodeCount: p.nodes?.total ?? 0,
    cpusTotal: p.cpus?.total ?? 0,
    priorityTier: p.priority?.tier ?? 1,
    limits: {
      maxTime: timeLimitOf(p.maximums?.time),
      defaultTime: timeLimitOf(p.defaults?.time),
      // No MaxMemPerNode is a set 0 in 25.11's answer (slurm.conf's UNLIMITED), not `infinite`.
      maxMemoryPerNodeMb: nonZero(p.maximums?.partition_memory_per_node),
      maxMemoryPerCpuMb: nonZero(p.maximums?.partition_memory_per_cpu),
      maxNodes: noValNumber(p.maximums?.nodes),
      maxCpusPerNode: noValNumber(p.maximums?.cpus_per_node),
    },
    access: {
      allowedAccounts: p.accounts?.allowed ?? [],
      deniedAccounts: p.accounts?.deny ?? [],
      allowedGroups: p.groups?.allowed ?? [],
      allowedQos: p.qos?.allowed ?? [],
      deniedQos: p.qos?.deny ?? [],
    },
  };
}

export function decodeNode(raw: unknown): NodeRecord {
  const n = parse(nodeSchema, raw, 'node');
  const flags = n.state ?? [];
  const reason = n.reason ? n.reason : null;
  return {
    name: n.name,
    state: flags.find((f) => NODE_BASE_STATES.has(f)) ?? flags[0] ?? 'UNKNOWN',
    stateFlags: flags,
    reason,
    reasonSetBy: reason && n.reason_set_by_user ? n.reason_set_by_user : null,
    reasonSince: reason ? nonZero(n.reason_changed_at) : null,
    cpus: n.cpus ?? 0,
    allocatedCpus: n.alloc_cpus ?? 0,
    cpuLoad: n.cpu_load ?? null,
    memoryMb: n.real_memory ?? 0,
    allocatedMemoryMb: n.alloc_memory ?? 0,
    freeMemoryMb: noValNumber(n.free_mem),
    features: n.features ?? [],
    activeFeatures: n.active_features ?? [],
    gres: n.gres ?? '',
    gresUsed: n.gres_used ?? '',
    partitions: n.partitions ?? [],
  };
}

export function decodeReservation(raw: unknown): ReservationRecord {
  const r = parse(reservationSchema, raw, 'reservation');
  return {
    name: r.name,
    startTime: nonZero(r.start_time),
    endTime: nonZero(r.end_time),
    nodeList: r.node_list ?? '',
    nodeCount: r.node_count ?? 0,
    coreCount: r.core_count ?? 0,
    flags: r.flags ?? [],
    users: r.users,
    accounts: r.accounts,
    groups: r.groups,
    partition: r.partition,
    tres: r.tres ?? '',
  };
}

export interface ClusterDecoder {
  partition: (raw: unknown) => PartitionRecord;
  node: (raw: unknown) => NodeRecord;
  reservation: (raw: unknown) => ReservationRecord;
}

const SHARED: ClusterDecoder = { partition: decodePartition, node: decodeNode, reservation: decodeReservation };

const DECODERS: Record<ApiVersion, ClusterDecoder> = { 'v0.0.42': SHARED, 'v0.0.43': SHARED, 'v0.0.44': SHARED };

export function clusterDecoderFor(version: ApiVersion): ClusterDecoder {
  return DECODERS[version];
}

// ---- Joining the answers ------------------------------------------------------------

/** A node's base states (slurm.h `node_states`); the other flags qualify one of them. */
const NODE_BASE_STATES: ReadonlySet<string> = new Set([
  'UNKNOWN',
  'DOWN',
  'IDLE',
  'ALLOCATED',
  'ERROR',
  'MIXED',
  'FUTURE',
]);

/** States and flags of a node that cannot take work: its unallocated CPUs are `other` to sinfo. */
const UNAVAILABLE: ReadonlySet<string> = new Set([
  'DOWN',
  'ERROR',
  'FUTURE',
  'UNKNOWN',
  'DRAIN',
  'FAIL',
  'NOT_RESPONDING',
  'POWERED_DOWN',
  'POWERING_DOWN',
  'MAINTENANCE',
  'REBOOT_ISSUED',
]);

export function nodeAvailable(node: NodeRecord): boolean {
  return ![node.state, ...node.stateFlags].some((f) => UNAVAILABLE.has(f));
}

const occupies = (job: SchedJob) => job.state === 'RUNNING' || job.state === 'SUSPENDED';

/** Nodes with the running jobs on each (a job's node list expanded). */
export function joinNodes(nodes: readonly NodeRecord[], jobs: readonly SchedJob[]): Node[] {
  const byNode = new Map<string, number[]>();
  for (const job of jobs) {
    if (!occupies(job)) continue;
    for (const host of expandHostlist(job.nodes)) {
      const list = byNode.get(host) ?? [];
      list.push(job.job_id);
      byNode.set(host, list);
    }
  }
  return nodes.map((n) => ({ ...n, available: nodeAvailable(n), jobIds: byNode.get(n.name) ?? [] }));
}

/**
 * Partitions with their nodes' CPUs and memory, counted as `sinfo` does (a node in two
 * partitions counts in both), and their running and pending jobs (a job pending in
 * `debug,long` waits in both).
 */
export function joinPartitions(
  partitions: readonly PartitionRecord[],
  nodes: readonly NodeRecord[],
  jobs: readonly SchedJob[],
): Partition[] {
  return partitions.map((p) => {
    const members = nodes.filter((n) => n.partitions.includes(p.name));
    const cpus = { total: 0, allocated: 0, idle: 0, other: 0 };
    const memoryMb = { total: 0, allocated: 0 };
    for (const n of members) {
      const allocated = Math.min(n.allocatedCpus, n.cpus);
      cpus.total += n.cpus;
      cpus.allocated += allocated;
      if (nodeAvailable(n)) cpus.idle += n.cpus - allocated;
      else cpus.other += n.cpus - allocated;
      memoryMb.total += n.memoryMb;
      memoryMb.allocated += n.allocatedMemoryMb;
    }
    let running = 0;
    let pending = 0;
    for (const job of jobs) {
      if (!job.partition.split(',').includes(p.name)) continue;
      if (occupies(job)) running++;
      else if (job.state === 'PENDING') pending++;
    }
    return { ...p, cpus, memoryMb, jobs: { running, pending } };
  });
}

/** The controller's queue as squeue shows it: jobs not yet ended, running before pending, by id. */
export function queueOf(jobs: readonly SchedJob[], lastUpdate: number | null): Queue {
  const rank = (job: SchedJob) => (occupies(job) ? 0 : job.state === 'PENDING' ? 1 : 2);
  const live = jobs.filter((job) => !isTerminalState(job.state));
  live.sort((a, b) => rank(a) - rank(b) || a.job_id - b.job_id || (a.array_task_id ?? 0) - (b.array_task_id ?? 0));
  return { jobs: live, lastUpdate };
}
