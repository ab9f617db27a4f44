import type { Command } from 'commander';
import { ConfigError, toError } from '../../errors.js';
import { parseArrayExpression } from '../../sched/job-array.js';
import { parseTimeLimit } from '../../sched/job-spec.js';
import { callDaemon, DaemonApiError, segment } from '../daemon-api.js';
import { EXIT } from '../exit-codes.js';
import { print, printError } from '../terminal.js';
import { flagsOf, REQUEST_ARGUMENT } from './jobs-flags.js';
import { requestIdOf } from './request-id.js';

/** The API's answer to a hold, release or update (`POST /api/v1/jobs/:id/hold`, …). */
interface ControlAnswer {
  id: string;
  state: string;
  changed: boolean;
  where: 'history' | 'scheduler' | null;
  held: { by: string; at: string } | null;
  message: string;
}

interface UpdateOptions {
  timeLimit?: string;
  partition?: string;
  qos?: string;
  nice?: string;
  name?: string;
  comment?: string;
  indexes?: string;
}

const INDEXES_OPTION = [
  '--indexes <list>',
  "an array job's task indexes in Slurm's syntax (1,3-5); default: the whole job",
] as const;

/**
 * `schedflow jobs hold|release|update <request>`: through the daemon's API (src/requests/
 * job-control.ts behind it), as `jobs cancel` does, so a change from the CLI goes through the
 * same door, the same checks and the same audit log as one from a token or the web UI.
 */
export function registerControl(jobs: Command): void {
  for (const kind of ['hold', 'release'] as const) {
    jobs
      .command(kind)
      .description(
        kind === 'hold'
          ? 'hold a request: held in Slurm once submitted, kept back (not submitted) before'
          : 'release a held request',
      )
      .argument('<request>', REQUEST_ARGUMENT)
      .option(...INDEXES_OPTION)
      .action(async (given: string, opts: { indexes?: string }, cmd: Command) => {
        const flags = flagsOf(cmd);
        const id = await requestIdOf(flags.dataDir, given);
        checkIndexes(opts.indexes);
        await ask(flags, id, {
          method: 'POST',
          path: `/api/v1/jobs/${segment(id)}/${kind}`,
          body: opts.indexes === undefined ? {} : { indexes: opts.indexes },
        });
      });
  }

  jobs
    .command('update')
    .description(
      "change a request's time limit, partition, QOS, nice, name or comment (its spec before submission, Slurm's job after)",
    )
    .argument('<request>', REQUEST_ARGUMENT)
    .option('--time-limit <time>', 'minutes, or a Slurm time (1:30:00, 2-00:00:00)')
    .option('--partition <name>', 'another partition (a pending job only)')
    .option('--qos <name>', 'another QOS')
    .option('--nice <n>', 'a nice value (a user may only raise it)')
    .option('--name <name>', 'another job name')
    .option('--comment <text>', 'a comment')
    .option(...INDEXES_OPTION)
    .action(async (given: string, opts: UpdateOptions, cmd: Command) => {
      const flags = flagsOf(cmd);
      const body = updateBodyOf(opts);
      const id = await requestIdOf(flags.dataDir, given);
      await ask(flags, id, { method: 'PATCH', path: `/api/v1/jobs/${segment(id)}`, body });
    });
}

/** The PATCH body of the flags given, read here so a mistake is the flag's, before the daemon is asked. */
export function updateBodyOf(opts: UpdateOptions): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (opts.timeLimit !== undefined) {
    try {
      parseTimeLimit(opts.timeLimit);
    } catch (error) {
      throw new ConfigError(`--time-limit: ${toError(error).message}`);
    }
    body.time_limit = /^\d+$/.test(opts.timeLimit.trim()) ? Number(opts.timeLimit) : opts.timeLimit;
  }
  if (opts.nice !== undefined) {
    if (!/^-?\d+$/.test(opts.nice.trim())) throw new ConfigError(`--nice: "${opts.nice}" is not a whole number`);
    body.nice = Number(opts.nice);
  }
  for (const key of ['partition', 'qos', 'name', 'comment'] as const) {
    if (opts[key] !== undefined) body[key] = opts[key];
  }
  if (Object.keys(body).length === 0) {
    throw new ConfigError('nothing to change: give --time-limit, --partition, --qos, --nice, --name or --comment');
  }
  checkIndexes(opts.indexes);
  if (opts.indexes !== undefined) body.indexes = opts.indexes;
  return body;
}

function checkIndexes(indexes: string | undefined): void {
  if (indexes === undefined) return;
  try {
    parseArrayExpression(indexes);
  } catch (error) {
    throw new ConfigError(`--indexes: ${toError(error).message}`);
  }
}

async function ask(
  flags: { dataDir: string; json?: boolean },
  id: string,
  call: { method: 'POST' | 'PATCH'; path: string; body: unknown },
): Promise<void> {
  try {
    const { body } = await callDaemon<ControlAnswer>(flags.dataDir, { ...call, nothing: 'nothing was changed' });
    if (flags.json) print(`${JSON.stringify(body)}\n`);
    else print(`request ${id}: ${body.message}\n`);
  } catch (error) {
    if (!(error instanceof DaemonApiError)) throw error;
    if (error.code === 'SCHEDFLOW_ERR_NOT_FOUND') throw new ConfigError(`no job request ${id} in the history`);
    if (flags.json) print(`${JSON.stringify({ id, error: { code: error.code, message: error.message } })}\n`);
    else printError(`schedflow: ${error.message}\n`);
    // Refused (by Slurm, or ended): it is so; unreachable or being submitted: try again.
    process.exitCode = error.retryable ? EXIT.unavailable : error.status === 400 ? EXIT.usage : EXIT.refused;
  }
}
