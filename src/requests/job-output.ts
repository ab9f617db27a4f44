import { hostname } from 'node:os';
import { getAccountingJob } from '../db/accounting.js';
import { tasksOf } from '../db/array-tasks.js';
import type { History } from '../db/history.js';
import type { AccountingJobRow, ArrayTaskRow, JobRequestRow, RequestState } from '../db/schema.js';
import { type ErrorCode, OutputTaskError } from '../errors.js';
import { assertNever } from '../lib/assert-never.js';
import { readFileTail } from '../lib/file-tail.js';
import { jobUidOf } from '../lib/host-users.js';
import { ArraySyntaxError, namesIndex, parseArrayExpression } from '../sched/job-array.js';
import { type OutputSpec, outputPathsOf } from '../sched/output-paths.js';
import { newTask } from './array-poll.js';
import { isTerminalRequest } from './request-state.js';

/**
 * The end of a job's stdout or stderr, read on the daemon's host from the path the history
 * holds; or why it cannot be (not written yet, not on this host, not readable). The daemon
 * cannot tell a file that exists only on a compute node from one that does not exist: it says
 * which path it tried, on which host, and where the job ran. The path is the job's to choose,
 * so the file is read as src/lib/file-tail.ts does: no link followed, nothing but a regular
 * file of the job's own user, nothing in schedflow's folders. An array job has no one file:
 * each task writes its own (`slurm-%A_%a.out` by default), read by naming the task.
 */

export type OutputStream = 'stdout' | 'stderr';

/** Lines a tail may ask for (the API's `tail`, `jobs output --tail`): enough for a log's end, bounded so one answer stays small. */
export const MAX_TAIL_LINES = 10_000;
/** Lines of a tail when none are asked for. */
export const DEFAULT_TAIL_LINES = 100;
/** Bytes read from the end of an output file at most, whatever the lines asked for (the API and `jobs output`). */
export const OUTPUT_TAIL_MAX_BYTES = 1024 * 1024;

export interface JobOutputOptions {
  /** Lines from the end; absent: all that `maxBytes` holds (summaries bound their excerpt by bytes). */
  tailLines?: number;
  /** Bytes read from the end at most, however large the file: a longer tail is cut to them. */
  maxBytes: number;
  /** Folders never read from (schedflow's data and configuration). */
  protectedDirs: readonly string[];
}

export type JobOutput =
  | {
      kind: 'ok';
      /** The Slurm job that wrote it: the request's, or the task's own. */
      jobId: number;
      /** The array task whose file it is; null for a single job. */
      taskId: number | null;
      stream: OutputStream;
      path: string;
      host: string;
      text: string;
      lines: number;
      sizeBytes: number;
      modifiedAt: number;
      /** Earlier lines (or bytes beyond `maxBytes`) were left out. */
      truncated: boolean;
      /** stderr asked for, and the job sends it to its stdout file (the spec names none). */
      sameFile: boolean;
      /** The bytes read looked binary (a NUL, or many control bytes): not text to quote. */
      binary: boolean;
    }
  | {
      kind: 'unavailable';
      code: Extract<
        ErrorCode,
        'SCHEDFLOW_ERR_OUTPUT_NOT_YET' | 'SCHEDFLOW_ERR_OUTPUT_NOT_FOUND' | 'SCHEDFLOW_ERR_OUTPUT_UNREADABLE'
      >;
      reason:
        | 'not_submitted'
        | 'path_unknown'
        | 'not_started'
        | 'never_ran'
        | 'not_on_this_host'
        | 'older_than_job'
        | 'no_permission'
        | 'protected'
        | 'not_a_file'
        | 'symlink'
        | 'unsafe_path'
        | 'not_owner'
        | 'hard_link'
        | 'read_error';
      message: string;
      stream: OutputStream;
      path: string | null;
      host: string;
    };

/** Slack for clocks and whole-second start times when telling this job's file from an older one. */
export const CLOCK_SLACK_MS = 60_000;

/**
 * What one output file belongs to: a single job (the request itself), or one task of an array
 * job, which has its own Slurm job, state, start and files (`slurm-%A_%a.out` by default).
 */
