import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { History } from '../db/history.js';
import { getRun, listRuns, stepRequests } from '../db/runs.js';
import {
  type JobRequestRow,
  type PipelineRunRow,
  RUN_STATES,
  type RunState,
  TERMINAL_RUN_STATES,
} from '../db/schema.js';
import { ConfigError } from '../errors.js';
import { sleep } from '../lib/sleep.js';
import type { RunTriggerAnswer, TriggerPayload } from '../queue/catalog.js';
import { runSummaryLines } from '../summaries/show.js';
import { runStartedBy } from '../views/run-start.js';
import { runDefinitionView, runView } from '../views/views.js';
import { openCliHistory } from './cli-history.js';
import { withDaemonDataDir } from './data-dir.js';
import { EXIT, exitCodeForCode } from './exit-codes.js';
import { formatDuration, table } from './format.js';
import { askDaemon, cancelThroughDaemon } from './jobs-command.js';
import { collectParam, parseInteger } from './options.js';
import { print, printError } from './terminal.js';
import { onInterrupt } from './wait-interrupt.js';

interface RunsFlags {
  dataDir: string;
  json?: boolean;
}

/** The CLI reads the history as a local admin: the whole run, as the API shows it to an admin token. */
const LOCAL_ADMIN = { admin: true } as const;

const time = (ms: number | null) => (ms === null ? '-' : new Date(ms).toLocaleString());

const isTerminalRun = (state: RunState) => (TERMINAL_RUN_STATES as readonly RunState[]).includes(state);

/** `2026-11-28 10:00 (3 s)` of a run, or `-`. */
function took(run: PipelineRunRow): string {
  return run.startedAt !== null && run.endedAt !== null
    ? formatDuration(Math.round((run.endedAt - run.startedAt) / 1000))
    : '-';
}

/** The run's row in `runs list`. */
function runRow(run: PipelineRunRow): string[] {
  return [run.id, run.pipeline, run.trigger, run.state, time(run.createdAt), took(run), run.detail ?? ''];
}

/** `fetch (attempt 2): running, job 123` */
function stepLine(row: JobRequestRow): string {
  const attempt = row.attempt > 1 ? ` (attempt ${row.attempt})` : '';
  const job = row.jobId === null ? '' : `, job ${row.jobId}`;
  const exit = row.exitCode === null ? '' : `, exit ${row.exitCode}`;
  return `step ${row.step ?? '?'}${attempt}: ${row.state}${job}${exit}${row.reason ? ` (${row.reason})` : ''}`;
}

/**
 * Follows a run through the history, printing each change of its steps and of itself, until it
 * ends. The history is read, never written: the daemon does the work.
 */
async function followRun(h: History, runId: string, json: boolean): Promise<PipelineRunRow> {
  const seen = new Map<string, string>();
  let runState: string | undefined;
  for (;;) {
    const run = await getRun(h, runId);
    if (!run) throw new ConfigError(`pipeline run ${runId} is gone from the history`);
    for (const row of await stepRequests(h, runId)) {
      const key = `${row.state}/${row.jobId ?? ''}`;
      if (seen.get(row.id) === key) continue;
      seen.set(row.id, key);
      print(
        json
          ? `${JSON.stringify({ at: new Date().toISOString(), step: row.step, attempt: row.attempt, request_id: row.id, state: row.state, job_id: row.jobId, exit_code: row.exitCode })}\n`
          : `${new Date().toLocaleTimeString()}  ${stepLine(row)}\n`,
      );
    }
    if (run.state !== runState) {
      runState = run.state;
      if (!json && !isTerminalRun(run.state)) print(`${new Date().toLocaleTimeString()}  run ${run.state}\n`);
    }
    if (isTerminalRun(run.state)) return run;
    await sleep(500);
  }
}

