/**
 * The simulator's own record of a job: what slurmctld and slurmdbd would know.
 * It is version-neutral; `render/` turns it into each data parser's JSON.
 */
export type SimJobState =
  | 'PENDING'
  | 'RUNNING'
  | 'COMPLETED'
  | 'FAILED'
  | 'TIMEOUT'
  | 'CANCELLED'
  | 'NODE_FAIL'
  | 'OUT_OF_MEMORY';

export const TERMINAL_STATES: ReadonlySet<SimJobState> = new Set([
  'COMPLETED',
  'FAILED',
  'TIMEOUT',
  'CANCELLED',
  'NODE_FAIL',
  'OUT_OF_MEMORY',
]);

export interface SimJob {
  jobId: number;
  name: string;
  user: string;
  userId: number;
  account: string;
  partition: string;
  comment: string;
  script: string;
  environment: string[];
  cwd: string;
  tasks: number;
  cpusPerTask: number;
  /** MB; null when not requested. */
  memoryPerNodeMb: number | null;
  /** Minutes; null means the partition's maximum (possibly infinite). */
  timeLimitMin: number | null;
  dependency: string;
  /** As requested, with `%j`-style patterns unexpanded; '' when not given. */
  standardOutput: string;
  standardError: string;
  state: SimJobState;
  /** Slurm's `state_reason` (None, Resources, Dependency, ...). */
  reason: string;
  /** Unix seconds; 0 when not yet reached. */
  submitTime: number;
  eligibleTime: number;
  startTime: number;
  endTime: number;
  /** Return code of the batch script; null when it never exited normally. */
  exitCode: number | null;
  /** Number of the signal that ended the script, if one did. */
  termSignal: number | null;
  /** CPU seconds used by the script's processes (user, system), when known. */
  cpuUserSec: number;
  cpuSystemSec: number;
  /**
   * Peak resident memory of the script's processes in bytes, sampled while it ran (what
   * jobacct_gather reports as MaxRSS); null when not measured (never ran, benchmark mode).
   */
  peakMemoryBytes: number | null;
  /**
   * slurmctld made the job's record but could place it nowhere (the submission was refused
   * with 2014): it is FAILED from the start, never ran, and stays in the listings like any job.
   */
  unplaceable?: boolean;
  /**
   * Cancelled while it ran, and its processes not gone yet: slurmctld shows the job
   * `CANCELLED,COMPLETING` until they are, and only then knows how the script ended.
   */
  completing?: boolean;
  /** Node the job ran on; '' before it starts. */
  nodes: string;
  /** Unix seconds of the last change to this record (drives `update_time`). */
  lastUpdate: number;
  /** Runtime only: pid of the process group leader while RUNNING. */
  pid?: number;
  /** Runtime only: the leader's start time, so a restart after a crash kills that process and no other. */
  pidStartTicks?: number;
}

export function cpusOf(job: Pick<SimJob, 'tasks' | 'cpusPerTask'>): number {
  return job.tasks * job.cpusPerTask;
}

export function isTerminal(job: Pick<SimJob, 'state'>): boolean {
  return TERMINAL_STATES.has(job.state);
}

/** Expands the sbatch filename patterns Slurm documents for --output (a useful subset). */
export function expandOutputPattern(pattern: string, job: SimJob, nodeName: string): string {
  return pattern.replace(/%(%|j|J|x|u|N|A|a)/g, (_match, key: string) => {
    switch (key) {
      case '%':
        return '%';
      case 'j':
      case 'J':
      case 'A':
        return String(job.jobId);
      case 'a':
        return '4294967294';
      case 'x':
        return job.name;
      case 'u':
        return job.user;
      case 'N':
        return nodeName;
      default:
        return key;
    }
  });
}
