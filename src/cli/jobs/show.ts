import type { Command } from 'commander';
import { getAccountingJob } from '../../db/accounting.js';
import { tasksOf } from '../../db/array-tasks.js';
import type { History } from '../../db/history.js';
import { transitionsOf } from '../../db/requests.js';
import type { JobRequestRow } from '../../db/schema.js';
import { describeArrayOutcome, formatCounts, summarizeArray, tasksToList } from '../../requests/array-state.js';
import { taskOutputPaths } from '../../requests/job-output.js';
import { hasAttempts, resubmittedAfterLoss } from '../../requests/lost-resubmit.js';
import { isTerminalRequest } from '../../requests/request-state.js';
import type { JobSpec } from '../../sched/job-spec.js';
import { summaryForRequest, summaryLines } from '../../summaries/show.js';
import { openCliHistory } from '../cli-history.js';
import { formatDuration, table } from '../format.js';
import { findRequest, type NamedRequest } from '../request-reference.js';
import { print } from '../terminal.js';
import { flagsOf, pendingLines, REQUEST_ARGUMENT, shownRow, time } from './jobs-flags.js';
import { pendingLoadLine, pendingLoadSeen } from './pending-load.js';

/** `schedflow jobs show <request>`: one request, its transitions, attempts, tasks, accounting and summary. */
export function registerShow(jobs: Command): void {
  jobs
    .command('show')
    .description('one request: its state, every transition, and the accounting record')
    .argument('<request>', REQUEST_ARGUMENT)
    .action(async (given: string, _opts, cmd: Command) => {
      const flags = flagsOf(cmd);
      const history = await openCliHistory(flags.dataDir, { write: false });
      try {
        const h = history.store;
        const { row, task } = await findRequest(h, given, { allowTask: true });
        const id = row.id;
        const { attemptsOf } = await import('../../requests/attempts.js');
        const transitions = await transitionsOf(h, id);
        const isArray = row.arrayTaskCount !== null;
        // An array's accounting records are its tasks': the one under the array's job id is one
        // task's (the last to start), never the array's outcome. Shown only for a task named
        // (`123_4`), its own record, as the UI's job page does.
        const recordJobId = isArray ? (task?.row?.jobId ?? null) : row.jobId;
        const accounting = recordJobId === null ? undefined : await getAccountingJob(h, row.profile, recordJobId);
        const summary = await summaryForRequest(h, row);
        const load = await pendingLoadSeen(flags.dataDir, row);
        if (flags.json) {
          const attempts = (await attemptsOf(h, row.id)).map((a) => ({
            id: a.id,
            attempt: a.attempt,
            state: a.state,
            jobId: a.jobId,
            exitCode: a.exitCode,
            reason: a.retryCause?.reason ?? null,
          }));
          print(
            `${JSON.stringify({ request: withLoad(shownRow(row), load), ...(task && { task: task.row ?? { taskId: task.taskId } }), transitions, attempts, accounting: accounting ?? null, summary }, null, 2)}\n`,
          );
          return;
        }
        const lines = [
          `request   ${row.id}`,
          `name      ${row.name} (profile ${row.profile}, from ${row.origin})`,
          `state     ${row.state}${row.reason ? ` (${row.reason})` : ''}`,
          ...pendingLines(row),
          ...pendingLoadLine(load),
          ...(row.heldAt !== null
            ? [
                `held      by ${row.heldBy ?? 'unknown'} since ${time(row.heldAt)}${row.jobId === null ? ' (kept back: submitted once released)' : ''}; release: schedflow jobs release ${row.id}`,
              ]
            : []),
          `job id    ${row.jobId ?? '-'}${row.adopted ? ' (adopted after an interrupted submit)' : ''}`,
          ...(task ? [taskLine(task)] : []),
          `exit      ${row.exitCode ?? '-'}${row.signal ? ` signal ${row.signal}` : ''}${isArray && row.exitCode !== null ? " (the highest of its tasks')" : ''}`,
          ...(isArray
            ? [
                `output    each task its own: ${(row.spec as JobSpec).standard_output || 'slurm-%A_%a.out'} (see the tasks below)`,
              ]
            : [
                `stdout    ${row.stdoutPath ?? '-'}`,
                `stderr    ${row.stderrPath === null ? '-' : row.stderrPath === row.stdoutPath ? `${row.stderrPath} (with stdout)` : row.stderrPath}`,
              ]),
          `seen      ${row.lastSeenAt ? `${time(row.lastSeenAt)}, answer ${row.lastSeenAgeSec ?? 0} s old${row.lastSeenStale ? ', stale' : ''}` : '-'}`,
          ...(row.errorMessage ? [`error     ${row.errorMessage}`] : []),
          ...(await attemptLines(h, row, attemptsOf)),
          '',
          table(
            ['AT', 'FROM', 'TO', 'SOURCE', 'REASON', 'DETAIL'],
            transitions.map((t) => [
              time(t.at),
              t.fromState ?? '-',
              t.toState,
              `${t.source}${t.stale ? ' (stale)' : ''}`,
              t.reason ?? '-',
              t.detail ?? '',
            ]),
          ),
        ];
        if (isArray) lines.push('', ...(await arrayLines(h, row)));
        if (accounting) {
          const recordOwner = task?.row ? `task ${task.taskId} (job ${task.row.jobId})` : null;
          lines.push(
            '',
            `accounting  ${recordOwner ? `${recordOwner}: ` : ''}${accounting.state}, exit ${accounting.exitCode ?? '-'}, elapsed ${formatDuration(accounting.elapsedSec)}, nodes ${accounting.nodes ?? '-'}, cpus ${accounting.cpus ?? '-'}`,
          );
        }
        lines.push('', ...(await summaryLines(h, row)));
        print(`${lines.join('\n')}\n`);
      } finally {
        await history.close();
      }
    });
}

