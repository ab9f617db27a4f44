import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { History } from '../db/history.js';
import { getRun, listRuns, stepRequests } from '../db/runs.js';
import { type JobRequestRow, type PipelineRunRow, RUN_STATES, type RunState } from '../db/schema.js';
import { ConfigError } from '../errors.js';
import { sleep } from '../lib/sleep.js';
import { isTerminalRun } from '../pipelines/run-transition.js';
import { runSummaryLines } from '../summaries/show.js';
import { runStartedBy } from '../views/run-start.js';
import { runDefinitionView, runOutputsView, runView } from '../views/views.js';
import { openCliHistory } from './cli-history.js';
import { callDaemon, type DaemonAnswer, DaemonApiError, segment } from './daemon-api.js';
import { withDaemonDataDir } from './data-dir.js';
import { EXIT } from './exit-codes.js';
import { formatDuration, table } from './format.js';
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
async function followRun(h: History, runId: string, json: boolean, fromAttempt = 1): Promise<PipelineRunRow> {
  const seen = new Map<string, string>();
  let runState: string | undefined;
  for (;;) {
    const run = await getRun(h, runId);
    if (!run) throw new ConfigError(`pipeline run ${runId} is gone from the history`);
    for (const row of await stepRequests(h, runId)) {
      // Following a resume: the steps of its attempt, not those of the attempts before.
      if (row.runAttempt < fromAttempt) continue;
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
    // A run read before the resume committed can still show its old end.
    if (isTerminalRun(run.state) && run.attempt >= fromAttempt) return run;
    await sleep(500);
  }
}

/** `schedflow runs`: pipeline runs of the running daemon: started, listed, shown, cancelled and resumed. */
export function registerRunsCommand(program: Command): void {
  const runs = withDaemonDataDir(
    program
      .command('runs')
      .description('pipeline runs of the running daemon: trigger, list, show, cancel, resume')
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
      // The API's door for runs: the same parameter checks and profile doors as a token's, recorded as the CLI's.
      const { body: run } = await callDaemon<{ id: string; pipeline: string; state: string; detail: string | null }>(
        flags.dataDir,
        {
          method: 'POST',
          path: `/api/v1/pipelines/${segment(pipeline)}/runs`,
          body: { params: opts.param },
          nothing: 'no run was started',
        },
      );
      if (flags.json) {
        print(
          `${JSON.stringify({ run: { id: run.id, pipeline: run.pipeline, state: run.state, detail: run.detail } })}\n`,
        );
      } else {
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
                outputs: runOutputsView(steps),
                steps: steps.map((s) => ({
                  step: s.step,
                  attempt: s.attempt,
                  run_attempt: s.runAttempt,
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
          ...(run.attempt > 1
            ? [`attempt   ${run.attempt} (resumed ${run.attempt - 1} time${run.attempt > 2 ? 's' : ''})`]
            : []),
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
                ['RUN ATTEMPT', 'STEP', 'ATTEMPT', 'REQUEST', 'JOBID', 'STATE', 'EXIT', 'REASON'],
                // Which attempt of the run made each step request: a resume's steps under its number.
                [...steps]
                  .sort((a, b) => a.runAttempt - b.runAttempt)
                  .map((s) => [
                    String(s.runAttempt),
                    s.step ?? '-',
                    String(s.attempt),
                    s.id,
                    s.jobId === null ? '-' : String(s.jobId),
                    s.state,
                    s.exitCode === null ? '-' : String(s.exitCode),
                    s.reason ?? '-',
                  ]),
              ),
          ...outputLines(runOutputsView(steps)),
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
      let answer: DaemonAnswer<RunCancelAnswer>;
      try {
        answer = await callDaemon<RunCancelAnswer>(flags.dataDir, {
          method: 'POST',
          path: `/api/v1/runs/${segment(id)}/cancel`,
          nothing: 'nothing was cancelled',
        });
      } catch (error) {
        if (!(error instanceof DaemonApiError)) throw error;
        if (error.code === 'SCHEDFLOW_ERR_NOT_FOUND') throw new ConfigError(`no pipeline run ${id} in the history`);
        if (flags.json) print(`${JSON.stringify({ id, error: { code: error.code, message: error.message } })}\n`);
        else printError(`schedflow: ${error.message}\n`);
        process.exitCode = error.retryable ? EXIT.unavailable : EXIT.refused;
        return;
      }
      const { body } = answer;
      if (flags.json) {
        print(`${JSON.stringify(body)}\n`);
        return;
      }
      const lines = [
        answer.status === 202
          ? `cancelling run ${id}: it ends cancelled once its steps have ended`
          : body.message.startsWith('already')
            ? `run ${id} was ${body.message}`
            : `cancelled run ${id}`,
        ...body.steps.map((s) => `  ${s.step}: ${s.outcome.replace('_', ' ')}${s.detail ? ` (${s.detail})` : ''}`),
      ];
      print(`${lines.join('\n')}\n`);
    });

  runs
    .command('resume')
    .description('resume a failed or cancelled run: a new attempt where only the steps that did not complete run again')
    .argument('<run>', 'run id')
    .option(
      '--param <name=value>',
      "a parameter to change for the steps run again (repeatable); default: the run's own",
      collectParam,
      {},
    )
    .option('--wait', 'print each step change; exit 0 only when the run succeeded')
    .action(async (id: string, opts: { param: Record<string, string>; wait?: boolean }, cmd: Command) => {
      const flags = flagsOf(cmd);
      let body: RunResumeAnswer;
      try {
        body = (
          await callDaemon<RunResumeAnswer>(flags.dataDir, {
            method: 'POST',
            path: `/api/v1/runs/${segment(id)}/resume`,
            body: Object.keys(opts.param).length ? { params: opts.param } : {},
            nothing: 'nothing was resumed',
          })
        ).body;
      } catch (error) {
        if (!(error instanceof DaemonApiError)) throw error;
        if (error.code === 'SCHEDFLOW_ERR_NOT_FOUND') throw new ConfigError(`no pipeline run ${id} in the history`);
        if (flags.json) print(`${JSON.stringify({ id, error: { code: error.code, message: error.message } })}\n`);
        else printError(`schedflow: ${error.message}\n`);
        process.exitCode = error.retryable ? EXIT.unavailable : EXIT.refused;
        return;
      }
      if (flags.json) print(`${JSON.stringify(body)}\n`);
      else print(`run ${id} ${body.message}\n`);
      if (!opts.wait) return;
      const history = await openCliHistory(flags.dataDir, { write: false });
      const stopWatching = onInterrupt(
        () =>
          `schedflow: stopped waiting; run ${id} goes on in the daemon. To cancel it: schedflow runs cancel ${id} --data-dir ${resolve(flags.dataDir)}`,
      );
      try {
        const ended = await followRun(history.store, id, flags.json ?? false, body.attempt);
        if (!flags.json) print(`run ${ended.id} ${ended.state}${ended.detail ? `: ${ended.detail}` : ''}\n`);
        process.exitCode = ended.state === 'succeeded' ? EXIT.ok : EXIT.refused;
      } finally {
        stopWatching();
        await history.close();
      }
    });

  registerRunControl(runs, flagsOf);
}

/** The API's answer to `POST /api/v1/runs/:id/resume`. */
interface RunResumeAnswer {
  id: string;
  state: string;
  attempt: number;
  message: string;
  kept: string[];
  steps: { step: string; request_id: string }[];
}

/** The steps' outputs under the steps' table: `split.chunks = 3`, one a line. */
function outputLines(outputs: Record<string, Record<string, string>>): string[] {
  const lines = Object.entries(outputs).flatMap(([step, values]) =>
    Object.entries(values).map(([name, value]) => `  ${step}.${name} = ${value}`),
  );
  return lines.length ? ['', 'outputs', ...lines] : [];
}

/** A step's line in the answer of a run's hold or release. */
interface StepControlAnswer {
  step: string;
  request_id: string;
  outcome: string;
  detail: string | null;
}

/** The API's answers to `POST /api/v1/runs/:id/hold|release` and `/api/v1/pipelines/:name/hold|release`. */
interface RunControlAnswer {
  id: string;
  state: string;
  message: string;
  steps: StepControlAnswer[];
}
interface PipelineControlAnswer {
  pipeline: string;
  message: string;
  runs: RunControlAnswer[];
}

/**
 * `schedflow runs hold|release <run>` (or `--pipeline <name>`: its active runs): every step not
 * running and not ended, through the daemon's API (src/pipelines/run-hold.ts behind it).
 */
function registerRunControl(runs: Command, flagsOf: (cmd: Command) => RunsFlags): void {
  for (const kind of ['hold', 'release'] as const) {
    runs
      .command(kind)
      .description(
        kind === 'hold'
          ? 'hold a run (or a pipeline’s active runs): its pending steps in Slurm, its steps not submitted kept back'
          : 'release the steps of a run (or of a pipeline’s active runs) that schedflow held',
      )
      .argument('[run]', 'run id')
      .option('--pipeline <name>', 'every active run of this pipeline instead of one run')
      .action(async (id: string | undefined, opts: { pipeline?: string }, cmd: Command) => {
        const flags = flagsOf(cmd);
        if ((id === undefined) === (opts.pipeline === undefined)) {
          throw new ConfigError(`runs ${kind}: give a run id or --pipeline <name>, not both`);
        }
        const path =
          id !== undefined
            ? `/api/v1/runs/${segment(id)}/${kind}`
            : `/api/v1/pipelines/${segment(opts.pipeline ?? '')}/${kind}`;
        let body: RunControlAnswer | PipelineControlAnswer;
        try {
          body = (
            await callDaemon<RunControlAnswer | PipelineControlAnswer>(flags.dataDir, {
              method: 'POST',
              path,
              nothing: 'nothing was changed',
            })
          ).body;
        } catch (error) {
          if (!(error instanceof DaemonApiError)) throw error;
          if (error.code === 'SCHEDFLOW_ERR_NOT_FOUND') {
            throw new ConfigError(
              id !== undefined ? `no pipeline run ${id} in the history` : `no pipeline "${opts.pipeline}"`,
            );
          }
          if (flags.json) print(`${JSON.stringify({ id, error: { code: error.code, message: error.message } })}\n`);
          else printError(`schedflow: ${error.message}\n`);
          process.exitCode = error.retryable ? EXIT.unavailable : EXIT.refused;
          return;
        }
        if (flags.json) {
          print(`${JSON.stringify(body)}\n`);
          return;
        }
        const runsOf = 'runs' in body ? body.runs : [body];
        const lines = 'runs' in body ? [`pipeline ${body.pipeline}: ${body.message}`] : [];
        for (const run of runsOf) {
          lines.push(`run ${run.id}: ${run.message}`);
          for (const s of run.steps) lines.push(`  ${s.step}: ${s.outcome}${s.detail ? ` (${s.detail})` : ''}`);
        }
        print(`${lines.join('\n')}\n`);
      });
  }
}

/** The API's answer to `POST /api/v1/runs/:id/cancel` (200: cancelled; 202: steps are ending). */
interface RunCancelAnswer {
  id: string;
  state: string;
  message: string;
  steps: { step: string; request_id: string; outcome: string; detail: string | null }[];
}
