import { expandOutputPattern as expandStdioPattern } from '../sched/output-paths.js';

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
  /**
   * An array job's records share its id (the first record's, `array_job_id`): the array's own
   * record holds the tasks still pending (`arrayPending`, `%` throttle in `arrayThrottle`, 0 for
   * none); a task leaves it as a record of its own, with a new job id, when it starts, and the
   * last one takes the array's record itself (test/fixtures/real-slurm-25.11/array_*).
   */
  arrayJobId?: number;
  /** The task this record runs; absent for the array's record while tasks are pending in it. */
  arrayTaskId?: number;
  arrayPending?: number[];
  arrayThrottle?: number;
  /** Held by its user (`scontrol hold`, an update with `hold: true`): priority 0, JobHeldUser. */
  held?: boolean;
  /** The job's nice value (`scontrol update nice=`); 0 when never set. */
  nice?: number;
  /** QOS; 'normal' when never set (the only QOS the simulated slurmdbd has). */
  qos?: string;
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

/** Expands the sbatch filename patterns (`%j`, `%x`, `%4a`, ...) as slurmstepd does for the batch step. */
export function expandOutputPattern(pattern: string, job: SimJob, nodeName: string): string {
  // The simulator knows every field: its jobs run on its one node, as their own user.
  return (
    expandStdioPattern(pattern, {
      jobId: job.jobId,
      name: job.name,
      user: job.user,
      node: nodeName,
      arrayJobId: job.arrayJobId ?? null,
      arrayTaskId: job.arrayTaskId ?? null,
    }) ?? pattern
  );
}

/**
 * The pattern a job that names no `standard_output` gets: sbatch's `slurm-%j.out`, an array's
 * `slurm-%A_%a.out` (real slurmrestd reports that pattern for its tasks, and slurmd writes there).
 */
export function defaultOutputPattern(job: Pick<SimJob, 'arrayJobId'>): string {
  return job.arrayJobId === undefined ? 'slurm-%j.out' : 'slurm-%A_%a.out';
}

/** Whether a record is (part of) an array job. */
export function isArrayRecord(job: SimJob): boolean {
  return job.arrayJobId !== undefined;
}

/** The array's own record while tasks are pending in it. */
export function isArrayMeta(job: SimJob): boolean {
  return job.arrayJobId !== undefined && job.arrayTaskId === undefined;
}
