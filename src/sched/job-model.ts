/**
 * One job model across data-parser versions and across the controller
 * (`/sched/{v}/jobs`) and accounting (`/scheddb/{v}/jobs`) views.
 * Slurm's own words are kept where users know them (job_id, partition, ...).
 */

/** Slurm's base job states (slurm.h `job_states`), plus UNKNOWN for a value this build does not know. */
export const JOB_STATES = [
  'PENDING',
  'RUNNING',
  'SUSPENDED',
  'COMPLETED',
  'CANCELLED',
  'FAILED',
  'TIMEOUT',
  'NODE_FAIL',
  'PREEMPTED',
  'BOOT_FAIL',
  'DEADLINE',
  'OUT_OF_MEMORY',
  'UNKNOWN',
] as const;

export type JobState = (typeof JOB_STATES)[number];

const TERMINAL: ReadonlySet<JobState> = new Set([
  'COMPLETED',
  'CANCELLED',
  'FAILED',
  'TIMEOUT',
  'NODE_FAIL',
  'PREEMPTED',
  'BOOT_FAIL',
  'DEADLINE',
  'OUT_OF_MEMORY',
]);

/**
 * The ends the controller makes by killing the job: until it has completed, its records say
 * SUCCESS 0 (a real Slurm 25.11.7), not the SIGTERM or the trap's own exit that follow. A job
 * that ended by itself has its exit code when it is COMPLETING (its epilog's time).
 */
export const KILLED_BY_CONTROLLER: ReadonlySet<JobState> = new Set<JobState>([
  'CANCELLED',
  'TIMEOUT',
  'DEADLINE',
  'PREEMPTED',
]);

export function isTerminalState(state: JobState): boolean {
  return TERMINAL.has(state);
}

/** A time limit: minutes, or no limit at all; null when the record does not say. */
export type TimeLimit = { minutes: number } | 'infinite' | null;

export interface SchedJob {
  /** Which endpoint the record came from. */
  source: 'controller' | 'accounting';
  job_id: number;
  name: string;
  /** The base state, from the flags Slurm sends. */
  state: JobState;
  /** Every flag exactly as sent (`["PENDING","REQUEUED"]`); the first base state becomes `state`. */
  state_flags: string[];
  /** Slurm's reason (`Resources`, `Dependency`, `NonZeroExitCode`, ...); null for `None` or absent. */
  reason: string | null;
  /**
   * Return code of the batch script; null while it has none (pending, running, or never ran)
   * or when a signal ended it. Accounting reads it from the batch step, as the job's own
   * record can say SUCCESS for a script that was killed.
   */
  exit_code: number | null;
  /** Signal that ended the job, if one did. */
  signal: { id: number; name: string } | null;
  /**
   * Unix seconds; null when not (yet) reached. Slurm's forecasts (the start of a pending job,
   * the end of a running one) are not times reached, nor is the start slurmctld stamps on a
   * job that ended before it ran (such a job has no nodes).
   */
  submit_time: number | null;
  start_time: number | null;
  end_time: number | null;
  /**
   * The controller's forecast of a pending job's start (Unix seconds): slurmctld sends it as
   * `start_time` while the job waits, once its scheduler (main or backfill) has placed the job in
   * time: the end of the jobs it waits for (`Resources`), its `--begin` time (`BeginTime`). Null
   * while it has none (just submitted, held, behind a dependency) and for a job that is not
   * pending; never from accounting, which keeps no forecast. Absent from a record made without it.
   */
  expected_start?: number | null;
  /**
   * Seconds the job ran; accounting reports it (running jobs too), for the controller it is
   * end - start of an ended job, and null while it runs (it would depend on the reader's clock).
   */
  elapsed_sec: number | null;
  time_limit: TimeLimit;
  partition: string;
  account: string;
  user: string;
  comment: string;
  /** Array master job id and task id, when the job is an array task. */
  array_job_id: number | null;
  array_task_id: number | null;
  /** Node list (`node[1-3]`); null before the job has nodes. */
  nodes: string | null;
  /** CPUs allocated (or requested, before allocation). */
  cpus: number | null;
  /**
   * Memory requested per node in MB, when known; memory per CPU × CPUs when only that is set
   * (exact for a job on one node).
   */
  memory_per_node_mb: number | null;
  /** CPU seconds used (user + system), from accounting only: the job's total or its steps' sum, the larger. */
  cpu_time_sec: number | null;
  /**
   * Peak resident memory in MB, from accounting only: the largest MaxRSS among the job's steps
   * (`steps[].tres.requested.max`, type `mem`). Null when no step has it, as on a cluster
   * without jobacct_gather; absent from a record made without it.
   */
  peak_memory_mb?: number | null;
  working_directory: string | null;
  /**
   * Expanded paths of the job's output files, when the record gives them. A record with no
   * stderr path means stderr goes to the stdout file, Slurm's default.
   */
  stdout_path: string | null;
  stderr_path: string | null;
}

/**
 * One element of the controller's light state listing (`GET …/jobs/state`). Real slurmrestd
 * sends `{"job_id": "25110018", "state": ["RUNNING"]}` there, whatever its document says
 * (`job_info`): the id as a string, the flags under `state`, and nothing else.
 */
export interface JobStateEntry {
  job_id: number;
  /**
   * The task of an array job (`"5_3"`: job 5, task 3). Asked for by the array's job id, the
   * listing has every task: one entry per task that has its own job, and one per task still
   * pending in the array's record, all under that record's id (`"1_4"`, `"1_5"`).
   */
  array_task_id: number | null;
  state: JobState;
  state_flags: string[];
}

/** A decode problem: names the member that is missing or of the wrong type. */
export class JobDecodeError extends Error {
  override name = 'JobDecodeError';
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(`${path}: ${message}`);
  }
}
