import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import type { ConnectionOptions, Queue } from 'bullmq';
import type { Command } from 'commander';
import { type DaemonInfo, readDaemonInfo } from '../daemon-info.js';
import { getAccountingJob, history as historyRows } from '../db/accounting.js';
import { tasksOf } from '../db/array-tasks.js';
import type { History } from '../db/history.js';
import type { OpenedHistory } from '../db/open-history.js';
import { getRequest, listRequests, transitionsOf } from '../db/requests.js';
import { type JobRequestRow, REQUEST_STATES, type RequestState } from '../db/schema.js';
import {
  ConfigError,
  JobOutputUnavailableError,
  RedisUnavailableError,
  SubmissionRefusedError,
  toError,
} from '../errors.js';
import { pidAlive } from '../lib/pid-lock.js';
import { sleep } from '../lib/sleep.js';
import { withTimeout } from '../lib/with-timeout.js';
import type {
  ApplySuggestionPayload,
  CancelPayload,
  JobCancelAnswer,
  RunCancelAnswer,
  SubmitPayload,
} from '../queue/catalog.js';
import { describeArrayOutcome, formatCounts, summarizeArray, tasksToList } from '../requests/array-state.js';
import { doorRefusal } from '../requests/door.js';
import { jobOutputOf, taskOutputPaths } from '../requests/job-output.js';
import { isTerminalRequest } from '../requests/request-state.js';
import { type ArrayExpression, parseArrayExpression } from '../sched/job-array.js';
import type { JobSpec } from '../sched/job-spec.js';
import { describeSuggestion } from '../summaries/prompt.js';
import { summaryForRequest, summaryLines } from '../summaries/show.js';
import { specView } from '../views/views.js';
import { openCliHistory } from './cli-history.js';
import { withDaemonDataDir } from './data-dir.js';
import { EXIT } from './exit-codes.js';
import { formatDuration, table } from './format.js';
import { parseInteger, parseSince } from './options.js';
import { findRequest, type NamedRequest } from './request-reference.js';
import { print, printError } from './terminal.js';
import { onInterrupt } from './wait-interrupt.js';

/*
 * What only some subcommands need is imported in them (`await import`), not here: BullMQ, the
 * queue catalog (zod, ajv) and the request modules that reach the scheduler client (undici)
 * were most of the second of CPU every `schedflow jobs list`, `show`, `history` or `output`
 * spent before it read one row of the history.
 */

/** A request's row as the CLI prints it: its spec as the API shows it (secret-looking environment values masked). */
function shownRow(row: JobRequestRow): JobRequestRow {
  return { ...row, spec: specView(row.spec) };
}

interface JobsFlags {
  dataDir: string;
  json?: boolean;
}

/**
 * What the daemon's door would refuse (src/requests/door.ts, from daemon.json), said before
 * anything is queued; `where` names the file or request in the message.
 */
function refuseAtDoor(
  info: DaemonInfo,
  profile: string,
  spec: Pick<JobSpec, 'account' | 'array'>,
  where: string,
): void {
  const door = info.doors?.[profile];
  const refused = door ? doorRefusal(profile, door, spec) : null;
  if (refused) throw new SubmissionRefusedError(refused.code, `${where}: ${refused.message}`);
}

function daemonAlive(info: DaemonInfo): boolean {
  return pidAlive(info.pid);
}

/** Bytes of an output file read from its end at most, as the API reads them. */
const OUTPUT_MAX_BYTES = 1024 * 1024;
/** Lines `jobs output --tail` may ask for, as the API allows. */
const MAX_TAIL_LINES = 10_000;

/** How long a command waits for the daemon's Redis before it gives up, nothing queued. */
const REDIS_CONNECT_TIMEOUT_MS = 3000;

/**
 * Runs `use` with one of the daemon's queues, or fails within seconds saying what to do: a
 * command must never hang retrying a Redis that is gone, printing ioredis's traces meanwhile.
 * A stopped daemon's private Redis stopped with it, so there is then no queue to wait in.
 */
