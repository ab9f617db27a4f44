import type { Node, Partition, ReservationRecord } from '../sched/cluster-model.js';
import type { ClusterAnswer, ClusterViewData, ClusterViewName } from '../sched/cluster-view.js';
import type { SchedJob, TimeLimit } from '../sched/job-model.js';

/**
 * The cluster view as the API (and the UI) show it. The partitions, nodes and reservations
 * are the cluster's, shown to any reader. The queue lists every user's jobs: a viewer who may
 * not see every owner's work (not `admin` or `audit`) sees it anonymised, the jobs' names,
 * users and accounts hidden (what the cluster is busy with, not whose work it is); comments
 * (schedflow's markers), working directories and output paths are never shown.
 */

const iso = (sec: number | null) => (sec === null ? null : new Date(sec * 1000).toISOString());
const limit = (t: TimeLimit): number | 'infinite' | null =>
  t === null ? null : t === 'infinite' ? 'infinite' : t.minutes;

export function partitionBody(p: Partition) {
  return {
    name: p.name,
    state: p.state,
    state_flags: p.stateFlags,
    node_list: p.nodeList,
    node_count: p.nodeCount,
    priority_tier: p.priorityTier,
    cpus: p.cpus,
    memory_mb: p.memoryMb,
    jobs: p.jobs,
    limits: {
      max_time: limit(p.limits.maxTime),
      default_time: limit(p.limits.defaultTime),
      max_memory_per_node_mb: p.limits.maxMemoryPerNodeMb,
      max_memory_per_cpu_mb: p.limits.maxMemoryPerCpuMb,
      max_nodes: p.limits.maxNodes,
      max_cpus_per_node: p.limits.maxCpusPerNode,
    },
    access: {
      allowed_accounts: p.access.allowedAccounts,
      denied_accounts: p.access.deniedAccounts,
      allowed_groups: p.access.allowedGroups,
      allowed_qos: p.access.allowedQos,
      denied_qos: p.access.deniedQos,
    },
  };
}

export function nodeBody(n: Node) {
  return {
    name: n.name,
    state: n.state,
    state_flags: n.stateFlags,
    available: n.available,
    reason: n.reason,
    reason_set_by: n.reasonSetBy,
    reason_since: iso(n.reasonSince),
    cpus: n.cpus,
    allocated_cpus: n.allocatedCpus,
    cpu_load: n.cpuLoad,
    memory_mb: n.memoryMb,
    allocated_memory_mb: n.allocatedMemoryMb,
    free_memory_mb: n.freeMemoryMb,
    features: n.features,
    active_features: n.activeFeatures,
    gres: n.gres,
    gres_used: n.gresUsed,
    partitions: n.partitions,
    job_ids: n.jobIds,
  };
}

export function reservationBody(r: ReservationRecord) {
  return {
    name: r.name,
    start_time: iso(r.startTime),
    end_time: iso(r.endTime),
    node_list: r.nodeList,
    node_count: r.nodeCount,
    core_count: r.coreCount,
    flags: r.flags,
    users: r.users,
    accounts: r.accounts,
    groups: r.groups,
    partition: r.partition,
    tres: r.tres,
  };
}

export function queueJobBody(j: SchedJob, anonymised: boolean) {
  return {
    job_id: j.job_id,
    array_job_id: j.array_job_id,
    array_task_id: j.array_task_id,
    name: anonymised ? null : j.name,
    user: anonymised ? null : j.user,
    account: anonymised ? null : j.account,
    partition: j.partition,
    state: j.state,
    state_flags: j.state_flags,
    reason: j.reason,
    submit_time: iso(j.submit_time),
    start_time: iso(j.start_time),
    time_limit: limit(j.time_limit),
    cpus: j.cpus,
    memory_per_node_mb: j.memory_per_node_mb,
    nodes: j.nodes,
  };
}

/** A view's answer as the API sends it; `seesEveryOwner` decides whether the queue is anonymised. */
export function clusterBody(
  answer: ClusterAnswer<ClusterViewData[ClusterViewName]>,
  ttlMs: number,
  seesEveryOwner: boolean,
) {
  const head = {
    profile: answer.profile,
    view: answer.view,
    fetched_at: answer.fetchedAt.toISOString(),
    age_sec: answer.ageSec,
    ttl_sec: ttlMs / 1000,
    stale: answer.stale,
    stale_reason: answer.staleReason,
    anonymised: answer.view === 'queue' && !seesEveryOwner,
  };
  switch (answer.view) {
    case 'partitions':
      return { ...head, partitions: (answer.data as ClusterViewData['partitions']).map(partitionBody) };
    case 'nodes':
      return { ...head, nodes: (answer.data as ClusterViewData['nodes']).map(nodeBody) };
    case 'reservations':
      return { ...head, reservations: (answer.data as ClusterViewData['reservations']).map(reservationBody) };
    case 'queue': {
      const queue = answer.data as ClusterViewData['queue'];
      return {
        ...head,
        jobs: queue.jobs.map((j) => queueJobBody(j, !seesEveryOwner)),
        last_update: iso(queue.lastUpdate),
      };
    }
  }
}
