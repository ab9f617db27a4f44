import type { SchedJob, TimeLimit } from './job-model.js';

/**
 * The cluster as the controller describes it (`GET {ctl}/partitions`, `/nodes`,
 * `/reservations`, `/jobs`), one model across data parsers v0.0.42 to v0.0.44. The records
 * (`*Record`) are what one answer says; the views (`Partition`, `Node`) join them with the
 * other answers, as `sinfo` does: a partition's CPUs and memory are its nodes', its running
 * and pending jobs are the job listing's.
 */

/** Who may use a partition; an empty list is no restriction of that kind (Slurm's empty string). */
export interface PartitionAccess {
  allowedAccounts: string[];
  deniedAccounts: string[];
  allowedGroups: string[];
  allowedQos: string[];
  deniedQos: string[];
}

/** A partition's own limits (an association's or QOS's are not in its record); null where unset. */
export interface PartitionLimits {
  /** MaxTime: minutes, or `infinite`. */
  maxTime: TimeLimit;
  /** DefaultTime: minutes, or `infinite`; null when the partition has none (MaxTime applies). */
  defaultTime: TimeLimit;
  /** MaxMemPerNode in MB; null when unlimited (25.11 writes it as a set 0). */
  maxMemoryPerNodeMb: number | null;
  /** MaxMemPerCPU in MB; null when unlimited. */
  maxMemoryPerCpuMb: number | null;
  /** MaxNodes per job; null when unlimited. */
  maxNodes: number | null;
  /** MaxCPUsPerNode; null when unlimited. */
  maxCpusPerNode: number | null;
}

/** One element of `partitions[]`. */
export interface PartitionRecord {
  name: string;
  /** The first of Slurm's state flags (`UP`, `DOWN`, `DRAIN`, `INACTIVE`). */
  state: string;
  stateFlags: string[];
  /** The node list as configured (`node[1-4]`). */
  nodeList: string;
  nodeCount: number;
  cpusTotal: number;
  priorityTier: number;
  limits: PartitionLimits;
  access: PartitionAccess;
}

/** One element of `nodes[]`. */
export interface NodeRecord {
  name: string;
  /** The base state (`IDLE`, `MIXED`, `ALLOCATED`, `DOWN`, `FUTURE`, `UNKNOWN`, `ERROR`). */
  state: string;
  /** Every flag as sent (`["IDLE","DRAIN"]`). */
  stateFlags: string[];
  /** Why an admin drained or downed it; null when none. */
  reason: string | null;
  reasonSetBy: string | null;
  /** Unix seconds; null when the node has no reason. */
  reasonSince: number | null;
  cpus: number;
  allocatedCpus: number;
  /** CPU load × 100, as slurmd reports it. */
  cpuLoad: number | null;
  memoryMb: number;
  allocatedMemoryMb: number;
  freeMemoryMb: number | null;
  features: string[];
  activeFeatures: string[];
  /** Slurm's GRES strings (`gpu:a100:4`); empty when none. */
  gres: string;
  gresUsed: string;
  partitions: string[];
}

/** One element of `reservations[]`. */
export interface ReservationRecord {
  name: string;
  /** Unix seconds. */
  startTime: number | null;
  endTime: number | null;
  nodeList: string;
  nodeCount: number;
  coreCount: number;
  /** `MAINT`, `IGNORE_JOBS`, `DAILY`… as Slurm writes them. */
  flags: string[];
  users: string[];
  accounts: string[];
  groups: string[];
  partition: string | null;
  /** `cpu=2` */
  tres: string;
}

/** CPUs of a set of nodes, as `sinfo -o %C` counts them. */
export interface CpuCounts {
  total: number;
  allocated: number;
  /** On nodes that could take work now. */
  idle: number;
  /** Not allocated, on nodes that cannot take work (down, drained, not responding…). */
  other: number;
}

/** A partition with what its nodes and the job listing say of it. */
export interface Partition extends PartitionRecord {
  cpus: CpuCounts;
  memoryMb: { total: number; allocated: number };
  jobs: { running: number; pending: number };
}

/** A node with the jobs the listing places on it. */
export interface Node extends NodeRecord {
  /** Whether the node can take work now (not down, drained, failing or not responding). */
  available: boolean;
  /** Ids of the running (or suspended) jobs on it. */
  jobIds: number[];
}

/** The controller's queue: every job it knows, with Slurm's last update. */
export interface Queue {
  jobs: SchedJob[];
  lastUpdate: number | null;
}