export async function withDaemonQueue<T>(
  info: DaemonInfo,
  dataDir: string,
  name: 'submit' | 'summarize' | 'pipeline',
  use: (queue: Queue) => Promise<T>,
): Promise<T> {
  if (!daemonAlive(info) && 'path' in info.redis) {
    throw new ConfigError(
      `the daemon of ${resolve(dataDir)} (pid ${info.pid}) is not running, so nothing was queued: start it (npm start, or schedflow start --data-dir ${dataDir}) and run this again`,
    );
  }
  const target = 'path' in info.redis ? info.redis.path : new URL(info.redis.url).host;
  const [{ Queue: BullQueue }, { redisOptions }, { CLI_ASK_JOB_OPTIONS, JOB_OPTIONS }] = await Promise.all([
    import('bullmq'),
    import('../redis/redis-server.js'),
    import('../queue/catalog.js'),
  ]);
  let lastError: Error | undefined;
  const queue = new BullQueue(name, {
    connection: {
      ...redisOptions(info.redis),
      // A queue (not a worker) may give up: one try per command, no reconnecting.
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
      retryStrategy: () => null,
    } as ConnectionOptions,
    prefix: info.queuePrefix,
    defaultJobOptions: name === 'pipeline' ? CLI_ASK_JOB_OPTIONS : JOB_OPTIONS[name],
  });
  queue.on('error', (error) => {
    lastError = error;
  });
  try {
    await withTimeout(queue.waitUntilReady(), REDIS_CONNECT_TIMEOUT_MS);
    return await use(queue);
  } catch (error) {
    const reason = (lastError ?? toError(error)).message;
    throw new RedisUnavailableError(
      `cannot reach the daemon's Redis at ${target} (${reason}); nothing was queued: try again once it is back`,
      { cause: error },
    );
  } finally {
    await queue.close().catch(() => undefined);
  }
}

const time = (ms: number | null) => (ms === null ? '-' : new Date(ms).toLocaleString());

function requestRow(r: JobRequestRow): string[] {
  const elapsed = r.startedAt && r.endedAt ? formatDuration(Math.round((r.endedAt - r.startedAt) / 1000)) : '-';
  return [
    r.id,
    r.name,
    r.profile,
    r.state,
    r.jobId === null ? '-' : String(r.jobId),
    time(r.createdAt),
    elapsed,
    r.exitCode === null ? '-' : String(r.exitCode),
  ];
}

/** Follows a request through the history, printing each transition, until it ends. */
async function follow(history: OpenedHistory, requestId: string, json: boolean): Promise<JobRequestRow> {
  let printed = 0;
  // Why a request does not move (its profile cannot work, the scheduler does not answer): the
  // error the daemon keeps on it while it waits, said once each time it changes, never silence.
  let said: string | null = null;
  for (;;) {
    const row = await getRequest(history.store, requestId);
    const transitions = row ? await transitionsOf(history.store, requestId) : [];
    for (const t of transitions.slice(printed)) {
      const line = json
        ? JSON.stringify({
            at: new Date(t.at).toISOString(),
            from: t.fromState,
            to: t.toState,
            source: t.source,
            reason: t.reason,
            detail: t.detail,
          })
        : `${new Date(t.at).toLocaleTimeString()}  ${t.fromState ?? '-'} → ${t.toState}  (${t.source}${t.reason ? `, ${t.reason}` : ''}${t.stale ? ', stale' : ''})${t.detail ? `  ${t.detail}` : ''}`;
      print(`${line}\n`);
    }
    printed = transitions.length;
    if (row && isTerminalRequest(row.state)) return row;
    const waitingOn = row && row.jobId === null ? row.errorMessage : null;
    if (waitingOn && waitingOn !== said) {
      print(
        json
          ? `${JSON.stringify({ at: new Date().toISOString(), state: row?.state, waiting: waitingOn, code: row?.errorCode })}\n`
          : `${new Date().toLocaleTimeString()}  still ${row?.state}, not submitted: ${waitingOn}\n`,
      );
    }
    said = waitingOn ?? said;
    await sleep(500);
  }
}

/** How long a cancel, or a run asked for, waits for the daemon's answer. */
const CANCEL_ANSWER_MS = 30_000;