interface OutputSubject {
  /** The Slurm job that writes the file: the request's, or the task's own once it has one. */
  jobId: number | null;
  state: RequestState;
  startedAt: number | null;
  /** How messages name it: `job 1000`, `task 3 (job 1003) of array job 1000`. */
  label: string;
  paths: { stdout: string | null; stderr: string | null };
}

/** Only absolute paths: without a working directory in the spec, where the job ran is the scheduler's to say. */
const absolute = (path: string | null) => (path?.startsWith('/') ? path : null);

/** The first node of a node list, when it names one plainly (`node[1-3]` does not). */
function firstNode(nodes: string | null | undefined): string | null {
  const node = nodes?.split(',')[0] ?? null;
  return node && !node.includes('[') ? node : null;
}

/** The request's output paths: the history's, else computed now from what accounting knows of where it ran. */
function pathsOf(
  row: JobRequestRow,
  accounting: AccountingJobRow | undefined,
): { stdout: string | null; stderr: string | null } {
  if (row.stdoutPath !== null) return { stdout: row.stdoutPath, stderr: row.stderrPath ?? row.stdoutPath };
  if (row.jobId === null) return { stdout: null, stderr: null };
  // A record without paths (a scheduler that reports none): computed, where everything it names is known.
  const paths = outputPathsOf(
    row.spec as OutputSpec,
    { jobId: row.jobId, name: row.name, user: accounting?.user || null, node: firstNode(accounting?.nodes) },
    null,
  );
  return { stdout: absolute(paths.stdout), stderr: absolute(paths.stderr) };
}

/**
 * A task's output paths: as a record of the task reported them, else computed from the spec
 * with the task's fields: `%A` the array's job id, `%a` the task's index, `%j` the task's own job
 * id (not known while it waits in the array's record), and `slurm-%A_%a.out` when the spec names
 * no file, as sbatch does.
 */
export function taskOutputPaths(
  row: Pick<JobRequestRow, 'spec' | 'name' | 'jobId'>,
  task: Pick<ArrayTaskRow, 'taskId' | 'jobId' | 'nodes' | 'stdoutPath' | 'stderrPath'>,
  user: string | null,
): { stdout: string | null; stderr: string | null } {
  if (task.stdoutPath !== null) return { stdout: task.stdoutPath, stderr: task.stderrPath ?? task.stdoutPath };
  if (row.jobId === null) return { stdout: null, stderr: null };
  const taskJobId = task.jobId ?? Number.NaN;
  const paths = outputPathsOf(
    row.spec as OutputSpec,
    {
      jobId: taskJobId,
      name: row.name,
      user,
      node: firstNode(task.nodes),
      arrayJobId: row.jobId,
      arrayTaskId: task.taskId,
    },
    null,
  );
  // A pattern that names %j (or %J) of a task with no job of its own yet cannot be known.
  const known = (path: string | null) => (path === null || path.includes('NaN') ? null : absolute(path));
  return { stdout: known(paths.stdout), stderr: known(paths.stderr) };
}

function subjectOf(row: JobRequestRow, accounting: AccountingJobRow | undefined, task?: ArrayTaskRow): OutputSubject {
  if (!task) {
    return {
      jobId: row.jobId,
      state: row.state,
      startedAt: row.startedAt,
      label: `job ${row.jobId}`,
      paths: pathsOf(row, accounting),
    };
  }
  return {
    jobId: task.jobId ?? row.jobId,
    state: task.state,
    startedAt: task.startedAt,
    label: `task ${task.taskId}${task.jobId !== null && task.jobId !== row.jobId ? ` (job ${task.jobId})` : ''} of array job ${row.jobId}`,
    paths: taskOutputPaths(row, task, accounting?.user || null),
  };
}

/**
 * The output of a request, or of one task of an array request (`taskId`), read from the history
 * and the daemon's host. An array job's tasks each write their own file, so one of them must be
 * named; a single job has none (OutputTaskError, which lists the array's indexes).
 */
