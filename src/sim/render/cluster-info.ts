import { freemem, loadavg } from 'node:os';
import type { PartitionSettings } from '../sim-config.js';
import { noVal } from './templates.js';

type Json = Record<string, unknown>;

export interface NodeView {
  clusterName: string;
  nodeName: string;
  cpus: number;
  allocatedCpus: number;
  memoryMb: number;
  /** MB the running jobs hold. */
  allocatedMemoryMb: number;
  partitions: string[];
  bootTime: number;
  /** When the node last had a job (Unix seconds). */
  lastBusy: number;
  /** The data parser answering: v0.0.43 and later add `topology` and a node's TLS members. */
  version: string;
}

const since = (version: string, first: string) => version >= first;

/**
 * One element of `partitions[]` in `GET /sched/{v}/partitions`, member for member as Slurm
 * 25.11.7 answers for a partition of slurm.conf with no DefMemPerCPU of its own (the cluster's
 * global one does not show here) and no MaxMemPerNode. Its `cluster` is empty on a cluster
 * that is not federated, as is the captured one's.
 */
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
    cluster: '',
    select_type: [],
    cpus: { task_binding: 0, total: node.cpus },
    defaults: {
      memory_per_cpu: 0,
      partition_memory_per_cpu: noVal(null),
      partition_memory_per_node: noVal(0),
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
    ...(since(node.version, 'v0.0.43') && { topology: '' }),
    partition: { state: ['UP'] },
    suspend_time: noVal(null),
  };
}

/**
 * One element of `nodes[]` in `GET /sched/{v}/nodes`, member for member as Slurm 25.11.7
 * answers for a node with no features, GRES or reason: one core per socket, a socket per CPU
 * (slurm.conf's `CPUs=` alone), its load and free memory the host's.
 */
export function renderNode(node: NodeView): Json {
  const state = node.allocatedCpus === 0 ? 'IDLE' : node.allocatedCpus >= node.cpus ? 'ALLOCATED' : 'MIXED';
  return {
    architecture: process.arch === 'x64' ? 'x86_64' : process.arch,
    burstbuffer_network_address: '',
    boards: 1,
    boot_time: noVal(node.bootTime),
    ...(since(node.version, 'v0.0.43') && { tls_cert_last_renewal: noVal(0), cert_flags: [] }),
    cluster_name: '',
    cores: 1,
    specialized_cores: 0,
    cpu_binding: 0,
    cpu_load: Math.round((loadavg()[0] ?? 0) * 100),
    free_mem: noVal(Math.round(freemem() / 1024 / 1024)),
    cpus: node.cpus,
    effective_cpus: node.cpus,
    specialized_cpus: '',
    energy: {
      average_watts: 0,
      base_consumed_energy: 0,
      consumed_energy: 0,
      current_watts: noVal(0),
      previous_consumed_energy: 0,
      last_collected: 0,
    },
    external_sensors: {},
    extra: '',
    power: {},
    features: [],
    active_features: [],
    gpu_spec: '',
    gres: '',
    gres_drained: 'N/A',
    gres_used: '',
    instance_id: '',
    instance_type: '',
    last_busy: noVal(node.lastBusy),
    mcs_label: '',
    specialized_memory: 0,
    name: node.nodeName,
    next_state_after_reboot: ['INVALID'],
    address: node.nodeName,
    hostname: node.nodeName,
    state: [state],
    operating_system: `${process.platform}`,
    owner: '',
    partitions: node.partitions,
    port: 6818,
    real_memory: node.memoryMb,
    res_cores_per_gpu: 0,
    comment: '',
    reason: '',
    reason_changed_at: noVal(0),
    reason_set_by_user: '',
    resume_after: noVal(0),
    reservation: '',
    alloc_memory: node.allocatedMemoryMb,
    alloc_cpus: node.allocatedCpus,
    alloc_idle_cpus: node.cpus - node.allocatedCpus,
    tres_used: node.allocatedCpus === 0 ? '' : `cpu=${node.allocatedCpus},mem=${node.allocatedMemoryMb}M`,
    tres_weighted: 0,
    slurmd_start_time: noVal(node.bootTime),
    sockets: node.cpus,
    threads: 1,
    temporary_disk: 0,
    weight: 1,
    ...(since(node.version, 'v0.0.43') && { topology: '' }),
    tres: `cpu=${node.cpus},mem=${node.memoryMb}M,billing=${node.cpus}`,
    version: '25.11.7',
  };
}