/**
 * Asks the running daemon to cancel a job request or a run (it holds the scheduler clients and
 * the history's writer) through a `cancel` job of its pipeline queue, and waits for the answer.
 */
export async function cancelThroughDaemon<Of extends 'job' | 'run'>(
  dataDir: string,
  payload: { of: Of; id: string },
): Promise<Of extends 'job' ? JobCancelAnswer : RunCancelAnswer> {
  const { CANCEL_JOB } = await import('../queue/catalog.js');
  return askDaemon(dataDir, 'cancel', (who) => ({
    name: CANCEL_JOB,
    data: { ...payload, who } satisfies CancelPayload,
  })) as Promise<Of extends 'job' ? JobCancelAnswer : RunCancelAnswer>;
}

/**
 * Asks the running daemon for something only it can do, through a job of its pipeline queue
 * (`cancel`, `trigger`), and waits for the job's answer. `what` names it in the messages;
 * `job` makes the job's name and data from the words that say who asks.
 */
export async function askDaemon(
  dataDir: string,
  what: string,
  job: (who: string) => { name: string; data: object },
): Promise<unknown> {
  const info = readDaemonInfo(dataDir);
  if (!daemonAlive(info)) {
    throw new ConfigError(
      `the daemon of ${resolve(dataDir)} (pid ${info.pid}) is not running, so nothing was done (${what}): start it and run this again`,
    );
  }
  const { name, data } = job(cliWho());
  return withDaemonQueue(info, dataDir, 'pipeline', async (queue) => {
    const added = await queue.add(name, data, { jobId: randomUUID() });
    const deadline = Date.now() + CANCEL_ANSWER_MS;
    for (;;) {
      const now = added.id ? await queue.getJob(added.id) : undefined;
      if (now?.finishedOn) {
        if (now.failedReason) throw new Error(`the daemon failed the ${what}: ${now.failedReason}`);
        return now.returnvalue as unknown;
      }
      if (Date.now() > deadline) {
        throw new RedisUnavailableError(
          `the daemon did not take the ${what} up within ${CANCEL_ANSWER_MS / 1000} s (are its workers running?); it stays queued and is done when they do`,
        );
      }
      await sleep(100);
    }
  });
}

/** Who asks, for the history and the daemon's log: `CLI (alice, pid 4242)`. */
export function cliWho(): string {
  return `CLI (${userInfoName()}, pid ${process.pid})`;
}

/** How the commands that take a request describe it in their help. */
const REQUEST_ARGUMENT = 'request id, a unique start of one, or its Slurm job id (123; 123_4 for an array task)';

/** The full id of the request `given` names, read from the history (for the commands the daemon carries out). */
async function requestIdOf(dataDir: string, given: string): Promise<string> {
  const history = await openCliHistory(dataDir, { write: false });
  try {
    return (await findRequest(history.store, given)).row.id;
  } finally {
    await history.close();
  }
}

/** `task      4: completed, job 125, exit 0` for `jobs show 123_4`. */
function taskLine(task: NonNullable<NamedRequest['task']>): string {
  const t = task.row;
  if (!t) return `task      ${task.taskId}: not reported by the scheduler yet`;
  return `task      ${t.taskId}: ${t.state}${t.jobId === null ? '' : `, job ${t.jobId}`}${t.exitCode === null ? '' : `, exit ${t.exitCode}`}${t.reason ? ` (${t.reason})` : ''}`;
}

function userInfoName(): string {
  return process.env.USER ?? process.env.LOGNAME ?? 'unknown user';
}