export async function jobOutputOf(
  h: History,
  row: JobRequestRow,
  stream: OutputStream,
  options: JobOutputOptions,
  taskId: number | null,
): Promise<JobOutput> {
  if (row.arrayTaskCount === null) {
    if (taskId !== null) {
      throw new OutputTaskError(
        `job request ${row.id} is not an array job: it has no task ${taskId}; ask without a task`,
      );
    }
    const accounting = row.jobId === null ? undefined : await getAccountingJob(h, row.profile, row.jobId);
    return readJobOutput(row, accounting, stream, options);
  }
  const expression = String((row.spec as { array?: unknown }).array ?? '');
  if (taskId === null) {
    throw new OutputTaskError(
      `job request ${row.id} is an array job of ${row.arrayTaskCount} tasks (${expression}): each task writes its own output; name one (task=N, --task N)`,
    );
  }
  const tasks = await tasksOf(h, row.id);
  let task = tasks.find((t) => t.taskId === taskId);
  if (!task) {
    // A task no answer has reported yet has no row: pending in the array's record, if it is one.
    if (!isTaskOf(row, taskId)) {
      throw new OutputTaskError(`job request ${row.id} has no task ${taskId}: its tasks are ${expression}`);
    }
    task = newTask(row.id, taskId);
  }
  const jobId = task.jobId ?? row.jobId;
  const accounting = jobId === null ? undefined : await getAccountingJob(h, row.profile, jobId);
  return readJobOutput(row, accounting, stream, options, task);
}

/** Ends that only a job that ran can have (a cancel, a node failure or a failed launch may come before any start). */
const RAN_STATES: ReadonlySet<string> = new Set(['completed', 'timeout', 'out_of_memory']);

/** Whether an index is one of the array's, by its expression (never listing its indexes). */
function isTaskOf(row: JobRequestRow, taskId: number): boolean {
  try {
    return namesIndex(parseArrayExpression(String((row.spec as { array?: unknown }).array ?? '')), taskId);
  } catch (error) {
    // Recorded from a spec that was checked: an expression that no longer parses names nothing.
    if (error instanceof ArraySyntaxError) return false;
    throw error;
  }
}

