import { hostname } from 'node:os';
import type { AccountingJobRow, JobRequestRow } from '../db/schema.js';
import type { ErrorCode } from '../errors.js';
import { assertNever } from '../lib/assert-never.js';
import { readFileTail } from '../lib/file-tail.js';
import { jobUidOf } from '../lib/host-users.js';
import { type OutputSpec, outputPathsOf } from '../sched/output-paths.js';
import { isTerminalRequest } from './request-state.js';

/**
 * The end of a job's stdout or stderr, read on the daemon's host from the path the history
 * holds; or why it cannot be (not written yet, not on this host, not readable). The daemon
 * cannot tell a file that exists only on a compute node from one that does not exist: it says
 * which path it tried, on which host, and where the job ran. The path is the job's to choose,
 * so the file is read as src/lib/file-tail.ts does: no link followed, nothing but a regular
 * file of the job's own user, nothing in schedflow's folders.
 */

export type OutputStream = 'stdout' | 'stderr';

export interface JobOutputOptions {
  /** Lines from the end. */
  tailLines: number;
  /** Bytes read from the end at most, however large the file: a longer tail is cut to them. */
  maxBytes: number;
  /** Folders never read from (schedflow's data and configuration). */
  protectedDirs: readonly string[];
}

export type JobOutput =
  | {
      kind: 'ok';
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
const CLOCK_SLACK_MS = 60_000;

/** The request's output paths: the history's, else computed now from what accounting knows of where it ran. */
function pathsOf(
  row: JobRequestRow,
  accounting: AccountingJobRow | undefined,
): { stdout: string | null; stderr: string | null } {
  if (row.stdoutPath !== null) return { stdout: row.stdoutPath, stderr: row.stderrPath ?? row.stdoutPath };
  if (row.jobId === null) return { stdout: null, stderr: null };
  // A record without paths (a scheduler that reports none): computed, where everything it names is known.
  const node = accounting?.nodes?.split(',')[0] ?? null;
  const paths = outputPathsOf(
    row.spec as OutputSpec,
    {
      jobId: row.jobId,
      name: row.name,
      user: accounting?.user || null,
      node: node && !node.includes('[') ? node : null,
    },
    null,
  );
  const absolute = (path: string | null) => (path?.startsWith('/') ? path : null);
  return { stdout: absolute(paths.stdout), stderr: absolute(paths.stderr) };
}

export async function readJobOutput(
  row: JobRequestRow,
  accounting: AccountingJobRow | undefined,
  stream: OutputStream,
  options: JobOutputOptions,
): Promise<JobOutput> {
  const host = hostname();
  const paths = pathsOf(row, accounting);
  const path = paths[stream];
  const unavailable = (
    code: Extract<JobOutput, { kind: 'unavailable' }>['code'],
    reason: Extract<JobOutput, { kind: 'unavailable' }>['reason'],
    message: string,
  ): JobOutput => ({ kind: 'unavailable', code, reason, message, stream, path, host });
  const started = row.startedAt !== null || (accounting?.startTime ?? null) !== null;
  const ended = isTerminalRequest(row.state);

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
      `where job ${row.jobId} writes its ${stream} is not known yet: its name pattern needs what only the scheduler knows (a node, a working directory), and no record of the job has reported the path`,
    );
  }
  const user = accounting?.user || null;
  const tail = readFileTail(path, {
    ownerUid: await jobUidOf(user),
    maxBytes: options.maxBytes,
    maxLines: options.tailLines,
    notBeforeMs: started && row.startedAt !== null ? row.startedAt - CLOCK_SLACK_MS : null,
    protectedDirs: options.protectedDirs,
  });
  const ranOn = accounting?.nodes ? ` (it ran on ${accounting.nodes})` : '';
  switch (tail.kind) {
    case 'ok': {
      const lines = tail.text === '' ? 0 : tail.text.replace(/\n$/, '').split('\n').length;
      return {
        kind: 'ok',
        stream,
        path,
        host,
        text: tail.text,
        lines,
        sizeBytes: tail.sizeBytes,
        modifiedAt: tail.mtimeMs,
        truncated: tail.truncated,
        sameFile: stream === 'stderr' && paths.stderr === paths.stdout,
      };
    }
    case 'missing':
      if (!started && !ended) {
        return unavailable(
          'SCHEDFLOW_ERR_OUTPUT_NOT_YET',
          'not_started',
          `job ${row.jobId} has not started (${row.state}): Slurm creates ${path} when it starts`,
        );
      }
      if (!started) {
        return unavailable(
          'SCHEDFLOW_ERR_OUTPUT_NOT_FOUND',
          'never_ran',
          `job ${row.jobId} ended (${row.state}) without running: it wrote no ${stream}`,
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
        `tried ${path} on ${host}: it was last written before job ${row.jobId} started, so it is another job's file${ranOn}`,
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