export function registerJobsCommand(program: Command): void {
  const jobs = withDaemonDataDir(
    program
      .command('jobs')
      .description("job requests through the running daemon's queue, and its history")
      .option('--json', 'print JSON'),
  );
  const flagsOf = (cmd: Command) => cmd.optsWithGlobals() as JobsFlags;

  jobs
    .command('submit')
    .description('queue a job file for the daemon to submit; --wait follows it to the end')
    .argument('<file>', 'job file (YAML or JSON job spec)')
    .option('--profile <name>', 'scheduler profile (default: the daemon’s first)')
    .option('--wait', 'print each transition; exit 0 only when the job COMPLETED')
    .option('--summarize', 'a summary when it ends, whatever the daemon’s setting')
    .option('--no-summarize', 'no summary when it ends, whatever the daemon’s setting')
    .action(async (file: string, opts: { profile?: string; wait?: boolean; summarize?: boolean }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const { readJobFile } = await import('./job-file.js');
      const { spec, retry } = readJobFile(file);
      const info = readDaemonInfo(flags.dataDir);
      const profile = opts.profile ?? info.defaultProfile;
      if (!info.profiles.includes(profile)) {
        throw new ConfigError(`the daemon has no profile "${profile}" (it has: ${info.profiles.join(', ')})`);
      }
      refuseAtDoor(info, profile, spec, file);
      const requestId = randomUUID();
      const payload: SubmitPayload = {
        requestId,
        request: {
          profile,
          spec,
          origin: 'cli',
          acceptedAt: Date.now(),
          ...(opts.summarize !== undefined && { summarize: opts.summarize }),
          ...(retry !== undefined && { retry }),
        },
      };
      await withDaemonQueue(info, flags.dataDir, 'submit', (queue) =>
        queue.add('submit', payload, { jobId: requestId }),
      );
      if (!daemonAlive(info)) {
        printError(
          `schedflow: warning: the daemon (pid ${info.pid}) is not running; the job waits in its Redis queue until it starts\n`,
        );
      }
      print(
        flags.json
          ? `${JSON.stringify({ requestId, profile })}\n`
          : `queued request ${requestId} (profile ${profile})\n`,
      );
      if (!opts.wait) return;
      const history = await openCliHistory(flags.dataDir, { write: false });
      // Ctrl-C stops the waiting, not the job: say so, and how to cancel it.
      const stopWatching = onInterrupt(
        () =>
          `schedflow: stopped waiting; request ${requestId} goes on in the daemon (nothing was cancelled). To cancel it: schedflow jobs cancel ${requestId} --data-dir ${resolve(flags.dataDir)}`,
      );
      try {
        const row = await follow(history, requestId, flags.json ?? false);
        if (!flags.json) {
          print(
            `job ${row.jobId ?? '-'} ${row.state}${row.exitCode !== null ? ` (exit ${row.exitCode})` : ''}${row.errorMessage ? `: ${row.errorMessage}` : ''}\n`,
          );
        }
        process.exitCode = row.state === 'completed' ? EXIT.ok : EXIT.refused;
      } finally {
        stopWatching();
        await history.close();
      }
    });

  jobs
    .command('list')
    .description('recent job requests, newest first')
    .option('--state <states>', `comma-separated: ${REQUEST_STATES.join(', ')}`)
    .option('--limit <n>', 'how many (default 50)', parseInteger)
    .action(async (opts: { state?: string; limit?: number }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const states = opts.state?.split(',').map((s) => s.trim().toLowerCase());
      const unknown = states?.filter((s) => !(REQUEST_STATES as readonly string[]).includes(s));
      if (unknown?.length)
        throw new ConfigError(`unknown state ${unknown.join(', ')}; states are ${REQUEST_STATES.join(', ')}`);
      const history = await openCliHistory(flags.dataDir, { write: false });
      try {
        const rows = await listRequests(history.store, {
          state: states as RequestState[] | undefined,
          limit: opts.limit,
        });
        print(
          flags.json
            ? `${JSON.stringify(rows.map(shownRow), null, 2)}\n`
            : `${table(['REQUEST', 'NAME', 'PROFILE', 'STATE', 'JOBID', 'CREATED', 'ELAPSED', 'EXIT'], rows.map(requestRow))}\n`,
        );
      } finally {
        await history.close();
      }
    });

  jobs
    .command('history')
    .description("accounting records of the profiles' accounts, schedflow's and external jobs, beside the local state")
    .option('--since <time>', 'e.g. 2h, 3d, 2026-11-01, Unix seconds', (v) => parseSince(v))
    .option('--profile <name>', 'one profile only')
    .option('--limit <n>', 'how many (default 100)', parseInteger)
    .action(async (opts: { since?: number; profile?: string; limit?: number }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const history = await openCliHistory(flags.dataDir, { write: false });
      try {
        const rows = await historyRows(history.store, {
          sinceSec: opts.since,
          profile: opts.profile,
          limit: opts.limit,
        });
        print(
          flags.json
            ? `${JSON.stringify(rows, null, 2)}\n`
            : `${table(
                [
                  'JOBID',
                  'NAME',
                  'ACCOUNT',
                  'USER',
                  'SLURM STATE',
                  'LOCAL STATE',
                  'EXIT',
                  'ELAPSED',
                  'CPUS',
                  'REQUEST',
                ],
                rows.map((r) => [
                  String(r.jobId),
                  r.name,
                  r.account,
                  r.user,
                  r.accountingState,
                  r.taskId === null
                    ? (r.localState ?? '(external)')
                    : `task ${r.taskId}: ${r.taskState} (array ${r.localState})`,
                  r.exitCode === null ? '-' : String(r.exitCode),
                  formatDuration(r.elapsedSec),
                  r.cpus === null ? '-' : String(r.cpus),
                  r.requestId ?? '-',
                ]),
              )}\n`,
        );
      } finally {
        await history.close();
      }
    });

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
        const { attemptsOf } = await import('../requests/attempts.js');
        const transitions = await transitionsOf(h, id);
        const isArray = row.arrayTaskCount !== null;
        // An array's accounting records are its tasks': the one under the array's job id is one
        // task's (the last to start), never the array's outcome. Shown only for a task named
        // (`123_4`), its own record, as the UI's job page does.
        const recordJobId = isArray ? (task?.row?.jobId ?? null) : row.jobId;
        const accounting = recordJobId === null ? undefined : await getAccountingJob(h, row.profile, recordJobId);
        const summary = await summaryForRequest(h, row);
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
            `${JSON.stringify({ request: shownRow(row), ...(task && { task: task.row ?? { taskId: task.taskId } }), transitions, attempts, accounting: accounting ?? null, summary }, null, 2)}\n`,
          );
          return;
        }
        const lines = [
          `request   ${row.id}`,
          `name      ${row.name} (profile ${row.profile}, from ${row.origin})`,
          `state     ${row.state}${row.reason ? ` (${row.reason})` : ''}`,
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

  jobs
    .command('cancel')
    .description('cancel a request: withdrawn before submission, cancelled by the scheduler after')
    .argument('<request>', REQUEST_ARGUMENT)
    .option('--wait', 'follow it until the history records it ended')
    .action(async (given: string, opts: { wait?: boolean }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const id = await requestIdOf(flags.dataDir, given);
      let answer = await cancelThroughDaemon(flags.dataDir, { of: 'job', id });
      // Being submitted right now: its job may exist upstream any moment; ask again as told.
      const until = Date.now() + CANCEL_ANSWER_MS;
      while (answer.kind === 'submitting' && Date.now() < until) {
        if (!flags.json) printError(`being submitted right now; asking again in ${answer.retryAfterSec} s\n`);
        await sleep(answer.retryAfterSec * 1000);
        answer = await cancelThroughDaemon(flags.dataDir, { of: 'job', id });
      }
      if (flags.json) print(`${JSON.stringify({ id, ...answer })}\n`);
      switch (answer.kind) {
        case 'not_found':
          throw new ConfigError(`no job request ${id} in the history`);
        case 'error':
          process.exitCode = answer.retryable ? EXIT.unavailable : EXIT.refused;
          if (!flags.json) printError(`schedflow: ${answer.message}\n`);
          return;
        case 'submitting':
          process.exitCode = EXIT.unavailable;
          if (!flags.json)
            printError(`schedflow: job request ${id} is still being submitted; cancel it again shortly\n`);
          return;
        case 'ended':
          process.exitCode = EXIT.refused;
          if (!flags.json) {
            printError(
              `schedflow: ${answer.upstream ? `job ${answer.jobId} has already ended upstream (${answer.upstream})` : `job request ${id} has already ended: ${answer.state}`}\n`,
            );
          }
          return;
        case 'cancelled':
          if (!flags.json) print(`cancelled request ${id} before it was submitted\n`);
          return;
        case 'requested':
          if (!flags.json) {
            print(`cancel of job ${answer.jobId} sent to the scheduler; the next poll records CANCELLED\n`);
          }
          if (!opts.wait) return;
          {
            const history = await openCliHistory(flags.dataDir, { write: false });
            try {
              const row = await follow(history, id, flags.json ?? false);
              if (!flags.json) print(`job ${row.jobId ?? '-'} ${row.state}\n`);
            } finally {
              await history.close();
            }
          }
          return;
      }
    });

  jobs
    .command('output')
    .description(
      "the end of a job's stdout (or stderr), read from the path the scheduler reported; an array job's tasks each write their own (--task)",
    )
    .argument('<request>', REQUEST_ARGUMENT)
    .option('--stderr', 'the stderr file instead of stdout')
    .option('--tail <lines>', 'lines from the end (default 100)', parseInteger)
    .option(
      '--task <index>',
      "an array job's task: its own file (slurm-%A_%a.out by default); or name the task as 123_4",
      parseInteger,
    )
    .action(async (given: string, opts: { stderr?: boolean; tail?: number; task?: number }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const history = await openCliHistory(flags.dataDir, { write: false });
      try {
        // `123_4` names task 4 of array job 123: its output, as `--task 4` would.
        const { row, task } = await findRequest(history.store, given, { allowTask: true });
        if (task && opts.task !== undefined && opts.task !== task.taskId) {
          throw new ConfigError(
            `${given} names task ${task.taskId}, and --task ${opts.task} another: name the task once (${given}, or request ${row.id} with --task N)`,
          );
        }
        const taskId = opts.task ?? task?.taskId ?? null;
        const tailLines = opts.tail ?? 100;
        if (tailLines < 1 || tailLines > MAX_TAIL_LINES) {
          throw new ConfigError(`--tail must be 1 to ${MAX_TAIL_LINES} lines`);
        }
        if (opts.task !== undefined && opts.task < 0) throw new ConfigError('--task must be a task index, 0 or more');
        const output = await jobOutputOf(
          history.store,
          row,
          opts.stderr ? 'stderr' : 'stdout',
          { tailLines, maxBytes: OUTPUT_MAX_BYTES, protectedDirs: [resolve(flags.dataDir)] },
          taskId,
        );
        if (output.kind === 'unavailable') throw new JobOutputUnavailableError(output.code, output.message);
        if (flags.json) {
          print(`${JSON.stringify(output)}\n`);
          return;
        }
        if (output.truncated || output.sameFile) {
          const notes = [
            ...(output.truncated ? [`the last ${output.lines} lines of ${output.sizeBytes} bytes`] : []),
            ...(output.sameFile ? ['stderr goes to the stdout file'] : []),
          ];
          printError(`==> ${output.path} (${notes.join('; ')}) <==\n`);
        }
        print(output.text);
      } finally {
        await history.close();
      }
    });

  jobs
    .command('retry-tasks')
    .description("run some of an array job's tasks again (by default the ones that did not complete): a new request")
    .argument('<request>', `${REQUEST_ARGUMENT}, of the array job`)
    .option('--indexes <list>', "task indexes in Slurm's syntax (3,7-9); default: every task that did not complete")
    .action(async (given: string, opts: { indexes?: string }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const info = readDaemonInfo(flags.dataDir);
      const history = await openCliHistory(flags.dataDir, { write: false });
      try {
        const id = (await findRequest(history.store, given)).row.id;
        let indexes: ArrayExpression | undefined;
        try {
          indexes = opts.indexes === undefined ? undefined : parseArrayExpression(opts.indexes);
        } catch (error) {
          throw new ConfigError(`--indexes: ${toError(error).message}`);
        }
        const [{ planArrayRetry }, { jobSpecSchema }] = await Promise.all([
          import('../requests/array-retry.js'),
          import('../sched/job-spec.js'),
        ]);
        const plan = await planArrayRetry(history.store, id, indexes);
        refuseAtDoor(info, plan.original.profile, plan.spec, `request ${id}`);
        const requestId = randomUUID();
        const payload: SubmitPayload = {
          requestId,
          request: {
            profile: plan.original.profile,
            spec: jobSpecSchema.parse(plan.spec),
            origin: 'cli',
            acceptedAt: Date.now(),
            arrayRetryOf: plan.original.id,
          },
        };
        await withDaemonQueue(info, flags.dataDir, 'submit', (queue) =>
          queue.add('submit', payload, { jobId: requestId }),
        );
        print(
          flags.json
            ? `${JSON.stringify({ requestId, retryOf: id, array: plan.array })}\n`
            : `queued request ${requestId}, running tasks ${plan.array} of ${id} again\n`,
        );
      } finally {
        await history.close();
      }
    });

  jobs
    .command('resubmit')
    .description("queue a request again with its summary's suggested change (more memory, a longer limit, ...)")
    .argument('<request>', REQUEST_ARGUMENT)
    .option('--apply-suggestion', 'apply the suggested change (required: nothing is re-submitted without it)')
    .action(async (given: string, opts: { applySuggestion?: boolean }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const info = readDaemonInfo(flags.dataDir);
      const history = await openCliHistory(flags.dataDir, { write: false });
      try {
        const id = (await findRequest(history.store, given)).row.id;
        const [{ suggestionToApply }, { APPLY_SUGGESTION_JOB }] = await Promise.all([
          import('../summaries/resubmit.js'),
          import('../queue/catalog.js'),
        ]);
        const { summary } = await suggestionToApply(history.store, id);
        const change = describeSuggestion(summary.suggestion as NonNullable<typeof summary.suggestion>);
        if (!opts.applySuggestion) {
          throw new ConfigError(
            `the suggested change is: ${change}; to apply it: schedflow jobs resubmit ${id} --apply-suggestion`,
          );
        }
        let newId = summary.appliedRequestId;
        if (!newId) {
          newId = randomUUID();
          const payload: ApplySuggestionPayload = { requestId: id, newRequestId: newId };
          newId = await withDaemonQueue(info, flags.dataDir, 'summarize', async (queue) => {
            // One job per summary: applying twice, even at once, makes one request.
            const jobId = `apply-${summary.id}`;
            await queue.add(APPLY_SUGGESTION_JOB, payload, { jobId });
            // A job already there (an earlier call) keeps its own new request id.
            const queued = await queue.getJob(jobId);
            return (queued?.data as ApplySuggestionPayload | undefined)?.newRequestId ?? payload.newRequestId;
          });
          if (!daemonAlive(info)) {
            printError(
              `schedflow: warning: the daemon (pid ${info.pid}) is not running; the request is made when it starts\n`,
            );
          }
          if (daemonAlive(info)) {
            for (let i = 0; i < 40 && !(await getRequest(history.store, newId)); i++) await sleep(250);
          }
        }
        print(
          flags.json
            ? `${JSON.stringify({ requestId: newId, resubmits: id, changes: summary.suggestion?.changes ?? {} })}\n`
            : `queued request ${newId}, re-submitting ${id} with ${change}\n`,
        );
      } finally {
        await history.close();
      }
    });
}

/** Failures `jobs show` lists; their count is in the counts line. */
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
 * attempt of its request (each its own Slurm job). Nothing for a request without a policy.
 */
async function attemptLines(
  h: History,
  row: JobRequestRow,
  attemptsOf: (h: History, id: string) => Promise<JobRequestRow[]>,
): Promise<string[]> {
  if (row.retryPolicy === null && row.retryCause === null) return [];
  const lines: string[] = [];
  if (row.retryCause) lines.push(`retry of  ${row.retryCause.previousId}: ${row.retryCause.reason}`);
  if (row.retryDueAt !== null) lines.push(`next      attempt ${row.attempt + 1} at ${time(row.retryDueAt)} (backoff)`);
  if (row.nextAttemptId !== null) lines.push(`next      attempt ${row.attempt + 1}: ${row.nextAttemptId}`);
  if (row.retryNote !== null) lines.push(`no retry  ${row.retryNote}`);
  const attempts = await attemptsOf(h, row.id);
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