export async function readJobOutput(
  row: JobRequestRow,
  accounting: AccountingJobRow | undefined,
  stream: OutputStream,
  options: JobOutputOptions,
  /** One task of an array job (its accounting record is `accounting`): that task's file. */
  task?: ArrayTaskRow,
): Promise<JobOutput> {
  const host = hostname();
  const subject = subjectOf(row, accounting, task);
  const { paths, label } = subject;
  const path = paths[stream];
  const unavailable = (
    code: Extract<JobOutput, { kind: 'unavailable' }>['code'],
    reason: Extract<JobOutput, { kind: 'unavailable' }>['reason'],
    message: string,
  ): JobOutput => ({ kind: 'unavailable', code, reason, message, stream, path, host });
  // An end only a run can have counts as a start: an end recorded from the light state listing
  // (the job began and ended between two polls, accounting not in yet) has no start time.
  const started =
    subject.startedAt !== null || (accounting?.startTime ?? null) !== null || RAN_STATES.has(subject.state);
  const ended = isTerminalRequest(subject.state);

  if (row.jobId === null) {
    return ended
      ? unavailable(
          'SCHEDFLOW_ERR_OUTPUT_NOT_FOUND',
          'never_ran',
          `job request ${row.id} ended (${row.state}) without a job: it wrote no output`,
        )
      : unavailable(
          'SCHEDFLOW_ERR_OUTPUT_NOT_YET',
          'not_submitted',
          `job request ${row.id} is not submitted yet (${row.state}): no output yet`,
        );
  }
  if (path === null) {
    return unavailable(
      started || ended ? 'SCHEDFLOW_ERR_OUTPUT_NOT_FOUND' : 'SCHEDFLOW_ERR_OUTPUT_NOT_YET',
      'path_unknown',
      `where ${label} writes its ${stream} is not known yet: its name pattern needs what only the scheduler knows (a node, a working directory), and no record of the job has reported the path`,
    );
  }
  const user = accounting?.user || null;
  const tail = readFileTail(path, {
    ownerUid: await jobUidOf(user),
    maxBytes: options.maxBytes,
    ...(options.tailLines !== undefined && { maxLines: options.tailLines }),
    notBeforeMs: subject.startedAt !== null ? subject.startedAt - CLOCK_SLACK_MS : null,
    protectedDirs: options.protectedDirs,
  });
  const nodes = task ? task.nodes : accounting?.nodes;
  const ranOn = nodes ? ` (it ran on ${nodes})` : '';
  switch (tail.kind) {
    case 'ok': {
      const lines = tail.text === '' ? 0 : tail.text.replace(/\n$/, '').split('\n').length;
      return {
        kind: 'ok',
        jobId: subject.jobId ?? row.jobId,
        taskId: task?.taskId ?? null,
        stream,
        path,
        host,
        text: tail.text,
        lines,
        sizeBytes: tail.sizeBytes,
        modifiedAt: tail.mtimeMs,
        truncated: tail.truncated,
        sameFile: stream === 'stderr' && paths.stderr === paths.stdout,
        binary: tail.binary,
      };
    }
    case 'missing':
      if (!started && !ended) {
        return unavailable(
          'SCHEDFLOW_ERR_OUTPUT_NOT_YET',
          'not_started',
          `${label} has not started (${subject.state}): Slurm creates ${path} when it starts`,
        );
      }
      if (!started) {
        return unavailable(
          'SCHEDFLOW_ERR_OUTPUT_NOT_FOUND',
          'never_ran',
          `${label} ended (${subject.state}) without running: it wrote no ${stream}`,
        );
      }
      return unavailable(
        'SCHEDFLOW_ERR_OUTPUT_NOT_FOUND',
        'not_on_this_host',
        `tried ${path} on ${host}: no such file. The job's node${ranOn} may hold it where the daemon cannot see it (not on a shared file system), or it was removed`,
      );
    case 'older':
      return unavailable(
        'SCHEDFLOW_ERR_OUTPUT_NOT_FOUND',
        'older_than_job',
        `tried ${path} on ${host}: it was last written before ${label} started, so it is another job's file${ranOn}`,
      );
    case 'forbidden':
      return unavailable(
        'SCHEDFLOW_ERR_OUTPUT_UNREADABLE',
        'no_permission',
        `tried ${path} on ${host}: the daemon may not read it (${tail.code}); make it readable to the daemon's user`,
      );
    case 'protected':
      return unavailable(
        'SCHEDFLOW_ERR_OUTPUT_UNREADABLE',
        'protected',
        `${path} is inside schedflow's own folders (its data or configuration): never read`,
      );
    case 'not-a-file':
      return unavailable(
        'SCHEDFLOW_ERR_OUTPUT_UNREADABLE',
        'not_a_file',
        `${path} on ${host} is not a regular file (a FIFO, a device or a folder is never opened)`,
      );
    case 'link':
      return unavailable(
        'SCHEDFLOW_ERR_OUTPUT_UNREADABLE',
        'symlink',
        `${path} on ${host} leads through a symbolic link a job could have made, which the daemon never follows (only root's are): write output to its real path`,
      );
    case 'unsafe-path':
      return unavailable(
        'SCHEDFLOW_ERR_OUTPUT_UNREADABLE',
        'unsafe_path',
        `${path} is not an absolute path of plain names (no . or ..): not read`,
      );
    case 'not-owner':
      return unavailable(
        'SCHEDFLOW_ERR_OUTPUT_UNREADABLE',
        'not_owner',
        `${path} on ${host} belongs to uid ${tail.uid}, not to the job's user ${user}: only a file of the job's own user is read for it`,
      );
    case 'hard-link':
      return unavailable(
        'SCHEDFLOW_ERR_OUTPUT_UNREADABLE',
        'hard_link',
        `${path} on ${host} belongs to the daemon's user and has other names (hard links): it may be one of schedflow's own files, so it is not read`,
      );
    case 'error':
      return unavailable(
        'SCHEDFLOW_ERR_OUTPUT_UNREADABLE',
        'read_error',
        `tried ${path} on ${host}: cannot be read (${tail.code})`,
      );
    default:
      return assertNever(tail);
  }
}