/** `schedflow runs`: pipeline runs of the running daemon: started, listed, shown and cancelled. */
export function registerRunsCommand(program: Command): void {
  const runs = withDaemonDataDir(
    program
      .command('runs')
      .description('pipeline runs of the running daemon: trigger, list, show, cancel')
      .option('--json', 'print JSON'),
  );
  const flagsOf = (cmd: Command) => cmd.optsWithGlobals() as RunsFlags;

  runs
    .command('trigger')
    .description('start a run of a loaded pipeline now, as the API does; --wait follows it to the end')
    .argument('<pipeline>', 'pipeline name (schedflow pipelines lists them)')
    .option('--param <name=value>', 'a run parameter (repeatable)', collectParam, {})
    .option('--wait', 'print each step change; exit 0 only when the run succeeded')
    .action(async (pipeline: string, opts: { param: Record<string, string>; wait?: boolean }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const { TRIGGER_JOB } = await import('../queue/catalog.js');
      const answer = (await askDaemon(flags.dataDir, 'run', (who) => ({
        name: TRIGGER_JOB,
        data: { pipeline, params: opts.param, who } satisfies TriggerPayload,
      }))) as RunTriggerAnswer;
      if (answer.kind === 'error') {
        // No such pipeline, a bad parameter, a step the profile's door refuses: nothing was made.
        if (flags.json) print(`${JSON.stringify(answer)}\n`);
        else printError(`schedflow: ${answer.message}\n`);
        process.exitCode = exitCodeForCode(answer.code, answer.retryable);
        return;
      }
      const { run } = answer;
      if (flags.json) print(`${JSON.stringify({ run })}\n`);
      else {
        const how =
          run.state === 'running'
            ? 'started'
            : run.state === 'queued'
              ? 'queued (it starts when the active run ends)'
              : run.state;
        print(`run ${run.id} of ${run.pipeline}: ${how}${run.detail ? ` (${run.detail})` : ''}\n`);
      }
      if (!opts.wait) return;
      const history = await openCliHistory(flags.dataDir, { write: false });
      const stopWatching = onInterrupt(
        () =>
          `schedflow: stopped waiting; run ${run.id} goes on in the daemon. To cancel it: schedflow runs cancel ${run.id} --data-dir ${resolve(flags.dataDir)}`,
      );
      try {
        const ended = await followRun(history.store, run.id, flags.json ?? false);
        if (!flags.json) print(`run ${ended.id} ${ended.state}${ended.detail ? `: ${ended.detail}` : ''}\n`);
        process.exitCode = ended.state === 'succeeded' ? EXIT.ok : EXIT.refused;
      } finally {
        stopWatching();
        await history.close();
      }
    });

  runs
    .command('list')
    .description('recent runs, newest first')
    .option('--pipeline <name>', 'runs of this pipeline only')
    .option('--state <states>', `comma-separated: ${RUN_STATES.join(', ')}`)
    .option('--limit <n>', 'how many (default 50)', parseInteger)
    .action(async (opts: { pipeline?: string; state?: string; limit?: number }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const states = opts.state?.split(',').map((s) => s.trim().toLowerCase());
      const unknown = states?.filter((s) => !(RUN_STATES as readonly string[]).includes(s));
      if (unknown?.length) {
        throw new ConfigError(`unknown state ${unknown.join(', ')}; states are ${RUN_STATES.join(', ')}`);
      }
      const history = await openCliHistory(flags.dataDir, { write: false });
      try {
        const rows = await listRuns(history.store, {
          pipeline: opts.pipeline,
          state: states as RunState[] | undefined,
          limit: opts.limit,
        });
        print(
          flags.json
            ? `${JSON.stringify(
                rows.map((run) => runView(run, LOCAL_ADMIN)),
                null,
                2,
              )}\n`
            : rows.length === 0
              ? 'no runs\n'
              : `${table(['RUN', 'PIPELINE', 'TRIGGER', 'STATE', 'CREATED', 'TOOK', 'DETAIL'], rows.map(runRow))}\n`,
        );
      } finally {
        await history.close();
      }
    });

  runs
    .command('show')
    .description('one run: how it was started, its state, every step attempt, and its summary')
    .argument('<run>', 'run id')
    .action(async (id: string, _opts, cmd: Command) => {
      const flags = flagsOf(cmd);
      const history = await openCliHistory(flags.dataDir, { write: false });
      try {
        const h = history.store;
        const run = await getRun(h, id);
        if (!run) throw new ConfigError(`no pipeline run ${id} in the history (schedflow runs list shows them)`);
        const steps = await stepRequests(h, run.id);
        if (flags.json) {
          print(
            `${JSON.stringify(
              {
                ...runView(run, LOCAL_ADMIN),
                definition: runDefinitionView(run.definition, LOCAL_ADMIN),
                steps: steps.map((s) => ({
                  step: s.step,
                  attempt: s.attempt,
                  request_id: s.id,
                  state: s.state,
                  job_id: s.jobId,
                  exit_code: s.exitCode,
                  reason: s.reason,
                })),
              },
              null,
              2,
            )}\n`,
          );
          return;
        }
        const params = Object.entries(run.params).map(([k, v]) => `${k}=${v}`);
        const lines = [
          `run       ${run.id}`,
          `pipeline  ${run.pipeline}`,
          `started   by ${runStartedBy(run)}${run.scheduledFor !== null ? `, for the tick of ${time(run.scheduledFor)}` : ''}`,
          `state     ${run.state}${run.detail ? ` (${run.detail})` : ''}`,
          `params    ${params.length ? params.join(' ') : '-'}`,
          `created   ${time(run.createdAt)}`,
          `began     ${time(run.startedAt)}`,
          `ended     ${time(run.endedAt)}${run.endedAt !== null && run.startedAt !== null ? ` (took ${took(run)})` : ''}`,
          ...(run.cancelRequestedAt !== null
            ? [`cancel    asked ${time(run.cancelRequestedAt)}${run.cancelledBy ? ` by ${run.cancelledBy}` : ''}`]
            : []),
          '',
          steps.length === 0
            ? '(no step requests)'
            : table(
                ['STEP', 'ATTEMPT', 'REQUEST', 'JOBID', 'STATE', 'EXIT', 'REASON'],
                steps.map((s) => [
                  s.step ?? '-',
                  String(s.attempt),
                  s.id,
                  s.jobId === null ? '-' : String(s.jobId),
                  s.state,
                  s.exitCode === null ? '-' : String(s.exitCode),
                  s.reason ?? '-',
                ]),
              ),
          '',
          ...(await runSummaryLines(h, run)),
        ];
        print(`${lines.join('\n')}\n`);
      } finally {
        await history.close();
      }
    });

  runs
    .command('cancel')
    .description('cancel a run: steps not submitted are withdrawn, submitted ones cancelled; it ends cancelled')
    .argument('<run>', 'run id')
    .action(async (id: string, _opts, cmd: Command) => {
      const flags = flagsOf(cmd);
      const answer = await cancelThroughDaemon(flags.dataDir, { of: 'run', id });
      if (flags.json) print(`${JSON.stringify({ id, ...answer })}\n`);
      switch (answer.kind) {
        case 'not_found':
          throw new ConfigError(`no pipeline run ${id} in the history`);
        case 'error':
          process.exitCode = answer.retryable ? EXIT.unavailable : EXIT.refused;
          if (!flags.json) printError(`schedflow: ${answer.message}\n`);
          return;
        case 'ended':
          process.exitCode = EXIT.refused;
          if (!flags.json) {
            printError(
              `schedflow: run ${id} has already ended: ${answer.state}${answer.detail ? ` (${answer.detail})` : ''}\n`,
            );
          }
          return;
        case 'cancelled':
        case 'cancelling': {
          if (flags.json) return;
          const head =
            answer.kind === 'cancelling'
              ? `cancelling run ${id}: it ends cancelled once its steps have ended`
              : answer.already
                ? `run ${id} was already cancelled${answer.detail ? ` (${answer.detail})` : ''}`
                : `cancelled run ${id}`;
          const lines = [
            head,
            ...(answer.steps ?? []).map(
              (s) => `  ${s.step}: ${s.outcome.replace('_', ' ')}${s.detail ? ` (${s.detail})` : ''}`,
            ),
          ];
          print(`${lines.join('\n')}\n`);
          return;
        }
      }
    });
}
