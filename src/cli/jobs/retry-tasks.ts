import type { Command } from 'commander';
import { ConfigError, toError } from '../../errors.js';
import { parseArrayExpression } from '../../sched/job-array.js';
import { callDaemon, segment } from '../daemon-api.js';
import { print } from '../terminal.js';
import { flagsOf, REQUEST_ARGUMENT } from './jobs-flags.js';
import { requestIdOf } from './request-id.js';
import { refusalOf } from './submit.js';

/** `schedflow jobs retry-tasks <request>`: a new request for some of an array job's tasks, through the daemon's API. */
export function registerRetryTasks(jobs: Command): void {
  jobs
    .command('retry-tasks')
    .description("run some of an array job's tasks again (by default the ones that did not complete): a new request")
    .argument('<request>', `${REQUEST_ARGUMENT}, of the array job`)
    .option('--indexes <list>', "task indexes in Slurm's syntax (3,7-9); default: every task that did not complete")
    .action(async (given: string, opts: { indexes?: string }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const id = await requestIdOf(flags.dataDir, given);
      // Read here too, so a mistake is said as the flag's, before the daemon is asked.
      if (opts.indexes !== undefined) {
        try {
          parseArrayExpression(opts.indexes);
        } catch (error) {
          throw new ConfigError(`--indexes: ${toError(error).message}`);
        }
      }
      const { body } = await callDaemon<{ id: string; array: string }>(flags.dataDir, {
        method: 'POST',
        path: `/api/v1/jobs/${segment(id)}/retry-tasks`,
        body: opts.indexes === undefined ? {} : { indexes: opts.indexes },
        nothing: 'nothing was queued',
      }).catch((error: unknown) => {
        throw refusalOf(error, `request ${id}`);
      });
      print(
        flags.json
          ? `${JSON.stringify({ requestId: body.id, retryOf: id, array: body.array })}\n`
          : `queued request ${body.id}, running tasks ${body.array} of ${id} again\n`,
      );
    });
}
