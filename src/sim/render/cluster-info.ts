import type { PartitionSettings } from '../sim-config.js';
import { noVal } from './templates.js';

type Json = Record<string, unknown>;

export interface NodeView {
  clusterName: string;
  nodeName: string;
  cpus: number;
  allocatedCpus: number;
  memoryMb: number;
  partitions: string[];
  bootTime: number;
}

/** One element of `partitions[]` in `GET /sched/{v}/partitions`. */
export function renderPartition(p: PartitionSettings, node: NodeView): Json {
  const maxTime = p.maxTimeMin === undefined || p.maxTimeMin === null ? noVal(null, true) : noVal(p.maxTimeMin);
  const defTime = p.defaultTimeMin === undefined || p.defaultTimeMin === null ? noVal(null) : noVal(p.defaultTimeMin);
  return {
    nodes: { allowed_allocation: '', configured: node.nodeName, total: 1 },
    accounts: { allowed: (p.allowAccounts ?? []).join(','), deny: '' },
    groups: { allowed: '' },
    qos: { allowed: '', deny: '', assigned: '' },
    alternate: '',
    tres: {
      billing_weights: '',
      configured: `cpu=${node.cpus},mem=${node.memoryMb}M,node=1,billing=${node.cpus}`,
    },
    cluster: node.clusterName,
    cpus: { task_binding: 0, total: node.cpus },
    defaults: {
      memory_per_cpu: 256,
      partition_memory_per_cpu: noVal(256),
      partition_memory_per_node: noVal(null),
      time: defTime,
      job: '',
    },
    grace_time: 0,
    maximums: {
      cpus_per_node: noVal(null, true),
      cpus_per_socket: noVal(null, true),
      memory_per_cpu: 0,
      partition_memory_per_cpu: noVal(null),
      // No MaxMemPerNode: slurmrestd 25.11 writes it as a set 0, not as infinite.
      partition_memory_per_node: noVal(0),
      nodes: noVal(null, true),
      shares: 1,
      oversubscribe: { jobs: 1, flags: [] },
      time: maxTime,
      over_time_limit: noVal(null),
    },
    minimums: { nodes: 0 },
    name: p.name,
    node_sets: '',
    priority: { job_factor: 1, tier: 1 },
    timeouts: { resume: noVal(null), suspend: noVal(null) },
    partition: { state: [p.state ?? 'UP'] },
    suspend_time: noVal(null),
  };
}

/** One element of `nodes[]` in `GET /sched/{v}/nodes`. */
export function renderNode(node: NodeView): Json {
  const state = node.allocatedCpus === 0 ? 'IDLE' : node.allocatedCpus >= node.cpus ? 'ALLOCATED' : 'MIXED';
  return {
    architecture: process.arch === 'x64' ? 'x86_64' : process.arch,
    boards: 1,
    boot_time: noVal(node.bootTime),
    cluster_name: node.clusterName,
    cores: node.cpus,
    cpus: node.cpus,
    effective_cpus: node.cpus,
    alloc_cpus: node.allocatedCpus,
    alloc_idle_cpus: node.cpus - node.allocatedCpus,
    alloc_memory: 0,
    free_mem: noVal(null),
    name: node.nodeName,
    hostname: node.nodeName,
    address: node.nodeName,
    state: [state],
    next_state_after_reboot: ['INVALID'],
    operating_system: `${process.platform}`,
    partitions: node.partitions,
    port: 6818,
    real_memory: node.memoryMb,
    reason: '',
    reason_set_by_user: '',
    sockets: 1,
    threads: 1,
    temporary_disk: 0,
    weight: 1,
    tres: `cpu=${node.cpus},mem=${node.memoryMb}M,billing=${node.cpus}`,
    version: '25.11.7',
    slurmd_start_time: noVal(node.bootTime),
  };
}
