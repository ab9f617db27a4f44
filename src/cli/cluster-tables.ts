import type { Node, Partition, ReservationRecord } from '../sched/cluster-model.js';
import type { SchedJob } from '../sched/job-model.js';
import { formatDuration, formatTime, formatTimeLimit, table } from './format.js';

/** `2.0G` / `512M`: memory as sinfo prints it, from MB. */
function memory(mb: number | null): string {
  if (mb === null) return '-';
  return mb >= 1024 ? `${(mb / 1024).toFixed(1)}G` : `${mb}M`;
}

const names = (list: readonly string[], none = 'all') => (list.length ? list.join(',') : none);

/** One line per partition, the columns `sinfo -s` and `scontrol show partition` give together. */
export function partitionsTable(partitions: readonly Partition[]): string {
  return table(
    ['PARTITION', 'STATE', 'NODES', 'CPUS(A/I/O/T)', 'MEMORY(A/T)', 'RUNNING', 'PENDING', 'MAXTIME', 'ACCOUNTS', 'QOS'],
    partitions.map((p) => [
      p.name,
      p.stateFlags.join(',') || p.state,
      `${p.nodeCount} (${p.nodeList || '-'})`,
      `${p.cpus.allocated}/${p.cpus.idle}/${p.cpus.other}/${p.cpus.total}`,
      `${memory(p.memoryMb.allocated)}/${memory(p.memoryMb.total)}`,
      String(p.jobs.running),
      String(p.jobs.pending),
      formatTimeLimit(p.limits.maxTime),
      `${names(p.access.allowedAccounts)}${p.access.deniedAccounts.length ? ` (not ${p.access.deniedAccounts.join(',')})` : ''}`,
      `${names(p.access.allowedQos)}${p.access.deniedQos.length ? ` (not ${p.access.deniedQos.join(',')})` : ''}`,
    ]),
  );
}

/** One line per node: state with its reason, CPUs and memory allocated, what it offers, its jobs. */
export function nodesTable(nodes: readonly Node[]): string {
  return table(
    ['NODE', 'STATE', 'CPUS(A/T)', 'MEMORY(A/T)', 'PARTITIONS', 'FEATURES', 'GRES', 'JOBS', 'REASON'],
    nodes.map((n) => [
      n.name,
      n.stateFlags.join('+') || n.state,
      `${n.allocatedCpus}/${n.cpus}`,
      `${memory(n.allocatedMemoryMb)}/${memory(n.memoryMb)}`,
      names(n.partitions, '-'),
      names(n.activeFeatures.length ? n.activeFeatures : n.features, '-'),
      n.gres || '-',
      names(n.jobIds.map(String), '-'),
      n.reason
        ? `${n.reason}${n.reasonSetBy ? ` [${n.reasonSetBy}${n.reasonSince ? `, ${formatTime(n.reasonSince)}` : ''}]` : ''}`
        : '-',
    ]),
  );
}

export function reservationsTable(reservations: readonly ReservationRecord[]): string {
  return table(
    ['RESERVATION', 'START', 'END', 'NODES', 'CORES', 'FLAGS', 'USERS', 'ACCOUNTS', 'PARTITION'],
    reservations.map((r) => [
      r.name,
      formatTime(r.startTime),
      formatTime(r.endTime),
      r.nodeList || '-',
      String(r.coreCount),
      names(r.flags, '-'),
      names(r.users, '-'),
      names(r.accounts, '-'),
      r.partition ?? '-',
    ]),
  );
}

/** The controller's queue as squeue lists it: pending and running jobs first, by id. */
export function queueTable(jobs: readonly SchedJob[]): string {
  return table(
    ['JOBID', 'PARTITION', 'NAME', 'USER', 'ACCOUNT', 'STATE', 'TIME', 'TIME_LIMIT', 'CPUS', 'NODELIST(REASON)'],
    jobs.map((j) => [
      j.array_task_id === null ? String(j.job_id) : `${j.array_job_id}_${j.array_task_id}`,
      j.partition,
      j.name,
      j.user,
      j.account,
      j.state,
      j.start_time !== null && j.state === 'RUNNING'
        ? formatDuration(Math.max(0, Math.floor(Date.now() / 1000) - j.start_time))
        : formatDuration(j.elapsed_sec),
      formatTimeLimit(j.time_limit),
      j.cpus === null ? '-' : String(j.cpus),
      j.state === 'PENDING' ? `(${j.reason ?? 'None'})` : (j.nodes ?? '-'),
    ]),
  );
}