/** The JSON's `pending` with its partition load (null when not known), as the API's detail has it. */
function withLoad<R extends { pending: object | null }>(
  shown: R,
  load: Awaited<ReturnType<typeof pendingLoadSeen>>,
): R {
  return shown.pending === null ? shown : { ...shown, pending: { ...shown.pending, partition: load?.load ?? null } };
}

/** `task      4: completed, job 125, exit 0` for `jobs show 123_4`. */
function taskLine(task: NonNullable<NamedRequest['task']>): string {
  const t = task.row;
  if (!t) return `task      ${task.taskId}: not reported by the scheduler yet`;
  return `task      ${t.taskId}: ${t.state}${t.jobId === null ? '' : `, job ${t.jobId}`}${t.exitCode === null ? '' : `, exit ${t.exitCode}`}${t.reason ? ` (${t.reason})` : ''}`;
}

/** Task rows `jobs show` lists at most, failures first (the UI lists 200: a terminal, fewer). */
const TASKS_SHOWN = 20;

/** An array job's tasks, compactly: counts by state, then the failures. */
async function arrayLines(h: History, row: JobRequestRow): Promise<string[]> {
  const tasks = await tasksOf(h, row.id);
  const total = row.arrayTaskCount ?? tasks.length;
  const { counts } = summarizeArray(tasks, total);
  const failures = tasks.filter((task) => isTerminalRequest(task.state) && task.state !== 'completed');
  const listed = tasksToList(tasks, TASKS_SHOWN);
  // Where each task writes: as its records reported, else its spec's pattern with its fields.
  const user = row.jobId === null ? null : ((await getAccountingJob(h, row.profile, row.jobId))?.user ?? null);
  const lines = [
    `array     ${String((row.spec as { array?: unknown }).array)}: ${total} tasks: ${formatCounts(counts)}`,
    `outcome   ${describeArrayOutcome(counts, total)}`,
    ...(row.arrayRetryOf ? [`retry of  ${row.arrayRetryOf}`] : []),
  ];
  if (listed.length > 0) {
    lines.push(
      table(
        ['TASK', 'JOB', 'STATE', 'EXIT', 'OUTPUT'],
        listed.map((task) => [
          String(task.taskId),
          String(task.jobId ?? '-'),
          task.state,
          String(task.exitCode ?? '-'),
          taskOutputPaths(row, task, user).stdout ?? '-',
        ]),
      ),
      ...(tasks.length > listed.length
        ? [`${listed.length} of ${tasks.length} tasks listed (those that did not complete first)`]
        : []),
      `a task's output: schedflow jobs output ${row.id} --task N${row.jobId !== null ? ` (or ${row.jobId}_N)` : ''}`,
    );
  }
  if (failures.length > 0) lines.push(`retry them: schedflow jobs retry-tasks ${row.id}`);
  return lines;
}

/**
 * A request's retries for `jobs show`: why this attempt was made, what follows it, and every
 * attempt of its request (each its own Slurm job). A resubmit after the controller lost a job
 * before it started is said as such, not as the retry policy's. Nothing for a request without
 * a policy, a retry or a resubmit.
 */
async function attemptLines(
  h: History,
  row: JobRequestRow,
  attemptsOf: (h: History, id: string) => Promise<JobRequestRow[]>,
): Promise<string[]> {
  if (!hasAttempts(row)) return [];
  const lines: string[] = [];
  const attempts = await attemptsOf(h, row.id);
  const cause = row.retryCause;
  if (cause) {
    const previous = attempts.find((a) => a.id === cause.previousId);
    const word = previous && resubmittedAfterLoss(previous) ? 'resubmit of' : 'retry of  ';
    lines.push(`${word} ${cause.previousId}: ${cause.reason}`);
  }
  const lost = resubmittedAfterLoss(row);
  if (row.retryDueAt !== null) {
    const why = lost ? 'resubmit: the controller lost the job before it started' : 'backoff';
    lines.push(`next      attempt ${row.attempt + 1} at ${time(row.retryDueAt)} (${why})`);
  }
  if (row.nextAttemptId !== null) {
    lines.push(
      `next      attempt ${row.attempt + 1}: ${row.nextAttemptId}${lost ? ' (resubmitted: the controller lost the job before it started)' : ''}`,
    );
  }
  if (row.retryNote !== null) lines.push(`no retry  ${row.retryNote}`);
  lines.push(
    '',
    table(
      ['ATTEMPT', 'REQUEST', 'JOB', 'STATE', 'EXIT', 'WHY'],
      attempts.map((a) => [
        `${a.attempt}${a.id === row.id ? ' *' : ''}`,
        a.id,
        String(a.jobId ?? '-'),
        a.state,
        String(a.exitCode ?? '-'),
        a.retryCause?.reason ?? 'first attempt',
      ]),
    ),
  );
  return lines;
}
